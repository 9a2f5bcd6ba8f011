"""Both retrieval arms of the PostgreSQL store, inside one package: the keyword arm finds
identifiers whole and by parts with the package's own BM25 statistics and answers any
string; the vector arm spends its depth on the package searched, index or no index.

`tests/index/test_store.py` says what the SQLite store does; these check `PgStore` does it too.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg import sql

from hexlocal_core.index.pg import vectors
from hexlocal_core.index.pg.db import connect
from hexlocal_core.index.pg.store import PgStore
from hexlocal_core.search.arms import keyword_arm, vector_arm
from hexlocal_core.search.sanitizer import to_phrases
from tests.support.pg import store, unit_rows, write_docs
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

__all__ = ["store"]  # the fixture, used by name


IDENTIFIER_DOCS = [
    ("Boruta.Oauth.html#token/2", "Call `Boruta.Oauth.token/2` to issue an access token."),
    ("TextChunker.html#split/2", "Pass `chunk_overlap: 10` to repeat context between chunks."),
    ("Req.html#merge/2", "Use `Req.merge/2` to merge options into a request."),
    ("Other.html#x/0", "Nothing relevant about sizes or tokens here at all."),
]


@pytest.fixture(scope="module")
def reads_store(pg_server: Any) -> Iterator[PgStore]:
    """One database for the tests that only read: each writes nothing, so they share it
    (a database per test is most of what these tests cost)."""
    name = f"reads_{id(reads_store)}"
    with psycopg.connect(pg_server.get_uri(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    s = PgStore(str(pg_server.get_uri(name)))
    write_docs(s, "ids", IDENTIFIER_DOCS)
    write_docs(
        s,
        "phrase",
        [("A.html#a/1", "Use chunk_overlap wisely."), ("B.html#b/1", "chunk and overlap apart")],
    )
    write_docs(
        s,
        "examples",
        [
            ("A.html#a/1", "decode a string"),
            ("B.html#b/1", "decode it:\n\n```elixir\niex> decode(x)\n```"),
        ],
    )
    write_docs(s, "hostile", [("A.html", "DROP chunks tables w1 t1 t2 x emoji 東京 and more")])
    try:
        yield s
    finally:
        s.close()


# -- the keyword arm -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected_ref"),
    [
        ("Boruta.Oauth.token/2", "Boruta.Oauth.html#token/2"),
        ("token/2", "Boruta.Oauth.html#token/2"),
        ("chunk_overlap", "TextChunker.html#split/2"),
        ("chunk overlap", "TextChunker.html#split/2"),
        ("CHUNK_OVERLAP option", "TextChunker.html#split/2"),
        ("Req.merge/2", "Req.html#merge/2"),
    ],
)
def test_identifiers_are_found_whole_and_by_parts(
    reads_store: PgStore, query: str, expected_ref: str
) -> None:
    store = reads_store
    for package_stats in (True, False):
        found = keyword_arm(
            store.session().chunks, to_phrases(query), package="ids", package_stats=package_stats
        )
        assert found, f"{query!r} matched nothing"
        assert store.hydrate([found[0][0]])[0].ref == expected_ref


def test_a_quoted_identifier_matches_whole_not_its_parts_apart(reads_store: PgStore) -> None:
    store = reads_store
    reads = store.session().chunks
    found = reads.keyword_hits(
        '"chunk_overlap"', package="phrase", depth=10, examples_only=False, weights=(8, 1, 1.5)
    )
    assert [store.hydrate([i])[0].ref for i, _ in found] == ["A.html#a/1"]
    phrase = reads.keyword_hits(
        '"chunk and"', package="phrase", depth=10, examples_only=False, weights=(8, 1, 1.5)
    )
    assert [store.hydrate([i])[0].ref for i, _ in phrase] == ["B.html#b/1"]


HOSTILE = [
    "",
    "   ",
    '"',
    '""',
    '"unclosed phrase',
    "*",
    '"x"**',
    "OR OR OR",
    "AND NOT NEAR(a b, 3)",
    "title:foo ^bar +baz",
    "a & b | !c <-> d:* 'e'",
    "'; DROP TABLE chunks; --",
    "%s %(x)s %% {}",
    "\\ \\\\ \\'",
    "(((((",
    "ünïcödé Ærøskøbing 東京 emoji 🎉",
    "x" * 5000,
    " OR ".join(f'"w{i}"' for i in range(500)),
    '"' + " ".join(f"t{i}" for i in range(300)) + '"*',
    "\x01\x02\x7f \x00 nul",
]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_any_string_gives_an_answer_never_an_sql_error(reads_store: PgStore, text: str) -> None:
    reads = reads_store.session().chunks
    weights = (8.0, 1.0, 1.5)
    for examples_only in (False, True):
        found = reads.keyword_hits(
            text, package="hostile", depth=5, examples_only=examples_only, weights=weights
        )
        assert isinstance(found, list)
        found = reads.package_keyword_hits(
            [text], package="hostile", depth=5, examples_only=examples_only, weights=weights
        )
        assert isinstance(found, list)
    found = reads.package_keyword_hits(
        to_phrases(text), package="hostile", depth=5, examples_only=False, weights=weights
    )
    assert {row.package for row in reads_store.hydrate([i for i, _ in found])} <= {"hostile"}


@settings(max_examples=80, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=300))
def test_random_text_never_raises(reads_store: PgStore, text: str) -> None:
    reads = reads_store.session().chunks
    weights = (8.0, 1.0, 1.5)
    assert isinstance(
        reads.keyword_hits(text, package="hostile", depth=5, examples_only=False, weights=weights),
        list,
    )
    assert isinstance(
        reads.package_keyword_hits(
            [text, *to_phrases(text)], package="ids", depth=5, examples_only=True, weights=weights
        ),
        list,
    )


def test_package_statistics_are_the_packages_own(store: PgStore) -> None:
    """`pool` is rare in finch and everywhere in nimble_pool, `request` everywhere in
    finch: by finch's own document frequencies `pool` is the telling word, by the whole
    table's `request` is."""
    write_docs(
        store,
        "finch",
        [
            ("Finch.html#a/0", "request pool"),
            ("Finch.html#b/0", "request request request"),
            ("Finch.html#c/0", "request here"),
            ("Finch.html#d/0", "request there"),
        ],
    )
    write_docs(store, "nimble_pool", [(f"P.html#p{i}/0", "pool pool pool") for i in range(30)])
    reads = store.session().chunks
    weights = (8.0, 1.0, 1.5)
    own = reads.package_keyword_hits(
        ['"pool"', '"request"'], package="finch", depth=10, examples_only=False, weights=weights
    )
    table = reads.keyword_hits(
        '"pool" OR "request"', package="finch", depth=10, examples_only=False, weights=weights
    )
    assert {store.hydrate([i])[0].package for i, _ in [*own, *table]} == {"finch"}
    assert store.hydrate([own[0][0]])[0].ref == "Finch.html#a/0"
    assert store.hydrate([table[0][0]])[0].ref == "Finch.html#b/0"


def test_examples_only_keeps_only_chunks_with_examples(reads_store: PgStore) -> None:
    reads = reads_store.session().chunks
    for examples_only, refs in ((True, ["B.html#b/1"]), (False, ["A.html#a/1", "B.html#b/1"])):
        found = reads.package_keyword_hits(
            ['"decode"'],
            package="examples",
            depth=5,
            examples_only=examples_only,
            weights=(8, 1, 1.5),
        )
        assert sorted(reads_store.hydrate([i])[0].ref for i, _ in found) == refs


# -- the vector arm --------------------------------------------------------------------


def test_vector_hits_in_one_package_equal_numpy_brute_force(store: PgStore) -> None:
    rng = np.random.default_rng(7)
    matrices = {}
    for name in ("alpha", "beta"):
        vecs = unit_rows(rng, 120)
        write_docs(store, name, [(f"M.html#f{i}/0", f"doc {name} {i}") for i in range(120)], vecs)
        matrices[name] = vecs
    alpha_ids = np.arange(1, 121)  # the first package written holds ids 1..120, in order
    for _ in range(5):
        q = unit_rows(rng, 1)[0]
        expected = alpha_ids[np.argsort(-(matrices["alpha"] @ q), kind="stable")[:10]].tolist()
        got = vector_arm(store.session().chunks, q, package="alpha", depth=10)
        assert [cid for cid, _ in got] == expected
        assert got[0][1] == pytest.approx(
            1 - float(matrices["alpha"][expected[0] - 1] @ q), abs=1e-5
        )


def test_a_small_package_next_to_a_big_one_still_gets_its_depth(
    store: PgStore, pg_url: str
) -> None:
    """The big package has HNSW indexes (all rows, and rows with examples); the small one
    is scanned in its own table. Neither spends the depth on the other's rows, and the
    index finds what an exact scan finds."""
    rng = np.random.default_rng(11)
    big = vectors.HNSW_MIN_ROWS + 100
    matrix = unit_rows(rng, big)
    docs = [
        (f"Big.html#f{i}/0", f"big {i}" + ("\n```\niex> x\n```" if i % 3 else ""))
        for i in range(big)
    ]
    write_docs(store, "big", docs, matrix)
    write_docs(
        store, "small", [(f"S.html#s{i}/0", f"small {i}") for i in range(40)], unit_rows(rng, 40)
    )
    for examples_only, index in ((False, "_hnsw"), (True, "_hnsw_ex")):
        with connect(pg_url) as conn:
            statement = vectors.nearest_statement("big", examples_only=examples_only)
            vector = str(matrix[0].tolist())
            plan = conn.execute(sql.SQL("EXPLAIN ") + statement, (vector, vector, 30)).fetchall()
        assert f"{vectors.table_name('big')}{index} on" in " ".join(str(r[0]) for r in plan)
    reads = store.session().chunks
    recall = []
    for _ in range(5):
        q = unit_rows(rng, 1)[0]
        small = vector_arm(reads, q, package="small", depth=30)
        assert len(small) == 30
        assert {store.hydrate([i])[0].package for i, _ in small} == {"small"}
        hits = vector_arm(reads, q, package="big", depth=30)
        exact = set((np.argsort(-(matrix @ q))[:30] + 1).tolist())  # big holds ids 1..big
        recall.append(len({i for i, _ in hits} & exact) / 30)
        examples = vector_arm(reads, q, package="big", depth=30, examples_only=True)
        assert len(examples) == 30
        assert all(row.has_example for row in store.hydrate([i for i, _ in examples]))
    assert np.mean(recall) >= 0.95


def test_no_vectors_yet_means_no_vector_hits(store: PgStore) -> None:
    assert store.vector_tables_exist() is False
    assert vector_arm(store.session().chunks, np.ones(16, np.float32), package="pkg") == []
    write_docs(store, "pkg", [("A.html", "a")])
    assert store.vector_tables_exist() is True
    assert vector_arm(store.session().chunks, np.ones(16, np.float32), package="other") == []


def test_a_search_during_a_rewrite_of_its_package_sees_a_whole_version(
    store: PgStore, pg_url: str
) -> None:
    """Rewriting a package drops and recreates its vector table in one transaction; a
    search in it waits, then reads the new table (never an error, never a mix)."""
    write_docs(store, "pkg", [(f"A.html#a{i}/0", f"first {i}") for i in range(20)])
    rng = np.random.default_rng(1)
    results: list[list[str]] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def search() -> None:
        try:
            while not stop.is_set():
                q = unit_rows(rng, 1)[0]
                ids = [cid for cid, _ in vector_arm(store.session().chunks, q, package="pkg")]
                results.append(sorted({row.version for row in store.hydrate(ids)}))
        except BaseException as exc:  # pragma: no cover - asserted below
            errors.append(exc)

    thread = threading.Thread(target=search)
    thread.start()
    for n in range(4):
        write_docs(
            store, "pkg", [(f"B.html#b{i}/0", f"v {n} {i}") for i in range(20)], version=f"2.{n}"
        )
    searched = len(results)
    wait_until(  # the last table is read too, not only the ones the writes raced with
        lambda: len(results) > searched or errors,
        what="a search after the last rewrite",
        detail=lambda: errors,
    )
    stop.set()
    thread.join()
    assert not errors, errors
    assert results and all(len(versions) <= 1 for versions in results)
