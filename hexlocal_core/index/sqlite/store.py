"""The docs index on SQLite (the default: one file): `seam.DocsStore`, the twin of
`pg/store.py`.

Packages, chunks, their FTS rows and vectors, and the embedding cache. All methods are
synchronous and short, except `replace_package` (one transaction for a whole package),
which callers run in a worker thread. Each thread gets its own connection (`db.py`). The
reads both engines answer alike are `store_sql.StoreSql`'s; chunk reads are in
`chunks.py`, memories in `memories.py`, jobs, sync, reindex and usage in `ops.py`;
vectors are encoded and their tables created only by `vectors.py`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import apsw
import numpy as np

from hexlocal_core.errors import StoreError
from hexlocal_core.index.rows import ChunkRow, PackageWrite, VectorRows
from hexlocal_core.index.sqlite.chunks import SqliteChunkReads
from hexlocal_core.index.sqlite.db import ConnectionPool, SqliteRunner, atomic, scalar
from hexlocal_core.index.sqlite.file_claim import FileClaim, try_file_claim
from hexlocal_core.index.sqlite.memories import SqliteMemoryQueries
from hexlocal_core.index.sqlite.migrations import SCHEMA_VERSION, migrate
from hexlocal_core.index.sqlite.ops import SqliteJobs, SqliteReindex, SqliteSync, SqliteUsage
from hexlocal_core.index.sqlite.vectors import (
    CHUNK_VEC_TABLE,
    create_vector_tables,
    decode_vector,
    encode_vector,
    record_embedding,
    vector_ids,
    vector_tables_exist,
)
from hexlocal_core.index.store_sql import (
    CHUNK_WRITE_COLUMNS,
    MARK_COMPLETE,
    PACKAGE_EXISTS,
    PACKAGE_WRITE_COLUMNS,
    STATUS_AT,
    StoreSql,
    chunk_values,
    package_values,
)
from hexlocal_core.index.tokens import split_terms
from hexlocal_core.model import Chunk
from hexlocal_core.ports import Vectors

log = logging.getLogger("hexlocal.store")


class SqliteSession:
    """One thread's connection, seen through the seam."""

    def __init__(self, store: Store, conn: apsw.Connection) -> None:
        self._store = store
        self.conn = conn
        self.chunks = SqliteChunkReads(conn)
        self.memories = SqliteMemoryQueries(conn)

    @contextlib.contextmanager
    def atomic(self) -> Iterator[SqliteSession]:
        with atomic(self.conn):
            yield self

    def claim_embedding(self, model: str, dims: int, provider: str) -> None:
        self._store.claim_embedding(self.conn, model, dims, provider)


class Store(StoreSql, SqliteRunner):
    """The docs index over one SQLite file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._pool = ConnectionPool(path)
        self.schema_version = migrate(self.conn)
        self.schema_latest = SCHEMA_VERSION
        self._usage = SqliteUsage(self)

    @property
    def conn(self) -> apsw.Connection:
        return self._pool.get()

    # -- the seam (seam.DocsStore) ---------------------------------------------------

    @property
    def location(self) -> str:
        return str(self.path)

    @property
    def engine(self) -> str:
        vec = scalar(self.conn, "SELECT vec_version()")
        return f"SQLite {apsw.sqlite_lib_version()} with FTS5 and sqlite-vec {vec}"

    def session(self) -> SqliteSession:
        return SqliteSession(self, self.conn)

    @property
    def jobs(self) -> SqliteJobs:
        return SqliteJobs(self)

    @property
    def sync(self) -> SqliteSync:
        return SqliteSync(self)

    @property
    def reindex(self) -> SqliteReindex:
        return SqliteReindex(self)

    @property
    def usage(self) -> SqliteUsage:
        return self._usage

    def try_ingest_claim(self, package: str, version: str) -> FileClaim | None:
        """The right to ingest `package@version`, or None while another process holds it
        (a file lock beside the database: `file_claim.py`)."""
        return try_file_claim(self.path, package, version)

    def close(self) -> None:
        self._pool.close()

    # -- embedding identity -------------------------------------------------------------

    def vector_tables_exist(self) -> bool:
        return vector_tables_exist(self.conn)

    def claim_embedding(self, conn: apsw.Connection, model: str, dims: int, provider: str) -> None:
        """Inside a write transaction: make sure vectors of `model` may be written.

        The first writer (a docs ingest or a memory) records its model and dims with the
        index and creates the vec0 tables; later writers of the same model pass; another
        model is refused, so vectors of two models never mix in one index.
        """
        current = self.embedding_config()
        if current is not None and (current.model, current.dims) != (model, dims):
            raise StoreError(
                f"the index holds vectors from {current.model} ({current.dims} dims); refusing to "
                f"mix in {model} ({dims} dims). Run `hexlocal reindex` to switch models."
            )
        create_vector_tables(conn, dims)
        if current is None:
            record_embedding(conn, model, dims, provider)

    # -- packages -----------------------------------------------------------------------

    def replace_package(self, write: PackageWrite) -> list[int]:
        """Write a package version, replacing any other version, in one transaction; the
        chunk ids in order. With vectors the package is complete, without them 'partial'."""
        if write.vectors is not None and len(write.chunks) != len(write.vectors):
            raise StoreError("internal: chunks and vectors differ in number; nothing written")
        conn = self.conn
        with atomic(conn):
            self._delete_package_rows(conn, write.name)
            values = package_values(write)
            conn.execute(
                f"INSERT INTO packages({PACKAGE_WRITE_COLUMNS}) VALUES ({_marks(len(values))})",
                values,
            )
            ids = [self._insert_chunk(conn, write.name, chunk) for chunk in write.chunks]
            if write.vectors is not None:
                self._insert_vectors(conn, VectorRows.of_write(write, ids), write.vectors)
        return ids

    def add_vectors(self, rows: VectorRows, vectors: Vectors) -> bool:
        """The vectors of these stored chunks of a 'partial' package version, in one
        transaction; False, writing nothing, when the package no longer holds that version
        (another writer replaced it meanwhile). Chunks that have a vector already are
        skipped, and a version another process completed meanwhile is left as it is."""
        conn = self.conn
        with atomic(conn):
            status = self._status_at(conn, rows.name, rows.version)
            if status != "partial":
                return status == "complete"
            rows, vectors = rows.missing(vectors, vector_ids(conn, rows.name, rows.ids))
            self._insert_vectors(conn, rows, vectors)
        return True

    def _embedded_ids(self, package: str) -> set[int]:
        return vector_ids(self.conn, package)

    def mark_complete(self, name: str, version: str) -> bool:
        """The 'partial' package version has all its vectors; False if it is gone (True if
        another process completed it first)."""
        conn = self.conn
        with atomic(conn):
            status = self._status_at(conn, name, version)
            if status != "partial":
                return status == "complete"
            conn.execute(MARK_COMPLETE, (name,))
        return True

    def _status_at(self, conn: apsw.Connection, name: str, version: str) -> str | None:
        """'partial' or 'complete' if the index holds this version of the package, else None."""
        found = scalar(conn, STATUS_AT, (name, version))
        return None if found is None else str(found)

    def _insert_chunk(self, conn: apsw.Connection, package: str, chunk: Chunk) -> int:
        values = chunk_values(package, chunk, split_terms(chunk.item.title, chunk.content))
        conn.execute(
            f"INSERT INTO chunks({CHUNK_WRITE_COLUMNS}) VALUES ({_marks(len(values))})", values
        )
        return int(conn.last_insert_rowid())

    def _insert_vectors(self, conn: apsw.Connection, rows: VectorRows, vectors: Vectors) -> None:
        """The vec0 rows and embedding-cache rows of these chunks."""
        if not rows.ids:
            return
        self.claim_embedding(conn, rows.embed_model, int(vectors.shape[1]), rows.embed_provider)
        for chunk_id, text_hash, has_example, vector in zip(
            rows.ids, rows.text_hashes, rows.has_example, vectors, strict=True
        ):
            blob = encode_vector(vector)
            conn.execute(
                f"INSERT INTO {CHUNK_VEC_TABLE}(rowid, embedding, package, has_example)"
                " VALUES (?,?,?,?)",
                (chunk_id, blob, rows.name, int(has_example)),
            )
            conn.execute(
                "INSERT OR IGNORE INTO embed_cache(model, text_hash, dims, vector)"
                " VALUES (?,?,?,?)",
                (rows.embed_model, text_hash, len(blob) // 4, blob),
            )

    def _delete_package_rows(self, conn: apsw.Connection, name: str) -> None:
        if self.vector_tables_exist():
            conn.execute(
                f"DELETE FROM {CHUNK_VEC_TABLE}"
                " WHERE rowid IN (SELECT id FROM chunks WHERE package = ?)",
                (name,),
            )
        conn.execute("DELETE FROM chunks WHERE package = ?", (name,))
        conn.execute("DELETE FROM packages WHERE name = ?", (name,))

    def delete_package(self, name: str) -> bool:
        with atomic(self.conn) as conn:
            existed = scalar(conn, PACKAGE_EXISTS, (name,)) is not None
            self._delete_package_rows(conn, name)
        return existed

    # -- embedding cache ----------------------------------------------------------------

    def cached_vectors(self, model: str, hashes: Iterable[str]) -> dict[str, np.ndarray[Any, Any]]:
        wanted = list(dict.fromkeys(hashes))
        found: dict[str, np.ndarray[Any, Any]] = {}
        for start in range(0, len(wanted), 500):
            part = wanted[start : start + 500]
            for text_hash, blob in self.conn.execute(
                "SELECT text_hash, vector FROM embed_cache"
                f" WHERE model = ? AND text_hash IN ({_marks(len(part))})",
                (model, *part),
            ):
                found[text_hash] = decode_vector(blob)
        return found

    def hydrate(self, ids: Sequence[int]) -> list[ChunkRow]:
        """Rows for the ids, in the order given; ids not stored are left out."""
        return SqliteChunkReads(self.conn).hydrate(ids)


def _marks(n: int) -> str:
    return ",".join("?" * n)
