"""Ensure a package version is indexed: resolve the version, decide whether a job is owed,
run it (once per package at a time) and wait for it up to a bound.

Every docs call (search, get, ingest) comes through `Ingestion.prepare` once. The model
guard runs once per call that may download, before the first request of a new package.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from attrs import evolve, frozen

from hexlocal_core.cancel import IngestCancelled
from hexlocal_core.errors import HexlocalError, ModelError, ModelUnavailable, RemoteError
from hexlocal_core.index.seam import DocsStore
from hexlocal_core.ingest.ingestor import Ingestor
from hexlocal_core.ingest.jobs import Job, JobRegistry, interrupted_jobs
from hexlocal_core.ingest.otp_source import is_otp_app
from hexlocal_core.ingest.project_code import own_app
from hexlocal_core.model import (
    IndexedPackage,
    IngestProgress,
    IngestReport,
    JobStatus,
    Notice,
    Phase,
    ProgressFn,
    ResolvedVersion,
    VersionSource,
)
from hexlocal_core.model_guard import model_guard
from hexlocal_core.notice_codes import NoticeCode
from hexlocal_core.ports import Embedder, HexRegistry
from hexlocal_core.search import notices
from hexlocal_core.threads import in_worker
from hexlocal_core.usecases.diagnostics import model_missing
from hexlocal_core.usecases.prepare_plan import (
    AnswerFromChunks,
    Facts,
    LastJob,
    Ready,
    ReportJob,
    Work,
    cancel_running,
    decide,
    switch_to,
)
from hexlocal_core.versions import resolve_version, validate_package_name

log = logging.getLogger("hexlocal.ingest")

WAIT_DEFAULT = -1.0  # `prepare(wait_s=...)`: wait INGEST_TIMEOUT_MS
# A failed ingestion of a partial package is retried by the first call after this long.
RETRY_FAILED_AFTER_S = 30.0


@frozen
class Prepared:
    """Where a docs call stands after resolution: ready at a version, or waiting on a job."""

    resolved: ResolvedVersion
    version: str
    notices: tuple[Notice, ...]
    waiting: JobStatus | None = None
    report: IngestReport | None = None

    @property
    def name(self) -> str:
        return self.resolved.name


@frozen
class _Now:
    """The facts of one docs call and the index row and jobs they were read from."""

    facts: Facts
    indexed: IndexedPackage | None
    running: Job | None
    before: Job | None  # the package's last job this process has not collected


class Ingestion:
    def __init__(
        self,
        store: DocsStore,
        embedder: Embedder | None,
        registry: HexRegistry,
        ingestor: Ingestor,
        *,
        project_root: Path,
        database_path: Path,
        timeout_s: float,
        startup_notices: tuple[Notice, ...] = (),
        answer_while_embedding: bool = True,
    ) -> None:
        self._store = store
        self._embedder = embedder
        self._registry = registry
        self._ingestor = ingestor
        self._project_root = project_root
        self._database_path = database_path
        self._timeout_s = timeout_s
        self._startup_notices = startup_notices
        self._answer_while_embedding = answer_while_embedding
        self._jobs = JobRegistry(store)

    async def resume(self) -> None:
        """Restarts the jobs a killed process left running."""
        rows = await in_worker(lambda: interrupted_jobs(self._store))
        if not rows:
            return
        # One finished since (by another process, or a sync): nothing left to do for it.
        rows = [r for r in rows if not self._indexed_at(r.package, r.version)]
        if not rows:
            return
        try:
            self.guard()  # once for all of them: the index and the embedder are shared
        except ModelError as exc:
            log.warning("not resuming %d interrupted ingestion(s): %s", len(rows), exc)
            return
        for row in rows:
            log.info("resuming interrupted ingestion of %s %s", row.package, row.version)
            self._start_job(row.package, row.version, None)

    async def aclose(self) -> None:
        await self._jobs.cancel_all()

    def status(self, package: str | None = None) -> list[JobStatus]:
        """This process's jobs (all, or the package's), else what the index holds for it."""
        if not package:
            return self._jobs.statuses()
        package = validate_package_name(package)  # a bad name is an error, never echoed whole
        job = self._jobs.get(package)
        if job is not None:
            return [job.status()]
        indexed = self._store.package(package)
        if indexed is None:
            return [JobStatus(package, "not indexed")]
        state = "indexed" if indexed.complete else "indexed (keyword only)"
        return [JobStatus(package, state, version=indexed.version)]

    async def resolve(self, package: str, version: str | None) -> ResolvedVersion:
        name = validate_package_name(package)
        otp = self._ingestor.otp
        if otp is not None and is_otp_app(name):
            return await otp.resolve(name, version)
        own = await in_worker(lambda: own_app(self._project_root, name))
        if own is not None:  # the project's own app: as compiled now, whatever was asked
            return ResolvedVersion(name, own.version(), VersionSource.PROJECT, str(own.ebin))
        try:
            return await resolve_version(
                name, version, project_root=self._project_root, registry=self._registry
            )
        except RemoteError as exc:
            indexed = self._store.package(name)
            if indexed is None:
                raise RemoteError(
                    f"cannot choose a version of {name}: {exc}. Pass an explicit version, or pin "
                    "it in mix.lock, to work offline."
                ) from exc
            notice = _offline_notice(name, indexed.version, exc, self._registry)
            return ResolvedVersion(name, indexed.version, VersionSource.INDEXED, notices=(notice,))

    async def prepare(
        self,
        package: str,
        version: str | None,
        *,
        refresh: bool,
        progress: ProgressFn | None,
        wait_s: float | None = WAIT_DEFAULT,
        searchable: bool = False,
    ) -> Prepared:
        """Where a docs call stands. `searchable`: the call can answer from the chunks alone
        (search, get): it stops waiting once they are written, with a notice, while the
        vectors are still being made; otherwise it waits for the whole job."""
        # resolve_version reads a blank version as "not given"; so must the checks below,
        # or a blank version would replace the indexed one with hex.pm's latest.
        if version is not None and not version.strip():
            version = None
        guarded = False
        if self._store.package(validate_package_name(package)) is None:
            self.guard()  # a new package means a download: refuse before any request
            guarded = True
        resolved = await self.resolve(package, version)
        notices = list(self._startup_notices) + list(resolved.notices)
        timeout = self._timeout_s if wait_s == WAIT_DEFAULT else wait_s
        await self._after_chunks_only(resolved.name, resolved.version, timeout)
        searchable = searchable and self._answer_while_embedding
        now = self._gather(resolved, version, refresh=refresh, searchable=searchable)
        current = switch_to(now.facts)
        if current is not None:
            notices.append(_not_latest_notice(resolved.name, current, resolved))
            resolved = evolve(resolved, version=current, source=VersionSource.INDEXED)
            now = evolve(now, facts=evolve(now.facts, wanted=current))
        if cancel_running(now.facts):
            # Jobs outlive their calls (the vectors come after the chunks): one still
            # embedding a version the project no longer asks for gives way.
            await self._jobs.cancel(
                resolved.name,
                f"{resolved.name} {resolved.version} is wanted now, not {now.facts.running}",
            )
            now = self._gather(resolved, version, refresh=refresh, searchable=searchable)
        decision = decide(now.facts)
        indexed, running, before = now.indexed, now.running, now.before
        if isinstance(decision, Ready):
            self._jobs.collect(resolved.name)
            return Prepared(resolved, resolved.version, tuple(notices))
        if isinstance(decision, ReportJob) and running is not None:
            # A sync's chunks-only job outran the budget: this call reports its progress.
            return Prepared(resolved, resolved.version, tuple(notices), waiting=running.status())
        if running is None and not guarded:
            self.guard()
        if isinstance(decision, AnswerFromChunks) and before is not None:
            # A job that failed moments ago (an embeddings API down, say) is not started
            # again on every call, each one a download of the docs: its chunks answer.
            notice = _embedding_notice(before, decision.stopped, self._model_missing(before))
            return Prepared(resolved, resolved.version, (*notices, notice))
        stopped = now.facts.last.stopped if now.facts.last is not None else None
        job = running or self._start_job(resolved.name, resolved.version, resolved, refresh=refresh)
        if isinstance(decision, Work) and decision.answer_now:
            if decision.owe_notice:
                notices.append(_embedding_notice(job, stopped, self._model_missing(job)))
            return Prepared(resolved, job.version, tuple(notices))
        with job.listening(progress):
            report = await self._jobs.wait(job, timeout, until_searchable=searchable)
        if report is None and searchable and job.searchable.is_set():
            if indexed is not None and indexed.version != job.version:
                notices.append(self._replaced_notice(indexed, resolved))
            notice = _embedding_notice(job, stopped, self._model_missing(job))
            return Prepared(resolved, job.version, (*notices, notice))
        if report is None:
            return Prepared(resolved, resolved.version, tuple(notices), waiting=job.status())
        self._jobs.collect(resolved.name)
        notices.extend(report.notices)
        if indexed is not None and indexed.version != report.version:
            notices.append(self._replaced_notice(indexed, resolved))
        return Prepared(resolved, report.version, tuple(notices), report=report)

    def _gather(
        self, resolved: ResolvedVersion, asked: str | None, *, refresh: bool, searchable: bool
    ) -> _Now:
        """What `decide` needs (the index, this process's job, how the last one ended),
        read once, with the values the call then acts on."""
        indexed = self._store.package(resolved.name)
        running = self._jobs.running(resolved.name)
        before = self._jobs.get(resolved.name)
        last = None
        if before is not None and before.done:
            last = LastJob(before.version, before.status().error, _recent(before))
        facts = Facts(
            wanted=resolved.version,
            pinned=_pinned(asked, resolved),
            refresh=refresh,
            searchable=searchable,
            indexed=indexed.version if indexed is not None else None,
            indexed_complete=indexed is not None and indexed.complete,
            running=running.version if running is not None else None,
            running_embeds=running is not None and running.embeds,
            last=last,
        )
        return _Now(facts, indexed, running, before)

    async def write_chunks(
        self, package: str, version: str | None, *, progress: ProgressFn | None = None
    ) -> bool:
        """Writes a package version's chunks and leaves its vectors for later (sync's first
        pass: every package answers by keyword within a minute, not after the last one's
        vectors). False, doing nothing, when that version's chunks are in the index or a
        job for the package runs. Raises what the ingestion raises."""
        resolved = await self.resolve(package, version)
        indexed = self._store.package(resolved.name)
        if indexed is not None and indexed.version == resolved.version:
            return False
        if self._jobs.running(resolved.name) is not None:
            return False
        self.guard()
        job = self._start_job(resolved.name, resolved.version, resolved, embed=False)
        try:
            with job.listening(progress):
                await self._jobs.wait(job, None)
        finally:
            self._jobs.collect(resolved.name)
        return True

    async def _after_chunks_only(self, name: str, version: str, timeout: float | None) -> None:
        """Lets a running chunks-only job end (its download and parse; within the call's
        budget), so the call that came meanwhile finds the chunks and starts the job that
        embeds them. If it failed for the version this call wants (a 404, corrupt docs),
        that failure is the call's answer: starting a job of its own would download again."""
        job = self._jobs.running(name)
        if job is None or job.embeds:
            return
        try:
            await self._jobs.wait(job, timeout)
        except HexlocalError as exc:
            # A sync stopped under it (cancelled), or another version: this call's own job
            # takes over.
            if job.version == version and not isinstance(exc, IngestCancelled):
                self._jobs.collect(name)
                raise
        except Exception:  # not the domain's: the next job meets it again
            pass
        if job.done:
            self._jobs.collect(name)

    def _indexed_at(self, name: str, version: str) -> bool:
        indexed = self._store.package(name)
        return indexed is not None and indexed.version == version and indexed.complete

    def _model_missing(self, job: Job) -> str | None:
        """Why no vectors will come, when the embedding model cannot be had: the job
        stopped on it, or the embedder's last download failed (a search answering while
        the job starts would otherwise promise vectors that never arrive)."""
        failure = job.failure
        if isinstance(failure, ModelUnavailable) and not failure.pending:
            return str(failure)
        return model_missing(self._embedder)

    def guard(self) -> None:
        """Raises ModelError unless new docs can be indexed (an embedder of the index's model)."""
        if self._embedder is None:
            raise ModelError(
                "no embedding model is available to index new docs; see `hexlocal models status`"
            )
        model_guard(self._store, self._embedder)

    def _start_job(
        self,
        name: str,
        version: str,
        resolved: ResolvedVersion | None,
        *,
        refresh: bool = False,
        embed: bool = True,
    ) -> Job:
        async def work(report: ProgressFn) -> IngestReport:
            target = resolved
            if target is None:  # a resumed job: the version is known, its source is not
                report(IngestProgress(name, version, Phase.RESOLVING))
                target = await self.resolve(name, version)
            # Chunks stored, partial: finished from them, unless a refresh asks for the docs.
            return await self._ingestor.run(target, report, from_store=not refresh, embed=embed)

        return self._jobs.start(name, version, "auto", work, embeds=embed)

    def _replaced_notice(self, old: IndexedPackage, resolved: ResolvedVersion) -> Notice:
        if resolved.source is VersionSource.PROJECT:
            return Notice(
                NoticeCode.PROJECT_REINDEXED,
                f"{old.name} was compiled again since it was indexed: its docs were read "
                f"anew ({old.version} -> {resolved.version}).",
            )
        why = {
            VersionSource.MIX_LOCK: f"which {resolved.detail or 'mix.lock'} pins",
            VersionSource.EXPLICIT: "which was asked for explicitly",
        }.get(resolved.source, f"chosen from {resolved.source.value}")
        return Notice(
            NoticeCode.VERSION_REPLACED,
            f"Replaced indexed '{old.name}' v{old.version} with v{resolved.version}, {why}. "
            f"The index keeps one version per package and is shared by every client using "
            f"{self._database_path}; another project on v{old.version} should use its own "
            "DATABASE_PATH.",
        )


def _recent(job: Job) -> bool:
    """Whether the job ended less than RETRY_FAILED_AFTER_S ago."""
    return job.ended is not None and time.perf_counter() - job.ended < RETRY_FAILED_AFTER_S


def _offline_notice(name: str, version: str, error: RemoteError, registry: HexRegistry) -> Notice:
    """Which version answers and why: the API known down, else the error hex.pm gave."""
    why = f"hex.pm could not be asked ({error})"
    for api in registry.reachable()[:1]:  # the API comes first; resolving asks only it
        if not api.reachable:
            why = api.describe()
    return Notice(
        NoticeCode.REGISTRY_UNREACHABLE,
        f"answering from the indexed {name} {version} without hex.pm's newest release: {why}.",
    )


def _pinned(version: str | None, resolved: ResolvedVersion) -> bool:
    """Whether the call names its version (explicitly, or the project does) rather than
    taking whatever is indexed or latest."""
    return version is not None or resolved.source not in (
        VersionSource.HEX_LATEST,
        VersionSource.INDEXED,
    )


def _embedding_notice(job: Job, stopped: str | None = None, missing: str | None = None) -> Notice:
    """The answer came from the chunks alone; `stopped`: why the last attempt ended;
    `missing`: why the model cannot be had (then no vectors are on their way)."""
    if missing is not None:
        return notices.keyword_only(f"{job.package} {job.version}", missing)
    status = job.status()
    done = (
        f" ({status.chunks_embedded}/{status.chunks_total} chunks embedded)"
        if status.chunks_total
        else ""
    )
    why = f" The last attempt stopped: {stopped}" if stopped else ""
    return Notice(
        NoticeCode.EMBEDDING_IN_PROGRESS,
        f"{job.package} {job.version} answers by keyword while its vectors are made{done}; "
        f"the ranking improves as they arrive, in the background.{why}",
    )


def _not_latest_notice(name: str, version: str, resolved: ResolvedVersion) -> Notice:
    return Notice(
        NoticeCode.INDEXED_VERSION_DIFFERS,
        f"Answering from the indexed {name} {version}; hex.pm's latest stable is "
        f"{resolved.version} and nothing in the project pins {name}. Pass "
        f"version='{resolved.version}' (or refresh) to switch.",
    )
