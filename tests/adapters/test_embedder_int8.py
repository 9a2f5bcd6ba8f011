"""The int8 embedder (`AI_EMBED_MODEL=...@int8`): its own model id, a cached quantised
graph, and embeddings close enough to fp32 to retrieve the same documents."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hexlocal_core.adapters import model_sources
from hexlocal_core.adapters.local_embedder import (
    EmbedderOptions,
    LocalEmbedder,
    build_local_embedder,
)
from hexlocal_core.adapters.model_sources import Which
from hexlocal_core.errors import ModelError
from tests.support.model_fixtures import model_settings
from tests.support.paths import SHARED, shared

pytestmark = pytest.mark.integration

REFERENCE = SHARED / "reference" / "minilm_l6_v2_reference.json"
INT8_ID = "local:sentence-transformers/all-MiniLM-L6-v2@int8"
# Measured on the 24 reference texts: mean cosine 0.990, worst text 0.979 (per-channel
# weight scales). A broken quantisation (per-tensor scales: ~0.90) falls well below.
MEAN_COSINE_FLOOR = 0.98
WORST_COSINE_FLOOR = 0.96


@pytest.fixture(scope="module")
def reference() -> list[dict[str, Any]]:
    shared(REFERENCE, "the embedder's reference vectors")
    items: list[dict[str, Any]] = json.loads(REFERENCE.read_text(encoding="utf-8"))["items"]
    return items


@pytest.fixture(scope="module")
def int8_embedder() -> LocalEmbedder:
    if model_sources.pypi_model_dir() is None:
        pytest.skip(f"the model package is absent: {model_sources.PYPI_INSTALL}")
    embedder = build_local_embedder(model_settings(AI_EMBED_MODEL=INT8_ID.removeprefix("local:")))
    embedder.ensure_loaded()
    return embedder


def test_int8_names_select_the_int8_embedder() -> None:
    for name in ("sentence-transformers/all-MiniLM-L6-v2@int8", "all-MiniLM-L6-v2@int8"):
        settings = model_settings(AI_EMBED_MODEL=name)
        assert model_sources.uses_local_embedder(settings) and model_sources.wants_int8(settings)
        # What build() and `models` read: an int8 name must never go to the cloud API.
        assert settings.uses_local_embedder
        assert model_sources.embed_model_id(settings) == INT8_ID
        # The files are the fp32 model's: nothing else to download.
        assert model_sources.repo_id(settings, Which.EMBEDDER) == model_sources.DEFAULT_EMBED_REPO
    fp32 = model_settings(AI_EMBED_MODEL="sentence-transformers/all-MiniLM-L6-v2")
    assert not model_sources.wants_int8(fp32)
    assert model_sources.embed_model_id(fp32) == "local:sentence-transformers/all-MiniLM-L6-v2"
    assert not model_sources.uses_local_embedder(
        model_settings(AI_EMBED_MODEL="mistral-embed@int8")
    )
    assert not model_settings(AI_EMBED_MODEL="mistral-embed@int8").uses_local_embedder


def test_int8_embedder_loads_with_its_own_id_and_384_dims(int8_embedder: LocalEmbedder) -> None:
    assert (int8_embedder.model_id, int8_embedder.dims) == (INT8_ID, 384)
    assert int8_embedder.quantized
    assert int8_embedder.graph is not None and int8_embedder.files is not None
    assert int8_embedder.graph.name.endswith(".int8.onnx")
    assert int8_embedder.graph != int8_embedder.files.onnx_path
    # Dynamic int8 stores weights in a quarter of the space.
    assert int8_embedder.graph.stat().st_size < int8_embedder.files.onnx_path.stat().st_size / 2


async def test_int8_agrees_with_the_fp32_reference(
    int8_embedder: LocalEmbedder, reference: list[dict[str, Any]]
) -> None:
    vectors = await int8_embedder.embed([item["text"] for item in reference])
    expected = np.array([item["embedding"] for item in reference], dtype=np.float32)
    assert vectors.shape == (len(reference), 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cosine = (vectors * expected).sum(axis=1)
    assert cosine.mean() >= MEAN_COSINE_FLOOR and cosine.min() >= WORST_COSINE_FLOOR
    # It is really another graph (not fp32 under a new name): the vectors differ.
    assert np.abs(vectors - expected).max() > 1e-3


async def test_int8_keeps_the_nearest_neighbour(int8_embedder: LocalEmbedder) -> None:
    docs = [
        "GenServer.call/3 makes a synchronous call to the server and waits for its reply.",
        "Enum.map/2 returns a list where each element is the result of invoking fun.",
        "Plug.Conn.read_body/2 reads the request body, up to the :length option.",
        "Ecto.Repo.transaction/2 runs the given function inside a transaction.",
    ]
    queries = [
        "send a request to a GenServer and wait for the answer",
        "apply a function to every element of a list",
        "how do I get the body of an HTTP request in plug",
        "run several database writes atomically",
    ]
    doc_vectors = await int8_embedder.embed(docs)
    query_vectors = await int8_embedder.embed(queries)
    assert list((query_vectors @ doc_vectors.T).argmax(axis=1)) == [0, 1, 2, 3]


async def test_an_int8_vector_does_not_depend_on_the_texts_beside_it(
    int8_embedder: LocalEmbedder, reference: list[dict[str, Any]]
) -> None:
    # A document embedded among others must get the vector a query of the same text gets
    # alone: int8 scales its activations over the whole run, so shared runs would not.
    texts = [item["text"] for item in reference]
    together = await int8_embedder.embed(texts)
    alone = np.vstack([await int8_embedder.embed([t]) for t in texts])
    np.testing.assert_array_equal(together, alone)


def _locate() -> model_sources.ModelFiles:
    return model_sources.resolve(model_settings(), Which.EMBEDDER)


def test_int8_graph_is_built_once_then_reused(
    int8_embedder: LocalEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = EmbedderOptions(quantize=True)
    first = LocalEmbedder(_locate, model_id=INT8_ID, options=options, cache_dir=tmp_path)
    first.ensure_loaded()
    assert first.graph is not None and first.graph.parent == tmp_path
    built = first.graph.stat()
    assert first.graph.with_suffix(".agreement").is_file()
    assert not list(tmp_path.glob(".quant-*"))  # no temporary file left behind

    def no_quantize(*args: object, **kwargs: object) -> None:
        raise AssertionError("the cached int8 graph should have been reused")

    import onnxruntime.quantization

    monkeypatch.setattr(onnxruntime.quantization, "quantize_dynamic", no_quantize)
    again = LocalEmbedder(_locate, model_id=INT8_ID, options=options, cache_dir=tmp_path)
    again.ensure_loaded()
    assert again.graph == first.graph
    assert again.graph.stat().st_mtime_ns == built.st_mtime_ns


def test_building_the_int8_graph_prints_nothing_and_leaves_logging_alone(
    int8_embedder: LocalEmbedder,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    # A process that configured no logging (the CLI's first run): onnxruntime's quantiser
    # must neither print its advice nor install a root handler that stays behind.
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    embedder = LocalEmbedder(
        _locate, model_id=INT8_ID, options=EmbedderOptions(quantize=True), cache_dir=tmp_path
    )
    embedder.ensure_loaded()
    assert embedder.graph is not None and embedder.graph.parent == tmp_path
    assert root.handlers == []
    assert "pre-processing" not in capfd.readouterr().err


def test_poor_agreement_refuses_int8_and_names_the_fix(
    int8_embedder: LocalEmbedder, tmp_path: Path
) -> None:
    # The cached int8 graph with a verdict below the floor: refuse rather than index with it.
    assert int8_embedder.graph is not None
    shutil.copy(int8_embedder.graph, tmp_path / int8_embedder.graph.name)
    (tmp_path / int8_embedder.graph.name).with_suffix(".agreement").write_text("0.5\n")
    embedder = LocalEmbedder(
        _locate, model_id=INT8_ID, options=EmbedderOptions(quantize=True), cache_dir=tmp_path
    )
    with pytest.raises(ModelError, match="AI_EMBED_MODEL=sentence-transformers/all-MiniLM-L6-v2 "):
        embedder.ensure_loaded()
