"""The SQLite store: migrations, FTS identifiers, vec0 KNN, WAL concurrency."""

from __future__ import annotations

import threading
from pathlib import Path

import apsw
import numpy as np
import pytest

from hexlocal_core.errors import SchemaTooNew, StoreError
from hexlocal_core.index.db import atomic, connect, scalar
from hexlocal_core.index.migrations import SCHEMA_VERSION, migrate
from hexlocal_core.index.store import CHUNK_VEC_TABLE, PackageWrite, Store
from hexlocal_core.search.arms import keyword_arm, vector_arm
from hexlocal_core.search.sanitizer import to_match
from tests.helpers import chunk_of, item, write_package


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
    match = to_match(query)
    assert match is not None
    found = keyword_arm(store.conn, match, package="pkg")
    assert found, f"{query!r} matched nothing"
    top = store.hydrate([found[0][0]])[0]
    assert top["ref"] == expected_ref


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
    assert [store.hydrate([i])[0]["ref"] for i in ids] == ["A.html#a/1"]


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
        got = [cid for cid, _ in vector_arm(store.conn, q, package="alpha", depth=10)]
        assert got == expected


def test_replace_package_is_atomic(tmp_path: Path) -> None:
    store = Store(tmp_path / "atomic.db")
    _write(store, "pkg", [("A.html", "first version")])
    chunks = [chunk_of(item("B.html", "second"))]
    bad = np.zeros((2, 16), dtype=np.float32)  # wrong count: must write nothing
    with pytest.raises(StoreError):
        store.replace_package(
            PackageWrite(
                name="pkg",
                version="2.0.0",
                source="hexdocs",
                chunker_version=1,
                item_count=1,
                chunks=chunks,
                vectors=bad,
                embed_model="test:hashing",
                embed_provider="test",
            )
        )
    assert store.package("pkg").version == "1.0.0"  # type: ignore[union-attr]
    assert [r["ref"] for r in store.hydrate([1])] == ["A.html"]


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
