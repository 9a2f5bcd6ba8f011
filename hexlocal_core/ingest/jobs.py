"""Ingestion jobs: at most one per package at a time, outliving the call that started them.

A call waits up to INGEST_TIMEOUT_MS for its job; past that it answers with the job's
status and the job keeps running; the next call (or `ingestion_status`) collects it. A job
pushes each progress update to every listener at once (no polling). Each job has a cancel
token bound around its work, so `cancel_all` stops its worker threads at their next
checkpoint; and a durable row, so a job killed with its process is resumed next start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterator

from hexlocal_core.cancel import CancelToken, IngestCancelled, bind
from hexlocal_core.index.rows import JobRow
from hexlocal_core.index.seam import DocsStore
from hexlocal_core.model import IngestProgress, IngestReport, JobStatus, Phase, ProgressFn

log = logging.getLogger("hexlocal.jobs")

JobWork = Callable[[ProgressFn], Awaitable[IngestReport]]

# How long `cancel_all` waits for jobs to reach a checkpoint before giving up on them.
CANCEL_WAIT_S = 2.0
# Phases past the chunk write: the package answers keyword searches and exact lookups.
SEARCHABLE = frozenset({Phase.EMBEDDING, Phase.DONE})


class Job:
    """One running (or finished, not yet collected) ingestion of a package version."""

    def __init__(self, package: str, version: str, row_id: int, *, embeds: bool = True) -> None:
        self.package = package
        self.version = version
        self.row_id = row_id
        self.embeds = embeds  # False: it writes the chunks only (sync's first pass)
        self.token = CancelToken()
        self.started = time.perf_counter()
        self.ended: float | None = None  # perf_counter when the task ended
        self.progress: IngestProgress | None = None
        self.task: asyncio.Task[IngestReport] | None = None
        self._listeners: list[ProgressFn] = []
        # Set once the chunks are written (keyword search answers): phase EMBEDDING or DONE.
        # A job that fails before that never sets it; its waiters get its result instead.
        self.searchable = asyncio.Event()
        self._loop = asyncio.get_running_loop()

    @property
    def done(self) -> bool:
        return self.task is not None and self.task.done()

    async def result(self) -> IngestReport:
        """The job's report, awaited without cancelling the job if the waiter is cancelled.

        A job cancelled under its waiters (shutdown) reaches them as `IngestCancelled`, a
        domain error, not as a CancelledError they would take for their own.
        """
        assert self.task is not None
        try:
            return await asyncio.shield(self.task)
        except asyncio.CancelledError:
            waiter = asyncio.current_task()
            if self.task.cancelled() and not (waiter and waiter.cancelling()):
                raise IngestCancelled(self.token.reason) from None
            raise

    def report(self, update: IngestProgress) -> None:
        """Records the job's progress and pushes it to every listener."""
        self.progress = update
        if update.phase in SEARCHABLE:
            self._loop.call_soon_threadsafe(self.searchable.set)
        for listener in list(self._listeners):
            try:
                listener(update)
            except Exception:  # noqa: BLE001 - one broken listener must not stop the job
                log.debug("progress listener failed", exc_info=True)

    @contextlib.contextmanager
    def listening(self, listener: ProgressFn | None) -> Iterator[None]:
        """`listener` gets the current progress now and every update while the block runs."""
        if listener is None:
            yield
            return
        self._listeners.append(listener)
        if self.progress is not None:
            listener(self.progress)
        try:
            yield
        finally:
            self._listeners.remove(listener)

    @property
    def failure(self) -> BaseException | None:
        """Why the job ended, when it ended on an error (not on a cancellation)."""
        if self.task is None or not self.task.done() or self.task.cancelled():
            return None
        return self.task.exception()

    def status(self) -> JobStatus:
        state, error = "running", None
        if self.task is not None and self.task.done():
            failure = None if self.task.cancelled() else self.task.exception()
            if self.task.cancelled() or isinstance(failure, IngestCancelled):
                reason = self.token.reason if self.token.cancelled else "cancelled"
                state, error = "cancelled", (str(failure) if failure else reason)
            elif failure is not None:
                state, error = "failed", str(failure)
            else:
                state = "done"
        p = self.progress
        return JobStatus(
            package=self.package,
            state=state,
            version=self.version,
            phase=p.phase if p else None,
            chunks_embedded=p.chunks_embedded if p else 0,
            chunks_total=p.chunks_total if p else 0,
            elapsed_s=round(time.perf_counter() - self.started, 1),
            error=error,
            progress=p,
        )


class JobRegistry:
    def __init__(self, store: DocsStore) -> None:
        self._store = store
        self._jobs: dict[str, Job] = {}

    def get(self, package: str) -> Job | None:
        return self._jobs.get(package)

    def statuses(self) -> list[JobStatus]:
        return [job.status() for job in self._jobs.values()]

    def running(self, package: str) -> Job | None:
        job = self._jobs.get(package)
        return job if job is not None and not job.done else None

    def start(
        self, package: str, version: str, source: str, work: JobWork, *, embeds: bool = True
    ) -> Job:
        """The running job for the package, or a new one running `work` (never two at once)."""
        existing = self.running(package)
        if existing is not None:
            return existing
        row = self._store.jobs.open_job(package, version, source)
        job = Job(package, version, row, embeds=embeds)

        async def run() -> IngestReport:
            # Bound inside the task: the threads it starts copy this context, token included.
            with bind(job.token):
                try:
                    return await work(job.report)
                except BaseException as exc:
                    cancelled = isinstance(exc, IngestCancelled | asyncio.CancelledError)
                    phase = Phase.CANCELLED if cancelled else Phase.FAILED
                    job.report(_final(job, phase, str(exc) or type(exc).__name__))
                    raise

        job.task = asyncio.get_running_loop().create_task(run(), name=f"ingest:{package}")
        self._jobs[package] = job
        job.task.add_done_callback(lambda _: self._close_row(job))
        return job

    async def wait(
        self, job: Job, timeout_s: float | None, *, until_searchable: bool = False
    ) -> IngestReport | None:
        """The job's report if it finishes within the timeout; re-raises its failure.

        `until_searchable`: also stop waiting (None) once its chunks are written, so a
        search answers by keyword while the vectors are still being made."""
        if not until_searchable:
            if timeout_s is None:
                return await job.result()
            try:
                return await asyncio.wait_for(job.result(), timeout_s)
            except TimeoutError:
                return None
        result = asyncio.ensure_future(job.result())
        ready = asyncio.ensure_future(job.searchable.wait())
        try:
            await asyncio.wait({result, ready}, timeout=timeout_s, return_when="FIRST_COMPLETED")
        finally:
            ready.cancel()
            if not result.done():
                result.cancel()  # the waiter only: `result()` shields the job itself
        return result.result() if result.done() and not result.cancelled() else None

    def collect(self, package: str) -> None:
        """Forget a finished job once its result has been handed out."""
        job = self._jobs.get(package)
        if job is not None and job.done:
            del self._jobs[package]

    async def cancel(self, package: str, reason: str, wait_s: float = CANCEL_WAIT_S) -> None:
        """Cancels the package's running job (another version is wanted now) and forgets it
        once it stopped; what it wrote stays (chunks first, then vector slices)."""
        job = self.running(package)
        if job is None or job.task is None:
            return
        job.token.cancel(reason)
        job.task.cancel()
        await asyncio.wait([job.task], timeout=wait_s)
        if job.done:
            del self._jobs[package]

    async def cancel_all(self, wait_s: float = CANCEL_WAIT_S) -> None:
        """Cancels every running job; returns once they stopped (or after `wait_s`).

        Nothing a cancelled job did is written: its one transaction is opened only after
        the last checkpoint, and a transaction already open runs to its end.
        """
        tasks = []
        for job in self._jobs.values():
            if job.task is not None and not job.task.done():
                job.token.cancel("ingestion was cancelled: hexlocal is shutting down")
                job.task.cancel()
                tasks.append(job.task)
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=wait_s)
        for task in pending:
            log.warning("%s did not stop within %.1f s of being cancelled", task.get_name(), wait_s)

    def _close_row(self, job: Job) -> None:
        job.ended = time.perf_counter()
        status = job.status()
        progress = status.progress.to_dict() if status.progress else {}
        try:
            self._store.jobs.close_job(
                job.row_id,
                done=status.state == "done",
                progress=progress,
                error=status.error,
            )
        except Exception:  # noqa: BLE001 - bookkeeping must never mask the job's own outcome
            log.exception("could not record the end of job %s", job.row_id)


def _final(job: Job, phase: Phase, message: str) -> IngestProgress:
    p = job.progress
    if p is None:
        return IngestProgress(job.package, job.version, phase, message=message)
    return IngestProgress(
        p.package, p.version, phase, p.items, p.chunks_total, p.chunks_embedded, message
    )


def interrupted_jobs(store: DocsStore) -> list[JobRow]:
    """Jobs left 'running' by a process that no longer exists; marked failed and returned."""
    return store.jobs.take_interrupted(alive)


def alive(pid: int) -> bool:
    """Whether a process with this id runs (ours always does)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
