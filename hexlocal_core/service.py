"""The facade every face uses (MCP server, CLI, Python callers), and `build`, the one
function that wires adapters to it. Tests call `build` with fakes for remote ports."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attrs import evolve

from hexlocal_core.config import Settings
from hexlocal_core.errors import (
    HexlocalError,
    ModelError,
    NotFound,
    PackageNotFound,
    RemoteError,
    UserInputError,
)
from hexlocal_core.index.store import Store
from hexlocal_core.index.usage_store import StoreUsageSink
from hexlocal_core.ingest.jobs import Job, JobRegistry, interrupted_jobs
from hexlocal_core.ingest.pipeline import index_items, model_guard
from hexlocal_core.ingest.sources import load_items
from hexlocal_core.model import (
    IndexedPackage,
    IngestProgress,
    IngestReport,
    IssueHit,
    IssueQuery,
    Memory,
    Notice,
    ResolvedVersion,
    SearchResult,
    VersionSource,
)
from hexlocal_core.ports import ChatModel, Embedder, HexRegistry, IssueTracker, Reranker
from hexlocal_core.search.engine import SearchEngine, SearchOutcome
from hexlocal_core.search.exact import parse_identifier, similar_titles
from hexlocal_core.usage import UsageReport, parse_period, summarize
from hexlocal_core.versions import resolve_version, validate_package_name

if TYPE_CHECKING:
    from hexlocal_core.evaluation import EvalOptions, EvalQuery, EvalReport
    from hexlocal_core.maintenance import DriftReport, ReindexPlan, ReindexProgress, ReindexReport
    from hexlocal_core.project_docs import ProjectIndexReport

log = logging.getLogger("hexlocal.service")

MAX_QUERY_CHARS = 4_000
MAX_LIMIT = 20
ProgressFn = Callable[[IngestProgress], None]


def check_query(query: str) -> str:
    if not isinstance(query, str) or not query.strip():
        raise UserInputError("the query is empty; pass the words or identifier to search for")
    if len(query) > MAX_QUERY_CHARS:
        raise UserInputError(
            f"the query is {len(query):,} characters; the limit is {MAX_QUERY_CHARS:,}. "
            "Ask about one thing at a time."
        )
    if any(ord(c) < 32 and c not in "\t\n\r" for c in query):
        raise UserInputError("the query contains control characters; pass plain text")
    return query.strip()


def check_limit(limit: int) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise UserInputError(f"limit must be a whole number from 1 to {MAX_LIMIT}, not {limit!r}")
    return limit


class Hexlocal:
    """hexlocal's use cases. Every face calls these and only formats what they return."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        *,
        embedder: Embedder | None,
        reranker: Reranker | None,
        chat: ChatModel | None,
        registry: HexRegistry,
        issues: IssueTracker | None,
        usage: StoreUsageSink,
    ) -> None:
        self.settings = settings
        self.store = store
        self.embedder = embedder
        self.reranker = reranker
        self.chat = chat
        self.registry = registry
        self.issues = issues
        self.usage = usage
        self.engine = SearchEngine(store, embedder, reranker)
        self.jobs = JobRegistry(store)
        self._startup_notices: tuple[Notice, ...] = tuple(
            Notice("setting_ignored", w) for w in settings.warnings
        )
        from hexlocal_core.curate import MemoryService

        self.memory = MemoryService(self)

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Background work for a long-lived process: resume interrupted jobs and the queue."""
        for row in await asyncio.to_thread(interrupted_jobs, self.store):
            log.info("resuming interrupted ingestion of %s %s", row["package"], row["version"])
            self._start_job(row["package"], row["version"], None)
        await self.memory.start()

    async def warm_up(self) -> None:
        """Load models now rather than on the first search (the MCP lifespan calls this)."""
        for model in (self.embedder, self.reranker):
            load = getattr(model, "ensure_loaded", None) or getattr(model, "load", None)
            if load is None:
                continue
            try:
                await asyncio.to_thread(load)
            except HexlocalError as exc:
                log.warning("model not loaded: %s", exc)

    async def aclose(self) -> None:
        await self.memory.stop()
        await self.jobs.cancel_all()
        for adapter in (self.registry, self.issues, self.chat, self.embedder):
            close = getattr(adapter, "close", None)
            if close is not None:
                try:
                    await close()
                except Exception:  # noqa: BLE001 - closing must not mask the caller's exit
                    log.debug("error closing %r", adapter, exc_info=True)
        self.store.close()

    async def __aenter__(self) -> Hexlocal:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- docs -----------------------------------------------------------------------------

    async def search_docs(
        self,
        package: str,
        query: str,
        version: str | None = None,
        *,
        limit: int = 5,
        examples_only: bool = False,
        refresh: bool = False,
        mode: str = "rerank",
        progress: ProgressFn | None = None,
    ) -> SearchResult:
        """Search one package's docs at the version the project runs, indexing it first."""
        query = check_query(query)
        limit = check_limit(limit)
        if mode == "rerank" and not self.settings.rerank_enabled:
            mode = "rrf"  # switched off on purpose: no notice owed
        prepared = await self._prepare(package, version, refresh=refresh, progress=progress)
        if prepared.waiting is not None:
            return prepared.waiting_result(query)
        outcome = await self.engine.search(
            prepared.name, query, limit=limit, mode=mode, examples_only=examples_only
        )
        return self._result(prepared, query, outcome)

    async def get_docs(
        self,
        package: str,
        identifier: str,
        version: str | None = None,
        *,
        progress: ProgressFn | None = None,
    ) -> SearchResult:
        """The docs of exactly one identifier (`Mod`, `Mod.fun/2`, `c:cb/1`, `t:t/0`)."""
        identifier = check_query(identifier)
        ident = parse_identifier(identifier)
        if ident is None:
            raise UserInputError(
                f"{identifier!r} is not an identifier; pass `Module`, `Module.fun/arity`, "
                "`c:callback/1` or `t:type/0` (use search_docs for questions)"
            )
        prepared = await self._prepare(package, version, refresh=False, progress=progress)
        if prepared.waiting is not None:
            return prepared.waiting_result(identifier)
        hits = await self.engine.exact(prepared.name, ident)
        notices: tuple[Notice, ...] = ()
        if not hits:
            near = await asyncio.to_thread(similar_titles, self.store.conn, prepared.name, ident)
            hint = f" Documented near it: {', '.join(near)}." if near else ""
            notices = (
                Notice(
                    "not_found",
                    f"{identifier} is not documented in {prepared.name} {prepared.version}.{hint}",
                ),
            )
        return self._result(prepared, identifier, SearchOutcome(hits, notices, {}))

    async def ingest(
        self,
        package: str,
        version: str | None = None,
        *,
        refresh: bool = False,
        progress: ProgressFn | None = None,
    ) -> tuple[IngestReport | None, tuple[Notice, ...]]:
        """Index a package version now (waits for the job); returns its report and notices."""
        prepared = await self._prepare(
            package, version, refresh=refresh, progress=progress, wait_s=None
        )
        return prepared.report, prepared.notices

    def ingestion_status(self, package: str | None = None) -> list[dict[str, Any]]:
        """This process's jobs (all, or the package's), else what the index holds for it."""
        if not package:
            return self.jobs.statuses()
        package = validate_package_name(package)  # a bad name is an error, never echoed whole
        job = self.jobs.get(package)
        if job is not None:
            return [job.status()]
        indexed = self.store.package(package)
        if indexed is None:
            return [{"package": package, "state": "not indexed"}]
        return [{"package": package, "state": "indexed", "version": indexed.version}]

    def diagnostics(self) -> dict[str, Any]:
        """Facts for `doctor`: the database, its schema, what it holds."""
        import apsw

        from hexlocal_core.index.migrations import SCHEMA_VERSION

        config = self.store.embedding_config()
        return {
            "database_path": str(self.store.path),
            "schema_version": self.store.schema_version,
            "schema_known": SCHEMA_VERSION,
            "sqlite": apsw.sqlite_lib_version(),
            "packages": len(self.store.packages()),
            "chunks": self.store.chunk_count(),
            "embedding_model": config.model if config else None,
            "embedding_dims": config.dims if config else None,
        }

    def list_packages(self) -> list[IndexedPackage]:
        return self.store.packages()

    # -- project docs ---------------------------------------------------------------------

    async def index_project_docs(self, paths: Sequence[Path] | None = None) -> ProjectIndexReport:
        """Index (or re-index) the project's own markdown (README.md, docs/, guides/)."""
        from hexlocal_core.project_docs import index_project_docs

        return await index_project_docs(self, paths)

    async def search_project_docs(self, query: str, *, limit: int = 5) -> SearchResult:
        from hexlocal_core.project_docs import search_project_docs

        return await search_project_docs(self, query, limit=limit)

    # -- memory -----------------------------------------------------------------------------

    async def remember(
        self,
        texts: list[str],
        *,
        package: str | None = None,
        version: str | None = None,
        tags: list[str] | None = None,
    ) -> list[dict[str, Any]]:
        return await self.memory.remember(texts, package=package, version=version, tags=tags)

    def remember_status(self, request_ids: list[str]) -> list[dict[str, Any]]:
        return self.memory.remember_status(request_ids)

    async def recall(
        self,
        query: str,
        *,
        limit: int = 5,
        package: str | None = None,
        include_deprecated: bool = False,
    ) -> list[Memory]:
        return await self.memory.recall(
            query, limit=limit, package=package, include_deprecated=include_deprecated
        )

    async def drain_memory(self, timeout: float | None = None) -> bool:
        """Wait until the curation queue is empty (tests, the CLI's `remember --wait`)."""
        return await self.memory.drain(timeout)

    # -- maintenance -------------------------------------------------------------------------

    async def drift(self, names: Sequence[str] = ()) -> list[DriftReport]:
        from hexlocal_core.maintenance import drift

        return await drift(self, names)

    async def plan_reindex(self) -> ReindexPlan:
        from hexlocal_core.maintenance import plan_reindex

        return await plan_reindex(self)

    async def reindex(
        self, *, dry_run: bool = False, progress: ReindexProgress | None = None
    ) -> ReindexReport:
        from hexlocal_core.maintenance import reindex

        return await reindex(self, dry_run=dry_run, progress=progress)

    # -- evaluation --------------------------------------------------------------------------

    async def evaluate(
        self, queries: Sequence[EvalQuery], options: EvalOptions, *, source: str
    ) -> EvalReport:
        """Run a query set through the search engine and score it (nothing is ingested)."""
        from hexlocal_core.evaluation import run_eval

        engine = self.engine
        models = {
            "embedder": engine.embedder.model_id if engine.embedder else None,
            "reranker": engine.reranker.model_id if engine.reranker else None,
        }
        return await run_eval(
            engine, self.store, queries, options=options, source=source, models=models
        )

    # -- issues and usage -------------------------------------------------------------------

    async def search_github_issues(
        self,
        query: str,
        *,
        package: str | None = None,
        repo: str | None = None,
        org: str | None = None,
        type: str | None = None,
        state: str | None = None,
        limit: int = 10,
    ) -> list[IssueHit]:
        from hexlocal_core.adapters.hex import repo_from_links
        from hexlocal_core.issues import validate_issue_query

        query = check_query(query)
        if package and not (repo or org):
            name = validate_package_name(package)
            info = await self.registry.package_info(name)
            repo = repo_from_links(info.links)
            if repo is None:
                raise NotFound(
                    f"hex.pm lists no GitHub repository for {name} (links: {dict(info.links)}); "
                    "pass repo='owner/name' instead"
                )
        q = validate_issue_query(
            IssueQuery(query, repo=repo, org=org, type=type, state=state, limit=limit)
        )
        if self.issues is None:
            raise RemoteError("GitHub issue search is not configured")
        return await self.issues.search(q)

    def get_token_usage(self, from_: str | None = None, until: str | None = None) -> UsageReport:
        start, end = parse_period(from_, until, datetime.now(UTC).date())
        return summarize(self.usage.events(start, end), start, end)

    # -- internals ------------------------------------------------------------------------

    async def _resolve(self, package: str, version: str | None) -> ResolvedVersion:
        name = validate_package_name(package)
        try:
            return await resolve_version(
                name, version, project_root=self.settings.project_root, registry=self.registry
            )
        except RemoteError as exc:
            indexed = self.store.package(name)
            if indexed is None:
                raise RemoteError(
                    f"cannot choose a version of {name}: {exc}. Pass an explicit version, or pin "
                    "it in mix.lock, to work offline."
                ) from exc
            return ResolvedVersion(
                name,
                indexed.version,
                VersionSource.INDEXED,
                notices=(
                    Notice(
                        "registry_unreachable",
                        f"hex.pm could not be reached ({exc}); answering from the indexed "
                        f"{name} {indexed.version}.",
                    ),
                ),
            )

    async def _prepare(
        self,
        package: str,
        version: str | None,
        *,
        refresh: bool,
        progress: ProgressFn | None,
        wait_s: float | None = -1.0,
    ) -> _Prepared:
        # resolve_version reads a blank version as "not given"; so must the checks below,
        # or a blank version would replace the indexed one with hex.pm's latest.
        if version is not None and not version.strip():
            version = None
        if self.embedder is not None and self.store.package(validate_package_name(package)) is None:
            model_guard(self.store, self.embedder)  # a new package means a download: refuse first
        resolved = await self._resolve(package, version)
        notices = list(self._startup_notices) + list(resolved.notices)
        indexed = self.store.package(resolved.name)
        running = self.jobs.running(resolved.name)
        if running is None and indexed is not None and not refresh:
            if indexed.version == resolved.version:
                self.jobs.collect(resolved.name)
                return _Prepared(resolved, indexed.version, tuple(notices))
            if (
                resolved.source in (VersionSource.HEX_LATEST, VersionSource.INDEXED)
                and version is None
            ):
                notices.append(_not_latest_notice(indexed, resolved))
                kept = evolve(resolved, version=indexed.version, source=VersionSource.INDEXED)
                return _Prepared(kept, indexed.version, tuple(notices))
        if self.embedder is None:
            raise ModelError(
                "no embedding model is available to index new docs; see `hexlocal models status`"
            )
        model_guard(self.store, self.embedder)  # before any download
        job = running or self._start_job(resolved.name, resolved.version, resolved)
        if progress is not None:
            _chain_progress(job, progress)
        timeout = self.settings.ingest_timeout_ms / 1000 if wait_s == -1.0 else wait_s
        report = await (self.jobs.wait(job, timeout) if timeout is not None else job.task)
        if report is None:
            return _Prepared(resolved, resolved.version, tuple(notices), waiting=job)
        self.jobs.collect(resolved.name)
        notices.extend(report.notices)
        if indexed is not None and indexed.version != report.version:
            notices.append(self._replaced_notice(indexed, resolved))
        return _Prepared(resolved, report.version, tuple(notices), report=report)

    def _start_job(self, name: str, version: str, resolved: ResolvedVersion | None) -> Job:
        async def run(on_progress: ProgressFn) -> IngestReport:
            started = time.perf_counter()
            target = resolved or await self._resolve(name, version)
            on_progress(IngestProgress(name, version, "downloading"))
            docs_url = await self._docs_html_url(name)
            request = await load_items(
                self.registry,
                target,
                project_root=self.settings.project_root,
                max_bytes=self.settings.max_docs_bytes,
                docs_html_url=docs_url,
                elixir_home=self.settings.elixir_home,
            )
            assert self.embedder is not None
            return await index_items(
                self.store,
                self.embedder,
                request,
                batch_size=self.settings.embed_batch_size,
                progress=on_progress,
                started=started,
            )

        return self.jobs.start(name, version, "auto", run)

    async def _docs_html_url(self, name: str) -> str | None:
        from hexlocal_core.versions import ELIXIR_APPS

        if name in ELIXIR_APPS:
            return None
        try:
            return (await self.registry.package_info(name)).docs_html_url
        except (RemoteError, PackageNotFound):
            return None

    def _replaced_notice(self, old: IndexedPackage, resolved: ResolvedVersion) -> Notice:
        why = {
            VersionSource.MIX_LOCK: f"which {resolved.detail or 'mix.lock'} pins",
            VersionSource.EXPLICIT: "which was asked for explicitly",
        }.get(resolved.source, f"chosen from {resolved.source.value}")
        return Notice(
            "version_replaced",
            f"Replaced indexed '{old.name}' v{old.version} with v{resolved.version}, {why}. "
            f"The index keeps one version per package and is shared by every client using "
            f"{self.settings.database_path}; another project on v{old.version} should use its own "
            "DATABASE_PATH.",
        )

    def _result(self, prepared: _Prepared, query: str, outcome: SearchOutcome) -> SearchResult:
        return SearchResult(
            package=prepared.name,
            version=prepared.version,
            query=query,
            hits=outcome.hits,
            notices=prepared.notices + outcome.notices,
            version_source=prepared.resolved.source.value,
            timings_ms=outcome.timings_ms,
        )


class _Prepared:
    """Where a docs call stands after resolution: ready at a version, or waiting on a job."""

    def __init__(
        self,
        resolved: ResolvedVersion,
        version: str,
        notices: tuple[Notice, ...],
        *,
        waiting: Job | None = None,
        report: IngestReport | None = None,
    ) -> None:
        self.resolved = resolved
        self.name = resolved.name
        self.version = version
        self.notices = notices
        self.waiting = waiting
        self.report = report

    def waiting_result(self, query: str) -> SearchResult:
        assert self.waiting is not None
        status = self.waiting.status()
        p = status.get("progress") or {}
        notice = Notice(
            "ingestion_in_progress",
            f"Indexing {self.name} {self.version} is still running ({p.get('phase', 'starting')}: "
            f"{p.get('chunks_embedded', 0)}/{p.get('chunks_total', 0)} chunks after "
            f"{status['elapsed_s']} s). It continues in the background; call again with the same "
            "arguments (or ingestion_status) to collect the results.",
        )
        return SearchResult(
            package=self.name,
            version=self.version,
            query=query,
            notices=self.notices + (notice,),
            version_source=self.resolved.source.value,
            ingestion=status,
        )


def _chain_progress(job: Job, progress: ProgressFn) -> None:
    """Forward a job's progress to one more listener (the MCP call waiting on it)."""

    async def forward() -> None:
        last = None
        while not job.done:
            if job.progress is not None and job.progress != last:
                last = job.progress
                progress(last)
            await asyncio.sleep(0.2)

    asyncio.get_running_loop().create_task(forward())


def _not_latest_notice(indexed: IndexedPackage, resolved: ResolvedVersion) -> Notice:
    return Notice(
        "indexed_version_differs",
        f"Answering from the indexed {indexed.name} {indexed.version}; hex.pm's latest stable is "
        f"{resolved.version} and nothing in the project pins {indexed.name}. Pass "
        f"version='{resolved.version}' (or refresh) to switch.",
    )


def build(
    settings: Settings | None = None,
    *,
    embedder: Embedder | None = None,
    reranker: Reranker | None = None,
    chat: ChatModel | None = None,
    registry: HexRegistry | None = None,
    issues: IssueTracker | None = None,
    load_models: bool = True,
) -> Hexlocal:
    """Wire hexlocal: settings -> store -> adapters -> service. The only composition root."""
    settings = settings or Settings.from_env()
    store = Store(Path(settings.database_path))
    usage = StoreUsageSink(store)
    if embedder is None and load_models:
        embedder = _default_embedder(settings, usage)
    if reranker is None and load_models and settings.rerank_enabled:
        reranker = _default_reranker(settings, usage)
    if chat is None and settings.ai_api_key:
        from hexlocal_core.adapters.openai_api import OpenAIChat

        chat = OpenAIChat(settings, usage=usage)
    if registry is None:
        from hexlocal_core.adapters.hex import HexClient

        registry = HexClient(settings)
    if issues is None:
        from hexlocal_core.adapters.github import GitHubIssues

        issues = GitHubIssues(settings)
    return Hexlocal(
        settings,
        store,
        embedder=embedder,
        reranker=reranker,
        chat=chat,
        registry=registry,
        issues=issues,
        usage=usage,
    )


def _default_embedder(settings: Settings, usage: StoreUsageSink) -> Embedder | None:
    try:
        if settings.uses_local_embedder:
            from hexlocal_core.adapters.local_embedder import build_local_embedder

            return build_local_embedder(settings, usage)
        from hexlocal_core.adapters.openai_api import OpenAIEmbedder

        return OpenAIEmbedder(settings, usage=usage)
    except HexlocalError as exc:
        log.warning("no embedder: %s", exc)
        return None


def _default_reranker(settings: Settings, usage: StoreUsageSink) -> Reranker | None:
    from hexlocal_core.adapters.cross_encoder import build_local_reranker

    try:
        return build_local_reranker(settings, usage)
    except HexlocalError as exc:
        log.info("no cross-encoder: %s", exc)
        return None
