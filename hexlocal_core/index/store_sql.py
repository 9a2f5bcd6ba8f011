"""The package and chunk rows both engines write and read with one statement.

`StoreSql` is the part of `seam.DocsStore` written once (`sqlite/store.py` and
`pg/store.py` inherit it); the constants are statements an engine runs inside its own
write transactions, and the column lists and value tuples say once how a package or a
chunk becomes a row.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from hexlocal_core.index.rows import EmbeddingConfig, PackageMeta, PackageWrite, Unembedded
from hexlocal_core.index.sql import SqlRunner, utcnow
from hexlocal_core.model import Chunk, IndexedPackage, embedding_text, sha256_text

PACKAGE_SELECT = (
    "SELECT name, version, source, status, ingested_at, chunker_version, item_count,"
    " chunk_count, embed_model FROM packages"
)


def package_row(r: Sequence[Any]) -> IndexedPackage:
    name, version, source, status, ingested_at, chunker_version, items, chunks, model = r
    return IndexedPackage(
        name=name,
        version=version,
        source=source,
        status=status,
        chunk_count=int(chunks),
        item_count=int(items),
        chunker_version=int(chunker_version),
        ingested_at=ingested_at,
        embed_model=model,
    )


# The columns a package row is written with (an engine may add its own after them).
PACKAGE_WRITE_COLUMNS = (
    "name, version, source, status, ingested_at, chunker_version, item_count, chunk_count,"
    " embed_model, docs_html_url, meta"
)


def package_values(write: PackageWrite) -> tuple[Any, ...]:
    """The write's values for `PACKAGE_WRITE_COLUMNS`: 'partial' until it has vectors."""
    return (
        write.name,
        write.version,
        write.source,
        "partial" if write.vectors is None else "complete",
        utcnow(),
        write.chunker_version,
        write.item_count,
        len(write.chunks),
        write.embed_model,
        write.docs_html_url,
        json.dumps(write.meta or {}),
    )


# The columns a chunk is written with (its id aside, and an engine's own after them).
CHUNK_WRITE_COLUMNS = (
    "package, version, ordinal, ref, page, title, doc_type, module, function, arity,"
    " signature, deprecated, since, content, content_hash, embed_hash, split_terms,"
    " hexdocs_url, source_url, source, has_example"
)


def chunk_values(package: str, chunk: Chunk, split: str) -> tuple[Any, ...]:
    """A chunk's values for `CHUNK_WRITE_COLUMNS`; `split` is its `split_terms`."""
    item = chunk.item
    return (
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
        sha256_text(chunk.embedding_text()),
        split,
        item.hexdocs_url,
        item.source_url,
        str(item.source),
        bool(chunk.has_example),
    )


# 'partial' or 'complete' if the index holds this version of the package (no row: neither).
STATUS_AT = "SELECT status FROM packages WHERE name = ? AND version = ?"
MARK_COMPLETE = "UPDATE packages SET status = 'complete' WHERE name = ?"
PACKAGE_EXISTS = "SELECT 1 FROM packages WHERE name = ?"


# The model the index's vectors come from (one row, id 1, once a vector was written).
EMBEDDING_CONFIG = "SELECT model, dims, provider, recorded_at FROM embedding_config WHERE id = 1"


def embedding_config_row(r: Sequence[Any]) -> EmbeddingConfig:
    model, dims, provider, recorded_at = r
    return EmbeddingConfig(str(model), int(dims), str(provider), str(recorded_at))


def embedding_row(r: Sequence[Any]) -> tuple[int, str, str, bool]:
    """(id, embed_hash, the text embedded, has_example) of an `EMBEDDING_ROWS` row: the
    text rebuilt from the stored title, signature and content, as ingestion made it."""
    return int(r[0]), str(r[1]), embedding_text(r[2], r[3], r[4]), bool(r[5])


EMBEDDING_ROWS = (
    "SELECT id, embed_hash, title, signature, content, has_example FROM chunks"
    " WHERE package = ? ORDER BY id"
)


class StoreSql(SqlRunner):
    """The `seam.DocsStore` reads both engines answer with one statement."""

    def embedding_config(self) -> EmbeddingConfig | None:
        found = self._select(EMBEDDING_CONFIG)
        return embedding_config_row(found[0]) if found else None

    def package(self, name: str) -> IndexedPackage | None:
        found = self._select(PACKAGE_SELECT + " WHERE name = ?", (name,))
        return package_row(found[0]) if found else None

    def packages(self) -> list[IndexedPackage]:
        order = f" ORDER BY name{self.dialect.bytewise}"
        return [package_row(r) for r in self._select(PACKAGE_SELECT + order)]

    def package_meta(self, name: str) -> PackageMeta:
        """How the package was ingested (every field None when it is not indexed)."""
        sql = "SELECT docs_html_url, meta FROM packages WHERE name = ?"
        for docs_html_url, raw in self._select(sql, (name,)):
            return PackageMeta.from_stored(docs_html_url, raw)
        return PackageMeta()

    def stored_hashes(self, package: str) -> list[tuple[str, int, str]]:
        """(ref, ordinal, content_hash) of every stored chunk of a package, for drift."""
        sql = "SELECT ref, ordinal, content_hash FROM chunks WHERE package = ? ORDER BY id"
        return [(str(r[0]), int(r[1]), str(r[2])) for r in self._select(sql, (package,))]

    def chunk_count(self) -> int:
        return int(self._value("SELECT count(*) FROM chunks") or 0)

    def unembedded(self, name: str, version: str) -> Unembedded | None:
        """The chunks of 'partial' `name` `version` that have no vector yet; None unless the
        index holds that version, partial."""
        package = self.package(name)
        if package is None or package.version != version or package.complete:
            return None
        stored = [embedding_row(r) for r in self._select(EMBEDDING_ROWS, (name,))]
        return Unembedded.of(package, stored, self._embedded_ids(name))

    def _embedded_ids(self, package: str) -> set[int]:
        """The package's chunk ids that have a vector (the engine's vector tables)."""
        raise NotImplementedError
