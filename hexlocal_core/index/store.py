"""The docs index: packages, chunks, their FTS rows and vectors, and the embedding cache.

All methods are synchronous and short, except `replace_package` (one transaction for a
whole package), which callers run in a worker thread. Each thread gets its own connection.
Reads that search and evaluation run over chunks are in `chunks.py`; memories are in
`memory_store.py`; vectors are encoded and their tables created only by `vectors.py`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import apsw
import numpy as np
from attrs import evolve, frozen

from hexlocal_core.errors import StoreError
from hexlocal_core.index import chunks
from hexlocal_core.index.chunks import ChunkRow
from hexlocal_core.index.db import ConnectionPool, atomic, scalar, utcnow
from hexlocal_core.index.file_claim import FileClaim, try_file_claim
from hexlocal_core.index.migrations import SCHEMA_VERSION, migrate
from hexlocal_core.index.sqlite_session import (
    SqliteJobs,
    SqliteReindex,
    SqliteSession,
    SqliteSync,
)
from hexlocal_core.index.tokens import split_terms
from hexlocal_core.index.usage_store import StoreUsageSink
from hexlocal_core.index.vectors import (
    CHUNK_VEC_TABLE,
    MEMORY_VEC_TABLE,
    create_vector_tables,
    decode_vector,
    drop_vector_tables,
    encode_vector,
    vector_ids,
    vector_tables_exist,
)
from hexlocal_core.model import Chunk, IndexedPackage, sha256_text
from hexlocal_core.ports import Vectors

log = logging.getLogger("hexlocal.store")

__all__ = [
    "CHUNK_VEC_TABLE",
    "MEMORY_VEC_TABLE",
    "ChunkRow",
    "EmbeddingConfig",
    "PackageMeta",
    "PackageWrite",
    "Store",
    "Unembedded",
    "VectorRows",
    "utcnow",
]


@frozen
class EmbeddingConfig:
    model: str
    dims: int
    provider: str
    recorded_at: str


@frozen
class PackageWrite:
    """Everything `replace_package` writes for one package version, in one transaction.

    `vectors` None: the chunks only, the package 'partial' (keyword search works at once);
    `add_vectors` then adds the vectors slice by slice and `mark_complete` ends it.
    """

    name: str
    version: str
    source: str
    chunker_version: int
    item_count: int
    chunks: Sequence[Chunk]
    vectors: Vectors | None  # row i belongs to chunks[i]; None: added later (see above)
    embed_model: str
    embed_provider: str
    docs_html_url: str | None = None
    meta: dict[str, Any] | None = None


@frozen
class VectorRows:
    """Where `add_vectors` puts vectors: row i is stored chunk `ids[i]` of a 'partial'
    package version, whose embedded text hashes to `text_hashes[i]` (its cache key)."""

    name: str
    version: str
    embed_model: str
    embed_provider: str
    ids: tuple[int, ...]
    text_hashes: tuple[str, ...]
    has_example: tuple[bool, ...]

    @classmethod
    def of_write(
        cls, write: PackageWrite, ids: Sequence[int], hashes: Sequence[str] | None = None
    ) -> VectorRows:
        """Every chunk of the write (ids from `replace_package`); `hashes`: the embedded
        texts' hashes when the caller has them, else computed here."""
        if hashes is None:
            hashes = [sha256_text(c.embedding_text()) for c in write.chunks]
        return cls(
            write.name,
            write.version,
            write.embed_model,
            write.embed_provider,
            tuple(ids),
            tuple(hashes),
            tuple(bool(c.has_example) for c in write.chunks),
        )

    def take(self, positions: Sequence[int]) -> VectorRows:
        return evolve(
            self,
            ids=tuple(self.ids[i] for i in positions),
            text_hashes=tuple(self.text_hashes[i] for i in positions),
            has_example=tuple(self.has_example[i] for i in positions),
        )

    def missing(self, vectors: Vectors, present: set[int]) -> tuple[VectorRows, Vectors]:
        """These rows and their vectors without the chunks that have a vector already:
        another process finishing the same package version wrote them first."""
        keep = [i for i, chunk_id in enumerate(self.ids) if chunk_id not in present]
        if len(keep) == len(self.ids):
            return self, vectors
        return self.take(keep), vectors[keep]


@frozen
class Unembedded:
    """A 'partial' package version's stored chunks that have no vector yet, with the text
    each one embeds: what finishing it needs without reading its docs again."""

    package: IndexedPackage
    rows: VectorRows
    texts: tuple[str, ...]

    @classmethod
    def of(
        cls,
        package: IndexedPackage,
        stored: Sequence[tuple[int, str, str, bool]],
        embedded: set[int],
    ) -> Unembedded:
        """`stored`: the package's (chunk id, embed_hash, embedded text, has_example) rows;
        `embedded`: the ids that have a vector. The model is the package's; the provider
        is the embedder's to fill in (see `finish_stored`)."""
        missing = [r for r in stored if r[0] not in embedded]
        rows = VectorRows(
            package.name,
            package.version,
            package.embed_model or "",
            "",
            tuple(r[0] for r in missing),
            tuple(r[1] for r in missing),
            tuple(r[3] for r in missing),
        )
        return cls(package, rows, tuple(r[2] for r in missing))


@frozen
class PackageMeta:
    """How a package version was ingested: what re-deriving its items needs."""

    docs_html_url: str | None = None
    generation: str | None = None  # hexdocs: which ExDoc search index it was read from
    tarball_bytes: int | None = None
    ebin: str | None = None  # BEAM docs: the ebin folder read
    paths: tuple[str, ...] | None = None  # project docs: the folders given (None: defaults)

    @classmethod
    def from_stored(cls, docs_html_url: str | None, raw: str | None) -> PackageMeta:
        meta = json.loads(raw) if raw else {}
        if not isinstance(meta, dict):
            meta = {}
        paths = meta.get("paths")
        return cls(
            docs_html_url=docs_html_url,
            generation=_opt_str(meta.get("generation")),
            tarball_bytes=meta["tarball_bytes"]
            if isinstance(meta.get("tarball_bytes"), int)
            else None,
            ebin=_opt_str(meta.get("ebin")),
            paths=tuple(str(p) for p in paths) if isinstance(paths, list) and paths else None,
        )


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


class Store:
    """The docs index over one SQLite file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._pool = ConnectionPool(path)
        self.schema_version = migrate(self.conn)
        self.schema_latest = SCHEMA_VERSION
        self._usage = StoreUsageSink(self)

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
    def usage(self) -> StoreUsageSink:
        return self._usage

    def try_ingest_claim(self, package: str, version: str) -> FileClaim | None:
        """The right to ingest `package@version`, or None while another process holds it
        (a file lock beside the database: index/file_claim.py)."""
        return try_file_claim(self.path, package, version)

    def close(self) -> None:
        self._pool.close()

    # -- embedding identity -------------------------------------------------------------

    def embedding_config(self) -> EmbeddingConfig | None:
        for model, dims, provider, recorded_at in self.conn.execute(
            "SELECT model, dims, provider, recorded_at FROM embedding_config"
        ):
            return EmbeddingConfig(str(model), int(dims), str(provider), str(recorded_at))
        return None

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
            _insert_embedding_config(conn, model, dims, provider)

    def switch_embedding(self, conn: apsw.Connection, model: str, dims: int, provider: str) -> None:
        """Drop all vectors and record a new model (used by reindex, inside its transaction)."""
        drop_vector_tables(conn)
        conn.execute("DELETE FROM embedding_config")
        create_vector_tables(conn, dims)
        _insert_embedding_config(conn, model, dims, provider)

    # -- packages -----------------------------------------------------------------------

    def package(self, name: str) -> IndexedPackage | None:
        for r in self.conn.execute(PACKAGE_SELECT + " WHERE name = ?", (name,)):
            return to_package(r)
        return None

    def packages(self) -> list[IndexedPackage]:
        return [to_package(r) for r in self.conn.execute(PACKAGE_SELECT + " ORDER BY name")]

    def package_meta(self, name: str) -> PackageMeta:
        """How the package was ingested (every field None when it is not indexed)."""
        for docs_html_url, raw in self.conn.execute(
            "SELECT docs_html_url, meta FROM packages WHERE name = ?", (name,)
        ):
            return PackageMeta.from_stored(docs_html_url, raw)
        return PackageMeta()

    def replace_package(self, write: PackageWrite) -> list[int]:
        """Write a package version, replacing any other version, in one transaction; the
        chunk ids in order. With vectors the package is complete, without them 'partial'."""
        if write.vectors is not None and len(write.chunks) != len(write.vectors):
            raise StoreError("internal: chunks and vectors differ in number; nothing written")
        conn = self.conn
        with atomic(conn):
            self._delete_package_rows(conn, write.name)
            status = "partial" if write.vectors is None else "complete"
            conn.execute(
                "INSERT INTO packages(name, version, source, status, ingested_at, chunker_version,"
                " item_count, chunk_count, embed_model, docs_html_url, meta)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    write.name,
                    write.version,
                    write.source,
                    status,
                    utcnow(),
                    write.chunker_version,
                    write.item_count,
                    len(write.chunks),
                    write.embed_model,
                    write.docs_html_url,
                    json.dumps(write.meta or {}),
                ),
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

    def unembedded(self, name: str, version: str) -> Unembedded | None:
        """The chunks of 'partial' `name` `version` that have no vector yet; None unless the
        index holds that version, partial."""
        package = self.package(name)
        if package is None or package.version != version or package.complete:
            return None
        conn = self.conn
        have = vector_ids(conn, name)
        return Unembedded.of(package, chunks.embedding_rows(conn, name), have)

    def mark_complete(self, name: str, version: str) -> bool:
        """The 'partial' package version has all its vectors; False if it is gone (True if
        another process completed it first)."""
        conn = self.conn
        with atomic(conn):
            status = self._status_at(conn, name, version)
            if status != "partial":
                return status == "complete"
            conn.execute("UPDATE packages SET status = 'complete' WHERE name = ?", (name,))
        return True

    def _status_at(self, conn: apsw.Connection, name: str, version: str) -> str | None:
        """'partial' or 'complete' if the index holds this version of the package, else None."""
        found = scalar(
            conn, "SELECT status FROM packages WHERE name = ? AND version = ?", (name, version)
        )
        return None if found is None else str(found)

    def _insert_chunk(self, conn: apsw.Connection, package: str, chunk: Chunk) -> int:
        values = chunks.chunk_values(package, chunk, split_terms(chunk.item.title, chunk.content))
        conn.execute(
            f"INSERT INTO chunks({chunks.CHUNK_WRITE_COLUMNS})"
            f" VALUES ({','.join('?' * len(values))})",
            values,
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
                found[text_hash] = decode_vector(blob)
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

    def hydrate(self, ids: Sequence[int]) -> list[ChunkRow]:
        """Rows for the ids, in the order given; ids not stored are left out."""
        return chunks.hydrate(self.conn, ids)


def _insert_embedding_config(conn: apsw.Connection, model: str, dims: int, provider: str) -> None:
    conn.execute(
        "INSERT INTO embedding_config(id, model, dims, provider, recorded_at)"
        " VALUES (1, ?, ?, ?, ?)",
        (model, dims, provider, utcnow()),
    )


PACKAGE_SELECT = (
    "SELECT name, version, source, status, ingested_at, chunker_version, item_count,"
    " chunk_count, embed_model FROM packages"
)


def to_package(r: Sequence[Any]) -> IndexedPackage:
    name, version, source, status, ingested_at, chunker_version, items, chunks_, model = r
    return IndexedPackage(
        name=name,
        version=version,
        source=source,
        status=status,
        chunk_count=int(chunks_),
        item_count=int(items),
        chunker_version=int(chunker_version),
        ingested_at=ingested_at,
        embed_model=model,
    )
