"""The PostgreSQL store (team mode): migrations, atomic writes, the model guard, exact
lookups, and the locks that keep several servers apart (the arms: `test_pg_search.py`).

The SQLite store's tests (`tests/index/test_store.py`) say what the behaviour is; these check
that `PgStore` has it, on a real PostgreSQL 16 + pgvector (`pg_url`, a fresh database).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql

from hexlocal_core.errors import SchemaTooNew, StoreError
from hexlocal_core.index.pg import vectors
from hexlocal_core.index.pg.db import connect
from hexlocal_core.index.pg.migrations import SCHEMA_VERSION
from hexlocal_core.index.pg.store import PgStore
from hexlocal_core.index.rows import PackageWrite
from hexlocal_core.search.arms import vector_arm
from tests.support.helpers import chunk_of, item
from tests.support.pg import package_write, store, unit_rows, write_docs
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

__all__ = ["store"]  # the fixture, used by name


def database_state(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every table (the per-package vector tables too) with every row, and the indexes."""
    with connect(url) as conn:
        tables = [
            str(r[0])
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
            )
        ]
        state: dict[str, list[tuple[Any, ...]]] = {
            "indexes": conn.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1"
            ).fetchall()
        }
        for name in tables:
            rows = conn.execute(sql.SQL("SELECT * FROM {}").format(sql.Identifier(name))).fetchall()
            state[name] = sorted(rows, key=repr)
    return state


# -- migrations ------------------------------------------------------------------------


def _schema(url: str) -> list[tuple[Any, ...]]:
    with connect(url) as conn:
        return conn.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = 'public' ORDER BY 1, 2"
        ).fetchall()


def test_migrations_are_idempotent(pg_url: str) -> None:
    first = PgStore(pg_url)
    first.close()
    schema = _schema(pg_url)
    again = PgStore(pg_url)
    engine = again.engine
    again.close()
    assert engine.startswith("PostgreSQL 16") and "pgvector 0." in engine
    assert again.schema_version == first.schema_version == SCHEMA_VERSION
    assert _schema(pg_url) == schema
    with connect(pg_url) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(1,)]


def test_servers_starting_at_once_migrate_once(pg_url: str) -> None:
    opened: list[PgStore] = []
    errors: list[BaseException] = []

    def start() -> None:
        try:
            opened.append(PgStore(pg_url))
        except BaseException as exc:  # pragma: no cover - asserted below
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in opened:
        s.close()
    assert not errors, errors
    assert [s.schema_version for s in opened] == [SCHEMA_VERSION] * 3
    with connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM schema_version").fetchone() == (1,)


def test_database_from_the_future_is_refused(pg_url: str) -> None:
    PgStore(pg_url).close()
    with connect(pg_url) as conn:
        conn.execute(
            "INSERT INTO schema_version VALUES (%s, 'm999_future', 'x')", (SCHEMA_VERSION + 5,)
        )
    with pytest.raises(SchemaTooNew, match="newer hexlocal"):
        PgStore(pg_url)


def test_an_unreachable_server_is_one_clear_error_without_the_password() -> None:
    url = "postgresql://hexlocal:s3cretpass@127.0.0.1:1/team?connect_timeout=2"
    with pytest.raises(StoreError, match=r"cannot reach PostgreSQL at postgresql://\*+@127") as e:
        PgStore(url)
    assert "s3cretpass" not in str(e.value)
    assert "DATABASE_URL" in str(e.value)


def test_a_database_without_pgvector_says_how_to_get_it(pg_server: Any) -> None:
    """pgvector is not a trusted extension: a plain user cannot create it."""
    with psycopg.connect(pg_server.get_uri(), autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'plain'").fetchone():
            conn.execute("CREATE ROLE plain LOGIN")
        conn.execute('DROP DATABASE IF EXISTS "novector"')
        conn.execute('CREATE DATABASE "novector" OWNER plain')
    url = str(pg_server.get_uri("novector")).replace("postgres:@", "plain:@", 1)
    with pytest.raises(StoreError, match=r"CREATE EXTENSION vector;.* as an administrator"):
        PgStore(url)


# -- writes ----------------------------------------------------------------------------


def _fail_at_ref(url: str, ref: str) -> None:
    """A trigger aborting the insert of one chunk: a failure in the middle of the write,
    after the old rows were deleted, the old vector table dropped and the first chunks of
    the new version written."""
    with connect(url) as conn:
        conn.execute(
            "CREATE FUNCTION fail_midwrite() RETURNS trigger LANGUAGE plpgsql AS $$"
            f" BEGIN IF NEW.ref = '{ref}' THEN RAISE EXCEPTION 'injected failure'; END IF;"
            " RETURN NEW; END $$"
        )
        conn.execute(
            "CREATE TRIGGER fail_mid_write BEFORE INSERT ON chunks"
            " FOR EACH ROW EXECUTE FUNCTION fail_midwrite()"
        )


@pytest.mark.parametrize("existing", [True, False], ids=["replacing v1", "first ingest"])
def test_a_failure_mid_write_leaves_the_database_exactly_as_it_was(
    store: PgStore, pg_url: str, existing: bool
) -> None:
    if existing:
        write_docs(store, "pkg", [("A.html", "first version"), ("A.html#a/1", "alpha")])
    _fail_at_ref(pg_url, "B.html#b3/0")
    before = database_state(pg_url)
    chunks = [
        chunk_of(item(f"B.html#b{i}/0", f"second version {i}", version="2.0.0")) for i in range(5)
    ]
    write = package_write("pkg", "2.0.0", chunks)
    with pytest.raises(psycopg.errors.RaiseException, match="injected failure"):
        store.replace_package(write)

    assert database_state(pg_url) == before
    package = store.package("pkg")
    if existing:
        assert package is not None and package.version == "1.0.0"
        assert vector_arm(store.session().chunks, write.vectors[0], package="pkg", depth=5)
    else:
        assert package is None
        assert store.embedding_config() is None  # the first write's model claim went too
    with connect(pg_url) as conn:
        conn.execute("DROP TRIGGER fail_mid_write ON chunks")
    store.replace_package(write)  # the same write, unhindered, goes through whole
    package = store.package("pkg")
    assert package is not None and package.chunk_count == 5


def test_chunks_and_vectors_of_different_counts_are_refused(store: PgStore, pg_url: str) -> None:
    write_docs(store, "pkg", [("A.html", "first version")])
    before = database_state(pg_url)
    write = package_write(
        "pkg", "2.0.0", [chunk_of(item("B.html", "second"))], np.zeros((2, 16), np.float32)
    )
    with pytest.raises(StoreError, match="differ in number"):
        store.replace_package(write)
    assert database_state(pg_url) == before


def test_another_models_vectors_are_refused_with_the_sqlite_message(store: PgStore) -> None:
    write_docs(store, "one", [("A.html", "a")])
    write = PackageWrite(
        name="two",
        version="1",
        source="hexdocs",
        chunker_version=1,
        item_count=1,
        chunks=[chunk_of(item("B.html", "b", package="two"))],
        vectors=np.ones((1, 8), dtype=np.float32),
        embed_model="other",
        embed_provider="x",
    )
    with pytest.raises(StoreError) as raised:
        store.replace_package(write)
    assert str(raised.value) == (
        "the index holds vectors from test:hashing (16 dims); refusing to mix in other "
        "(8 dims). Run `hexlocal reindex` to switch models."
    )
    assert store.package("two") is None
    with pytest.raises(StoreError, match="reindex"), store.session().atomic() as session:
        session.claim_embedding("other", 8, "x")


def test_a_second_version_replaces_the_first_and_delete_drops_its_vectors(
    store: PgStore, pg_url: str
) -> None:
    write_docs(store, "pkg", [("A.html", "first"), ("A.html#a/1", "alpha")])
    write_docs(store, "pkg", [("B.html", "second")], version="2.0.0")
    package = store.package("pkg")
    assert package is not None and (package.version, package.chunk_count) == ("2.0.0", 1)
    assert [ref for ref, _, _ in store.stored_hashes("pkg")] == ["B.html"]
    assert store.delete_package("pkg") is True
    assert store.delete_package("pkg") is False
    assert store.chunk_count() == 0
    with connect(pg_url) as conn:
        assert vectors.vector_tables(conn) == []
    assert vector_arm(store.session().chunks, np.ones(16, np.float32), package="pkg") == []


def test_the_embedding_cache_keeps_every_written_vector(store: PgStore) -> None:
    rng = np.random.default_rng(3)
    vecs = unit_rows(rng, 2)
    write_docs(store, "pkg", [("A.html", "one"), ("B.html", "two")], vecs)
    hashes = [row.embed_hash for row in store.hydrate([1, 2])]
    cached = store.cached_vectors("test:hashing", [*hashes, "unknown"])
    assert sorted(cached) == sorted(hashes)
    for i, text_hash in enumerate(hashes):
        assert cached[text_hash].dtype == np.float32
        np.testing.assert_array_equal(cached[text_hash], vecs[i])


# -- exact lookups -------------------------------------------------------------------


def test_exact_lookups_read_as_on_sqlite(store: PgStore) -> None:
    from hexlocal_core.index.rows import ItemQuery
    from hexlocal_core.model import DocType

    items = [
        item("Req.html", "Req module", title="Req", doc_type=DocType.MODULE, module="Req"),
        item("Req.html#get/2", "get", title="get/2", module="Req", function="get", arity=2),
        item("Req.html#get/2-examples", "ex", title="get/2", module="Req", function="get", arity=2),
        item(
            "Req.Request.html#get/1",
            "g1",
            title="get/1",
            module="Req.Request",
            function="get",
            arity=1,
        ),
        item("Req.html#new/1", "new", title="new/1", module="Req", function="new", arity=1),
    ]
    store.replace_package(package_write("req", "1.0.0", [chunk_of(i) for i in items]))
    reads = store.session().chunks
    ref = {row.id: row.ref for row in store.hydrate(list(range(1, 6)))}
    got = reads.exact_ids("req", ItemQuery("Req", "get", 2), limit=10)
    assert [ref[i] for i in got] == ["Req.html#get/2", "Req.html#get/2-examples"]
    module = reads.exact_ids("req", ItemQuery("Req", not_doc_types=("function",)), limit=10)
    assert [ref[i] for i in module] == ["Req.html"]
    assert reads.titles_named("req", "get", "Req.Request", 10) == ["get/1", "get/2"]
    assert reads.titles_named("req", "get", "Req", 10) == ["get/2", "get/1"]
    assert reads.titles_in_module("req", "Req", 10) == ["Req", "get/2", "new/1"]
    by_ref = reads.ids_by_ref("req", [("Req.html#new/1", "Req.html#get/2-")])
    assert sorted(ref[i] for i in by_ref) == ["Req.html#get/2-examples", "Req.html#new/1"]
    # `_` is no wildcard: a prefix with `_` matches only itself
    assert reads.ids_by_ref("req", [("x", "Req_html")]) == frozenset()
    assert reads.locate([2, 1, 2]) == {
        1: ("Req.html", "Req.html"),
        2: ("Req.html#get/2", "Req.html"),
    }
    stats = reads.package_stats()
    assert [(s.name, s.chunks, s.items) for s in stats] == [("req", 5, 5)]
    assert len(list(reads.content_hashes())) == 5


# -- several servers -------------------------------------------------------------------


def test_one_server_holds_an_ingest_claim_and_the_others_are_refused(
    store: PgStore, pg_url: str
) -> None:
    other = PgStore(pg_url)
    try:
        claim = store.try_ingest_claim("jason", "1.4.4")
        assert claim is not None
        assert other.try_ingest_claim("jason", "1.4.4") is None  # another server: refused
        assert store.try_ingest_claim("jason", "1.4.4") is None  # another job here: too
        elsewhere = other.try_ingest_claim("jason", "1.5.0")  # another version is free
        assert elsewhere is not None
        elsewhere.release()
        released = threading.Thread(target=claim.release)  # any thread may release it
        released.start()
        released.join()
        again = other.try_ingest_claim("jason", "1.4.4")
        assert again is not None
        again.release()
        again.release()  # twice is harmless
    finally:
        other.close()


def test_a_server_that_dies_mid_ingest_frees_its_claim(store: PgStore, pg_url: str) -> None:
    claim = store.try_ingest_claim("jason", "1.4.4")
    assert claim is not None
    with connect(pg_url) as conn:  # the holder's connection ends, as with its process
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_locks"
            " WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()"
        )
    taken = wait_until(
        lambda: store.try_ingest_claim("jason", "1.4.4"),
        what="the claim freed with its holder's connection",
        every=0.05,
    )
    taken.release()
    claim.release()  # its connection is gone: nothing to do, nothing raised


def test_two_servers_writing_one_new_package_take_turns(store: PgStore, pg_url: str) -> None:
    write_docs(store, "base", [("A.html", "a")])  # the model is claimed: no wait there
    other = PgStore(pg_url)
    errors: list[BaseException] = []

    def write_version(s: PgStore, version: str) -> None:
        try:
            docs = [(f"V{version}.html#f{i}/0", f"text {version} {i}") for i in range(800)]
            write_docs(s, "pkg", docs, version=version)
        except BaseException as exc:  # pragma: no cover - asserted below
            errors.append(exc)

    threads = [
        threading.Thread(target=write_version, args=(s, v))
        for s, v in ((store, "1.0.0"), (other, "2.0.0"))
    ]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        other.close()
    assert not errors, errors
    package = store.package("pkg")
    assert package is not None and package.chunk_count == 800
    assert {ref.split(".html")[0] for ref, _, _ in store.stored_hashes("pkg")} == {
        f"V{package.version}"
    }


def test_atomic_is_one_transaction_and_rolls_back_whole(store: PgStore) -> None:
    write_docs(store, "pkg", [("A.html", "a")])
    session = store.session()
    with pytest.raises(RuntimeError), session.atomic() as tx:
        tx.execute("DELETE FROM chunks")
        with tx.atomic() as inner:  # a savepoint
            inner.execute("DELETE FROM packages")
        raise RuntimeError("boom")
    assert store.chunk_count() == 1 and store.package("pkg") is not None
    with session.atomic() as tx:
        with pytest.raises(psycopg.errors.UndefinedTable), tx.atomic() as inner:
            inner.execute("SELECT * FROM no_such_table")
        tx.execute("DELETE FROM chunks")  # the outer transaction goes on after the savepoint
    assert store.chunk_count() == 0
