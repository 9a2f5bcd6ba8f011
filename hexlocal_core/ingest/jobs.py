"""Ingestion jobs: at most one per package at a time, outliving the call that started them.

A call waits up to INGEST_TIMEOUT_MS for its job; past that it answers with progress and
the job keeps running; the next call (or `ingestion_status`) collects the result. Each job
also has a durable row, so a job killed with its process is found and resumed next start.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable, Coroutine
from typing import Any

from attrs import define, field

from hexlocal_core.errors import HexlocalError
from hexlocal_core.index.db import atomic, rows
from hexlocal_core.index.store import Store, utcnow
from hexlocal_core.model import IngestProgress, IngestReport

log = logging.getLogger("hexlocal.jobs")

ProgressFn = Callable[[IngestProgress], None]
JobFactory = Callable[[ProgressFn], Coroutine[Any, Any, IngestReport]]


@define
class Job:
    package: str
    version: str
    task: asyncio.Task[IngestReport]
    row_id: int
    started: float = field(factory=time.perf_counter)
    progress: IngestProgress | None = None

    @property
    def done(self) -> bool:
        return self.task.done()

    def status(self) -> dict[str, Any]:
        state = "running"
        error = None
        if self.task.done():
            exc = self.task.exception() if not self.task.cancelled() else None
            state = "failed" if (exc or self.task.cancelled()) else "done"
            error = str(exc) if exc else ("cancelled" if self.task.cancelled() else None)
        out: dict[str, Any] = {
            "package": self.package,
            "version": self.version,
            "state": state,
            "elapsed_s": round(time.perf_counter() - self.started, 1),
            "progress": self.progress.to_dict() if self.progress else None,
        }
        if error:
            out["error"] = error
        return out


class JobRegistry:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._jobs: dict[str, Job] = {}

    def get(self, package: str) -> Job | None:
        return self._jobs.get(package)

    def statuses(self) -> list[dict[str, Any]]:
        return [job.status() for job in self._jobs.values()]

    def running(self, package: str) -> Job | None:
        job = self._jobs.get(package)
        return job if job is not None and not job.done else None

    def start(self, package: str, version: str, source: str, factory: JobFactory) -> Job:
        """The running job for the package, or a new one (never two at once)."""
        existing = self.running(package)
        if existing is not None:
            return existing
        row_id = self._open_row(package, version, source)
        holder: list[Job] = []

        def on_progress(p: IngestProgress) -> None:
            if holder:
                holder[0].progress = p

        task = asyncio.get_running_loop().create_task(
            factory(on_progress), name=f"ingest:{package}"
        )
        job = Job(package, version, task, row_id)
        holder.append(job)
        self._jobs[package] = job
        task.add_done_callback(lambda t: self._close_row(job))
        return job

    async def wait(self, job: Job, timeout_s: float) -> IngestReport | None:
        """The job's report if it finishes within the timeout; re-raises its failure."""
        try:
            return await asyncio.wait_for(asyncio.shield(job.task), timeout_s)
        except TimeoutError:
            return None

    def collect(self, package: str) -> None:
        """Forget a finished job once its result has been handed out."""
        job = self._jobs.get(package)
        if job is not None and job.done:
            del self._jobs[package]

    async def cancel_all(self) -> None:
        for job in list(self._jobs.values()):
            if not job.done:
                job.task.cancel()
        for job in list(self._jobs.values()):
            try:
                await job.task
            except (asyncio.CancelledError, HexlocalError, Exception):  # noqa: BLE001
                pass

    # -- durable rows -------------------------------------------------------------------

    def _open_row(self, package: str, version: str, source: str) -> int:
        with atomic(self.store.conn) as conn:
            conn.execute(
                "INSERT INTO ingest_jobs(package, version, source, status, pid, started_at)"
                " VALUES (?, ?, ?, 'running', ?, ?)",
                (package, version, source, os.getpid(), utcnow()),
            )
            return int(conn.last_insert_rowid())

    def _close_row(self, job: Job) -> None:
        status = job.status()
        state = "done" if status["state"] == "done" else "failed"
        try:
            with atomic(self.store.conn) as conn:
                conn.execute(
                    "UPDATE ingest_jobs SET status = ?, finished_at = ?, progress = ?, error = ?"
                    " WHERE id = ?",
                    (
                        state,
                        utcnow(),
                        json.dumps(status.get("progress") or {}),
                        status.get("error"),
                        job.row_id,
                    ),
                )
        except Exception:  # noqa: BLE001 - bookkeeping must never mask the job's own outcome
            log.exception("could not record the end of job %s", job.row_id)


def interrupted_jobs(store: Store) -> list[dict[str, Any]]:
    """Jobs left 'running' by a process that no longer exists; marked failed and returned."""
    found = []
    for row in rows(
        store.conn,
        "SELECT id, package, version, source, pid FROM ingest_jobs WHERE status = 'running'",
    ):
        if row["pid"] and _alive(int(row["pid"])):
            continue
        found.append(row)
    if found:
        with atomic(store.conn) as conn:
            for row in found:
                conn.execute(
                    "UPDATE ingest_jobs SET status='failed', finished_at=?, error='interrupted'"
                    " WHERE id=?",
                    (utcnow(), row["id"]),
                )
    return found


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
