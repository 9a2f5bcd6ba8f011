"""The local cross-encoder, on a stand-in checkpoint: MiniLM's real encoder plus a seeded
random classification head, built to ONNX by the real code path."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from hexlocal_core.adapters import model_sources, onnx_build
from hexlocal_core.adapters.cross_encoder import (
    LocalCrossEncoder,
    RerankerOptions,
    build_local_reranker,
    input_length,
)
from hexlocal_core.adapters.local_embedder import LocalEmbedder
from hexlocal_core.adapters.model_sources import Which
from hexlocal_core.adapters.onnx_runtime import load_tokenizer, open_session, pad
from hexlocal_core.errors import ModelError, ModelUnavailable
from hexlocal_core.model import UsageEvent
from hexlocal_core.ports import Reranker
from tests.support.model_fixtures import model_settings

pytestmark = pytest.mark.integration

QUERY = "how do I make a synchronous call to a GenServer"
PASSAGES = [
    "GenServer.call/3 makes a synchronous call to the server and waits for its reply.",
    "GenServer.cast/2 sends an asynchronous request to the server.",
    "Enum.map/2 returns a list where each element is the result of invoking fun.",
    "Supervisors start, stop and restart their children. " * 20,
    "Jason.decode!/2 raises Jason.DecodeError when the input is not valid JSON.",
]
MODEL_ID = "local:cross-encoder/ms-marco-MiniLM-L6-v2"


class Usage:
    def __init__(self) -> None:
        self.events: list[UsageEvent] = []

    def record(self, event: UsageEvent) -> None:
        self.events.append(event)


@pytest.fixture(scope="module")
def usage() -> Usage:
    return Usage()


@pytest.fixture(scope="module")
def reranker(stand_in_reranker_dir: Path, usage: Usage) -> LocalCrossEncoder:
    settings = model_settings(HEXLOCAL_RERANK_MODEL_DIR=str(stand_in_reranker_dir))
    built = build_local_reranker(settings, usage)
    assert built is not None
    built.ensure_loaded()
    return built


async def test_one_deterministic_score_per_pair(reranker: LocalCrossEncoder) -> None:
    assert isinstance(reranker, Reranker) and reranker.model_id == MODEL_ID
    first = await reranker.score(QUERY, PASSAGES)
    again = await reranker.score(QUERY, PASSAGES)
    assert len(first) == len(PASSAGES) and all(isinstance(s, float) for s in first)
    assert first == again
    assert len(set(first)) == len(first)  # the head is not degenerate


async def test_batched_scores_equal_per_pair_scores(reranker: LocalCrossEncoder) -> None:
    together = await reranker.score(QUERY, PASSAGES)
    alone = [(await reranker.score(QUERY, [p]))[0] for p in PASSAGES]
    np.testing.assert_allclose(together, alone, atol=1e-4)
    reversed_scores = await reranker.score(QUERY, PASSAGES[::-1])
    np.testing.assert_allclose(reversed_scores[::-1], together, atol=1e-4)


def test_scores_equal_the_classification_head_on_the_encoder(
    reranker: LocalCrossEncoder, stand_in_reranker_dir: Path, local_embedder: LocalEmbedder
) -> None:
    """The built classifier graph is CLS -> pooler dense + tanh -> classifier, computed here
    in numpy over the embedder's encoder graph (same encoder weights; that graph is checked
    against sentence-transformers in test_embedder.py)."""
    folder = stand_in_reranker_dir
    assert local_embedder.files is not None
    encoder = local_embedder.files.onnx_path
    assert reranker.files is not None
    length = input_length(RerankerOptions(), reranker.files)
    tokenizer = load_tokenizer(folder / "tokenizer.json", length, pairs=True)
    encodings = [tokenizer.encode(QUERY, p) for p in PASSAGES]
    ids, mask = pad([e.ids for e in encodings])
    types, _ = pad([e.type_ids for e in encodings])
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    (hidden,) = open_session(encoder, 2).run(None, feeds)
    weights = onnx_build.load_weights(folder / "model.safetensors")
    pooled = np.tanh(hidden[:, 0] @ weights["pooler.dense.weight"].T + weights["pooler.dense.bias"])
    expected = pooled @ weights["classifier.weight"].T + weights["classifier.bias"]
    np.testing.assert_allclose(reranker.score_sync(QUERY, PASSAGES), expected[:, 0], atol=1e-4)


def test_passage_is_truncated_and_query_kept(reranker: LocalCrossEncoder) -> None:
    long_passage = "The supervisor restarts the child process after a crash. " * 400
    short, long = reranker.score_sync(QUERY, [long_passage[:4000], long_passage])
    assert short == pytest.approx(long, abs=1e-5)  # beyond 512 tokens nothing counts
    # A query longer than the window still scores (truncated from both sides instead).
    (score,) = reranker.score_sync("GenServer " * 400, ["a passage"])
    assert np.isfinite(score)


async def test_empty_passages_and_usage(reranker: LocalCrossEncoder, usage: Usage) -> None:
    before = len(usage.events)
    assert await reranker.score(QUERY, []) == []
    assert len(usage.events) == before
    await reranker.score(QUERY, PASSAGES[:2])
    event = usage.events[-1]
    assert (event.model, event.kind, event.local, event.success) == (
        MODEL_ID,
        "rerank",
        True,
        True,
    )
    assert event.prompt_tokens > 20


def test_off_builds_nothing() -> None:
    assert build_local_reranker(model_settings(AI_RERANK_MODEL="off")) is None


async def test_absent_model_names_the_fix_and_is_not_a_failed_call(tmp_path: Path) -> None:
    settings = model_settings()
    usage = Usage()
    reranker = LocalCrossEncoder(
        lambda: model_sources.resolve(settings, Which.RERANKER, hub_cache=tmp_path),
        model_id=MODEL_ID,
        usage=usage,
    )
    with pytest.raises(ModelUnavailable) as info:
        await reranker.score(QUERY, PASSAGES)
    message = str(info.value)  # the tests run with HF_HUB_OFFLINE=1
    assert "cross-encoder/ms-marco-MiniLM-L6-v2" in message and "unset HF_HUB_OFFLINE" in message
    assert "AI_RERANK_MODEL=off" in message and not info.value.pending
    assert not reranker.loaded and usage.events == []  # absence is not a failure


async def test_lifecycle_warm_up_then_aclose_then_reload(stand_in_reranker_dir: Path) -> None:
    settings = model_settings(HEXLOCAL_RERANK_MODEL_DIR=str(stand_in_reranker_dir))
    reranker = build_local_reranker(settings)
    assert reranker is not None and not reranker.loaded
    await reranker.warm_up()
    assert reranker.loaded
    first = await reranker.score(QUERY, PASSAGES)
    await reranker.aclose()
    assert not reranker.loaded
    assert await reranker.score(QUERY, PASSAGES) == first  # loads again on the next use


def test_cross_encoder_does_not_reach_into_the_embedder() -> None:
    import ast

    from hexlocal_core.adapters import cross_encoder

    tree = ast.parse(Path(cross_encoder.__file__).read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "hexlocal_core.adapters.onnx_runtime" in imported
    assert "hexlocal_core.adapters.local_embedder" not in imported


async def test_empty_model_folder_names_the_variable(tmp_path: Path) -> None:
    reranker = build_local_reranker(model_settings(HEXLOCAL_RERANK_MODEL_DIR=str(tmp_path)))
    assert reranker is not None
    with pytest.raises(ModelError, match="HEXLOCAL_RERANK_MODEL_DIR="):
        reranker.ensure_loaded()


def write_wrong_shape_model(folder: Path, tokenizer: Path) -> Path:
    """An ONNX model answering (batch, seq) floats: not one logit per pair."""
    import onnx
    from onnx import TensorProto, helper

    names = ("input_ids", "attention_mask", "token_type_ids")
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["b", "s"]) for n in names]
    output = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["b", "s"])
    node = helper.make_node("Cast", ["input_ids"], ["logits"], to=TensorProto.FLOAT)
    graph = helper.make_graph([node], "wrong", inputs, [output])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save_model(model, str(folder / "model.onnx"))
    shutil.copyfile(tokenizer, folder / "tokenizer.json")
    return folder


async def test_unrecognised_output_shape_is_a_model_error(
    stand_in_reranker_dir: Path, tmp_path: Path
) -> None:
    folder = write_wrong_shape_model(tmp_path / "m", stand_in_reranker_dir / "tokenizer.json")
    reranker = build_local_reranker(model_settings(HEXLOCAL_RERANK_MODEL_DIR=str(folder)))
    assert reranker is not None
    with pytest.raises(ModelError, match="one logit per pair"):
        await reranker.score(QUERY, PASSAGES)


def test_int8_agreement_is_measured_once(reranker: LocalCrossEncoder, tmp_path: Path) -> None:
    assert reranker.files is not None
    graph = reranker.files.onnx_path
    checked: list[tuple[Path, Path]] = []

    def check(fp32: Path, int8: Path) -> float:
        checked.append((fp32, int8))
        assert open_session(int8, 1).get_outputs()[0].name == "logits"
        return 0.75

    first = onnx_build.ensure_quantized(graph, tmp_path, check)
    again = onnx_build.ensure_quantized(graph, tmp_path, check)
    assert first == again and first[1] == 0.75
    assert len(checked) == 1 and checked[0][0] == graph  # the verdict is remembered
    assert first[0].name.endswith(".int8.onnx") and first[0].is_file()
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".agreement", ".onnx"]


@pytest.mark.parametrize(("min_agreement", "quantized"), [(-1.0, True), (1.01, False)])
def test_int8_used_only_when_it_agrees_enough(
    stand_in_reranker_dir: Path, min_agreement: float, quantized: bool
) -> None:
    settings = model_settings(HEXLOCAL_RERANK_MODEL_DIR=str(stand_in_reranker_dir))
    options = RerankerOptions(quantize=True, min_agreement=min_agreement)
    reranker = build_local_reranker(settings, options=options)
    assert reranker is not None
    scores = reranker.score_sync(QUERY, PASSAGES)
    assert reranker.quantized is quantized
    assert len(scores) == len(PASSAGES) and np.isfinite(scores).all()


def test_the_model_reads_its_own_length(reranker: LocalCrossEncoder) -> None:
    """The engine's passages (title line + 360 characters) reach 268 word pieces with a
    query: the default reads them whole, so a passage's words past 128 pieces count."""
    assert reranker.files is not None and reranker.files.positions == 512
    assert input_length(RerankerOptions(), reranker.files) == 512
    head = "GenServer.call/3 makes a synchronous call and waits for the reply. " * 9
    cut = reranker.score_sync(QUERY, [head, head + "Supervisors restart crashed children."])
    assert cut[0] != pytest.approx(cut[1], abs=1e-5)


@pytest.mark.parametrize(
    ("option", "sbert", "positions", "expected"),
    [
        (None, None, 512, 512),  # the position embeddings: the longest input there is
        (None, 256, 512, 256),  # sentence_bert_config.json's max_seq_length, when given
        (None, None, None, 512),  # a graph without config.json: BERT's 512
        (32, None, 512, 32),  # an explicit cut
        (1000, None, 512, 512),  # never past the graph's positions
    ],
)
def test_input_length(
    option: int | None, sbert: int | None, positions: int | None, expected: int, tmp_path: Path
) -> None:
    files = model_sources.ModelFiles(
        which=Which.RERANKER,
        name="x/y",
        onnx_path=tmp_path / "model.onnx",
        tokenizer_path=tmp_path / "tokenizer.json",
        source="local folder",
        detail=str(tmp_path),
        max_length=sbert,
        positions=positions,
    )
    assert input_length(RerankerOptions(max_length=option), files) == expected


def test_options_are_used(stand_in_reranker_dir: Path) -> None:
    settings = model_settings(HEXLOCAL_RERANK_MODEL_DIR=str(stand_in_reranker_dir))
    reranker = build_local_reranker(settings, options=RerankerOptions(max_length=32, threads=1))
    assert reranker is not None
    long_passage = "word " * 200
    a, b = reranker.score_sync("q", [long_passage, long_passage[:150]])
    assert a == pytest.approx(b, abs=1e-5)  # both cut at 32 tokens
