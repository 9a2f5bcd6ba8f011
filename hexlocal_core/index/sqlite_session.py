"""The SQLite side of the storage seam (`seam.py`), bound over the statement modules.

The statements stay in `chunks.py`, `memory_store.py`, `jobs_store.py`, `sync_store.py`,
`reindex_store.py` and `usage_store.py`, as functions over a connection (or the store);
these classes bind the first argument, so the seam's methods are those functions with
their signatures checked by mypy, and no statement is written twice.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, Concatenate, ParamSpec, TypeVar

import apsw

from hexlocal_core.index import chunks, jobs_store, memory_store, reindex_store, sync_store
from hexlocal_core.index.db import EmbeddingOwner, atomic

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


def _bind(fn: Callable[Concatenate[T, P], R]) -> Callable[Concatenate[Any, P], R]:
    """A method calling `fn(self.target, ...)`: the module function, first argument bound."""

    def method(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return fn(self.target, *args, **kwargs)

    method.__doc__ = fn.__doc__
    return method


class SqliteChunkReads:
    def __init__(self, conn: apsw.Connection) -> None:
        self.target = conn

    hydrate = _bind(chunks.hydrate)
    locate = _bind(chunks.locate)
    keyword_hits = _bind(chunks.keyword_hits)
    package_keyword_hits = _bind(chunks.package_keyword_hits)
    vector_hits = _bind(chunks.vector_hits)
    stored_vectors = _bind(chunks.stored_vectors)
    exact_ids = _bind(chunks.exact_ids)
    titles_named = _bind(chunks.titles_named)
    titles_in_module = _bind(chunks.titles_in_module)
    member_titles = _bind(chunks.member_titles)
    module_names = _bind(chunks.module_names)
    packages_with_module = _bind(chunks.packages_with_module)
    package_stats = _bind(chunks.package_stats)
    content_hashes = _bind(chunks.content_hashes)
    ids_by_ref = _bind(chunks.ids_by_ref)


class SqliteMemoryQueries:
    def __init__(self, conn: apsw.Connection) -> None:
        self.target = conn

    memories_by_ids = _bind(memory_store.memories_by_ids)
    memory_text = _bind(memory_store.memory_text)
    deprecated_count = _bind(memory_store.deprecated_count)
    live_ids_with_norm_hash = _bind(memory_store.live_ids_with_norm_hash)
    insert_memory = _bind(memory_store.insert_memory)
    rewrite_memory = _bind(memory_store.rewrite_memory)
    deprecate_memory = _bind(memory_store.deprecate_memory)
    memory_vectors_exist = _bind(memory_store.memory_vectors_exist)
    memory_knn = _bind(memory_store.memory_knn)
    drop_memory_vector = _bind(memory_store.drop_memory_vector)
    put_memory_vector = _bind(memory_store.put_memory_vector)
    missing_vectors = _bind(memory_store.missing_vectors)
    keyword_memory_ids = _bind(memory_store.keyword_memory_ids)
    out_of_scope_count = _bind(memory_store.out_of_scope_count)
    in_scope = _bind(memory_store.in_scope)
    log_curation = _bind(memory_store.log_curation)
    curation_history = _bind(memory_store.curation_history)
    enqueue = _bind(memory_store.enqueue)
    next_pending = _bind(memory_store.next_pending)
    pending_count = _bind(memory_store.pending_count)
    # One writer at a time (BEGIN IMMEDIATE): inside atomic() the row is already ours.
    request_status = _bind(memory_store.request_status)
    finish_request = _bind(memory_store.finish_request)
    requests = _bind(memory_store.requests)


class SqliteSession:
    """One thread's connection, seen through the seam."""

    def __init__(self, store: EmbeddingOwner, conn: apsw.Connection) -> None:
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


class SqliteJobs:
    def __init__(self, store: EmbeddingOwner) -> None:
        self.target = store

    open_job = _bind(jobs_store.open_job)
    close_job = _bind(jobs_store.close_job)
    take_interrupted = _bind(jobs_store.take_interrupted)


class SqliteSync:
    def __init__(self, store: EmbeddingOwner) -> None:
        self.target = store

    all_rows = _bind(sync_store.all_rows)
    update_queue = _bind(sync_store.update_queue)
    claim_next = _bind(sync_store.claim_next)
    finish = _bind(sync_store.finish)
    note_waiting = _bind(sync_store.note_waiting)


class SqliteReindex:
    def __init__(self, store: EmbeddingOwner) -> None:
        self.target = store

    embedded_texts = _bind(reindex_store.embedded_texts)
    memory_texts = _bind(reindex_store.memory_texts)
    cache_vectors = _bind(reindex_store.cache_vectors)
    switch_model = _bind(reindex_store.switch_model)
