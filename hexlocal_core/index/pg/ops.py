"""Jobs, the sync queue, reindex and usage on PostgreSQL: the twins of `sqlite/ops.py`
(the statements both share are in `ops_sql.py`), for servers on several hosts.

- A pid means something only on its host, so job and sync rows record the host too, and
  `take_interrupted` judges only this host's rows (another host's are its own to judge).
- `claim_next` takes the first queued row `FOR UPDATE SKIP LOCKED`: two servers claiming
  at once get two different rows, never one twice.
- `update_queue` locks the queue against writers (not readers) for its read-decide-write.
- `switch_model` takes the embedding lock exclusively (`db.EMBEDDING_LOCK`), so no
  ingest of the old model can commit into the switched index.
- Usage events carry the server that recorded them (its id, or host:pid); `events`
  reads them all.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Mapping, Sequence

import numpy as np
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
from hexlocal_core.index.pg import memory_schema, vectors
from hexlocal_core.index.pg.db import DIALECT, EMBEDDING_LOCK, Database, Executor, PgRunner
from hexlocal_core.index.rows import JobRow, QueueChanges, SyncRow, Vector
from hexlocal_core.index.sql import utcnow
from hexlocal_core.model import UsageEvent

log = logging.getLogger("hexlocal.store")

HOST = socket.gethostname()


def server_id() -> str:
    """This server among those sharing the database: host and process."""
    return f"{HOST}:{os.getpid()}"


# -- ingestion jobs ------------------------------------------------------------------------


class PgJobs(JobsSql, PgRunner):
    def __init__(self, ex: Executor) -> None:
        self._ex = ex

    def open_job(self, package: str, version: str, source: str) -> int:
        """Records a running job of this process; returns its row id."""
        return int(
            self._ex.scalar(
                "INSERT INTO ingest_jobs(package, version, source, status, pid, host, started_at)"
                " VALUES (%s, %s, %s, 'running', %s, %s, %s) RETURNING id",
                (package, version, source, os.getpid(), HOST, utcnow()),
            )
        )

    def take_interrupted(self, alive: Callable[[int], bool]) -> list[JobRow]:
        """Jobs of this host left 'running' by a process that no longer exists, marked
        failed and returned (each to one caller, should two servers of the host ask)."""
        sql = RUNNING_JOBS + " AND host = ? ORDER BY id"
        found = [job_row(r) for r in self._select(sql, (HOST,))]
        gone = [row for row in found if not (row.pid and alive(int(row.pid)))]
        if not gone:
            return []
        taken = self._ex.fetchall(
            "UPDATE ingest_jobs SET status = 'failed', finished_at = %s, error = 'interrupted'"
            " WHERE id = ANY(%s::bigint[]) AND status = 'running' RETURNING id",
            (utcnow(), [row.id for row in gone]),
        )
        ids = {int(r[0]) for r in taken}
        return [row for row in gone if row.id in ids]


# -- the sync queue ------------------------------------------------------------------------


class PgSync(SyncSql, PgRunner):
    def __init__(self, ex: Executor) -> None:
        self._ex = ex

    def update_queue(self, decide: Callable[[dict[str, SyncRow]], QueueChanges]) -> None:
        """Reads the queue, lets `decide` (pure) say what changes, writes it: one
        transaction holding off other writers (claims included) from read to write."""
        with self._ex.atomic() as ex:
            ex.execute("LOCK TABLE sync_queue IN SHARE ROW EXCLUSIVE MODE")
            current = {r.package: r for r in map(sync_row, ex.fetchall(SYNC_SELECT))}
            changes = decide(current)
            for name in changes.delete:
                ex.execute("DELETE FROM sync_queue WHERE package = %s", (name,))
            now = utcnow()
            for r in changes.upsert:
                ex.execute(
                    "INSERT INTO sync_queue(package, version, kind, status, seq, reason, retry,"
                    " pid, host, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                    " ON CONFLICT (package) DO UPDATE SET version = EXCLUDED.version,"
                    " kind = EXCLUDED.kind, status = EXCLUDED.status, seq = EXCLUDED.seq,"
                    " reason = EXCLUDED.reason, retry = EXCLUDED.retry, pid = EXCLUDED.pid,"
                    " host = EXCLUDED.host, updated_at = EXCLUDED.updated_at",
                    (
                        *(r.package, r.version, r.kind, r.status, r.seq, r.reason, r.retry),
                        *(r.pid, HOST if r.pid is not None else None, now),
                    ),
                )

    def claim_next(self, skip: Sequence[str] = ()) -> SyncRow | None:
        """The first queued row (by seq), now marked running by this process; None when
        none is left that another server is not claiming this instant."""
        pid = os.getpid()
        row = self._ex.fetchone(
            "UPDATE sync_queue SET status = 'running', pid = %s, host = %s, updated_at = %s"
            " WHERE package = (SELECT package FROM sync_queue WHERE status = 'queued'"
            ' AND package <> ALL(%s::text[]) ORDER BY seq, package COLLATE "C" LIMIT 1'
            " FOR UPDATE SKIP LOCKED) AND status = 'queued'"
            " RETURNING package, version, kind, seq",
            (pid, HOST, utcnow(), list(skip)),
        )
        if row is None:
            return None
        package, version, kind, seq = row
        return SyncRow(str(package), str(version), str(kind), "running", int(seq), pid=pid)

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
        self._ex.execute(
            "UPDATE sync_queue SET status = %s, version = coalesce(%s, version), reason = %s,"
            " retry = %s, pid = NULL, host = NULL, updated_at = %s WHERE package = %s",
            (status, version, reason, retry, utcnow(), package),
        )


# -- reindex -------------------------------------------------------------------------------


class PgReindex(ReindexSql, PgRunner):
    def __init__(self, db: Database) -> None:
        self._db = db
        self._ex = Executor(db)

    def cache_vectors(
        self, model: str, hashes: Sequence[str], vectors_: Sequence[npt.ArrayLike]
    ) -> None:
        """Puts vectors into the embedding cache under `model`, in one transaction."""
        rows = []
        for text_hash, vector in zip(hashes, vectors_, strict=True):
            values = np.asarray(vector, dtype=np.float32).reshape(-1)
            rows.append((model, text_hash, int(values.size), values))
        rows.sort(key=lambda r: r[1])  # one lock order for every writer: no deadlock
        with self._db.transaction() as conn, conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO embed_cache(model, text_hash, dims, vector) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (model, text_hash) DO UPDATE SET dims = EXCLUDED.dims,"
                " vector = EXCLUDED.vector",
                rows,
            )

    def switch_model(
        self, model: str, provider: str, dims: int, memory_vectors: Mapping[int, Vector]
    ) -> None:
        """One transaction: vector tables rebuilt from the cache, the new model recorded.

        Raises ModelError (nothing switched) when a chunk has no cached vector under `model`.
        """
        with self._db.transaction() as conn:
            # Exclusive: waits for ingests writing vectors, and holds new ones off.
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", EMBEDDING_LOCK)
            row = conn.execute(DIALECT.sql(UNCACHED_CHUNKS), (model,)).fetchone()
            missing = int(row[0]) if row else 0
            if missing:
                raise uncached(missing, model)
            cached = conn.execute(DIALECT.sql(CACHED_DIMS), (model,)).fetchone()
            dims = switch_dims(cached[0] if cached else None, memory_vectors) or dims
            vectors.drop_all(conn)
            if not dims:
                # Nothing to embed and a model that learns its dimension on first use:
                # forget the old model, and let the next ingest record the new one.
                conn.execute("DELETE FROM embedding_config")
                memory_schema.drop_memory_vectors(conn)
                return
            conn.execute(
                "INSERT INTO embedding_config(id, model, dims, provider, recorded_at)"
                " VALUES (1, %s, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET"
                " model = EXCLUDED.model, dims = EXCLUDED.dims, provider = EXCLUDED.provider,"
                " recorded_at = EXCLUDED.recorded_at",
                (model, dims, provider, utcnow()),
            )
            names = conn.execute("SELECT DISTINCT package FROM chunks").fetchall()
            for (package,) in names:
                vectors.create(conn, str(package), dims)
                vectors.fill_from_cache(conn, str(package), model)
                vectors.index(conn, str(package))
            memory_schema.replace_memory_vectors(conn, model, memory_vectors)
            conn.execute("UPDATE packages SET embed_model = %s", (model,))
        log.info("index switched to %s at %s", model, utcnow())


# -- usage ---------------------------------------------------------------------------------


class PgUsage(UsageSql, PgRunner):
    """Records every model call; a failed write is logged, never raised into the caller."""

    def __init__(self, ex: Executor, server: str) -> None:
        self._ex = ex
        self.server = server  # who records: HEXLOCAL_SERVER_ID, or host:pid

    def record(self, event: UsageEvent) -> None:
        try:
            self._ex.execute(
                "INSERT INTO usage_events(at, model, kind, prompt_tokens, completion_tokens,"
                " total_tokens, success, local, server) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                (*usage_values(event), self.server),
            )
        except Exception:  # noqa: BLE001 - accounting must not break a search
            log.exception("could not record a usage event")
