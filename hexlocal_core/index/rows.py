"""The values that cross the storage seam, whichever engine holds the index.

Callers above `index/` import these and `seam.py`, never an engine: a `ChunkRow` read
from SQLite and one read from PostgreSQL are the same value. Vectors cross as numpy
arrays (`ports.Vectors`, one row per vector); how an engine stores them (a float32 blob
in vec0, pgvector's `vector`) is the engine's own business.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from attrs import evolve, frozen

from hexlocal_core.model import Chunk, IndexedPackage, sha256_text
from hexlocal_core.ports import Vectors

Vector = npt.NDArray[np.float32]  # one vector, shape (dims,)

# -- chunks --------------------------------------------------------------------------------


@frozen
class ChunkRow:
    """One stored chunk, as `DocsStore.hydrate` returns it."""

    id: int
    package: str
    version: str
    ordinal: int
    ref: str
    page: str
    title: str
    doc_type: str
    module: str | None
    function: str | None
    arity: int | None
    signature: str | None
    deprecated: str | None
    since: str | None
    content: str
    content_hash: str
    embed_hash: str
    split_terms: str
    hexdocs_url: str
    source_url: str | None
    source: str
    has_example: bool


@frozen
class ItemQuery:
    """Which stored item an identifier names: its module and, for a member, its name."""

    module: str | None
    function: str | None = None  # None: the module's own docs
    arity: int | None = None
    doc_types: tuple[str, ...] = ()  # members: only these types (empty: any)
    not_doc_types: tuple[str, ...] = ()  # modules: never these types


@frozen
class PackageStats:
    """A package record with counts taken from its stored rows (for a corpus fingerprint)."""

    name: str
    version: str
    chunker_version: int
    embed_model: str | None
    chunks: int
    items: int  # distinct refs


# -- packages and their vectors ------------------------------------------------------------


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


# -- memories ------------------------------------------------------------------------------


@frozen
class MemoryRow:
    id: int
    text: str
    curated: bool
    package: str | None
    version: str | None
    tags: tuple[str, ...]
    deprecated: bool
    embed_model: str | None
    created_at: str
    updated_at: str


@frozen
class MemoryText:
    """A memory's text with the hashes stored beside it (computed by the memory layer)."""

    text: str
    text_hash: str
    norm_hash: str


@frozen
class MemoryScope:
    """Which memories a recall may return: one package's (or all), deprecated or not."""

    package: str | None = None
    include_deprecated: bool = False


@frozen
class CurationEntry:
    """One decision that touched a memory."""

    request_id: str
    action: str
    model: str | None
    reason: str | None
    at: str


@frozen
class QueuedRow:
    """A pending submission, oldest first by `seq`."""

    seq: int
    request_id: str
    text: str
    package: str | None
    version: str | None
    tags: tuple[str, ...]


@frozen
class RequestRow:
    """What became of one request (the queue row, read back for remember_status)."""

    request_id: str
    status: str  # pending | done | failed
    action: str | None
    memory_id: int | None
    curated: bool | None  # None until decided
    reason: str | None
    model: str | None
    submitted_at: str
    processed_at: str | None


@frozen
class NewRequest:
    request_id: str
    text: str
    package: str | None
    version: str | None
    tags: tuple[str, ...]


# -- ingestion jobs and the sync queue -----------------------------------------------------


@frozen
class JobRow:
    id: int
    package: str
    version: str
    source: str
    pid: int | None


SYNC_STATUSES = ("queued", "running", "done", "failed", "skipped")


@frozen
class SyncRow:
    package: str
    version: str
    kind: str  # hex | git | path | elixir | another SCM's name
    status: str  # one of SYNC_STATUSES
    seq: int  # order of work
    reason: str | None = None  # failed / skipped: why; queued: why it waits
    retry: bool = True  # failed: whether a background sync tries it again
    pid: int | None = None  # running: the process working on it


@frozen
class QueueChanges:
    """What a sync run writes: rows to insert or replace, and packages to drop."""

    upsert: tuple[SyncRow, ...] = ()
    delete: tuple[str, ...] = ()
