"""search_docs and get_docs: one package's docs at the version the project runs."""

from __future__ import annotations

from attrs import evolve

from hexlocal_core.bounds import check_limit, check_mode, check_query
from hexlocal_core.errors import NotFound, UserInputError
from hexlocal_core.index.seam import DocsStore
from hexlocal_core.ingest.otp_source import OtpSource
from hexlocal_core.model import (
    JobStatus,
    Notice,
    ProgressFn,
    ResolvedMode,
    SearchMode,
    SearchResult,
    VersionSource,
)
from hexlocal_core.notice_codes import NoticeCode
from hexlocal_core.screening import screen_search
from hexlocal_core.search.cross_package import search_many
from hexlocal_core.search.engine import SearchEngine, SearchOutcome
from hexlocal_core.search.exact import Identifier, parse_identifier, similar_titles
from hexlocal_core.threads import in_worker
from hexlocal_core.usecases.ingest import Ingestion, Prepared
from hexlocal_core.usecases.local_sources import LocalSources
from hexlocal_core.usecases.locate import OTP_ALIASES, Locator, OtpOwners

OTP_PACKAGES = "Erlang/OTP"  # SearchResult.package of a search of every OTP app
# What the vector arm's state makes of a ranking: nothing to an exact lookup's answer.
_VECTOR_NOTICES = frozenset({NoticeCode.EMBEDDING_IN_PROGRESS, NoticeCode.KEYWORD_ONLY})


class Docs:
    def __init__(
        self,
        ingestion: Ingestion,
        engine: SearchEngine,
        store: DocsStore,
        *,
        rerank_enabled: bool,
        local: LocalSources,
        locator: Locator,
        otp: OtpSource | None = None,
    ) -> None:
        self._ingestion = ingestion
        self._engine = engine
        self._store = store
        self._rerank_enabled = rerank_enabled
        self._local = local
        self._locator = locator
        self._otp = otp

    async def search(
        self,
        package: str,
        query: str,
        version: str | None,
        *,
        limit: int,
        examples_only: bool,
        refresh: bool,
        mode: SearchMode | str,
        progress: ProgressFn | None,
    ) -> SearchResult:
        query = check_query(query)
        limit = check_limit(limit)
        ran = ResolvedMode.of(check_mode(mode), rerank_enabled=self._rerank_enabled)
        located: tuple[Notice, ...] = ()
        if package.strip().lower() in OTP_ALIASES:
            ident = parse_identifier(query)
            if ident is None or not ident.erlang:
                return await self._search_otp(query, limit=limit, mode=ran, progress=progress)
            package, located = await self._owner(package, ident, query)
        prepared = await self._ingestion.prepare(
            package, version, refresh=refresh, progress=progress, searchable=True
        )
        prepared = evolve(prepared, notices=located + prepared.notices)
        if prepared.waiting is not None:
            return evolve(waiting_result(prepared, prepared.waiting, query), mode=ran)
        outcome = await self._engine.search(
            prepared.name, query, limit=limit, mode=ran.used, examples_only=examples_only
        )
        return evolve(_result(prepared, query, await self._located(outcome)), mode=ran)

    async def get(
        self,
        package: str | None,
        identifier: str,
        version: str | None,
        *,
        progress: ProgressFn | None,
    ) -> SearchResult:
        identifier = check_query(identifier)
        ident = parse_identifier(identifier)
        if ident is None:
            raise UserInputError(
                f"{identifier!r} is not an identifier; pass `Module`, `Module.fun/arity`, "
                "`c:callback/1`, `t:type/0` or an Erlang one (`:ets.new/2`, `ets:new/2`); "
                "use search_docs for questions"
            )
        package, found = await self._owner(package, ident, identifier)
        prepared = await self._ingestion.prepare(
            package, version, refresh=False, progress=progress, searchable=True
        )
        # An exact lookup reads no vectors: that they are still being made (or cannot be)
        # says nothing about this answer, and would send an agent back to ask again.
        kept = tuple(n for n in prepared.notices if n.code not in _VECTOR_NOTICES)
        prepared = evolve(prepared, notices=found + kept)
        if prepared.waiting is not None:
            return waiting_result(prepared, prepared.waiting, identifier)
        hits = await self._engine.exact(prepared.name, ident)
        notices: tuple[Notice, ...] = ()
        if not hits:
            name, conn_of = prepared.name, self._store
            near = await in_worker(lambda: similar_titles(conn_of.session().chunks, name, ident))
            hint = f" Documented near it: {', '.join(near)}." if near else ""
            notices += (
                Notice(
                    NoticeCode.NOT_FOUND,
                    f"{identifier} is not documented in {prepared.name} {prepared.version}.{hint}",
                ),
            )
        return _result(prepared, identifier, await self._located(SearchOutcome(hits, notices, {})))

    async def _owner(
        self, package: str | None, ident: Identifier, identifier: str
    ) -> tuple[str, tuple[Notice, ...]]:
        """The package to read: the one asked for, else the one its module belongs to
        (`erlang` and `otp` mean the OTP application that holds it)."""
        alias = package is not None and package.strip().lower() in OTP_ALIASES
        if package is not None and package.strip() and not alias:
            return package, ()
        otp = await self._otp_modules()
        located = await in_worker(lambda: self._locator.locate(ident, otp=otp, only_otp=alias))
        if located.owners:
            owner = located.owners[0]
            why = Notice(
                NoticeCode.PACKAGE_LOCATED,
                f"{ident} is documented in {owner.package} ({owner.origin}).",
            )
            return owner.package, (why, *located.notices)
        near = f" Modules spelt like it: {', '.join(located.near)}." if located.near else ""
        where = "any OTP application" if alias else "the project's packages, Elixir or OTP"
        raise NotFound(
            f"no package found for {identifier}: its module is in none of {where}.{near} "
            "Pass package= if you know it."
        )

    async def _search_otp(
        self, query: str, *, limit: int, mode: ResolvedMode, progress: ProgressFn | None
    ) -> SearchResult:
        """`erlang`/`otp` with a question: every OTP application the project uses, searched
        together (each indexed first, as a search of it would)."""
        if self._otp is None:
            raise NotFound("Erlang/OTP docs are not available in this configuration")
        names: list[str] = []
        notices: list[Notice] = []
        for app, _ in await self._otp.project_apps():
            prepared = await self._ingestion.prepare(
                app, None, refresh=False, progress=progress, searchable=True
            )
            notices.extend(n for n in prepared.notices if n not in notices)
            if prepared.waiting is None:
                names.append(app)
        outcome = await search_many(self._engine, names, query, limit=limit, mode=mode.used)
        result = SearchResult(
            package=OTP_PACKAGES,
            version=None,
            query=query,
            hits=(await self._located(outcome)).hits,
            notices=(*notices, *outcome.notices),
            version_source=VersionSource.OTP.value,
            timings_ms=outcome.timings_ms,
            mode=mode,
        )
        return screen_search(result)

    async def _otp_modules(self) -> OtpOwners:
        owners = await self._otp.owners() if self._otp is not None else None
        return owners.owners if owners is not None else {}

    async def _located(self, outcome: SearchOutcome) -> SearchOutcome:
        """The outcome with each hit's local file in deps/, where the project has it."""
        hits = await in_worker(lambda: self._local.annotate(outcome.hits))
        return evolve(outcome, hits=hits)


def _result(prepared: Prepared, query: str, outcome: SearchOutcome) -> SearchResult:
    result = SearchResult(
        package=prepared.name,
        version=prepared.version,
        query=query,
        hits=outcome.hits,
        notices=prepared.notices + outcome.notices,
        version_source=prepared.resolved.source.value,
        timings_ms=outcome.timings_ms,
    )
    return screen_search(result)


def waiting_result(prepared: Prepared, status: JobStatus, query: str) -> SearchResult:
    phase = status.phase or "starting"
    notice = Notice(
        NoticeCode.INGESTION_IN_PROGRESS,
        f"Indexing {prepared.name} {prepared.version} is still running ({phase}: "
        f"{status.chunks_embedded}/{status.chunks_total} chunks after {status.elapsed_s} s). "
        "It continues in the background; call again with the same arguments (or "
        "ingestion_status) to collect the results.",
    )
    return SearchResult(
        package=prepared.name,
        version=prepared.version,
        query=query,
        notices=prepared.notices + (notice,),
        version_source=prepared.resolved.source.value,
        ingestion=status,
    )
