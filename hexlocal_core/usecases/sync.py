"""`sync`: index every package the project runs, one at a time, resumable across processes.

Gather (the lock, `_build`, the project's Elixir version, the index) -> plan the queue
(`sync_plan.plan_queue`, pure) -> one worker claims the queued rows in order and indexes
each through `Ingestion.prepare`, the way a search would. So a search for a package being
synced waits for that same job (within INGEST_TIMEOUT_MS) instead of starting another,
and a search for a package still queued starts its job at once; the worker, reaching it,
finds it indexed (or joins its job) and moves on.

The queue lives in the database (`seam.SyncQueries`): a process that ends mid-sync
leaves its rows queued (or claimed by a pid that no longer runs), and the next sync, or
the next start of a long-lived process, carries on from there.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from attrs import frozen

from hexlocal_core.cancel import IngestCancelled
from hexlocal_core.errors import HexlocalError, ModelError, RemoteError, UserInputError
from hexlocal_core.index.rows import QueueChanges, SyncRow
from hexlocal_core.index.seam import DocsStore
from hexlocal_core.ingest.jobs import alive
from hexlocal_core.ingest.otp_source import OtpSource
from hexlocal_core.ingest.project_code import own_apps
from hexlocal_core.model import (
    IngestProgress,
    JobStatus,
    Notice,
    PackageState,
    ProgressFn,
    SyncState,
)
from hexlocal_core.notice_codes import NoticeCode
from hexlocal_core.threads import in_worker
from hexlocal_core.usecases.ingest import Ingestion
from hexlocal_core.usecases.sync_plan import (
    PROJECT_KIND,
    VERSIONED_KINDS,
    SyncTarget,
    elixir_targets,
    lock_targets,
    otp_targets,
    package_states,
    plan_queue,
)
from hexlocal_core.versions import (
    LockTooLarge,
    MalformedLock,
    build_version,
    find_lock,
    find_mix_root,
    load_lock,
    resolve_version,
)

log = logging.getLogger("hexlocal.sync")

SyncProgress = Callable[[PackageState], None]


@frozen
class SyncReport:
    """Where every package the project runs stands when `sync` returns."""

    packages: tuple[PackageState, ...]
    queued: int  # packages this call put in the queue
    running: bool  # the worker is still going (`sync(wait=False)`)
    seconds: float
    notices: tuple[Notice, ...] = ()

    def count(self, state: SyncState) -> int:
        return sum(1 for p in self.packages if p.locked and p.state is state)

    def to_dict(self) -> dict[str, object]:
        return {
            "packages": [p.to_dict() for p in self.packages],
            "queued": self.queued,
            "running": self.running,
            "seconds": self.seconds,
            "counts": {str(s): self.count(s) for s in SyncState if self.count(s)},
            "notices": [n.to_dict() for n in self.notices],
        }


@frozen
class _Gathered:
    targets: tuple[SyncTarget, ...]
    notices: tuple[Notice, ...]


class Syncer:
    def __init__(
        self,
        store: DocsStore,
        ingestion: Ingestion,
        *,
        project_root: Path,
        include_elixir: bool,
        otp: OtpSource | None = None,
    ) -> None:
        self._store = store
        self._otp = otp  # None: OTP applications are not synced
        self._ingestion = ingestion
        self._project_root = project_root
        self._include_elixir = include_elixir
        self._worker: asyncio.Task[None] | None = None
        self._background: asyncio.Task[SyncReport] | None = None
        self._pending = False  # rows were queued since the worker last looked
        self._claimed: set[str] = set()  # rows this instance holds as 'running'
        self._listeners: list[SyncProgress] = []
        self._elixir: tuple[str | None, str | None] | None = None  # (version, why none)
        self._blocked: str | None = None  # why the worker stopped with rows still queued

    # -- the use case ---------------------------------------------------------------------

    async def sync(
        self,
        *,
        wait: bool,
        progress: SyncProgress | None,
        retry_failed: bool,
        fresh: bool = True,
    ) -> SyncReport:
        """`fresh=False` reuses the last `elixir --version` answer (a BEAM start): a
        project-wide search queues what is missing on every call and must not pay it."""
        started = time.perf_counter()
        gathered = await self._gather(fresh=fresh)
        # Only complete packages are done: a 'partial' one (its embedding cut short) is
        # queued again, and its job embeds only what the cache lacks.
        indexed = {p.name: p.version for p in await in_worker(self._store.packages) if p.complete}
        queued: list[str] = []

        def decide(current: dict[str, SyncRow]) -> QueueChanges:
            changes = plan_queue(
                gathered.targets,
                current,
                indexed,
                retry_failed=retry_failed,
                claimed=self._held,
            )
            queued.extend(r.package for r in changes.upsert if r.status == "queued")
            return changes

        await in_worker(lambda: self._store.sync.update_queue(decide))
        self._kick()
        with self._listening(progress):
            if wait and self._worker is not None:
                await asyncio.shield(self._worker)
        notices = gathered.notices
        if self._blocked is not None:
            notices += (Notice(NoticeCode.SYNC_WAITING, f"sync is waiting: {self._blocked}"),)
        return SyncReport(
            packages=tuple(await self._states(gathered)),
            queued=len(queued),
            running=self._worker is not None and not self._worker.done(),
            seconds=round(time.perf_counter() - started, 3),
            notices=notices,
        )

    def start_background(self) -> None:
        """`sync` in a task (the MCP server's start); failures are logged, never raised."""

        async def run() -> SyncReport:
            try:
                return await self.sync(wait=False, progress=None, retry_failed=False)
            except Exception:
                log.exception("the background sync could not start")
                raise

        task = asyncio.get_running_loop().create_task(run(), name="hexlocal-sync")
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        self._background = task

    async def states(self) -> list[PackageState]:
        return await self._states(await self._gather(fresh=False))

    async def aclose(self) -> None:
        """Stops the worker; the row it held goes back to the queue for the next start."""
        for task in (self._background, self._worker):
            if task is not None and not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    # -- gathering --------------------------------------------------------------------------

    async def _gather(self, *, fresh: bool) -> _Gathered:
        root = self._project_root
        lock_path = await in_worker(lambda: find_lock(root))
        mix_root = await in_worker(lambda: find_mix_root(root))
        notices: list[Notice] = []
        targets: list[SyncTarget] = []
        if lock_path is None and mix_root is None:
            notices.append(
                Notice(
                    NoticeCode.NO_MIX_PROJECT,
                    f"no Mix project (mix.exs or mix.lock) at or above {root}; set PROJECT_ROOT "
                    "to the project's folder to sync its dependencies",
                )
            )
            return _Gathered((), tuple(notices))
        if lock_path is None:
            notices.append(
                Notice(NoticeCode.NO_MIX_LOCK, f"no mix.lock under {mix_root}; run `mix deps.get`")
            )
        else:
            targets.extend(await self._lock_targets(lock_path, notices))
        if self._include_elixir:
            version, why = await self._elixir_version(fresh=fresh)
            targets.extend(elixir_targets(version, why))
        if self._otp is not None:
            targets.extend(otp_targets(await self._otp.project_apps()))
        own = await in_worker(lambda: own_apps(root))
        targets.extend(SyncTarget(a.app, a.version(), PROJECT_KIND) for a in own)
        return _Gathered(tuple(targets), tuple(notices))

    async def _lock_targets(self, lock_path: Path, notices: list[Notice]) -> list[SyncTarget]:
        try:
            lock = await in_worker(lambda: load_lock(lock_path))
        except (LockTooLarge, MalformedLock) as exc:
            notices.append(
                Notice(NoticeCode.MIXLOCK_UNREADABLE, f"cannot sync from {lock_path}: {exc}")
            )
            return []
        root = self._project_root

        def built(app: str) -> str | None:
            found = build_version(app, root)
            return found[0] if found else None

        return await in_worker(lambda: lock_targets(lock.entries, lock.problems, built))

    async def _elixir_version(self, *, fresh: bool) -> tuple[str | None, str | None]:
        # `elixir --version` starts a BEAM (about a second): `list` reuses the last answer.
        if self._elixir is not None and not fresh:
            return self._elixir
        try:
            resolved = await resolve_version(
                "elixir", None, project_root=self._project_root, registry=None
            )
            self._elixir = (resolved.version, None)
        except UserInputError as exc:
            self._elixir = (None, str(exc))
        return self._elixir

    async def _states(self, gathered: _Gathered) -> list[PackageState]:
        rows = await in_worker(lambda: self._store.sync.all_rows())
        indexed = {p.name: p for p in await in_worker(self._store.packages)}
        jobs = {j.package: j for j in self._ingestion.status() if j.state == "running"}
        for row in rows.values():  # a worker of another process: no counts, but indexing
            if row.status == "running" and row.package not in jobs and not self._held(row):
                rows[row.package] = SyncRow(row.package, row.version, row.kind, "queued", row.seq)
        return package_states(gathered.targets, rows, indexed, jobs)

    def _held(self, row: SyncRow) -> bool:
        """Whether a live worker holds this 'running' row (ours, or another process's)."""
        if row.pid is None:
            return False
        if row.pid == os.getpid():
            return row.package in self._claimed  # else left by an earlier instance here
        return alive(row.pid)

    # -- the worker -------------------------------------------------------------------------

    def _kick(self) -> None:
        """Makes sure a worker will look at the queue (never two workers at once)."""
        self._pending = True
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(
                self._work(), name="hexlocal-sync-worker"
            )
            self._worker.add_done_callback(_log_failure)

    async def _work(self) -> None:
        try:
            self._ingestion.guard()
        except ModelError as exc:
            log.warning("sync waits: %s", exc)
            self._blocked = why = str(exc)
            await in_worker(lambda: self._store.sync.note_waiting(why))
            return
        self._blocked = None
        await in_worker(lambda: self._store.sync.note_waiting(None))
        while True:
            if self._pending:  # rows were queued: their chunks first, then their vectors
                self._pending = False
                await self._write_chunks_first()
            row = await in_worker(self._store.sync.claim_next, undo=self._requeue)
            if row is None:
                if self._pending:
                    continue
                return  # no await between this check and the end: see `_kick`
            self._claimed.add(row.package)
            try:
                if not await self._ingest(row):
                    return
            finally:
                self._claimed.discard(row.package)

    async def _write_chunks_first(self) -> None:
        """The first pass: every queued package's chunks, in queue order, before any of
        their vectors, so each answers by keyword (and project-wide search covers it)
        within about a minute of a fresh project's start, not after the vectors of every
        package queued ahead of it. The claim loop then embeds each from its stored chunks.
        A package that fails here is recorded failed, as the claim loop records it (no
        second download); a model problem is left to that loop, which stops on it."""
        rows = await in_worker(lambda: self._store.sync.all_rows())
        for row in sorted(rows.values(), key=lambda r: r.seq):
            if row.status != "queued":
                continue
            version = row.version if row.kind in VERSIONED_KINDS else None
            try:
                await self._ingestion.write_chunks(row.package, version, progress=self._relay(row))
            except ModelError:
                return
            except Exception as exc:  # noqa: BLE001 - one package's bug must not stop the rest
                await self._failed(row, exc)

    async def _ingest(self, row: SyncRow) -> bool:
        """Indexes one claimed row; False when the worker must stop (models unusable)."""
        # Elixir's apps by their version; the others as a search would ask, so the lock
        # (or _build, for git/path deps) chooses it again at this moment.
        version = row.version if row.kind in VERSIONED_KINDS else None
        try:
            prepared = await self._ingestion.prepare(
                row.package, version, refresh=False, progress=self._relay(row), wait_s=None
            )
        except (asyncio.CancelledError, IngestCancelled):
            self._finish_now(row, "queued", None)  # the next start carries on with it
            raise
        except ModelError as exc:
            self._finish_now(row, "queued", str(exc))
            self._blocked = why = str(exc)
            log.warning("sync stopped: %s", exc)
            await in_worker(lambda: self._store.sync.note_waiting(why))
            return False
        except Exception as exc:  # noqa: BLE001 - one package's bug must not stop the rest
            await self._failed(row, exc)
            return True
        done = prepared.version
        await in_worker(lambda: self._store.sync.finish(row.package, "done", version=done))
        indexed = await in_worker(lambda: self._store.package(row.package))
        chunks = indexed.chunk_count if indexed is not None else 0
        self._tell(row, SyncState.INDEXED, None, version=done, chunks=chunks)
        return True

    async def _failed(self, row: SyncRow, exc: Exception) -> None:
        """Records the row failed, and why; only a remote failure is retried by a
        background sync (an explicit one retries every failure)."""
        if isinstance(exc, HexlocalError):
            log.info("sync: %s failed: %s", row.package, exc)
            # Shown beside the package and version already: "plug 1.20.3: ..." says them twice.
            reason = str(exc).removeprefix(f"{row.package} {row.version}: ")
            retry = isinstance(exc, RemoteError)
        else:
            log.error("sync: indexing %s failed unexpectedly", row.package, exc_info=exc)
            reason, retry = f"unexpected {type(exc).__name__}: {exc}", True
        await in_worker(
            lambda: self._store.sync.finish(row.package, "failed", reason=reason, retry=retry)
        )
        self._tell(row, SyncState.FAILED, reason)

    def _requeue(self, row: SyncRow | None) -> None:
        """A row claimed just as the worker was cancelled goes back to the queue."""
        if row is not None:
            self._finish_now(row, "queued", None)

    def _finish_now(self, row: SyncRow, status: str, reason: str | None) -> None:
        # Synchronous on purpose: it runs while the task is being cancelled.
        try:
            self._store.sync.finish(row.package, status, reason=reason)
        except Exception:  # noqa: BLE001 - the next start still finds the row (dead pid)
            log.exception("could not put %s back in the sync queue", row.package)

    # -- progress ---------------------------------------------------------------------------

    @contextmanager
    def _listening(self, listener: SyncProgress | None) -> Iterator[None]:
        if listener is None:
            yield
            return
        self._listeners.append(listener)
        try:
            yield
        finally:
            self._listeners.remove(listener)

    def _relay(self, row: SyncRow) -> ProgressFn:
        def relay(p: IngestProgress) -> None:
            job = JobStatus(
                row.package,
                "running",
                version=p.version,
                phase=p.phase,
                chunks_embedded=p.chunks_embedded,
                chunks_total=p.chunks_total,
            )
            self._push(
                PackageState(
                    row.package,
                    SyncState.INDEXING,
                    kind=row.kind,
                    locked_version=row.version or job.version,
                    phase=job.phase,
                    chunks_embedded=job.chunks_embedded,
                    chunks_total=job.chunks_total,
                )
            )

        return relay

    def _tell(
        self,
        row: SyncRow,
        state: SyncState,
        reason: str | None,
        *,
        version: str | None = None,
        chunks: int = 0,
    ) -> None:
        self._push(
            PackageState(
                row.package,
                state,
                kind=row.kind,
                locked_version=row.version or version,
                indexed_version=version,
                chunks=chunks,
                reason=reason,
            )
        )

    def _push(self, state: PackageState) -> None:
        for listener in list(self._listeners):
            try:
                listener(state)
            except Exception:  # noqa: BLE001 - a broken listener must not stop the sync
                log.debug("sync progress listener failed", exc_info=True)


def _log_failure(task: asyncio.Task[None]) -> None:
    # A background worker has no caller to raise to: a bug (or a store that cannot be
    # written) is logged here, and the rows it left go back to the queue at the next sync.
    if not task.cancelled() and task.exception() is not None:
        log.error("the sync worker stopped", exc_info=task.exception())
