"""search_docs without a package: every package the project runs, at the version it runs.

The scope is what `sync` tracks (`Syncer.states()`): mix.lock's deps and Elixir's own apps
at the project's Elixir version. Only packages indexed at that version are searched now;
the rest are named in one notice and queued for the sync worker, so a project-wide search
never waits on a download.

Ranking across packages (fair to small ones): `search/cross_package.py`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import attrs

from hexlocal_core.bounds import MAX_SEARCH_PACKAGES, check_limit, check_mode, check_query
from hexlocal_core.errors import UserInputError
from hexlocal_core.model import (
    Notice,
    PackageState,
    ResolvedMode,
    SearchMode,
    SearchResult,
    SyncState,
)
from hexlocal_core.notice_codes import NoticeCode
from hexlocal_core.screening import screen_search
from hexlocal_core.search.cross_package import search_many
from hexlocal_core.search.engine import SearchEngine
from hexlocal_core.search.notices import keyword_only
from hexlocal_core.threads import in_worker
from hexlocal_core.usecases.diagnostics import model_missing
from hexlocal_core.usecases.local_sources import LocalSources
from hexlocal_core.usecases.sync import Syncer
from hexlocal_core.usecases.sync_plan import KEYWORD_ONLY
from hexlocal_core.versions import ELIXIR_APPS, validate_package_name

# SearchResult.package of a project-wide answer; each hit names its own package@version.
ALL_PACKAGES = "project dependencies"
# ...and its version_source: the lock's packages, and also Elixir's and OTP's apps and the
# project's own, none of which mix.lock pins.
PROJECT_VERSIONS = "what the project runs"
# How many packages one notice names before "and N more" (a 60-package lock stays short).
NOTICE_NAMES = 12
# States the sync worker will take up when asked again (queued rows may have no worker in
# this process: a CLI run, or a server started with HEXLOCAL_SYNC_ON_START=false).
_QUEUEABLE = (SyncState.NOT_INDEXED, SyncState.OUTDATED, SyncState.QUEUED)


@attrs.frozen
class _Scope:
    searchable: tuple[PackageState, ...]  # indexed at the version the project runs
    missing: tuple[PackageState, ...]  # the project runs them; not indexed at that version
    unknown: tuple[str, ...]  # asked for by name, neither locked nor indexed


class ProjectSearch:
    def __init__(
        self,
        syncer: Syncer,
        engine: SearchEngine,
        *,
        rerank_enabled: bool,
        local: LocalSources,
    ) -> None:
        self._syncer = syncer
        self._engine = engine
        self._rerank_enabled = rerank_enabled
        self._local = local

    async def search(
        self, query: str, *, packages: Sequence[str] | None, limit: int, mode: SearchMode | str
    ) -> SearchResult:
        started = time.perf_counter()
        query = check_query(query)
        limit = check_limit(limit)
        wanted = _wanted(packages)
        # Checked here: an empty scope never reaches the engine.
        ran = ResolvedMode.of(check_mode(mode), rerank_enabled=self._rerank_enabled)
        scope = _scope(await self._syncer.states(), wanted)
        notices: list[Notice] = []
        missing = scope.missing
        if any(s.state in _QUEUEABLE for s in missing):
            report = await self._syncer.sync(
                wait=False, progress=None, retry_failed=False, fresh=False
            )
            missing = _scope(report.packages, wanted).missing
        if missing:
            notices.append(_missing_notice(missing, len(scope.searchable) + len(missing)))
        if scope.unknown:
            notices.append(_unknown_notice(scope.unknown))
        names = [s.name for s in scope.searchable]
        embedding = _embedding_notice(scope.searchable, model_missing(self._engine.embedder))
        if embedding is not None:
            notices.append(embedding)
        outcome = await search_many(self._engine, names, query, limit=limit, mode=ran.used)
        hits = await in_worker(lambda: self._local.annotate(outcome.hits))
        notices.extend(outcome.notices)
        if not scope.searchable and not missing and not scope.unknown:
            notices.append(_empty_scope_notice())
        elif not hits and scope.searchable:
            shown = ", ".join(names[:NOTICE_NAMES])
            notices.append(
                Notice(
                    NoticeCode.NO_RESULTS,
                    f"Nothing in the indexed docs of {shown} matched {query[:80]!r}. Try the "
                    "packages' own vocabulary (module or function names).",
                )
            )
        total_ms = round((time.perf_counter() - started) * 1000, 2)
        result = SearchResult(
            package=ALL_PACKAGES,
            version=None,
            query=query,
            hits=hits,
            notices=tuple(notices),
            version_source=PROJECT_VERSIONS,
            # The engine's stages summed over the packages, then the fusion's own.
            timings_ms={
                **outcome.timings_ms,
                "total": total_ms,
                "packages": float(len(scope.searchable)),
            },
            mode=ran,
        )
        return screen_search(result)


def _wanted(packages: Sequence[str] | None) -> tuple[str, ...] | None:
    if packages is None:
        return None
    if len(packages) > MAX_SEARCH_PACKAGES:
        raise UserInputError(
            f"at most {MAX_SEARCH_PACKAGES} packages in one search; leave packages out to "
            "search every package the project runs"
        )
    names = tuple(dict.fromkeys(validate_package_name(p) for p in packages))
    return names or None  # an empty list means "no restriction", as leaving it out does


def _scope(states: Sequence[PackageState], wanted: tuple[str, ...] | None) -> _Scope:
    by_name = {s.name: s for s in states}
    if wanted is None:
        # Elixir's apps indexed while HEXLOCAL_SYNC_ELIXIR=false (so not "locked") are
        # still the project's language: searched at the version indexed.
        chosen = [s for s in states if s.locked or s.name in ELIXIR_APPS]
        unknown: tuple[str, ...] = ()
    else:
        chosen = [by_name[n] for n in wanted if n in by_name]
        unknown = tuple(n for n in wanted if n not in by_name)
    searchable = tuple(s for s in chosen if is_searchable(s))
    missing = tuple(s for s in chosen if not is_searchable(s))
    return _Scope(searchable, missing, unknown)


def is_searchable(state: PackageState) -> bool:
    """Indexed, or being indexed with its chunks already in at the version it runs (the
    vectors come after the chunks: the keyword arm answers meanwhile).

    Whatever the job's phase: sync's second pass finishes a package from its stored
    chunks and starts at `resolving`, so a package searched a moment before would drop
    out of the scope, named "not indexed", until the job reached `embedding`. The stored
    version stays whole while a job rewrites it (one transaction)."""
    if state.state is SyncState.INDEXED:
        return True
    return (
        state.state is SyncState.INDEXING
        and state.chunks > 0
        and state.indexed_version == state.locked_version
    )


def _embedding_notice(scope: Sequence[PackageState], missing: str | None) -> Notice | None:
    """Which searched packages answered without all their vectors, or None; `missing`:
    why the embedding model cannot be had (then no vectors are on their way)."""
    partial = [s.name for s in scope if s.state is SyncState.INDEXING or s.reason == KEYWORD_ONLY]
    if not partial:
        return None
    shown = ", ".join(partial[:NOTICE_NAMES])
    more = f" and {len(partial) - NOTICE_NAMES} more" if len(partial) > NOTICE_NAMES else ""
    if missing is not None:
        return keyword_only(f"{shown}{more}", missing, plural=len(partial) > 1)
    return Notice(
        NoticeCode.EMBEDDING_IN_PROGRESS,
        f"{shown}{more} answered by keyword while their vectors are made; the ranking "
        "improves as they arrive, in the background.",
    )


def _missing_notice(missing: Sequence[PackageState], total: int) -> Notice:
    """The packages left out, grouped by why, names only: the reasons are
    list_indexed_packages's to give, and this notice comes with every project-wide answer."""
    groups: dict[str, list[PackageState]] = {}
    for state in missing:
        groups.setdefault(_GROUP.get(state.state, "not indexed"), []).append(state)
    parts = [
        f"{len(states)} {group} ({_names(states)}): {_NEXT[group]}"
        for group, states in sorted(groups.items(), key=lambda g: _ORDER.index(g[0]))
    ]
    return Notice(
        NoticeCode.PACKAGES_NOT_INDEXED,
        f"{len(missing)} of the project's {total} packages are not searched yet. "
        + "; ".join(parts)
        + ".",
    )


_GROUP = {
    SyncState.QUEUED: "queued",
    SyncState.INDEXING: "queued",
    SyncState.FAILED: "failed",
    SyncState.SKIPPED: "skipped",
}
_ORDER = ("queued", "not indexed", "failed", "skipped")
_NEXT = {
    "queued": "they are indexed in the background; search again later, or call search_docs "
    "with the package to index it now",
    "not indexed": "call search_docs with the package to index it now",
    "failed": "list_indexed_packages (`hexlocal list`) says why; `hexlocal sync` tries them again",
    "skipped": "list_indexed_packages (`hexlocal list`) says why",
}


def _names(states: Sequence[PackageState]) -> str:
    shown = [_name(s) for s in states[:NOTICE_NAMES]]
    if len(states) > NOTICE_NAMES:
        shown.append(f"and {len(states) - NOTICE_NAMES} more")
    return ", ".join(shown)


def _name(state: PackageState) -> str:
    name = f"{state.name} {state.locked_version}" if state.locked_version else state.name
    if state.state is SyncState.INDEXING and state.chunks_total:
        return f"{name}, {state.chunks_embedded}/{state.chunks_total} chunks"
    return name


def _unknown_notice(names: Sequence[str]) -> Notice:
    return Notice(
        NoticeCode.PACKAGE_NOT_IN_PROJECT,
        f"{', '.join(names)}: not in the project's mix.lock and not indexed, so not searched; "
        "call search_docs with package=NAME to index and search it.",
    )


def _empty_scope_notice() -> Notice:
    return Notice(
        NoticeCode.NO_PROJECT_PACKAGES,
        "No package to search: no mix.lock (with Hex deps) at or above the project root and "
        "nothing indexed. Set PROJECT_ROOT to the project's folder, or pass a package.",
    )
