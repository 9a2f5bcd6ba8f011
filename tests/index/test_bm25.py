"""BM25 with one package's statistics: the formula, and what it changes on a real index."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from hexlocal_core.index import bm25
from hexlocal_core.index.sqlite import fts
from hexlocal_core.index.sqlite.store import Store
from hexlocal_core.search.sanitizer import to_phrases
from tests.support.helpers import chunk_of, item, write_package

WEIGHTS = (8.0, 1.0, 1.5)


def _write(store: Store, name: str, docs: list[tuple[str, str]]) -> None:
    write_package(store, name, [chunk_of(item(ref, text, package=name)) for ref, text in docs])


@pytest.mark.parametrize(
    ("documents", "with_term", "expected"),
    [
        (10, 1, math.log(9.5 / 1.5)),
        (6, 3, bm25.IDF_FLOOR),  # in half the documents: log(1) = 0, floored as FTS5 does
        (26, 21, bm25.IDF_FLOOR),  # in most of them: negative, floored
    ],
)
def test_idf(documents: int, with_term: int, expected: float) -> None:
    assert bm25.idf(documents, with_term) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("lo", "hi", "count", "expected"),
    [(5, 9, 5, True), (5, 9, 4, False), (None, None, 0, False), (3, 3, 1, True)],
)
def test_contiguous(lo: int | None, hi: int | None, count: int, expected: bool) -> None:
    assert fts.contiguous(lo, hi, count) is expected


def test_alone_in_the_index_the_package_scores_are_fts5s_own(tmp_path: Path) -> None:
    store = Store(tmp_path / "alone.db")
    _write(
        store,
        "pkg",
        [
            ("A.html#a/1", "pool checkout timeout for a pool"),
            ("B.html#b/1", "checkout a connection"),
            ("C.html#c/1", "the timeout of the queue and the pool size and more words"),
            ("D.html#d/1", "unrelated text"),
        ],
    )
    phrases = to_phrases("pool checkout timeout")
    ours = store.session().chunks.package_keyword_hits(
        phrases, package="pkg", depth=10, examples_only=False, weights=WEIGHTS
    )
    theirs = store.session().chunks.keyword_hits(
        " OR ".join(phrases),
        package="pkg",
        depth=10,
        examples_only=False,
        weights=WEIGHTS,
    )
    assert [cid for cid, _ in ours] == [cid for cid, _ in theirs]
    assert [s for _, s in ours] == pytest.approx([s for _, s in theirs], rel=1e-9)


def test_another_package_in_the_index_does_not_change_the_ranking(tmp_path: Path) -> None:
    # In `pkg`, "alpha" is rare (1 of 6 docs) and "beta" common (3 of 6): the alpha doc
    # answers "alpha beta" best. `other` mentions alpha everywhere, which makes alpha the
    # common word of the whole index and flips the table-wide BM25 ranking.
    store = Store(tmp_path / "shared.db")
    _write(
        store,
        "pkg",
        [
            ("X.html#x/0", "alpha gamma"),
            ("Y.html#y/0", "beta gamma"),
            ("F.html#f/0", "beta delta"),
            ("G.html#g/0", "beta epsilon"),
            ("H.html#h/0", "zeta eta"),
            ("I.html#i/0", "theta iota"),
        ],
    )
    _write(store, "other", [(f"O{i}.html#o/{i}", f"alpha kappa{i}") for i in range(20)])
    phrases = to_phrases("alpha beta")

    def top(package_stats: bool) -> str:
        if package_stats:
            found = store.session().chunks.package_keyword_hits(
                phrases, package="pkg", depth=5, examples_only=False, weights=WEIGHTS
            )
        else:
            found = store.session().chunks.keyword_hits(
                " OR ".join(phrases),
                package="pkg",
                depth=5,
                examples_only=False,
                weights=WEIGHTS,
            )
        return store.hydrate([found[0][0]])[0].ref

    assert top(package_stats=True) == "X.html#x/0"
    assert top(package_stats=False) == "Y.html#y/0"  # the contamination this removes


def test_examples_only_keeps_the_package_ranking_among_examples(tmp_path: Path) -> None:
    store = Store(tmp_path / "examples.db")
    _write(
        store,
        "pkg",
        [
            ("A.html#a/1", "stream the body"),
            ("B.html#b/1", "stream the body\n\n```elixir\nstream(conn)\n```"),
            ("C.html#c/1", "body only\n\niex> body(conn)"),
        ],
    )
    found = store.session().chunks.package_keyword_hits(
        to_phrases("stream body"),
        package="pkg",
        depth=5,
        examples_only=True,
        weights=WEIGHTS,
    )
    assert [store.hydrate([cid])[0].ref for cid, _ in found] == ["B.html#b/1", "C.html#c/1"]
