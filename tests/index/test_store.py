"""The SQLite store: migrations, FTS identifiers, vec0 KNN, WAL concurrency."""

from __future__ import annotations

import threading
from pathlib import Path

import apsw
import numpy as np
import pytest

from hexlocal_core.errors import SchemaTooNew, StoreError
from hexlocal_core.index.rows import PackageWrite
from hexlocal_core.index.sqlite.db import atomic, connect, scalar
from hexlocal_core.index.sqlite.migrations import SCHEMA_VERSION, migrate
from hexlocal_core.index.sqlite.store import Store
from hexlocal_core.index.sqlite.vectors import CHUNK_VEC_TABLE
from hexlocal_core.model import Chunk, DocType
from hexlocal_core.search.arms import keyword_arm, vector_arm
from hexlocal_core.search.sanitizer import to_phrases
from tests.support.helpers import HashingEmbedder, chunk_of, item, write_package


def _write(
    store: Store, name: str, docs: list[tuple[str, str]], vectors: np.ndarray | None = None
) -> None:
    write_package(
        store, name, [chunk_of(item(ref, text, package=name)) for ref, text in docs], vectors
    )


def test_migrations_are_idempotent(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    conn = connect(db)
    assert migrate(conn) == SCHEMA_VERSION
    schema = sorted(
        r[0] for r in conn.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL")
    )
    assert migrate(conn) == SCHEMA_VERSION
    assert (
        sorted(r[0] for r in conn.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL"))
        == schema
    )


def test_database_from_the_future_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "future.db"
    Store(db).close()
    conn = connect(db)
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION + 5}")
    conn.close()
    with pytest.raises(SchemaTooNew, match="newer hexlocal"):
        Store(db)


def test_connection_pragmas(tmp_path: Path) -> None:
    conn = connect(tmp_path / "p.db")
    assert scalar(conn, "PRAGMA journal_mode") == "wal"
    assert scalar(conn, "PRAGMA foreign_keys") == 1
    assert scalar(conn, "SELECT vec_version()").startswith("v")
    assert scalar(conn, "PRAGMA cache_size") <= -65536


@pytest.mark.parametrize(
    ("query", "expected_ref"),
    [
        ("Boruta.Oauth.token/2", "Boruta.Oauth.html#token/2"),
        ("token/2", "Boruta.Oauth.html#token/2"),
        ("chunk_overlap", "TextChunker.html#split/2"),
        ("chunk overlap", "TextChunker.html#split/2"),
        ("CHUNK_OVERLAP option", "TextChunker.html#split/2"),
    ],
)
def test_identifiers_are_found_whole_and_by_parts(
    tmp_path: Path, query: str, expected_ref: str
) -> None:
    store = Store(tmp_path / "fts.db")
    _write(
        store,
        "pkg",
        [
            ("Boruta.Oauth.html#token/2", "Call `Boruta.Oauth.token/2` to issue an access token."),
            (
                "TextChunker.html#split/2",
                "Pass `chunk_overlap: 10` to repeat context between chunks.",
            ),
            ("Other.html#x/0", "Nothing relevant about sizes or tokens here at all."),
        ],
    )
    phrases = to_phrases(query)
    assert phrases
    for package_stats in (True, False):
        found = keyword_arm(
            store.session().chunks, phrases, package="pkg", package_stats=package_stats
        )
        assert found, f"{query!r} matched nothing"
        top = store.hydrate([found[0][0]])[0]
        assert top.ref == expected_ref


def test_quoted_identifier_phrase_matches_directly(tmp_path: Path) -> None:
    store = Store(tmp_path / "phrase.db")
    _write(
        store,
        "pkg",
        [("A.html#a/1", "Use chunk_overlap wisely."), ("B.html#b/1", "chunk and overlap apart")],
    )
    ids = [
        r[0]
        for r in store.conn.execute(
            "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH '\"chunk_overlap\"'"
        )
    ]
    assert [store.hydrate([i])[0].ref for i in ids] == ["A.html#a/1"]


def test_vec0_knn_in_one_package_equals_numpy_brute_force(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    store = Store(tmp_path / "vec.db")
    for name in ("alpha", "beta"):
        n = 120
        vecs = rng.standard_normal((n, 16)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        _write(store, name, [(f"M.html#f{i}/0", f"doc {name} {i}") for i in range(n)], vecs)
    alpha_rows = list(
        store.conn.execute(
            f"SELECT c.id, v.embedding FROM chunks c JOIN {CHUNK_VEC_TABLE} v"
            " ON v.rowid = c.id WHERE c.package='alpha'"
        )
    )
    ids = np.array([r[0] for r in alpha_rows])
    matrix = np.stack([np.frombuffer(r[1], dtype=np.float32) for r in alpha_rows])
    for _ in range(5):
        q = rng.standard_normal(16).astype(np.float32)
        q /= np.linalg.norm(q)
        expected = ids[np.argsort(-(matrix @ q), kind="stable")[:10]].tolist()
        got = [cid for cid, _ in vector_arm(store.session().chunks, q, package="alpha", depth=10)]
        assert got == expected


def _version_write(name: str, version: str, chunks: list[Chunk]) -> PackageWrite:
    """One package version's whole write, vectors from the hashing embedder."""
    emb = HashingEmbedder()
    return PackageWrite(
        name=name,
        version=version,
        source="hexdocs",
        chunker_version=1,
        item_count=len(chunks),
        chunks=chunks,
        vectors=np.stack([emb.vector(c.embedding_text()) for c in chunks]),
        embed_model=emb.model_id,
        embed_provider="test",
    )


def _database_state(conn: apsw.Connection) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every stored table (FTS and vec0 keep theirs in shadow tables), and
    the schema itself, so a comparison sees any write at all."""
    state: dict[str, list[tuple[object, ...]]] = {
        "sqlite_master": sorted(conn.execute("SELECT type, name, sql FROM sqlite_master"), key=repr)
    }
    tables = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%'"
    ).fetchall()
    for (name,) in tables:
        state[str(name)] = sorted(conn.execute(f'SELECT * FROM "{name}"'), key=repr)
    return state


def _fail_at_chunk(conn: apsw.Connection, version: str, n: int) -> None:
    """A trigger that aborts the n-th chunk insert of `version`: a failure in the middle of
    the write, after old rows were deleted and the package row, FTS rows and vectors of the
    first chunks were written."""
    conn.execute(
        f"CREATE TRIGGER fail_mid_write BEFORE INSERT ON chunks WHEN new.version = '{version}'"
        f" AND (SELECT count(*) FROM chunks WHERE version = '{version}') >= {n - 1}"
        " BEGIN SELECT RAISE(ABORT, 'injected failure'); END"
    )


@pytest.mark.parametrize("existing", [True, False], ids=["replacing v1", "first ingest"])
def test_a_failure_mid_write_leaves_the_database_exactly_as_it_was(
    tmp_path: Path, existing: bool
) -> None:
    store = Store(tmp_path / "atomic.db")
    if existing:
        _write(store, "pkg", [("A.html", "first version"), ("A.html#a/1", "alpha")])
    _fail_at_chunk(store.conn, "2.0.0", 3)
    before = _database_state(store.conn)
    chunks = [
        chunk_of(item(f"B.html#b{i}/0", f"second version {i}", version="2.0.0")) for i in range(5)
    ]
    write = _version_write("pkg", "2.0.0", chunks)
    with pytest.raises(apsw.ConstraintError, match="injected failure"):
        store.replace_package(write)

    assert _database_state(store.conn) == before
    if existing:
        assert store.package("pkg").version == "1.0.0"  # type: ignore[union-attr]
    else:
        assert store.package("pkg") is None
        assert store.embedding_config() is None  # the first write's model claim went too
    store.conn.execute("DROP TRIGGER fail_mid_write")
    store.replace_package(write)  # the same write, unhindered, goes through whole
    assert store.package("pkg").chunk_count == 5  # type: ignore[union-attr]


def test_chunks_and_vectors_of_different_counts_are_refused(tmp_path: Path) -> None:
    store = Store(tmp_path / "count.db")
    _write(store, "pkg", [("A.html", "first version")])
    before = _database_state(store.conn)
    with pytest.raises(StoreError, match="differ in number"):
        store.replace_package(
            PackageWrite(
                name="pkg",
                version="2.0.0",
                source="hexdocs",
                chunker_version=1,
                item_count=1,
                chunks=[chunk_of(item("B.html", "second"))],
                vectors=np.zeros((2, 16), dtype=np.float32),
                embed_model="test:hashing",
                embed_provider="test",
            )
        )
    assert _database_state(store.conn) == before


def test_another_models_vectors_are_refused(tmp_path: Path) -> None:
    store = Store(tmp_path / "mix.db")
    _write(store, "one", [("A.html", "a")])
    chunks = [chunk_of(item("B.html", "b", package="two"))]
    with pytest.raises(StoreError, match="reindex"):
        store.replace_package(
            PackageWrite(
                name="two",
                version="1",
                source="hexdocs",
                chunker_version=1,
                item_count=1,
                chunks=chunks,
                vectors=np.ones((1, 8), dtype=np.float32),
                embed_model="other",
                embed_provider="x",
            )
        )
    assert store.package("two") is None


def test_wal_reader_keeps_snapshot_while_writer_commits(tmp_path: Path) -> None:
    db = tmp_path / "wal.db"
    Store(db).close()
    writer = connect(db)
    reader = connect(db)
    writer.execute("CREATE TABLE t(x)")
    writer.execute("INSERT INTO t VALUES (1)")
    errors: list[BaseException] = []
    reader.execute("BEGIN")
    before = scalar(reader, "SELECT count(*) FROM t")

    def write_many() -> None:
        try:
            conn = connect(db)
            for i in range(200):
                with atomic(conn):
                    conn.execute("INSERT INTO t VALUES (?)", (i,))
        except BaseException as exc:  # pragma: no cover - asserted below
            errors.append(exc)

    thread = threading.Thread(target=write_many)
    thread.start()
    seen = [scalar(reader, "SELECT count(*) FROM t") for _ in range(50)]
    thread.join()
    assert not errors, errors
    assert set(seen) == {before}  # the snapshot never moved mid-transaction
    reader.execute("COMMIT")
    assert scalar(reader, "SELECT count(*) FROM t") == before + 200


def test_two_writers_wait_instead_of_failing(tmp_path: Path) -> None:
    db = tmp_path / "busy.db"
    Store(db).close()
    setup = connect(db)
    setup.execute("CREATE TABLE t(x)")
    errors: list[BaseException] = []

    def hammer() -> None:
        conn = connect(db)
        try:
            for i in range(100):
                with atomic(conn):
                    conn.execute("INSERT INTO t VALUES (?)", (i,))
                    _ = scalar(conn, "SELECT count(*) FROM t")
        except apsw.Error as exc:  # pragma: no cover - asserted below
            errors.append(exc)

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert scalar(setup, "SELECT count(*) FROM t") == 400


def test_a_full_disk_is_one_clear_error_and_nothing_is_written(tmp_path: Path) -> None:
    """SQLITE_FULL mid-write (the page limit stands in for a full disk: SQLite answers both
    with the same error) rolls back and says what to do, naming the file."""
    store = Store(tmp_path / "full.db")
    _write(store, "pkg", [("A.html", "first version")])
    before = _database_state(store.conn)
    pages = scalar(store.conn, "PRAGMA page_count")
    store.conn.execute(f"PRAGMA max_page_count = {pages + 1}")
    chunks = [
        chunk_of(item(f"B.html#b{i}/0", "long text " * 400 + str(i), version="2.0.0"))
        for i in range(40)
    ]
    write = _version_write("pkg", "2.0.0", chunks)
    with pytest.raises(StoreError, match=r"full\.db is full .*free space") as raised:
        store.replace_package(write)

    assert isinstance(raised.value.__cause__, apsw.FullError)
    assert "\n" not in str(raised.value)
    store.conn.execute(f"PRAGMA max_page_count = {2**30}")
    assert _database_state(store.conn) == before
    assert scalar(store.conn, "PRAGMA integrity_check") == "ok"


def test_a_title_documented_twice_takes_its_first_chunks_place(tmp_path: Path) -> None:
    # A type and a callback of one name (`era/0`) share a title: the titles a misspelt
    # identifier is compared against keep document order, so `era/0` stays first (ties
    # between equally close names go to the earlier one).
    store = Store(tmp_path / "twice.db")
    docs = [
        ("M.html#t:era/0", "M.era/0", DocType.TYPE, "era"),
        ("M.html#t:feature/0", "M.feature/0", DocType.TYPE, "feature"),
        ("M.html#c:era/0", "M.era/0", DocType.CALLBACK, "era"),
    ]
    items = [
        item(ref, f"{kind} {name}", title=title, doc_type=kind, module="M", function=name, arity=0)
        for ref, title, kind, name in docs
    ]
    write_package(store, "pkg", [chunk_of(i) for i in items])
    reads = store.session().chunks
    for limit in (-1, 5):
        assert reads.member_titles("pkg", limit) == ["M.era/0", "M.feature/0"]
        assert reads.titles_in_module("pkg", "M", limit) == ["M.era/0", "M.feature/0"]
    assert reads.titles_named("pkg", "era", "M", 5) == ["M.era/0"]
    store.close()
