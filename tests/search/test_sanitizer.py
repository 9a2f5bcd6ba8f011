"""QuerySanitizer: any input gives a legal MATCH expression (checked against real FTS5)."""

from __future__ import annotations

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hexlocal_core.index.tokens import FTS_TOKENIZER
from hexlocal_core.search.sanitizer import light_stem, to_match


def _table(title: str, content: str, split: str) -> apsw.Connection:
    """An in-memory FTS5 table with the index's columns and tokenizer, holding one row."""
    conn = apsw.Connection(":memory:")
    tokenize = f'tokenize="{FTS_TOKENIZER}"'
    conn.execute(f"CREATE VIRTUAL TABLE f USING fts5(title, content, split_terms, {tokenize})")
    conn.execute("INSERT INTO f VALUES (?, ?, ?)", (title, content, split))
    return conn


@pytest.fixture(scope="module")
def fts() -> apsw.Connection:
    return _table("Req.merge/2", "merge options chunk_overlap NEAR", "merge chunk overlap")


def _run(conn: apsw.Connection, query: str) -> list[int]:
    match = to_match(query)
    if match is None:
        return []
    return [r[0] for r in conn.execute("SELECT rowid FROM f WHERE f MATCH ?", (match,))]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("chunk_overlap", '"chunk_overlap" OR "chunk" OR "overlap"'),
        ("Req.merge/2", '"req merge/2" OR "req" OR "merge/2" OR "merge"'),
        ("perform/3", '"perform/3" OR "perform"'),
        ("c:init/1", '"init/1" OR "init"'),
        # plain words also get a prefix query of their light stem (deliberate change:
        # questions and docs use different word forms, and the index has no stemmer)
        ("how do I use the merge", '"merge" OR "merge"*'),
        ("the of", '"the" OR "of"'),
        ('"unbalanced', '"unbalanced" OR "unbalanc"*'),
        ("raising errors.", '"raising" OR "rais"* OR "errors" OR "error"*'),
        ("Enum.map", '"enum map" OR "enum" OR "map"'),  # identifiers are never stemmed
        ("NimblePool", '"nimblepool"'),
        ("NEAR(a b)", '"near a" OR "near" OR "b"'),
        ("", None),
        ("*** ^^^ :::", None),
    ],
)
def test_sanitizer_table(fts: apsw.Connection, query: str, expected: str | None) -> None:
    assert to_match(query) == expected
    _run(fts, query)  # and it is legal FTS5


@pytest.mark.parametrize("query", ["Req.merge/2", "chunk overlap", "merge", "MERGE OPTIONS"])
def test_sanitized_queries_find_the_row(fts: apsw.Connection, query: str) -> None:
    assert _run(fts, query) == [1]


@pytest.mark.parametrize(
    ("word", "stem"),
    [
        ("raising", "rais"),
        ("stopped", "stop"),
        ("called", "call"),
        ("tokens", "token"),
        ("libraries", "librar"),
        ("connections", "connect"),
        ("class", "class"),
        ("status", "status"),
        ("uses", "uses"),  # the stem would be shorter than MIN_STEM
        ("map", "map"),
    ],
)
def test_light_stem(word: str, stem: str) -> None:
    assert light_stem(word) == stem


@pytest.mark.parametrize(
    ("query", "found"),
    [("raises an error", True), ("raising", True), ("errors", True), ("rainbow", False)],
)
def test_word_forms_meet_through_the_stem_prefix(query: str, found: bool) -> None:
    conn = _table("x", "it raised an error", "")
    assert bool(_run(conn, query)) is found


def test_huge_query_is_bounded(fts: apsw.Connection) -> None:
    match = to_match("word " * 20_000 + "".join(f"w{i} " for i in range(5000)))
    assert match is not None and match.count(" OR ") < 40
    _run(fts, "x" * 1_000_000)


@settings(max_examples=10_000, deadline=None)
@given(st.text(max_size=200))
def test_any_string_is_legal_fts5(query: str) -> None:
    conn = _shared_conn()
    _run(conn, query)  # raises on any SQLite error


_CONN: list[apsw.Connection] = []


def _shared_conn() -> apsw.Connection:
    if not _CONN:
        _CONN.append(_table("a", "b", "c"))
    return _CONN[0]
