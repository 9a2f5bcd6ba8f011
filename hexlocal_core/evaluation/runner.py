"""run_eval: every query through every selected mode, judged by the eval's own rules.

Before searching, each query gets a status:

* NOT_INDEXED: its package is not in the index, or another version is (scores would
  measure the wrong docs);
* BROKEN: its expectation resolves to no stored chunk (a typo, a ref the parser drops, or
  a query set written for other docs); it is reported and left out of every score;
* OK: it is searched once per mode and scored.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Protocol

from attrs import asdict, field, frozen

from hexlocal_core.errors import UserInputError
from hexlocal_core.evaluation.fingerprint import CorpusFingerprint, fingerprint
from hexlocal_core.evaluation.metrics import ModeScore, score_runs
from hexlocal_core.evaluation.queries import KINDS, EvalQuery
from hexlocal_core.evaluation.relevance import relevant_ids
from hexlocal_core.index.seam import DocsStore
from hexlocal_core.model import Hit, Notice, SearchMode
from hexlocal_core.search.cross_package import ScopedSearcher
from hexlocal_core.search.engine import SearchEngine
from hexlocal_core.search.sanitizer import to_match

EVAL_MODES = tuple(m.value for m in SearchMode)
RETURNED = 10  # hits asked for per search: enough for MRR@10


class QueryStatus(StrEnum):
    OK = "ok"
    BROKEN = "broken"
    NOT_INDEXED = "not indexed"


class Outcome(Protocol):
    """What the eval reads from a search (SearchOutcome fits)."""

    @property
    def hits(self) -> tuple[Hit, ...]: ...
    @property
    def notices(self) -> tuple[Notice, ...]: ...
    @property
    def timings_ms(self) -> dict[str, float]: ...
    @property
    def pool(self) -> tuple[int, ...]: ...


class Searcher(Protocol):
    """The engine's public search call (SearchEngine fits)."""

    async def search(
        self, package: str, query: str, *, limit: int = ..., mode: str = ..., exact: bool = ...
    ) -> Outcome: ...


@frozen
class EvalOptions:
    modes: tuple[str, ...] = EVAL_MODES
    only: str | None = None  # one of queries.KINDS, or None for every kind
    exact: bool = True  # the engine's exact-identifier lookup
    warmup: bool = True  # one untimed search per mode first, so model loading is not timed
    # Drop each query's package: search every package the set has indexed, fused as the
    # project-wide search_docs does (search/cross_package.py), so the scope decides.
    all_packages: bool = False


@frozen
class ReturnedDoc:
    ref: str
    title: str
    relevant: bool


@frozen
class ModeRun:
    mode: str
    rank: int | None  # 1-based rank of the first relevant chunk returned, None if none
    in_pool: bool  # a relevant chunk was in the fused candidate pool
    ms: float  # wall time of the search call
    returned: tuple[ReturnedDoc, ...]
    notices: tuple[str, ...] = ()  # notice codes, e.g. rerank_unavailable
    stage_ms: Mapping[str, float] = field(factory=dict)  # the engine's own stage timings


@frozen
class QueryResult:
    query: EvalQuery
    status: QueryStatus
    relevant_rows: int = 0
    indexed_version: str | None = None
    match: str | None = None  # the sanitized FTS expression (diagnostics only)
    runs: tuple[ModeRun, ...] = ()

    def run(self, mode: str) -> ModeRun | None:
        return next((r for r in self.runs if r.mode == mode), None)


@frozen
class EvalReport:
    source: str
    created_at: str
    fingerprint: CorpusFingerprint
    options: EvalOptions
    results: tuple[QueryResult, ...]
    scores: tuple[ModeScore, ...]
    models: Mapping[str, str | None] = field(factory=dict)

    def by_status(self, status: QueryStatus) -> list[QueryResult]:
        return [r for r in self.results if r.status is status]

    def score(self, mode: str, kind: str = "all") -> ModeScore | None:
        return next((s for s in self.scores if s.mode == mode and s.kind == kind), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "created_at": self.created_at,
            "fingerprint": self.fingerprint.to_dict(),
            "models": dict(self.models),
            "options": asdict(self.options),
            "counts": {s.value: len(self.by_status(s)) for s in QueryStatus},
            "scores": [s.to_dict() for s in self.scores],
            "queries": [_result_dict(r) for r in self.results],
        }


def _result_dict(result: QueryResult) -> dict[str, Any]:
    return {
        **result.query.to_dict(),
        "status": result.status.value,
        "relevant_rows": result.relevant_rows,
        "indexed_version": result.indexed_version,
        "fts_match": result.match,
        "runs": {
            run.mode: {
                "rank": run.rank,
                "in_pool": run.in_pool,
                "ms": run.ms,
                "notices": list(run.notices),
                "stage_ms": dict(run.stage_ms),
                "returned": [asdict(d) for d in run.returned],
            }
            for run in result.runs
        },
    }


def ingest_targets(queries: Sequence[EvalQuery]) -> list[tuple[str, str | None]]:
    """Each distinct (package, version) of a query set, in first-use order."""
    return list(dict.fromkeys((q.package, q.version) for q in queries))


def _status(query: EvalQuery, fp: CorpusFingerprint) -> QueryStatus | None:
    indexed = fp.version_of(query.package)
    if indexed is None or (query.version is not None and indexed != query.version):
        return QueryStatus.NOT_INDEXED
    return None


async def _run_mode(
    searcher: Searcher, query: EvalQuery, mode: str, relevant: frozenset[int], exact: bool
) -> ModeRun:
    started = time.perf_counter()
    outcome = await searcher.search(
        query.package, query.query, limit=RETURNED, mode=mode, exact=exact
    )
    ms = round((time.perf_counter() - started) * 1000, 2)
    returned = tuple(ReturnedDoc(h.ref, h.title, h.chunk_id in relevant) for h in outcome.hits)
    rank = next((i for i, doc in enumerate(returned, start=1) if doc.relevant), None)
    return ModeRun(
        mode=mode,
        rank=rank,
        in_pool=any(cid in relevant for cid in outcome.pool),
        ms=ms,
        returned=returned,
        notices=tuple(dict.fromkeys(n.code for n in outcome.notices)),
        stage_ms=dict(outcome.timings_ms),
    )


async def _evaluate(
    searcher: Searcher,
    store: DocsStore,
    query: EvalQuery,
    fp: CorpusFingerprint,
    options: EvalOptions,
) -> QueryResult:
    indexed = fp.version_of(query.package)
    status = _status(query, fp)
    if status is not None:
        return QueryResult(query, status, indexed_version=indexed)
    relevant = relevant_ids(store.session().chunks, query.package, query.expect)
    if not relevant:
        return QueryResult(query, QueryStatus.BROKEN, indexed_version=indexed)
    runs = [await _run_mode(searcher, query, m, relevant, options.exact) for m in options.modes]
    return QueryResult(
        query,
        QueryStatus.OK,
        relevant_rows=len(relevant),
        indexed_version=indexed,
        match=to_match(query.query),
        runs=tuple(runs),
    )


def _scores(results: Sequence[QueryResult], modes: Sequence[str]) -> tuple[ModeScore, ...]:
    scored = [r for r in results if r.status is QueryStatus.OK]
    # Only the kinds this query set has (plus "all"): a set without error queries must not
    # print an error row of zeros, and a new kind appears without touching this code.
    present = {r.query.kind for r in results}
    kinds = (*(k for k in KINDS if k in present), "all")
    out: list[ModeScore] = []
    for mode in modes:
        for kind in kinds:
            runs = [
                run
                for r in scored
                if kind in ("all", r.query.kind) and (run := r.run(mode)) is not None
            ]
            out.append(
                score_runs(
                    mode,
                    kind,
                    [run.rank for run in runs],
                    [run.in_pool for run in runs],
                    [run.ms for run in runs],
                )
            )
    return tuple(out)


async def _warm_up(searcher: Searcher, queries: Sequence[EvalQuery], options: EvalOptions) -> None:
    if not options.warmup or not queries:
        return
    first = queries[0]
    for mode in options.modes:
        await searcher.search(
            first.package, first.query, limit=RETURNED, mode=mode, exact=options.exact
        )


def check_modes(modes: Sequence[str]) -> tuple[str, ...]:
    unknown = [m for m in modes if m not in EVAL_MODES]
    if unknown or not modes:
        named = ", ".join(unknown) or "(none)"
        raise UserInputError(f"unknown eval mode(s) {named}; choose from {', '.join(EVAL_MODES)}")
    return tuple(dict.fromkeys(modes))


async def run_eval(
    searcher: Searcher,
    store: DocsStore,
    queries: Sequence[EvalQuery],
    *,
    options: EvalOptions | None = None,
    source: str = "",
    models: Mapping[str, str | None] | None = None,
) -> EvalReport:
    """Search every query in every mode and score the outcomes (sequentially, for timing)."""
    options = options or EvalOptions()
    modes = check_modes(options.modes)
    chosen = [q for q in queries if options.only is None or q.kind == options.only]
    fp = fingerprint(store)
    ready = [q for q in chosen if _status(q, fp) is None]
    if options.all_packages:  # the set's indexed packages are the "project"
        if not isinstance(searcher, SearchEngine):
            raise UserInputError("the all-packages eval needs the search engine")
        searcher = ScopedSearcher(searcher, sorted({q.package for q in ready}))
    await _warm_up(searcher, ready, options)
    results: list[QueryResult] = []
    for query in chosen:
        results.append(await _evaluate(searcher, store, query, fp, options))
    return EvalReport(
        source=source,
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        fingerprint=fp,
        options=options,
        results=tuple(results),
        scores=_scores(results, modes),
        models=dict(models or {}),
    )
