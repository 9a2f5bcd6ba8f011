"""Memories on PostgreSQL behave as on SQLite: the same calls through the seam, on both
engines, give the same rows, in the same order (keyword recall included: BM25 on both).

Each test takes `queries`, a `MemoryQueries` of either engine (PostgreSQL through the real
`PgStore`); what only PostgreSQL has (the MATCH -> tsquery translation taking any text,
the queue lease) is tested on PostgreSQL alone.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from hexlocal_core.index.pg import memory_schema as pgm
from hexlocal_core.index.pg.memories import PgMemoryQueries, fts_match_to_tsquery
from hexlocal_core.index.pg.store import PgSession, PgStore
from hexlocal_core.index.rows import MemoryScope, MemoryText, NewRequest
from hexlocal_core.index.seam import MemoryQueries
from hexlocal_core.index.sqlite.store import Store
from hexlocal_core.model import sha256_text
from hexlocal_core.search.sanitizer import to_match

pytestmark = pytest.mark.integration

WEIGHTS = (1.0, 1.5)  # recall's BM25 weights: text, split identifier parts


@pytest.fixture(scope="module")
def admin(pg_server: Any) -> Iterator[psycopg.Connection[Any]]:
    """A connection to the server's own database, for statements that need no table."""
    with psycopg.connect(pg_server.get_uri(), autocommit=True) as conn:
        yield conn


@pytest.fixture
def pg_store(pg_url: str) -> Iterator[PgStore]:
    store = PgStore(pg_url)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def pg_session(pg_store: PgStore) -> PgSession:
    return pg_store.session()


@pytest.fixture
def pg(pg_session: PgSession) -> PgMemoryQueries:
    return pg_session.memories


@pytest.fixture
def sqlite(tmp_path: Path) -> Iterator[MemoryQueries]:
    store = Store(tmp_path / "memories.db")
    store.claim_embedding(store.conn, "test:model", 3, "test")  # creates memory_vecs
    try:
        yield store.session().memories
    finally:
        store.close()


@pytest.fixture(params=["sqlite", "pg"])
def queries(request: pytest.FixtureRequest) -> MemoryQueries:
    if request.param == "pg":
        session: PgSession = request.getfixturevalue("pg_session")
        return PgMemoryQueries(session)  # returned as MemoryQueries: mypy checks the fit
    found: MemoryQueries = request.getfixturevalue("sqlite")
    return found


def text(value: str) -> MemoryText:
    return MemoryText(value, sha256_text(value), sha256_text(value.lower()))


def add(q: MemoryQueries, value: str, package: str | None = None, **kw: Any) -> int:
    return q.insert_memory(
        text(value), curated=kw.get("curated", False), package=package,
        version=kw.get("version"), tags=kw.get("tags", ()),
    )  # fmt: skip


def recall_ids(q: MemoryQueries, query: str, scope: MemoryScope | None = None) -> list[int]:
    match = to_match(query)
    assert match is not None
    return q.keyword_memory_ids(match, scope or MemoryScope(), depth=15, weights=WEIGHTS)


def unit(*xs: float) -> np.ndarray[Any, Any]:
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


# -- memories -------------------------------------------------------------------------------


def test_insert_then_read_back(queries: MemoryQueries) -> None:
    first = add(queries, "Req.merge/2 keeps headers", "req", version="0.5.0", tags=("http",))
    second = add(queries, "Ecto sandbox needs async false", curated=True)

    rows = queries.memories_by_ids([first, second, 999])

    assert second > first and set(rows) == {first, second}
    row = rows[first]
    assert (row.text, row.package, row.version, row.tags) == (
        "Req.merge/2 keeps headers", "req", "0.5.0", ("http",),
    )  # fmt: skip
    assert (row.curated, row.deprecated, row.embed_model) == (False, False, None)
    assert row.created_at == row.updated_at and row.created_at.endswith("+00:00")
    assert rows[second].curated is True and rows[second].package is None
    assert queries.memory_text(first) == "Req.merge/2 keeps headers"
    assert queries.memory_text(999) is None
    assert queries.memories_by_ids([]) == {}


def test_rewrite_replaces_text_scope_tags_and_keywords(queries: MemoryQueries) -> None:
    mid = add(queries, "plug_cowboy drops idle sockets", "plug_cowboy")

    queries.rewrite_memory(
        mid, text("bandit_http closes idle sockets"), package="bandit", version="1.0.0",
        tags=["http", "idle"],
    )  # fmt: skip

    row = queries.memories_by_ids([mid])[mid]
    assert (row.text, row.package, row.version, row.tags, row.curated) == (
        "bandit_http closes idle sockets", "bandit", "1.0.0", ("http", "idle"), True,
    )  # fmt: skip
    assert recall_ids(queries, "bandit_http") == [mid]
    assert recall_ids(queries, "plug_cowboy") == []  # the old words are gone from the index
    assert queries.live_ids_with_norm_hash(text("bandit_http closes idle sockets").norm_hash) == {
        mid
    }


def test_deprecated_memories_leave_live_views(queries: MemoryQueries) -> None:
    kept = add(queries, "jason decodes keys as strings")
    gone = add(queries, "jason decodes keys as strings")
    queries.deprecate_memory(gone)

    assert queries.deprecated_count() == 1
    assert queries.memories_by_ids([gone])[gone].deprecated is True
    assert queries.live_ids_with_norm_hash(text("jason decodes keys as strings").norm_hash) == {
        kept
    }
    assert set(recall_ids(queries, "jason keys")) == {kept}
    assert set(recall_ids(queries, "jason keys", MemoryScope(include_deprecated=True))) == {
        kept,
        gone,
    }


# -- keyword recall -------------------------------------------------------------------------


def test_identifiers_are_found_whole_and_by_their_parts(queries: MemoryQueries) -> None:
    ident = add(queries, "chunk_overlap sets how far chunks reach into each other")
    plain = add(queries, "the overlap between two chunks is small")
    arity = add(queries, "Req.merge/2 keeps the headers it was given")
    add(queries, "nothing related here at all")

    assert recall_ids(queries, "chunk_overlap")[0] == ident  # whole first, parts after
    assert set(recall_ids(queries, "chunk_overlap")) == {ident, plain}
    assert set(recall_ids(queries, "overlap")) == {ident, plain}  # a split part matches
    assert recall_ids(queries, "merge/2") == [arity]
    assert recall_ids(queries, "Req.merge/2") == [arity]
    assert set(recall_ids(queries, "merging")) == {arity}  # the stem as a prefix


def test_phrases_do_not_span_text_and_split_terms(queries: MemoryQueries) -> None:
    # text tokens: [the, parser, uses, token_stream]; split terms: [token, stream]
    mid = add(queries, "the parser uses token_stream")

    assert recall_ids(queries, "token_stream") == [mid]
    # "token_stream token" as a phrase would need `token_stream` followed by `token`.
    match = '"token_stream token"'
    assert queries.keyword_memory_ids(match, MemoryScope(), depth=5, weights=WEIGHTS) == []


def test_keyword_scope_applies_before_the_depth_cut(queries: MemoryQueries) -> None:
    ecto = [add(queries, f"Repo.insert_all note {i}", "ecto") for i in range(3)]
    for i in range(20):
        add(queries, f"Repo.insert_all elsewhere {i}", "other")

    found = queries.keyword_memory_ids(
        '"insert_all"', MemoryScope("ecto"), depth=5, weights=WEIGHTS
    )

    assert sorted(found) == ecto


CORPUS = [
    "chunk_overlap sets how far chunks reach into each other",
    "the overlap between two chunks is small unless chunk_size is large",
    "Req.merge/2 merges options; Req.new/1 builds a request",
    "Ecto.Repo.insert_all/3 skips changesets and autogenerated timestamps",
    "Phoenix.PubSub broadcasts reach every node; chunked responses stream",
    "roots/list can deadlock the stdio transport in anubis_mcp 1.14.0",
    "the stdio transport buffers lines; a long line is split across reads",
    "GenServer.call/3 timeout defaults to 5000 ms; raise it for slow merges",
    "Jason.decode!/2 with keys: :atoms creates atoms: never on user input",
    "merging maps: Map.merge/2 prefers the right side on conflicts",
]
QUERIES = [
    "chunk_overlap", "chunks overlap", "merge/2", "Req.merge/2", "merging options",
    "stdio deadlock", "insert_all timestamps", "timeout", "decode keys atoms", "transport",
]  # fmt: skip


def test_keyword_order_is_sqlites(sqlite: MemoryQueries, pg: PgMemoryQueries) -> None:
    for memory in CORPUS:
        assert add(sqlite, memory) == add(pg, memory)
    sqlite.deprecate_memory(4)
    pg.deprecate_memory(4)

    for query in QUERIES:
        for scope in (MemoryScope(), MemoryScope(include_deprecated=True)):
            assert recall_ids(pg, query, scope) == recall_ids(sqlite, query, scope), query


HOSTILE = [
    '"unbalanced quote',
    "NEAR(stdio deadlock, 2)",
    "stdio*",
    "text:deadlock",
    "stdio AND OR NOT",
    "'); DROP TABLE memories; --",
    "^deadlock",
    "(((",
    ":::",
    '"" """ "a""b"',
    "\\' \\\\ ''' %s %(x)s",
    "🦀 émoji ñ",
    "a" * 5_000,
    "x&y|z!w<->v:*A",
]


def test_hostile_queries_through_the_sanitizer(queries: MemoryQueries) -> None:
    mid = add(queries, "roots/list can deadlock the stdio transport")

    for query in HOSTILE:
        found = [] if to_match(query) is None else recall_ids(queries, query)

        assert queries.memories_by_ids([mid]), query  # the DROP did nothing
        if "stdio" in query or "deadlock" in query:
            assert found == [mid], query


def test_pg_any_match_text_answers_a_list(pg: PgMemoryQueries) -> None:
    # Stronger than SQLite's contract (FTS5 raises on a raw `"unbalanced`): any text.
    mid = add(pg, "roots/list can deadlock the stdio transport")

    for match in HOSTILE:
        found = pg.keyword_memory_ids(match, MemoryScope(), depth=5, weights=WEIGHTS)

        assert isinstance(found, list), match
        if match in ("stdio*", "^deadlock", "stdio AND OR NOT"):
            assert found == [mid], match


def test_random_text_never_breaks_a_tsquery(pg: PgMemoryQueries) -> None:
    add(pg, "émoji and stdio and chunk_overlap")
    alphabet = "ab é_/\"'*:()&|!<->\\%$;-0" + chr(0x1F980)
    rng = random.Random(18)
    for _ in range(300):
        match = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        assert isinstance(
            pg.keyword_memory_ids(match, MemoryScope(), depth=3, weights=WEIGHTS), list
        )


@pytest.mark.parametrize(
    ("match", "tsquery"),
    [
        ('"chunk_overlap"', "'chunk_overlap'"),
        (
            '"req merge/2" OR "req" OR "merge/2" OR "merge"',
            "'req' <-> 'merge/2' | 'req' | 'merge/2' | 'merge'",
        ),
        ('"raising" OR "rais"*', "'raising' | 'rais':*"),
        ('"gen server"*', "'gen' <-> 'server':*"),
        ('"Émoji"', "'emoji'"),  # folded as unicode61 remove_diacritics does
        ('"a""b"', "'a' <-> 'b'"),  # an escaped quote is no token
        # Not the sanitizer's output, read as FTS5 would: juxtaposition and AND bind first.
        ("a OR b c", "'a' | 'b' & 'c'"),
        ("stdio AND deadlock*", "'stdio' & 'deadlock':*"),
        ("NEAR(stdio deadlock)", "'stdio' & 'deadlock'"),
        ("text:deadlock", "'text' <-> 'deadlock'"),
        ('"unbalanced', "'unbalanced'"),
        ("'); DROP TABLE", "'drop' & 'table'"),
        ("x&y|z!w<->v:*A", "'x' <-> 'y' <-> 'z' <-> 'w' <-> 'v' <-> 'a'"),
        ("OR AND NOT NEAR", None),
        ('"" ":::" "*"', None),
        ("", None),
    ],
)
def test_match_to_tsquery(admin: psycopg.Connection[Any], match: str, tsquery: str | None) -> None:
    found = fts_match_to_tsquery(match)
    if tsquery is None:
        assert found is None
    else:  # as PostgreSQL reads it back
        assert admin.execute("SELECT %s::tsquery::text", (found,)).fetchone() == (tsquery,)


# -- vectors --------------------------------------------------------------------------------


def test_knn_is_nearest_first_with_cosine_distances(queries: MemoryQueries) -> None:
    ids = [add(queries, f"memory {i}") for i in range(4)]
    placed = [unit(1, 0, 0), unit(1, 1, 0), unit(0, 1, 0), unit(-1, 0, 0)]
    for mid, vector in zip(ids, placed, strict=True):
        queries.put_memory_vector(mid, vector, "test:model")

    near = queries.memory_knn(unit(1, 0, 0), 3)

    assert [i for i, _ in near] == ids[:3]
    assert [d for _, d in near] == pytest.approx([0.0, 1 - np.sqrt(0.5), 1.0], abs=1e-6)
    assert queries.memory_knn(unit(1, 0, 0), 0) == []
    assert len(queries.memory_knn(unit(1, 0, 0), 10)) == 4


def test_vectors_before_any_exist(queries: MemoryQueries) -> None:
    mid = add(queries, "no vector yet")

    assert queries.memory_knn(unit(1, 0, 0), 5) == []
    assert queries.missing_vectors("test:model", 10) == [(mid, "no vector yet")]


def test_vector_put_replace_drop_and_the_gaps(queries: MemoryQueries) -> None:
    a, b, c = (add(queries, f"fact {n}") for n in "abc")
    queries.put_memory_vector(a, unit(1, 0, 0), "test:model")
    queries.put_memory_vector(b, unit(0, 1, 0), "test:old")
    queries.put_memory_vector(a, unit(0, 0, 1), "test:model")  # replaces a's vector

    assert queries.memory_vectors_exist() is True
    [(nearest, distance)] = queries.memory_knn(unit(0, 0, 1), 1)
    assert nearest == a and distance == pytest.approx(0.0, abs=1e-6)
    assert queries.memories_by_ids([a])[a].embed_model == "test:model"
    assert queries.missing_vectors("test:model", 10) == [(b, "fact b"), (c, "fact c")]
    assert queries.missing_vectors("test:model", 1) == [(b, "fact b")]

    queries.drop_memory_vector(a)

    assert queries.memories_by_ids([a])[a].embed_model is None
    assert [i for i, _ in queries.memory_knn(unit(0, 0, 1), 5)] == [b]
    assert [i for i, _ in queries.missing_vectors("test:model", 10)] == [a, b, c]


def test_pg_memory_vectors_exist_once_one_is_stored(pg: PgMemoryQueries) -> None:
    mid = add(pg, "fact")
    assert pg.memory_vectors_exist() is False
    pg.put_memory_vector(mid, unit(1, 0), "test:model")
    assert pg.memory_vectors_exist() is True


def test_pg_knn_ignores_vectors_of_other_dims(pg: PgMemoryQueries) -> None:
    a, b = add(pg, "three dims"), add(pg, "two dims")
    pg.put_memory_vector(a, unit(1, 0, 0), "test:model")
    pg.put_memory_vector(b, unit(1, 0), "test:other")

    assert [i for i, _ in pg.memory_knn(unit(1, 0, 0), 5)] == [a]


def test_pg_reindex_replaces_every_memory_vector(
    pg: PgMemoryQueries, pg_session: PgSession
) -> None:
    a, b = add(pg, "fact a"), add(pg, "fact b")
    pg.put_memory_vector(a, unit(1, 0, 0), "test:old")
    pg.put_memory_vector(b, unit(0, 1, 0), "test:old")

    with pg_session.atomic() as tx:
        pgm.replace_memory_vectors(tx, "test:new", {a: unit(0, 1)})

    [(nearest, distance)] = pg.memory_knn(unit(0, 1), 5)
    assert nearest == a and distance == pytest.approx(0.0, abs=1e-6)
    assert pg.missing_vectors("test:new", 10) == [(b, "fact b")]  # no vector under the new model


# -- scope ----------------------------------------------------------------------------------


def test_in_scope_and_out_of_scope_count(queries: MemoryQueries) -> None:
    ecto = add(queries, "ecto fact", "ecto")
    old = add(queries, "old ecto fact", "ecto")
    req = add(queries, "req fact", "req")
    queries.deprecate_memory(old)
    ids = [ecto, old, req]

    assert queries.in_scope(ids, MemoryScope()) == {ecto, req}
    assert queries.in_scope(ids, MemoryScope("ecto")) == {ecto}
    assert queries.in_scope(ids, MemoryScope("ecto", include_deprecated=True)) == {ecto, old}
    assert queries.in_scope([], MemoryScope()) == set()
    assert queries.out_of_scope_count(MemoryScope()) == 1
    assert queries.out_of_scope_count(MemoryScope("ecto")) == 2
    assert queries.out_of_scope_count(MemoryScope(include_deprecated=True)) == 0


def test_pg_counts_a_memory_without_package_as_out_of_a_packages_scope(
    pg: PgMemoryQueries,
) -> None:
    # SQLite's `NOT (... AND m.package = ?)` is NULL for such a memory and counts it not.
    add(pg, "general fact")
    add(pg, "ecto fact", "ecto")

    assert pg.out_of_scope_count(MemoryScope("ecto")) == 1


# -- the curation log -----------------------------------------------------------------------


def test_curation_history_is_oldest_first_per_memory(queries: MemoryQueries) -> None:
    a, b = add(queries, "fact a"), add(queries, "fact b")
    queries.log_curation("r1", "create", a, None, "new")
    queries.log_curation("r2", "discard", None, None, "empty")
    queries.log_curation("r3", "merge", a, "chat:x", "same subject")
    queries.log_curation("r4", "create", b, None, "new")

    history = queries.curation_history([a, b, 999])

    assert [(e.request_id, e.action, e.model, e.reason) for e in history[a]] == [
        ("r1", "create", None, "new"),
        ("r3", "merge", "chat:x", "same subject"),
    ]
    assert [e.request_id for e in history[b]] == ["r4"] and history[999] == []
    assert history[a][0].at.endswith("+00:00")
    assert queries.curation_history([]) == {}


# -- the remember queue ---------------------------------------------------------------------


def requests(*names: str, package: str | None = None) -> list[NewRequest]:
    return [NewRequest(n, f"text of {n}", package, None, ("t1", "t2")) for n in names]


def test_queue_order_statuses_and_rows(queries: MemoryQueries) -> None:
    queries.enqueue(requests("r1", "r2", package="ecto"))
    queries.enqueue(requests("r3"))

    first = queries.next_pending()
    assert first is not None
    assert (first.request_id, first.text, first.package, first.tags) == (
        "r1", "text of r1", "ecto", ("t1", "t2"),
    )  # fmt: skip
    assert queries.pending_count() == 3 and queries.request_status("r1") == "pending"

    queries.finish_request(
        "r1", status="done", action="create", memory_id=7, reason="new", curated=False,
        model=None,
    )  # fmt: skip
    queries.finish_request(
        "r2", status="failed", action=None, memory_id=None, reason="gave up", curated=False,
        model=None,
    )  # fmt: skip

    after = queries.next_pending()
    assert after is not None and after.request_id == "r3" and after.seq > first.seq
    assert queries.pending_count() == 1
    assert queries.request_status("r1") == "done" and queries.request_status("nope") is None
    rows = queries.requests(["r1", "r3", "nope"])
    assert set(rows) == {"r1", "r3"}
    done, pending = rows["r1"], rows["r3"]
    assert (done.status, done.action, done.memory_id, done.curated, done.reason) == (
        "done", "create", 7, False, "new",
    )  # fmt: skip
    assert done.processed_at is not None and done.submitted_at.endswith("+00:00")
    assert (pending.status, pending.curated, pending.processed_at) == ("pending", None, None)
    assert queries.requests([]) == {}


def test_pg_queue_lease_hands_two_servers_different_rows(pg_session: PgSession) -> None:
    one = PgMemoryQueries(pg_session, owner="server-1")
    two = PgMemoryQueries(pg_session, owner="server-2")
    one.enqueue(requests("r1", "r2"))

    assert (got := one.next_pending()) is not None and got.request_id == "r1"
    assert (got := two.next_pending()) is not None and got.request_id == "r2"
    # a restarted worker of server 1 resumes with the item it had abandoned
    assert (got := one.next_pending()) is not None and got.request_id == "r1"
    with pg_session.atomic():  # server 2 decides r2
        assert two.request_status("r2") == "pending"
        two.finish_request(
            "r2", status="done", action="create", memory_id=1, reason="new", curated=False,
            model=None,
        )  # fmt: skip
    assert two.next_pending() is None  # r1 is leased to server 1, which is alive
    assert two.pending_count() == 1
    expired = PgMemoryQueries(pg_session, owner="server-2", lease_s=0)
    assert (got := expired.next_pending()) is not None and got.request_id == "r1"
