"""The docs index: packages, chunks, their FTS rows and vectors, and the embedding cache.

All methods are synchronous and short, except `replace_package` (one transaction for a
whole package), which callers run in a worker thread. Each thread gets its own connection.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import apsw
import numpy as np
from attrs import frozen

from hexlocal_core.errors import StoreError
from hexlocal_core.index.db import ConnectionPool, atomic, rows, scalar
from hexlocal_core.index.migrations import migrate
from hexlocal_core.model import Chunk, IndexedPackage, sha256_text
from hexlocal_core.ports import Vectors
from hexlocal_core.search.tokens import split_terms

log = logging.getLogger("hexlocal.store")

CHUNK_VEC_TABLE = "chunk_vecs"
MEMORY_VEC_TABLE = "memory_vecs"


def utcnow() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@frozen
class EmbeddingConfig:
    model: str
    dims: int
    provider: str
    recorded_at: str


@frozen
class PackageWrite:
    """Everything `replace_package` writes for one package version, in one transaction."""

    name: str
    version: str
    source: str
    chunker_version: int
    item_count: int
    chunks: Sequence[Chunk]
    vectors: Vectors  # row i belongs to chunks[i]
    embed_model: str
    embed_provider: str
    docs_html_url: str | None = None
    meta: dict[str, Any] | None = None


def _blob(vector: np.ndarray[Any, Any]) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


class Store:
    """The docs index over one SQLite file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._pool = ConnectionPool(path)
        self.schema_version = migrate(self.conn)

    @property
    def conn(self) -> apsw.Connection:
        return self._pool.get()

    def close(self) -> None:
        self._pool.close()

    # -- embedding identity -------------------------------------------------------------

    def embedding_config(self) -> EmbeddingConfig | None:
        found = rows(self.conn, "SELECT model, dims, provider, recorded_at FROM embedding_config")
        return EmbeddingConfig(**found[0]) if found else None

    def vector_tables_exist(self) -> bool:
        return bool(
            scalar(
                self.conn,
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
                (CHUNK_VEC_TABLE,),
            )
        )

    def _ensure_vector_tables(self, conn: apsw.Connection, dims: int) -> None:
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {CHUNK_VEC_TABLE} USING vec0("
            f"embedding float[{dims}] distance_metric=cosine, "
            "package text partition key, has_example integer)"
        )
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {MEMORY_VEC_TABLE} USING vec0("
            f"embedding float[{dims}] distance_metric=cosine)"
        )

    def _record_embedding(
        self, conn: apsw.Connection, model: str, dims: int, provider: str
    ) -> None:
        current = self.embedding_config()
        if current is not None and (current.model, current.dims) != (model, dims):
            raise StoreError(
                f"the index holds vectors from {current.model} ({current.dims} dims); refusing to "
                f"mix in {model} ({dims} dims). Run `hexlocal reindex` to switch models."
            )
        if current is None:
            self._ensure_vector_tables(conn, dims)
            conn.execute(
                "INSERT INTO embedding_config(id, model, dims, provider, recorded_at) "
                "VALUES (1, ?, ?, ?, ?)",
                (model, dims, provider, utcnow()),
            )

    def switch_embedding(self, conn: apsw.Connection, model: str, dims: int, provider: str) -> None:
        """Drop all vectors and record a new model (used by reindex, inside its transaction)."""
        conn.execute(f"DROP TABLE IF EXISTS {CHUNK_VEC_TABLE}")
        conn.execute(f"DROP TABLE IF EXISTS {MEMORY_VEC_TABLE}")
        conn.execute("DELETE FROM embedding_config")
        self._ensure_vector_tables(conn, dims)
        conn.execute(
            "INSERT INTO embedding_config(id, model, dims, provider, recorded_at)"
            " VALUES (1, ?, ?, ?, ?)",
            (model, dims, provider, utcnow()),
        )

    # -- packages -----------------------------------------------------------------------

    def package(self, name: str) -> IndexedPackage | None:
        found = rows(self.conn, _PACKAGE_SELECT + " WHERE name = ?", (name,))
        return _to_package(found[0]) if found else None

    def packages(self) -> list[IndexedPackage]:
        return [_to_package(r) for r in rows(self.conn, _PACKAGE_SELECT + " ORDER BY name")]

    def package_meta(self, name: str) -> dict[str, Any]:
        raw = scalar(self.conn, "SELECT meta FROM packages WHERE name = ?", (name,))
        return dict(json.loads(raw)) if raw else {}

    def replace_package(self, write: PackageWrite) -> None:
        """Write a package version whole, replacing any other version, in one transaction."""
        if len(write.chunks) != len(write.vectors):
            raise StoreError("internal: chunks and vectors differ in number; nothing written")
        dims = int(write.vectors.shape[1]) if len(write.vectors) else 0
        conn = self.conn
        with atomic(conn):
            if dims:
                self._record_embedding(conn, write.embed_model, dims, write.embed_provider)
            self._delete_package_rows(conn, write.name)
            conn.execute(
                "INSERT INTO packages(name, version, source, status, ingested_at, chunker_version,"
                " item_count, chunk_count, embed_model, docs_html_url, meta)"
                " VALUES (?, ?, ?, 'complete', ?, ?, ?, ?, ?, ?, ?)",
                (
                    write.name,
                    write.version,
                    write.source,
                    utcnow(),
                    write.chunker_version,
                    write.item_count,
                    len(write.chunks),
                    write.embed_model,
                    write.docs_html_url,
                    json.dumps(write.meta or {}),
                ),
            )
            for chunk, vector in zip(write.chunks, write.vectors, strict=True):
                self._insert_chunk(conn, write.name, chunk, vector, write.embed_model)

    def _insert_chunk(
        self, conn: apsw.Connection, package: str, chunk: Chunk, vector: Any, model: str
    ) -> None:
        item = chunk.item
        embed_text = chunk.embedding_text()
        embed_hash = sha256_text(embed_text)
        conn.execute(
            "INSERT INTO chunks(package, version, ordinal, ref, page, title, doc_type, module,"
            " function, arity, signature, deprecated, since, content, content_hash, embed_hash,"
            " split_terms, hexdocs_url, source_url, source, has_example)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                package,
                item.version,
                chunk.ordinal,
                item.ref,
                item.page,
                item.title,
                str(item.doc_type),
                item.module,
                item.function,
                item.arity,
                item.signature,
                item.deprecated,
                item.since,
                chunk.content,
                chunk.content_hash,
                embed_hash,
                split_terms(item.title, chunk.content),
                item.hexdocs_url,
                item.source_url,
                str(item.source),
                int(chunk.has_example),
            ),
        )
        chunk_id = conn.last_insert_rowid()
        blob = _blob(vector)
        conn.execute(
            f"INSERT INTO {CHUNK_VEC_TABLE}(rowid, embedding, package, has_example)"
            " VALUES (?,?,?,?)",
            (chunk_id, blob, package, int(chunk.has_example)),
        )
        conn.execute(
            "INSERT OR IGNORE INTO embed_cache(model, text_hash, dims, vector) VALUES (?,?,?,?)",
            (model, embed_hash, len(blob) // 4, blob),
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
            existed = scalar(conn, "SELECT 1 FROM packages WHERE name = ?", (name,)) is not None
            self._delete_package_rows(conn, name)
        return existed

    # -- embedding cache ----------------------------------------------------------------

    def cached_vectors(self, model: str, hashes: Iterable[str]) -> dict[str, np.ndarray[Any, Any]]:
        wanted = list(dict.fromkeys(hashes))
        found: dict[str, np.ndarray[Any, Any]] = {}
        for start in range(0, len(wanted), 500):
            part = wanted[start : start + 500]
            marks = ",".join("?" * len(part))
            for text_hash, blob in self.conn.execute(
                "SELECT text_hash, vector FROM embed_cache"
                f" WHERE model = ? AND text_hash IN ({marks})",
                (model, *part),
            ):
                found[text_hash] = np.frombuffer(blob, dtype=np.float32)
        return found

    # -- reads for search ---------------------------------------------------------------

    def stored_hashes(self, package: str) -> list[tuple[str, int, str]]:
        """(ref, ordinal, content_hash) of every stored chunk of a package, for drift."""
        return [
            (r[0], r[1], r[2])
            for r in self.conn.execute(
                "SELECT ref, ordinal, content_hash FROM chunks WHERE package = ? ORDER BY id",
                (package,),
            )
        ]

    def chunk_count(self) -> int:
        return int(scalar(self.conn, "SELECT count(*) FROM chunks") or 0)

    def hydrate(self, ids: Sequence[int]) -> list[dict[str, Any]]:
        """Rows for the ids, in the order given (`IN (...)` returns storage order)."""
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        by_id = {
            r["id"]: r
            for r in rows(self.conn, f"SELECT * FROM chunks WHERE id IN ({marks})", tuple(ids))
        }
        return [by_id[i] for i in ids if i in by_id]


_PACKAGE_SELECT = (
    "SELECT name, version, source, status, ingested_at, chunker_version, item_count,"
    " chunk_count, embed_model FROM packages"
)


def _to_package(r: dict[str, Any]) -> IndexedPackage:
    return IndexedPackage(
        name=r["name"],
        version=r["version"],
        source=r["source"],
        status=r["status"],
        chunk_count=r["chunk_count"],
        item_count=r["item_count"],
        chunker_version=r["chunker_version"],
        ingested_at=r["ingested_at"],
        embed_model=r["embed_model"],
    )
