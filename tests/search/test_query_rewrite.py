"""What the vector arm embeds for a prose query (search/query_rewrite.py): the framing of a
question goes, its subject stays; identifiers and error pastes are never rewritten."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from hexlocal_core.index.sqlite.store import Store
from hexlocal_core.ports import Vectors
from hexlocal_core.search.engine import SearchEngine
from hexlocal_core.search.query_rewrite import (
    embed_mean,
    mean_unit,
    plain_words,
    strip_question,
    texts_to_embed,
)
from hexlocal_core.search.query_shape import Shape
from hexlocal_core.search.tuning import SearchTuning
from tests.support.helpers import HashingEmbedder, chunk_of, item, write_package


@pytest.mark.parametrize(
    ("query", "package", "expected"),
    [
        ("How do I stream a large response body?", "", "stream a large response body"),
        ("is there a way to retry a request on timeout", "", "retry a request on timeout"),
        ("What's the best way to validate options", "", "validate options"),
        ("In ecto_sql, how can I run a migration down?", "ecto_sql", "run a migration down"),
        ("with Req: please, show me how to set a base url", "req", "set a base url"),
        (
            "the changeset keeps its errors; how do I clear them?",
            "",
            "the changeset keeps its errors; clear them",
        ),
        ("decode keys as atoms", "", "decode keys as atoms"),  # nothing to strip
        ("how do I?", "", "how do I?"),  # all framing: kept whole, never empty
    ],
)
def test_strip_question(query: str, package: str, expected: str) -> None:
    assert strip_question(query, package) == expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("I need my test to fail if no message arrives", "need test to fail if no message arrives"),
        (
            "how can I make my logs show the request id so I can trace it",
            "make logs show the request id trace it",
        ),
        ("My", "My"),  # nothing left: the stripped text stays
        ("timeout for a pool checkout", "timeout for a pool checkout"),
    ],
)
def test_plain_words_drop_the_users_own_person(query: str, expected: str) -> None:
    assert plain_words(query) == expected


def test_only_prose_is_rewritten_and_only_when_asked() -> None:
    prose = "How do I decode keys as atoms?"
    assert texts_to_embed(prose, "jason", Shape.PROSE, rewrite=False) == (prose,)
    assert texts_to_embed(prose, "jason", Shape.PROSE, rewrite=True) == (
        prose,
        "decode keys as atoms",
    )
    for shape, text in (
        (Shape.IDENTIFIER, "Jason.decode/2"),
        (Shape.ERROR, "** (Jason.DecodeError) unexpected byte"),
    ):
        assert texts_to_embed(text, "jason", shape, rewrite=True) == (text,)
    # No framing to drop: one text, one embedding, as without the rewrite.
    assert texts_to_embed("decode keys as atoms", "jason", Shape.PROSE, rewrite=True) == (
        "decode keys as atoms",
    )


def test_mean_unit_is_the_unit_mean_direction() -> None:
    rows = np.array([[3.0, 0.0], [0.0, 0.5]], dtype=np.float32)  # norms differ: units count
    out = mean_unit(rows)
    assert out.shape == (1, 2)
    assert np.allclose(out, [[2**-0.5, 2**-0.5]], atol=1e-6)
    opposite = np.array([[1.0, 0.0], [-1.0, 0.0]], dtype=np.float32)
    assert np.allclose(mean_unit(opposite), [[1.0, 0.0]])  # degenerate: the first row


async def test_embed_mean_makes_one_call_for_both_texts() -> None:
    embedder = HashingEmbedder()
    calls: list[int] = []
    original = embedder.embed

    async def counting(texts: Sequence[str]) -> Vectors:
        calls.append(len(texts))
        return await original(texts)

    embedder.embed = counting  # type: ignore[method-assign]
    one = await embed_mean(embedder, ("decode keys as atoms",))
    assert np.allclose(one, await embedder.embed_query("decode keys as atoms"))
    before = len(calls)
    both = await embed_mean(embedder, ("How do I decode keys?", "decode keys"))
    assert calls[before:] == [2]  # one embedder call for the pair
    assert both.shape == (1, embedder.dims) and abs(float(np.linalg.norm(both)) - 1.0) < 1e-5
    expected = mean_unit(await original(["How do I decode keys?", "decode keys"]))
    assert np.allclose(both, expected, atol=1e-6)


class PlacedEmbedder(HashingEmbedder):
    """Embeds the two texts of one question where the test places them."""

    def __init__(self, placed: dict[str, np.ndarray]) -> None:
        super().__init__(dims=4)
        self.placed = placed
        self.seen: list[list[str]] = []

    async def embed(self, texts: Sequence[str]) -> Vectors:
        self.seen.append(list(texts))
        return np.stack([self.placed[t] for t in texts])

    async def embed_query(self, text: str) -> Vectors:
        return await self.embed([text])


async def test_the_vector_arm_searches_from_the_mean_of_question_and_plain_words(
    tmp_path: Path,
) -> None:
    # The question lands on X, its plain words on Y; the chunk between them (Z) is what
    # the mean finds. Real SQLite and sqlite-vec; vector mode, so only the arm speaks.
    e = np.eye(4, dtype=np.float32)
    question, plain = "How do I frobnicate my widget?", "frobnicate widget"
    embedder = PlacedEmbedder({question: e[0], plain: e[1]})
    store = Store(tmp_path / "index.db")
    vectors = {"X": e[0], "Y": e[1], "Z": (e[0] + e[1]) / np.sqrt(2), "W": e[3]}
    chunks = [chunk_of(item(f"M.html#{n}", f"text {n}", package="m")) for n in vectors]
    write_package(store, "m", chunks, np.stack(list(vectors.values())))

    async def top(rewrite: bool, query: str = question) -> str:
        tuning = SearchTuning(vector_rewrite=rewrite)
        engine = SearchEngine(store, embedder, None, tuning=tuning)
        outcome = await engine.search("m", query, limit=3, mode="vector", exact=False)
        return outcome.hits[0].ref.removeprefix("M.html#")

    try:
        assert await top(rewrite=False) == "X"
        assert embedder.seen[-1] == [question]
        assert await top(rewrite=True) == "Z"
        assert embedder.seen[-1] == [question, plain]  # one call for both
        assert SearchTuning().vector_rewrite  # the default
    finally:
        store.close()
