"""The docs index on PostgreSQL + pgvector (team mode): `seam.DocsStore`, the twin of
`sqlite/store.py` (the reads both answer alike are `store_sql.StoreSql`'s).

Several hexlocal servers, on several hosts, share one database. What that changes from
the SQLite store, which one user's processes share:

- Opening migrates under an advisory lock (`pg/migrations.py`), so servers starting at
  once apply each step once.
- `try_ingest_claim` takes a session-level advisory lock on a connection of its own, held
  for the whole fetch-and-write: one server ingests a package version, the others poll
  until it is done and then find it indexed.
- The embedding model is claimed under a shared advisory lock (`db.EMBEDDING_LOCK`), which
  a model switch takes exclusively: vectors of an old model cannot be committed into an
  index another server is switching, nor two models' first writes both win.
- Chunk vectors are one table per package (`pg/vectors.py`), written, indexed and
  dropped in `replace_package`'s transaction.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import psycopg

from hexlocal_core.errors import StoreError
from hexlocal_core.index.pg import db as pg_db
from hexlocal_core.index.pg import fts, vectors
from hexlocal_core.index.pg.chunks import PgChunkReads
from hexlocal_core.index.pg.db import (
    DIALECT,
    EMBEDDING_LOCK,
    INGEST_SPACE,
    WRITE_SPACE,
    Database,
    Executor,
    PgRunner,
)
from hexlocal_core.index.pg.memories import PgMemoryQueries
from hexlocal_core.index.pg.migrations import SCHEMA_VERSION, migrate
from hexlocal_core.index.pg.ops import PgJobs, PgReindex, PgSync, PgUsage
from hexlocal_core.index.pg.ops import server_id as server_id_default
from hexlocal_core.index.rows import ChunkRow, EmbeddingConfig, PackageWrite, VectorRows
from hexlocal_core.index.sql import utcnow
from hexlocal_core.index.store_sql import (
    CHUNK_WRITE_COLUMNS,
    EMBEDDING_CONFIG,
    MARK_COMPLETE,
    PACKAGE_EXISTS,
    PACKAGE_WRITE_COLUMNS,
    STATUS_AT,
    StoreSql,
    chunk_values,
    embedding_config_row,
    package_values,
)
from hexlocal_core.index.tokens import split_terms
from hexlocal_core.model import Chunk
from hexlocal_core.ports import Vectors
from hexlocal_core.redact import redact_url

Connection = psycopg.Connection[tuple[Any, ...]]


_CHUNK_INSERT_COLUMNS = f"id, {CHUNK_WRITE_COLUMNS}, tsv, token_count"


def read_embedding_config(ex: Connection | Executor) -> EmbeddingConfig | None:
    row = ex.execute(EMBEDDING_CONFIG).fetchone()
    return None if row is None else embedding_config_row(row)


def claim_embedding(ex: Connection | Executor, model: str, dims: int, provider: str) -> None:
    """Inside a transaction: make sure vectors of `model` may be written (see `Store`).

    The first writer records its model and dims; later writers of the same model pass;
    another model is refused, so vectors of two models never mix in one index.
    """
    ex.execute("SELECT pg_advisory_xact_lock_shared(%s, %s)", EMBEDDING_LOCK)
    current = read_embedding_config(ex)
    if current is None:
        # Two first writers at once: the second waits on the key, then reads the winner.
        ex.execute(
            "INSERT INTO embedding_config(id, model, dims, provider, recorded_at)"
            " VALUES (1, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
            (model, dims, provider, utcnow()),
        )
        current = read_embedding_config(ex)
    if current is not None and (current.model, current.dims) != (model, dims):
        raise StoreError(
            f"the index holds vectors from {current.model} ({current.dims} dims); refusing to "
            f"mix in {model} ({dims} dims). Run `hexlocal reindex` to switch models."
        )


class PgSession(Executor):
    """One thread's view of the index; `execute` and friends are documented in `pg/db.py`."""

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self.chunks = PgChunkReads(self)
        self.memories = PgMemoryQueries(self)

    def claim_embedding(self, model: str, dims: int, provider: str) -> None:
        claim_embedding(self, model, dims, provider)


class PgIngestClaim:
    """A held ingest claim (`PgStore.try_ingest_claim`); `release` may run in any thread."""

    def __init__(self, conn: Connection, key: tuple[int, str]) -> None:
        self._conn = conn
        self._key = key

    def release(self) -> None:
        if self._conn.closed:
            return
        with contextlib.suppress(psycopg.Error):
            self._conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", self._key)
        self._conn.close()


class PgStore(StoreSql, PgRunner):
    """The docs index in one PostgreSQL database (`DATABASE_URL`)."""

    def __init__(self, url: str, *, server_id: str = "") -> None:
        """`server_id` names this server in usage rows (`HEXLOCAL_SERVER_ID`); empty:
        host:pid."""
        location = redact_url(url)
        conn = pg_db.connect(url)
        try:
            with pg_db.translating(location):
                self.schema_version = migrate(conn, location)
        finally:
            conn.close()
        self.schema_latest = SCHEMA_VERSION
        self._db = Database(url)
        self._ex = Executor(self._db)
        self._usage = PgUsage(self._ex, server_id or server_id_default())

    # -- the seam (seam.DocsStore) -------------------------------------------------------

    @property
    def engine(self) -> str:
        row = self._ex.fetchone(
            "SELECT current_setting('server_version'),"
            " (SELECT extversion FROM pg_extension WHERE extname = 'vector')"
        )
        server, vector = row if row else ("?", "?")
        return f"PostgreSQL {server} with pgvector {vector}"

    @property
    def location(self) -> str:
        return self._db.location

    def session(self) -> PgSession:
        return PgSession(self._db)

    @property
    def jobs(self) -> PgJobs:
        return PgJobs(self._ex)

    @property
    def sync(self) -> PgSync:
        return PgSync(self._ex)

    @property
    def reindex(self) -> PgReindex:
        return PgReindex(self._db)

    @property
    def usage(self) -> PgUsage:
        return self._usage

    def try_ingest_claim(self, package: str, version: str) -> PgIngestClaim | None:
        """The right to ingest `package@version`, or None while another server holds it.

        A session-level advisory lock, held on a connection of its own until `release`:
        a server that dies mid-ingest releases it with its connection."""
        conn = pg_db.connect(self._db.url)
        key = (INGEST_SPACE, f"{package}@{version}")
        try:
            with pg_db.translating(self.location):
                row = conn.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))", key).fetchone()
        except BaseException:
            conn.close()
            raise
        if not (row and row[0]):
            conn.close()
            return None
        return PgIngestClaim(conn, key)

    def close(self) -> None:
        self._db.close()

    # -- embedding identity --------------------------------------------------------------

    def vector_tables_exist(self) -> bool:
        """Whether an embedder's dims are known (SQLite: the vec0 tables exist)."""
        return bool(self._ex.scalar("SELECT EXISTS (SELECT 1 FROM embedding_config)"))

    # -- packages ------------------------------------------------------------------------

    def replace_package(self, write: PackageWrite) -> list[int]:
        """Write a package version, replacing any other version, in one transaction; the
        chunk ids in order. With vectors the package is complete, without them 'partial'."""
        if write.vectors is not None and len(write.chunks) != len(write.vectors):
            raise StoreError("internal: chunks and vectors differ in number; nothing written")
        rows = [_chunk_values(write.name, chunk) for chunk in write.chunks]
        tokens = sum(int(r[-1]) for r in rows)
        with self._db.transaction() as conn:
            _lock_package(conn, write.name)
            _delete_package_rows(conn, write.name)
            values = (*package_values(write), tokens)
            conn.execute(
                f"INSERT INTO packages({PACKAGE_WRITE_COLUMNS}, token_count)"
                f" VALUES ({', '.join(['%s'] * len(values))})",
                values,
            )
            ids = _allocate_ids(conn, len(rows))
            with conn.cursor().copy(f"COPY chunks ({_CHUNK_INSERT_COLUMNS}) FROM STDIN") as copy:
                for chunk_id, values in zip(ids, rows, strict=True):
                    copy.write_row((chunk_id, *values))
            if write.vectors is not None and len(write.vectors):
                _add_vectors(conn, VectorRows.of_write(write, ids), write.vectors)
                vectors.index(conn, write.name)
        return ids

    def add_vectors(self, rows: VectorRows, vecs: Vectors) -> bool:
        """Vectors for these stored chunks of a 'partial' package version, in one
        transaction; False, writing nothing, when the package no longer holds that version.
        Chunks that have a vector already are skipped, and a version another server
        completed meanwhile is left as it is."""
        if not rows.ids:
            return True
        with self._db.transaction() as conn:
            _lock_package(conn, rows.name)
            status = _status_at(conn, rows.name, rows.version)
            if status != "partial":
                return status == "complete"
            rows, vecs = rows.missing(vecs, vectors.stored_ids(conn, rows.name, rows.ids))
            if rows.ids:
                _add_vectors(conn, rows, vecs)
        return True

    def _embedded_ids(self, package: str) -> set[int]:
        with self._ex.connection() as conn:
            return vectors.stored_ids(conn, package)

    def mark_complete(self, name: str, version: str) -> bool:
        """The 'partial' package version has all its vectors (its HNSW index is built now,
        once); False if it is gone (True if another server completed it first)."""
        with self._db.transaction() as conn:
            _lock_package(conn, name)
            status = _status_at(conn, name, version)
            if status != "partial":
                return status == "complete"
            if vectors.exists(conn, name):
                vectors.index(conn, name)
            conn.execute(DIALECT.sql(MARK_COMPLETE), (name,))
        return True

    def delete_package(self, name: str) -> bool:
        with self._db.transaction() as conn:
            _lock_package(conn, name)
            existed = conn.execute(DIALECT.sql(PACKAGE_EXISTS), (name,)).fetchone()
            _delete_package_rows(conn, name)
        return existed is not None

    # -- embedding cache -----------------------------------------------------------------

    def cached_vectors(self, model: str, hashes: Iterable[str]) -> dict[str, np.ndarray[Any, Any]]:
        wanted = list(dict.fromkeys(hashes))
        found: dict[str, np.ndarray[Any, Any]] = {}
        with self._db.connection() as conn:
            for start in range(0, len(wanted), 1000):
                part = wanted[start : start + 1000]
                for text_hash, vector in conn.execute(
                    "SELECT text_hash, vector FROM embed_cache"
                    " WHERE model = %s AND text_hash = ANY(%s::text[])",
                    (model, part),
                    binary=True,
                ):
                    found[str(text_hash)] = np.asarray(vector, dtype=np.float32)
        return found

    def hydrate(self, ids: Sequence[int]) -> list[ChunkRow]:
        """Rows for the ids, in the order given; ids not stored are left out."""
        return PgChunkReads(self._ex).hydrate(ids)


def _chunk_values(package: str, chunk: Chunk) -> tuple[Any, ...]:
    """A chunk's column values after its id (COPY order), its tsvector built here."""
    split = split_terms(chunk.item.title, chunk.content)
    doc = fts.document(chunk.item.title, chunk.content, split)
    return (*chunk_values(package, chunk, split), doc.tsvector, doc.length)


def _allocate_ids(conn: Connection, n: int) -> list[int]:
    """n new chunk ids, increasing (document order is id order, as on SQLite)."""
    if n == 0:
        return []
    found = conn.execute(
        "SELECT nextval(pg_get_serial_sequence('chunks', 'id')) FROM generate_series(1, %s)",
        (n,),
    ).fetchall()
    return sorted(int(r[0]) for r in found)


def _add_vectors(conn: Connection, rows: VectorRows, vecs: Vectors) -> None:
    """Rows of the package's vector table (created by the first) and their embedding-cache
    rows, for these chunks."""
    dims = int(vecs.shape[1])
    claim_embedding(conn, rows.embed_model, dims, rows.embed_provider)
    if not vectors.exists(conn, rows.name):
        vectors.create(conn, rows.name, dims)
    vectors.load(conn, rows.name, zip(rows.ids, rows.has_example, vecs, strict=True))
    vectors.cache_package(conn, rows.name, rows.embed_model, dims, rows.ids)


def _status_at(conn: Connection, name: str, version: str) -> str | None:
    """'partial' or 'complete' if the index holds this version of the package, else None."""
    found = conn.execute(DIALECT.sql(STATUS_AT), (name, version)).fetchone()
    return None if found is None else str(found[0])


def _lock_package(conn: Connection, name: str) -> None:
    """Two servers writing one package (two versions of a package new to the index) take
    turns: the second replaces the first's rows instead of failing on its primary key."""
    conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (WRITE_SPACE, name))


def _delete_package_rows(conn: Connection, name: str) -> None:
    vectors.drop(conn, name)
    conn.execute("DELETE FROM chunks WHERE package = %s", (name,))
    conn.execute("DELETE FROM packages WHERE name = %s", (name,))
