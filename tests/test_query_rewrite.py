"""What the vector arm embeds for a prose query (search/query_rewrite.py): the framing of a
question goes, its subject stays; identifiers and error pastes are never rewritten."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from hexlocal_core.ports import Vectors
from hexlocal_core.search.query_rewrite import (
    embed_mean,
    mean_unit,
    plain_words,
    strip_question,
    texts_to_embed,
)
from hexlocal_core.search.query_shape import Shape
from tests.helpers import HashingEmbedder


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
