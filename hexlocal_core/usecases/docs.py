"""search_docs and get_docs: one package's docs at the version the project runs."""

from __future__ import annotations

from hexlocal_core.bounds import check_limit, check_query
from hexlocal_core.errors import UserInputError
from hexlocal_core.index.seam import DocsStore
from hexlocal_core.ingest.jobs import ProgressFn
from hexlocal_core.ingest.pipeline import in_worker
from hexlocal_core.model import JobStatus, Notice, SearchResult
from hexlocal_core.screening import screen_search
from hexlocal_core.search.engine import SearchEngine, SearchOutcome
from hexlocal_core.search.exact import parse_identifier, similar_titles
from hexlocal_core.usecases.ingest import Indexing, Prepared


class Docs:
    def __init__(
        self, indexing: Indexing, engine: SearchEngine, store: DocsStore, *, rerank_enabled: bool
    ) -> None:
        self._indexing = indexing
        self._engine = engine
        self._store = store
        self._rerank_enabled = rerank_enabled

    async def search(
        self,
        package: str,
        query: str,
        version: str | None,
        *,
        limit: int,
        examples_only: bool,
        refresh: bool,
        mode: str,
        progress: ProgressFn | None,
    ) -> SearchResult:
        query = check_query(query)
        limit = check_limit(limit)
        if mode == "rerank" and not self._rerank_enabled:
            mode = "rrf"  # switched off on purpose: no notice owed
        prepared = await self._indexing.prepare(
            package, version, refresh=refresh, progress=progress, searchable=True
        )
        if prepared.waiting is not None:
            return waiting_result(prepared, prepared.waiting, query)
        outcome = await self._engine.search(
            prepared.name, query, limit=limit, mode=mode, examples_only=examples_only
        )
        return _result(prepared, query, outcome)

    async def get(
        self, package: str, identifier: str, version: str | None, *, progress: ProgressFn | None
    ) -> SearchResult:
        identifier = check_query(identifier)
        ident = parse_identifier(identifier)
        if ident is None:
            raise UserInputError(
                f"{identifier!r} is not an identifier; pass `Module`, `Module.fun/arity`, "
                "`c:callback/1` or `t:type/0` (use search_docs for questions)"
            )
        prepared = await self._indexing.prepare(
            package, version, refresh=False, progress=progress, searchable=True
        )
        if prepared.waiting is not None:
            return waiting_result(prepared, prepared.waiting, identifier)
        hits = await self._engine.exact(prepared.name, ident)
        notices: tuple[Notice, ...] = ()
        if not hits:
            name, conn_of = prepared.name, self._store
            near = await in_worker(lambda: similar_titles(conn_of.session().chunks, name, ident))
            hint = f" Documented near it: {', '.join(near)}." if near else ""
            notices = (
                Notice(
                    "not_found",
                    f"{identifier} is not documented in {prepared.name} {prepared.version}.{hint}",
                ),
            )
        return _result(prepared, identifier, SearchOutcome(hits, notices, {}))


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
        "ingestion_in_progress",
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
