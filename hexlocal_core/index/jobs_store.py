"""The durable rows of ingestion jobs (`ingest_jobs`): one per job, opened when it starts
and closed when it ends, so a job killed with its process is found at the next start."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import Any

from attrs import frozen

from hexlocal_core.index.db import Connected, atomic, rows, utcnow


@frozen
class JobRow:
    id: int
    package: str
    version: str
    source: str
    pid: int | None


def open_job(store: Connected, package: str, version: str, source: str) -> int:
    """Records a running job of this process; returns its row id."""
    with atomic(store.conn) as conn:
        conn.execute(
            "INSERT INTO ingest_jobs(package, version, source, status, pid, started_at)"
            " VALUES (?, ?, ?, 'running', ?, ?)",
            (package, version, source, os.getpid(), utcnow()),
        )
        return int(conn.last_insert_rowid())


def close_job(
    store: Connected, row_id: int, *, done: bool, progress: Mapping[str, Any], error: str | None
) -> None:
    with atomic(store.conn) as conn:
        conn.execute(
            "UPDATE ingest_jobs SET status = ?, finished_at = ?, progress = ?, error = ?"
            " WHERE id = ?",
            ("done" if done else "failed", utcnow(), json.dumps(dict(progress)), error, row_id),
        )


def take_interrupted(store: Connected, alive: Callable[[int], bool]) -> list[JobRow]:
    """Jobs left 'running' by a process that no longer exists, marked failed and returned."""
    found = [
        JobRow(int(r["id"]), r["package"], r["version"], r["source"], r["pid"])
        for r in rows(
            store.conn,
            "SELECT id, package, version, source, pid FROM ingest_jobs WHERE status = 'running'",
        )
    ]
    gone = [row for row in found if not (row.pid and alive(int(row.pid)))]
    if gone:
        with atomic(store.conn) as conn:
            for row in gone:
                conn.execute(
                    "UPDATE ingest_jobs SET status='failed', finished_at=?, error='interrupted'"
                    " WHERE id=?",
                    (utcnow(), row.id),
                )
    return gone
