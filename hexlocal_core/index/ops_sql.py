"""Jobs, the sync queue, reindex and usage: the statements and row readers both engines
share. The classes are the parts of `seam.JobQueries`, `SyncQueries`, `ReindexQueries`
and `UsageRecords` written once; `sqlite/ops.py` and `pg/ops.py` inherit them and add
the writes that differ (PostgreSQL records the host beside a pid, claims rows with
`SKIP LOCKED`, and locks the embedding model for a switch).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

from hexlocal_core.errors import ModelError
from hexlocal_core.index.rows import SYNC_STATUSES, JobRow, SyncRow, Vector
from hexlocal_core.index.sql import SqlRunner, utcnow
from hexlocal_core.index.store_sql import EMBEDDING_ROWS, embedding_row
from hexlocal_core.model import UsageEvent

# -- ingestion jobs ------------------------------------------------------------------------

RUNNING_JOBS = "SELECT id, package, version, source, pid FROM ingest_jobs WHERE status = 'running'"


def job_row(r: Sequence[Any]) -> JobRow:
    """A `JobRow` of a `RUNNING_JOBS` row."""
    row_id, package, version, source, pid = r
    return JobRow(int(row_id), package, version, source, None if pid is None else int(pid))


class JobsSql(SqlRunner):
    def close_job(
        self, row_id: int, *, done: bool, progress: Mapping[str, Any], error: str | None
    ) -> None:
        self._write(
            "UPDATE ingest_jobs SET status = ?, finished_at = ?, progress = ?, error = ?"
            " WHERE id = ?",
            ("done" if done else "failed", utcnow(), json.dumps(dict(progress)), error, row_id),
        )


# -- the sync queue ------------------------------------------------------------------------

SYNC_SELECT = "SELECT package, version, kind, status, seq, reason, retry, pid FROM sync_queue"


def sync_row(r: Sequence[Any]) -> SyncRow:
    package, version, kind, status, seq, reason, retry, pid = r
    return SyncRow(
        package=str(package),
        version=str(version),
        kind=str(kind),
        status=str(status),
        seq=int(seq),
        reason=None if reason is None else str(reason),
        retry=bool(retry),
        pid=None if pid is None else int(pid),
    )


def check_final(status: str) -> None:
    """`finish` ends a claim: with any status but 'running'."""
    if status not in SYNC_STATUSES or status == "running":
        raise ValueError(f"not a final sync status: {status!r}")


class SyncSql(SqlRunner):
    def all_rows(self) -> dict[str, SyncRow]:
        sql = SYNC_SELECT + f" ORDER BY seq, package{self.dialect.bytewise}"
        return {row.package: row for row in map(sync_row, self._select(sql))}

    def note_waiting(self, reason: str | None) -> None:
        """Records why the queued rows wait (no embedder, another model), or clears it."""
        sql = "UPDATE sync_queue SET reason = ?, updated_at = ? WHERE status = 'queued'"
        self._write(sql, (reason, utcnow()))


# -- reindex -------------------------------------------------------------------------------

# Chunks with no vector in the embedding cache under a model: a switch to it waits for none.
UNCACHED_CHUNKS = (
    "SELECT count(*) FROM chunks c LEFT JOIN embed_cache e ON e.model = ?"
    " AND e.text_hash = c.embed_hash WHERE e.text_hash IS NULL"
)
CACHED_DIMS = "SELECT dims FROM embed_cache WHERE model = ? LIMIT 1"


def uncached(missing: int, model: str) -> ModelError:
    """Why a switch to `model` was refused: an ingest wrote chunks meanwhile."""
    return ModelError(
        f"{missing} chunks have no vector under {model} (a package was indexed "
        "meanwhile); nothing was switched. Run `hexlocal reindex` again."
    )


def switch_dims(cached: int | None, memory_vectors: Mapping[int, Vector]) -> int:
    """The dimension the new model's vectors really have (an API embedder learns its own
    on first use): the cache's, else a memory vector's, else 0 (nothing was embedded)."""
    if cached:
        return int(cached)
    for vector in memory_vectors.values():
        return int(vector.size)
    return 0


class ReindexSql(SqlRunner):
    def embedded_texts(self, package: str) -> list[tuple[str, str]]:
        """(embed_hash, text embedded) for a package's chunks, rebuilt from the stored rows."""
        found = map(embedding_row, self._select(EMBEDDING_ROWS, (package,)))
        return [(text_hash, text) for _, text_hash, text, _ in found]

    def memory_texts(self) -> list[tuple[int, str]]:
        found = self._select("SELECT id, text FROM memories ORDER BY id")
        return [(int(r[0]), str(r[1])) for r in found]


# -- usage ---------------------------------------------------------------------------------


def usage_values(event: UsageEvent) -> tuple[Any, ...]:
    """(at, model, kind, prompt, completion and total tokens, success, local) of an event."""
    at = event.at or datetime.now(UTC)
    return (
        at.astimezone(UTC).isoformat(timespec="microseconds"),
        event.model,
        event.kind,
        event.prompt_tokens,
        event.completion_tokens,
        event.total_tokens,
        event.success,
        event.local,
    )


class UsageSql(SqlRunner):
    def events(self, start: date, end: date) -> list[UsageEvent]:
        """Events from the start of `start` to the end of `end` (UTC days, inclusive)."""
        lo = datetime.combine(start, datetime.min.time(), UTC)
        hi = datetime.combine(end + timedelta(days=1), datetime.min.time(), UTC)
        sql = (
            "SELECT at, model, kind, prompt_tokens, completion_tokens, success, local"
            " FROM usage_events WHERE at >= ? AND at < ? ORDER BY at, id"
        )
        window = (lo.isoformat(timespec="microseconds"), hi.isoformat(timespec="microseconds"))
        return [
            UsageEvent(
                model=model,
                kind=kind,
                prompt_tokens=prompt,
                completion_tokens=completion,
                success=bool(success),
                local=bool(local),
                at=datetime.fromisoformat(at),
            )
            for at, model, kind, prompt, completion, success, local in self._select(sql, window)
        ]
