"""QuerySanitizer: any input gives a legal MATCH expression (checked against real FTS5)."""

from __future__ import annotations

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hexlocal_core.search.sanitizer import to_match
from hexlocal_core.search.tokens import FTS_TOKENIZER


@pytest.fixture(scope="module")
def fts() -> apsw.Connection:
    conn = apsw.Connection(":memory:")
    conn.execute(
        f'CREATE VIRTUAL TABLE f USING fts5(title, content, split_terms, tokenize="{FTS_TOKENIZER}")'
    )
    conn.execute(
        "INSERT INTO f VALUES ('Req.merge/2', 'merge options chunk_overlap NEAR', 'merge chunk overlap')"
    )
    return conn


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
        ("how do I use the merge", '"merge"'),
        ("the of", '"the" OR "of"'),
        ('"unbalanced', '"unbalanced"'),
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
        conn = apsw.Connection(":memory:")
        conn.execute(
            f'CREATE VIRTUAL TABLE f USING fts5(title, content, split_terms, tokenize="{FTS_TOKENIZER}")'
        )
        conn.execute("INSERT INTO f VALUES ('a', 'b', 'c')")
        _CONN.append(conn)
    return _CONN[0]
