"""The facade every face uses (MCP server, CLI, Python callers), and `build`, the one
function that wires adapters to it. Tests call `build` with fakes for remote ports.

`Hexlocal` holds the ports and has one method per use case, each delegating to a module
of `hexlocal_core.usecases` (or `memory.service`) with the ports that use case needs. It
exposes no internals: a face that needs a fact asks a method (`diagnostics()`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hexlocal_core.adapters.default_models import default_chat, default_reranker, served_embedder
from hexlocal_core.bounds import DEFAULT_DIFF_LIMIT
from hexlocal_core.config import Settings
from hexlocal_core.errors import HexlocalError
from hexlocal_core.index.seam import DocsStore, UsageRecords
from hexlocal_core.ingest.ingestor import Ingestor, SourcePaths
from hexlocal_core.ingest.otp_source import OtpSource, otp_paths
from hexlocal_core.memory.service import MemoryPorts, MemoryService
from hexlocal_core.model import (
    Diagnostics,
    DownloadProgress,
    IndexedPackage,
    IngestReport,
    IssueHit,
    JobStatus,
    Memory,
    Notice,
    PackageState,
    ProgressFn,
    SearchMode,
    SearchResult,
)
from hexlocal_core.notice_codes import NoticeCode
from hexlocal_core.ports import (
    ChatModel,
    Embedder,
    HexRegistry,
    IssueTracker,
    OtpDocsSource,
    Reranker,
    Resource,
)
from hexlocal_core.search.engine import SearchEngine
from hexlocal_core.store_choice import open_store
from hexlocal_core.usage import UsageReport
from hexlocal_core.usecases import drift as drift_uc
from hexlocal_core.usecases import evaluation as evaluation_uc
from hexlocal_core.usecases import issues as issues_uc
from hexlocal_core.usecases import packages as packages_uc
from hexlocal_core.usecases import project_docs as project_docs_uc
from hexlocal_core.usecases import reindex as reindex_uc
from hexlocal_core.usecases import usage as usage_uc
from hexlocal_core.usecases.diff import VersionDiff
from hexlocal_core.usecases.docs import Docs
from hexlocal_core.usecases.ingest import Ingestion
from hexlocal_core.usecases.local_sources import LocalSources
from hexlocal_core.usecases.locate import Locator
from hexlocal_core.usecases.project_search import ProjectSearch
from hexlocal_core.usecases.sync import Syncer, SyncProgress, SyncReport
from hexlocal_core.usecases.upgrade_impact import UpgradeImpact, UpgradeReport
from hexlocal_core.usecases.version_differ import VersionDiffer

if TYPE_CHECKING:
    from hexlocal_core.evaluation import EvalOptions, EvalQuery, EvalReport
    from hexlocal_core.usecases.diagnostics import ModelDownload
    from hexlocal_core.usecases.drift import DriftReport
    from hexlocal_core.usecases.project_docs import ProjectIndexReport
    from hexlocal_core.usecases.reindex import ReindexPlan, ReindexProgress, ReindexReport

log = logging.getLogger("hexlocal.service")


class Hexlocal:
    """hexlocal's use cases. Every face calls these and only formats what they return."""

    def __init__(
        self,
        settings: Settings,
        store: DocsStore,
        *,
        embedder: Embedder | None,
        reranker: Reranker | None,
        chat: ChatModel | None,
        registry: HexRegistry,
        issues: IssueTracker | None,
        usage: UsageRecords,
        otp_docs: OtpDocsSource | None,
    ) -> None:
        self._settings = settings
        self._store = store
        self._embedder = embedder
        self._reranker = reranker
        self._chat = chat
        self._registry = registry
        self._issues = issues
        self._usage = usage
        self._otp_docs = otp_docs
        self._engine = SearchEngine(store, embedder, reranker)
        # Texts handed to the embedder per call; progress and cancellation move between
        # calls, and the adapter batches each call its own way
        # (docs/decisions/0006-ingestion-and-chunking.md).
        self._slice = settings.embed_batch_size
        paths = SourcePaths(settings.project_root, settings.elixir_home, settings.max_docs_bytes)
        otp = OtpSource(otp_docs, otp_paths(settings))
        self._ingestor = Ingestor(store, embedder, registry, paths, slice_size=self._slice, otp=otp)
        self._ingestion = Ingestion(
            store,
            embedder,
            registry,
            self._ingestor,
            project_root=settings.project_root,
            database_path=settings.database_path,
            timeout_s=settings.ingest_timeout_ms / 1000,
            startup_notices=tuple(Notice(NoticeCode.SETTING_IGNORED, w) for w in settings.warnings),
            answer_while_embedding=settings.answer_while_embedding,
        )
        local = LocalSources(settings.project_root)
        locator = Locator(
            store, project_root=settings.project_root, elixir_home=settings.elixir_home
        )
        self._docs = Docs(
            self._ingestion,
            self._engine,
            store,
            rerank_enabled=settings.rerank_enabled,
            local=local,
            locator=locator,
            otp=otp,
        )
        self._differ = VersionDiffer(
            store,
            registry,
            project_root=settings.project_root,
            max_docs_bytes=settings.max_docs_bytes,
            otp=otp,
        )
        self._upgrade = UpgradeImpact(
            registry, settings.project_root, settings.max_docs_bytes, otp=otp
        )
        self._memory = MemoryService(MemoryPorts(settings, store, embedder, chat))
        self._syncer = Syncer(
            store,
            self._ingestion,
            project_root=settings.project_root,
            include_elixir=settings.sync_elixir,
            otp=otp if settings.sync_otp else None,
        )
        self._project_search = ProjectSearch(
            self._syncer, self._engine, rerank_enabled=settings.rerank_enabled, local=local
        )

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Background work for a long-lived process: resume interrupted jobs, the curation
        queue, and (unless HEXLOCAL_SYNC_ON_START=false) sync the project's packages."""
        await self._ingestion.resume()
        await self._memory.start()
        if self._settings.sync_on_start:
            self._syncer.start_background()

    async def warm_up(self) -> None:
        """Load models now rather than on the first search (the MCP lifespan calls this)."""
        for model in (self._embedder, self._reranker):
            if model is None:
                continue
            try:
                await model.warm_up()
            except HexlocalError as exc:
                log.warning("model not loaded: %s", exc)

    async def aclose(self) -> None:
        """Stops the curation worker, cancels ingestion jobs, closes adapters and the store."""
        await self._memory.stop()
        await self._syncer.aclose()  # before the jobs: its row goes back to the queue
        await self._ingestion.aclose()
        # The facade owns every adapter it holds, those handed to build() included (as an
        # aiohttp session owns its connector): closing it releases them all.
        adapters: tuple[Resource | None, ...] = (
            self._registry,
            self._otp_docs,
            self._issues,
            self._chat,
            self._embedder,
            self._reranker,
        )
        for adapter in adapters:
            if adapter is None:
                continue
            try:
                await adapter.aclose()
            except Exception:  # noqa: BLE001 - closing must not mask the caller's exit
                log.debug("error closing %r", adapter, exc_info=True)
        self._store.close()

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
        mode: SearchMode | str = SearchMode.RERANK,
        progress: ProgressFn | None = None,
    ) -> SearchResult:
        """Search one package's docs at the version the project runs, indexing it first."""
        return await self._docs.search(
            package,
            query,
            version,
            limit=limit,
            examples_only=examples_only,
            refresh=refresh,
            mode=mode,
            progress=progress,
        )

    async def search_project_deps(
        self,
        query: str,
        *,
        packages: Sequence[str] | None = None,
        limit: int = 5,
        mode: SearchMode | str = SearchMode.RERANK,
    ) -> SearchResult:
        """Search every package the project runs (mix.lock's deps at their locked versions,
        Elixir's apps at the project's Elixir version), or only `packages`; each hit names
        its package@version. Packages not indexed at that version are named in one notice
        and queued for the sync worker: this call never waits on a download."""
        return await self._project_search.search(query, packages=packages, limit=limit, mode=mode)

    async def get_docs(
        self,
        package: str | None,
        identifier: str,
        version: str | None = None,
        *,
        progress: ProgressFn | None = None,
    ) -> SearchResult:
        """The docs of exactly one identifier (`Mod`, `Mod.fun/2`, `c:cb/1`, `t:t/0`,
        `:ets.new/2`); without a package, the one its module belongs to."""
        return await self._docs.get(package, identifier, version, progress=progress)

    async def ingest(
        self,
        package: str,
        version: str | None = None,
        *,
        refresh: bool = False,
        progress: ProgressFn | None = None,
    ) -> tuple[IngestReport | None, tuple[Notice, ...]]:
        """Index a package version now (waits for the job); returns its report and notices."""
        prepared = await self._ingestion.prepare(
            package, version, refresh=refresh, progress=progress, wait_s=None
        )
        return prepared.report, prepared.notices

    async def diff_versions(
        self,
        package: str,
        from_version: str | None = None,
        to_version: str | None = None,
        *,
        kind: str | None = None,
        limit: int = DEFAULT_DIFF_LIMIT,
        offset: int = 0,
    ) -> VersionDiff:
        """What changed in `package` between two versions: added, removed, deprecated,
        signature changed, docs changed, by module. `from_version` defaults to what the
        project runs (else the indexed version), `to_version` to hex.pm's latest stable.
        Both are parsed from their docs tarballs in memory; the index is not touched.
        One page: every kind's count, then `limit` entries per kind (or of `kind`) from
        `offset`."""
        return await self._differ.diff(
            package, from_version, to_version, kind=kind, limit=limit, offset=offset
        )

    async def upgrade_impact(
        self, package: str, to_version: str | None = None, *, from_version: str | None = None
    ) -> UpgradeReport:
        """What changes for the project's own code when `package` moves from what it runs
        to `to_version` (default: latest stable): see `usecases/upgrade_impact.py`."""
        return await self._upgrade.impact(package, to_version, from_version=from_version)

    def ingestion_status(self, package: str | None = None) -> list[JobStatus]:
        """This process's jobs (all, or the package's), else what the index holds for it."""
        return self._ingestion.status(package)

    def diagnostics(self) -> Diagnostics:
        """Facts for `doctor` and logs: the database, its schema, what it holds."""
        return packages_uc.diagnostics(
            self._store, project_root=self._settings.project_root, warnings=self._settings.warnings
        )

    def list_packages(self) -> list[IndexedPackage]:
        """What the index holds (see `project_packages` for what the project runs)."""
        return packages_uc.list_packages(self._store)

    async def project_packages(self) -> list[PackageState]:
        """Every package the project runs (mix.lock's deps, Elixir's own apps) with its
        state: indexed, indexing n/m, queued, failed + why, skipped + why, outdated, not
        indexed; then every indexed package the project does not run (`kind` None)."""
        return await self._syncer.states()

    async def sync(
        self, *, wait: bool = False, progress: SyncProgress | None = None, retry_failed: bool = True
    ) -> SyncReport:
        """Queue every package the project runs that is not indexed at its version, and
        index them one at a time in the background; `wait` returns when the queue is
        empty. `progress` gets each package's state as it moves. Resumable: what is left
        when the process ends is done by the next `sync` (or `start`)."""
        return await self._syncer.sync(wait=wait, progress=progress, retry_failed=retry_failed)

    # -- project docs ---------------------------------------------------------------------

    async def index_project_docs(self, paths: Sequence[Path] | None = None) -> ProjectIndexReport:
        """Index (or re-index) the project's own markdown (README.md, docs/, guides/)."""
        return await project_docs_uc.index_project_docs(
            self._store, self._embedder, self._settings.project_root, paths, slice_size=self._slice
        )

    async def search_project_docs(self, query: str, *, limit: int = 5) -> SearchResult:
        return await project_docs_uc.search_project_docs(
            self._engine,
            self._store,
            self._ingestion,
            self._settings.project_root,
            query,
            limit=limit,
            rerank_enabled=self._settings.rerank_enabled,
        )

    # -- memory -----------------------------------------------------------------------------

    async def remember(
        self,
        texts: list[str],
        *,
        package: str | None = None,
        version: str | None = None,
        tags: list[str] | None = None,
    ) -> list[dict[str, Any]]:
        return await self._memory.remember(texts, package=package, version=version, tags=tags)

    def remember_status(self, request_ids: list[str]) -> list[dict[str, Any]]:
        return self._memory.remember_status(request_ids)

    async def recall(
        self,
        query: str,
        *,
        limit: int = 5,
        package: str | None = None,
        include_deprecated: bool = False,
    ) -> list[Memory]:
        return await self._memory.recall(
            query, limit=limit, package=package, include_deprecated=include_deprecated
        )

    async def drain_memory(self, timeout: float | None = None) -> bool:
        """Wait until the curation queue is empty (tests, the CLI's `remember --wait`)."""
        return await self._memory.drain(timeout)

    # -- maintenance -------------------------------------------------------------------------

    async def drift(self, names: Sequence[str] = ()) -> list[DriftReport]:
        return await drift_uc.drift(self._store, self._ingestor, self._settings.project_root, names)

    async def plan_reindex(self) -> ReindexPlan:
        return await reindex_uc.plan_reindex(self._store, self._embedder)

    async def reindex(
        self, *, dry_run: bool = False, progress: ReindexProgress | None = None
    ) -> ReindexReport:
        return await reindex_uc.reindex(
            self._store,
            self._embedder,
            batch_size=self._settings.embed_batch_size,
            dry_run=dry_run,
            progress=progress,
        )

    # -- evaluation --------------------------------------------------------------------------

    async def evaluate(
        self, queries: Sequence[EvalQuery], options: EvalOptions, *, source: str
    ) -> EvalReport:
        """Run a query set through the search engine and score it (nothing is ingested)."""
        return await evaluation_uc.evaluate(
            self._engine,
            self._store,
            self._embedder,
            self._reranker,
            queries,
            options,
            source=source,
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
        return await issues_uc.search_github_issues(
            self._registry,
            self._issues,
            query,
            package=package,
            repo=repo,
            org=org,
            type=type,
            state=state,
            limit=limit,
        )

    def get_token_usage(self, from_: str | None = None, until: str | None = None) -> UsageReport:
        return usage_uc.get_token_usage(self._usage, from_, until)

    # -- model downloads ----------------------------------------------------------------------

    def model_downloads(self) -> tuple[ModelDownload, ...]:
        """Where each local model's download stands; the MCP face polls it while a call
        waits, so a first answer that downloads a model shows progress."""
        from hexlocal_core.usecases import diagnostics as diagnostics_uc

        models = {"embedder": self._embedder, "reranker": self._reranker}
        return diagnostics_uc.model_downloads(models)


def build(
    settings: Settings | None = None,
    *,
    embedder: Embedder | None = None,
    reranker: Reranker | None = None,
    chat: ChatModel | None = None,
    registry: HexRegistry | None = None,
    issues: IssueTracker | None = None,
    otp_docs: OtpDocsSource | None = None,
    load_models: bool = True,
    model_progress: DownloadProgress | None = None,
) -> Hexlocal:
    """Wire hexlocal: settings -> store -> adapters -> service. The only composition root.

    `model_progress(message, done, total)` hears a local model's first-need download (the
    CLI prints it on stderr; the MCP face polls `model_downloads()` instead)."""
    settings = settings or Settings.from_env()
    store = open_store(settings)
    served = settings.served_with(_indexed_model(store))
    usage = store.usage
    if embedder is None and load_models:
        embedder = served_embedder(settings, served, usage, model_progress)
    settings = served
    if reranker is None and load_models and settings.rerank_enabled:
        reranker = default_reranker(settings, usage, model_progress)
    if chat is None:
        chat = default_chat(settings, usage)
    if registry is None:
        from hexlocal_core.adapters.hex import HexClient

        registry = HexClient(settings)
    if otp_docs is None:
        from hexlocal_core.adapters.otp_docs import OtpDocsClient

        otp_docs = OtpDocsClient(settings)
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
        otp_docs=otp_docs,
    )


def _indexed_model(store: DocsStore) -> str | None:
    config = store.embedding_config()
    return config.model if config is not None else None
