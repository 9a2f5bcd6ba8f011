"""Jobs, the sync queue, reindex and usage on SQLite: the twins of `pg/ops.py`.

- Ingestion jobs (`ingest_jobs`): one row per job, opened when it starts and closed when
  it ends, so a job killed with its process is found at the next start.
- The sync queue (`sync_queue`): one row per package the project runs, so a sync cut short
  by an exit resumes at the next start and a failure keeps its reason. A worker claims a
  row (status 'running', its pid) before working on it, so two processes on one index
  never index the same package at once.
- Reindex: stored texts, the embedding cache, and the one transaction that switches the
  whole index to another embedding model.
- Usage events: the UsageSink adapters write to, and the reader for reports.

Each class runs on the store's connection of the calling thread; the statements both
engines share are in `ops_sql.py`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence

import apsw
import numpy.typing as npt

from hexlocal_core.index.ops_sql import (
    CACHED_DIMS,
    RUNNING_JOBS,
    SYNC_SELECT,
    UNCACHED_CHUNKS,
    JobsSql,
    ReindexSql,
    SyncSql,
    UsageSql,
    check_final,
    job_row,
    switch_dims,
    sync_row,
    uncached,
    usage_values,
)
from hexlocal_core.index.rows import JobRow, QueueChanges, SyncRow, Vector
from hexlocal_core.index.sql import utcnow
from hexlocal_core.index.sqlite.db import Connected, SqliteRunner, atomic, scalar
from hexlocal_core.index.sqlite.vectors import (
    CHUNK_VEC_TABLE,
    MEMORY_VEC_TABLE,
    create_vector_tables,
    drop_vector_tables,
    encode_vector,
    record_embedding,
)
from hexlocal_core.model import UsageEvent

log = logging.getLogger("hexlocal.store")


class _OnStore(SqliteRunner):
    def __init__(self, store: Connected) -> None:
        self._store = store

    @property
    def conn(self) -> apsw.Connection:
        return self._store.conn


# -- ingestion jobs ------------------------------------------------------------------------


class SqliteJobs(JobsSql, _OnStore):
    def open_job(self, package: str, version: str, source: str) -> int:
        """Records a running job of this process; returns its row id."""
        with atomic(self.conn) as conn:
            conn.execute(
                "INSERT INTO ingest_jobs(package, version, source, status, pid, started_at)"
                " VALUES (?, ?, ?, 'running', ?, ?)",
                (package, version, source, os.getpid(), utcnow()),
            )
            return int(conn.last_insert_rowid())

    def take_interrupted(self, alive: Callable[[int], bool]) -> list[JobRow]:
        """Jobs left 'running' by a process that no longer exists, marked failed and
        returned."""
        found = [job_row(r) for r in self._select(RUNNING_JOBS)]
        gone = [row for row in found if not (row.pid and alive(int(row.pid)))]
        if gone:
            with atomic(self.conn) as conn:
                for row in gone:
                    conn.execute(
                        "UPDATE ingest_jobs SET status='failed', finished_at=?,"
                        " error='interrupted' WHERE id=?",
                        (utcnow(), row.id),
                    )
        return gone


# -- the sync queue ------------------------------------------------------------------------


class SqliteSync(SyncSql, _OnStore):
    def update_queue(self, decide: Callable[[dict[str, SyncRow]], QueueChanges]) -> None:
        """Reads the queue, lets `decide` (pure) say what changes, writes it: one
        transaction, so a worker of another process cannot claim a row between the read
        and the write."""
        with atomic(self.conn) as conn:
            current = {r.package: r for r in map(sync_row, conn.execute(SYNC_SELECT))}
            changes = decide(current)
            for name in changes.delete:
                conn.execute("DELETE FROM sync_queue WHERE package = ?", (name,))
            now = utcnow()
            for r in changes.upsert:
                conn.execute(
                    "INSERT OR REPLACE INTO sync_queue(package, version, kind, status, seq,"
                    " reason, retry, pid, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (r.package, r.version, r.kind, r.status, r.seq, r.reason, r.retry, r.pid, now),
                )

    def claim_next(self, skip: Sequence[str] = ()) -> SyncRow | None:
        """The first queued row (by seq), now marked running by this process; None when
        empty."""
        pid = os.getpid()
        with atomic(self.conn) as conn:
            queued = conn.execute(SYNC_SELECT + " WHERE status = 'queued' ORDER BY seq")
            for row in map(sync_row, queued):
                if row.package in skip:
                    continue
                conn.execute(
                    "UPDATE sync_queue SET status = 'running', pid = ?, updated_at = ?"
                    " WHERE package = ?",
                    (pid, utcnow(), row.package),
                )
                return SyncRow(row.package, row.version, row.kind, "running", row.seq, pid=pid)
        return None

    def finish(
        self,
        package: str,
        status: str,
        *,
        version: str | None = None,
        reason: str | None = None,
        retry: bool = True,
    ) -> None:
        """Ends this process's claim on a row: done, failed (with why), or queued again."""
        check_final(status)
        self._write(
            "UPDATE sync_queue SET status = ?, version = coalesce(?, version), reason = ?,"
            " retry = ?, pid = NULL, updated_at = ? WHERE package = ?",
            (status, version, reason, retry, utcnow(), package),
        )


# -- reindex -------------------------------------------------------------------------------


class SqliteReindex(ReindexSql, _OnStore):
    def cache_vectors(
        self, model: str, hashes: Sequence[str], vectors: Sequence[npt.ArrayLike]
    ) -> None:
        """Puts vectors into the embedding cache under `model`, in one transaction."""
        with atomic(self.conn) as conn:
            for text_hash, vector in zip(hashes, vectors, strict=True):
                blob = encode_vector(vector)
                conn.execute(
                    "INSERT OR REPLACE INTO embed_cache(model, text_hash, dims, vector)"
                    " VALUES (?,?,?,?)",
                    (model, text_hash, len(blob) // 4, blob),
                )

    def switch_model(
        self, model: str, provider: str, dims: int, memory_vectors: Mapping[int, Vector]
    ) -> None:
        """One transaction: new vector tables filled from the cache, the new model recorded.

        Raises ModelError (nothing switched) when a chunk has no cached vector under `model`.
        """
        with atomic(self.conn) as conn:
            # Checked inside the write lock: another process may have ingested meanwhile.
            missing = scalar(conn, UNCACHED_CHUNKS, (model,))
            if missing:
                raise uncached(missing, model)
            dims = switch_dims(scalar(conn, CACHED_DIMS, (model,)), memory_vectors) or dims
            drop_vector_tables(conn)
            conn.execute("DELETE FROM embedding_config")
            if not dims:
                # Nothing to embed and a model that learns its dimension on first use:
                # forget the old model, and let the next ingest record the new one.
                return
            create_vector_tables(conn, dims)
            record_embedding(conn, model, dims, provider)
            conn.execute(
                f"INSERT INTO {CHUNK_VEC_TABLE}(rowid, embedding, package, has_example)"
                " SELECT c.id, e.vector, c.package, c.has_example FROM chunks c"
                " JOIN embed_cache e ON e.model = ? AND e.text_hash = c.embed_hash",
                (model,),
            )
            for mid, vector in memory_vectors.items():
                conn.execute(
                    f"INSERT INTO {MEMORY_VEC_TABLE}(rowid, embedding) VALUES (?, ?)",
                    (mid, encode_vector(vector)),
                )
            conn.execute("UPDATE packages SET embed_model = ?", (model,))
            conn.execute("UPDATE memories SET embed_model = ?", (model,))
        log.info("index switched to %s at %s", model, utcnow())


# -- usage ---------------------------------------------------------------------------------


class SqliteUsage(UsageSql, _OnStore):
    """Records every model call; a failed write is logged, never raised into the caller."""

    def record(self, event: UsageEvent) -> None:
        try:
            with atomic(self.conn) as conn:
                conn.execute(
                    "INSERT INTO usage_events(at, model, kind, prompt_tokens, completion_tokens,"
                    " total_tokens, success, local) VALUES (?,?,?,?,?,?,?,?)",
                    usage_values(event),
                )
        except Exception:  # noqa: BLE001 - accounting must not break a search
            log.exception("could not record a usage event")
