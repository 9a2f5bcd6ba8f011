"""The storage seam: what the layers above ask of an index, whichever engine holds it.

Two engines implement it: SQLite (`sqlite/store.Store`, the default, one file) and
PostgreSQL with pgvector (`pg/store.PgStore`, selected by `DATABASE_URL`, for teams), in
one style, sharing every statement they spell alike (`sql.py`). Callers hold a
`DocsStore` and never see a connection: a `Session` is the work of one thread, and
`Session.atomic()` the one way to make several writes one transaction (a curation
decision spans several).

Every method is synchronous and short; callers run them in worker threads
(`asyncio.to_thread`), as both drivers block. Values cross the seam as the attrs values of
`rows.py` (`ChunkRow`, `MemoryRow`, ...) and vectors as numpy arrays, the same whichever
engine answers: callers above `index/` import this module and `rows.py`, never an engine
(`tests/test_architecture.py` holds that).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import date
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from hexlocal_core.index.rows import (
    ChunkRow,
    CurationEntry,
    EmbeddingConfig,
    ItemQuery,
    JobRow,
    MemoryRow,
    MemoryScope,
    MemoryText,
    NewRequest,
    PackageMeta,
    PackageStats,
    PackageWrite,
    QueueChanges,
    QueuedRow,
    RequestRow,
    SyncRow,
    Unembedded,
    Vector,
    VectorRows,
)
from hexlocal_core.model import IndexedPackage, UsageEvent
from hexlocal_core.ports import Vectors


class ChunkReads(Protocol):
    """Reads over stored chunks: the retrieval arms, exact lookup, hydration, eval."""

    def hydrate(self, ids: Sequence[int]) -> list[ChunkRow]: ...
    def locate(self, ids: Sequence[int]) -> dict[int, tuple[str, str]]: ...
    def keyword_hits(
        self,
        match: str,
        *,
        package: str,
        depth: int,
        examples_only: bool,
        weights: tuple[float, float, float],
    ) -> list[tuple[int, float]]: ...
    def package_keyword_hits(
        self,
        phrases: Sequence[str],
        *,
        package: str,
        depth: int,
        examples_only: bool,
        weights: tuple[float, float, float],
        rescore: int = 1,
    ) -> list[tuple[int, float]]: ...
    def stored_vectors(self, package: str, ids: Sequence[int]) -> dict[int, np.ndarray[Any, Any]]:
        """The stored vectors of these chunks of the package (those that have one)."""
        ...

    def vector_hits(
        self, query_vector: Vectors, *, package: str, depth: int, examples_only: bool
    ) -> list[tuple[int, float]]: ...
    def exact_ids(self, package: str, item: ItemQuery, *, limit: int) -> list[int]: ...
    def titles_named(
        self, package: str, function: str, prefer_module: str | None, limit: int
    ) -> list[str]: ...
    def titles_in_module(self, package: str, module: str, limit: int) -> list[str]: ...
    def member_titles(self, package: str, limit: int) -> list[str]: ...
    def module_names(self, package: str, limit: int) -> list[str]: ...
    def packages_with_module(self, module: str) -> list[str]: ...
    def package_stats(self) -> list[PackageStats]: ...
    def content_hashes(self) -> Iterator[str]: ...
    def ids_by_ref(self, package: str, targets: Sequence[tuple[str, str]]) -> frozenset[int]: ...


class MemoryQueries(Protocol):
    """Memories, their vectors, the remember queue and the curation log."""

    def memories_by_ids(self, ids: Sequence[int]) -> dict[int, MemoryRow]: ...
    def memory_text(self, memory_id: int) -> str | None: ...
    def deprecated_count(self) -> int: ...
    def live_ids_with_norm_hash(self, norm_hash: str) -> set[int]: ...
    def insert_memory(
        self,
        text: MemoryText,
        *,
        curated: bool,
        package: str | None,
        version: str | None,
        tags: Sequence[str],
    ) -> int: ...
    def rewrite_memory(
        self,
        memory_id: int,
        text: MemoryText,
        *,
        package: str | None,
        version: str | None,
        tags: Sequence[str],
    ) -> None: ...
    def deprecate_memory(self, memory_id: int) -> None: ...
    def memory_vectors_exist(self) -> bool: ...
    def memory_knn(self, vector: Vectors, k: int) -> list[tuple[int, float]]: ...
    def drop_memory_vector(self, memory_id: int) -> None: ...
    def put_memory_vector(self, memory_id: int, vector: Vectors, model: str) -> None: ...
    def missing_vectors(self, model: str, limit: int) -> list[tuple[int, str]]: ...
    def keyword_memory_ids(
        self, match: str, scope: MemoryScope, *, depth: int, weights: tuple[float, float]
    ) -> list[int]: ...
    def out_of_scope_count(self, scope: MemoryScope) -> int: ...
    def in_scope(self, ids: Sequence[int], scope: MemoryScope) -> set[int]: ...
    def log_curation(
        self,
        request_id: str,
        action: str,
        memory_id: int | None,
        model: str | None,
        reason: str,
    ) -> None: ...
    def curation_history(self, ids: Sequence[int]) -> dict[int, list[CurationEntry]]: ...
    def enqueue(self, items: Sequence[NewRequest]) -> None: ...
    def next_pending(self) -> QueuedRow | None: ...
    def pending_count(self) -> int: ...
    def request_status(self, request_id: str) -> str | None:
        """Inside `atomic()`, the row stays claimed until the transaction ends, so two
        servers curating one queue never decide the same request twice."""
        ...

    def finish_request(
        self,
        request_id: str,
        *,
        status: str,
        action: str | None,
        memory_id: int | None,
        reason: str,
        curated: bool,
        model: str | None,
    ) -> None: ...
    def requests(self, request_ids: Sequence[str]) -> dict[str, RequestRow]: ...


class Session(Protocol):
    """One thread's view of the index."""

    @property
    def chunks(self) -> ChunkReads: ...
    @property
    def memories(self) -> MemoryQueries: ...
    def atomic(self) -> AbstractContextManager[Session]:
        """One transaction (a savepoint when nested); any exception rolls it all back."""
        ...

    def claim_embedding(self, model: str, dims: int, provider: str) -> None:
        """Inside `atomic()`: make sure vectors of `model` may be written (see Store)."""
        ...


class JobQueries(Protocol):
    """Durable ingestion job rows: a job killed with its process is found at the next start."""

    def open_job(self, package: str, version: str, source: str) -> int: ...
    def close_job(
        self, row_id: int, *, done: bool, progress: Mapping[str, Any], error: str | None
    ) -> None: ...
    def take_interrupted(self, alive: Callable[[int], bool]) -> list[JobRow]: ...


class SyncQueries(Protocol):
    """The durable queue of `hexlocal sync`."""

    def all_rows(self) -> dict[str, SyncRow]: ...
    def update_queue(self, decide: Callable[[dict[str, SyncRow]], QueueChanges]) -> None: ...
    def claim_next(self, skip: Sequence[str] = ()) -> SyncRow | None: ...
    def finish(
        self,
        package: str,
        status: str,
        *,
        version: str | None = None,
        reason: str | None = None,
        retry: bool = True,
    ) -> None: ...
    def note_waiting(self, reason: str | None) -> None: ...


class ReindexQueries(Protocol):
    """What `reindex` reads and the one transaction that switches the embedding model."""

    def embedded_texts(self, package: str) -> list[tuple[str, str]]: ...
    def memory_texts(self) -> list[tuple[int, str]]: ...
    def cache_vectors(
        self, model: str, hashes: Sequence[str], vectors: Sequence[npt.ArrayLike]
    ) -> None: ...
    def switch_model(
        self, model: str, provider: str, dims: int, memory_vectors: Mapping[int, Vector]
    ) -> None:
        """One transaction: every chunk's vector from the cache under `model`, the memories'
        from `memory_vectors`, the model recorded; ModelError, nothing switched, when a
        chunk has no cached vector."""
        ...


class IngestClaim(Protocol):
    def release(self) -> None: ...


class UsageRecords(Protocol):
    """Model-call accounting: a failed write is logged, never raised into the caller."""

    def record(self, event: UsageEvent) -> None: ...
    def events(self, start: date, end: date) -> list[UsageEvent]: ...


class DocsStore(Protocol):
    """An index: packages, chunks, vectors, the embedding cache, memories, jobs, usage."""

    schema_version: int  # the schema the database is at
    schema_latest: int  # the last step this hexlocal knows

    @property
    def engine(self) -> str:
        """The engine and its search extensions, with versions (for `doctor`)."""
        ...

    @property
    def location(self) -> str:
        """Where the index lives, for messages (a path, or a URL without its password)."""
        ...

    def session(self) -> Session: ...
    @property
    def jobs(self) -> JobQueries: ...
    @property
    def sync(self) -> SyncQueries: ...
    @property
    def reindex(self) -> ReindexQueries: ...
    @property
    def usage(self) -> UsageRecords: ...
    def try_ingest_claim(self, package: str, version: str) -> IngestClaim | None:
        """The right to fetch and write one package version, or None while another process
        sharing the index holds it. Never blocks: the caller polls (and stays cancellable),
        and after each refusal looks whether the other process has indexed it meanwhile."""
        ...

    def close(self) -> None: ...
    def embedding_config(self) -> EmbeddingConfig | None: ...
    def vector_tables_exist(self) -> bool: ...
    def package(self, name: str) -> IndexedPackage | None: ...
    def packages(self) -> list[IndexedPackage]: ...
    def package_meta(self, name: str) -> PackageMeta: ...
    def replace_package(self, write: PackageWrite) -> list[int]:
        """The version's chunks (and vectors, if the write has them) in one transaction,
        replacing any other version; the chunk ids in order. Without vectors the package
        is 'partial': keyword search works, `add_vectors` fills in the rest."""
        ...

    def add_vectors(self, rows: VectorRows, vecs: Vectors) -> bool:
        """Vectors for these stored chunks of a partial package version, in one
        transaction; False (nothing written) if the package no longer holds that version."""
        ...

    def unembedded(self, name: str, version: str) -> Unembedded | None:
        """The chunks of partial `name` `version` still without a vector (and the text each
        embeds); None unless the index holds that version, partial."""
        ...

    def mark_complete(self, name: str, version: str) -> bool: ...
    def delete_package(self, name: str) -> bool: ...
    def cached_vectors(
        self, model: str, hashes: Iterable[str]
    ) -> dict[str, np.ndarray[Any, Any]]: ...
    def stored_hashes(self, package: str) -> list[tuple[str, int, str]]: ...
    def chunk_count(self) -> int: ...
    def hydrate(self, ids: Sequence[int]) -> list[ChunkRow]: ...
