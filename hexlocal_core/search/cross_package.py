"""One ranked list from several packages' searches, fair to small packages.

The engine runs per package (its BM25 statistics and vector partition are the package's
own); these functions fuse the per-package answers by reciprocal rank, never by raw
scores. A hit's score is sum(weight / (k + rank)) over the arms that placed it, the same
formula the engine uses inside one package: rank 1 of a 30-chunk package weighs what rank
1 of a 5,000-chunk package weighs, so size cannot drown a small package, and a rare term
that ranks first in a small package's BM25 earns one arm's share, not an outsized score.

Rank alone cannot tell packages apart (every package matching a word at all has a rank
1), so a third ranking orders the whole union by query-term coverage: the share of the
query's words a hit contains, on one scale for every package without a model. When the
cross-encoder ran, its scores are also on one scale (it reads query and passage only), so
its order is fused with the global one with the same bounded authority as in a package.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import attrs

from hexlocal_core.index.tokens import split_parts, tokens
from hexlocal_core.model import Hit, Notice
from hexlocal_core.search.engine import SearchEngine, SearchOutcome, plan_query
from hexlocal_core.search.fusion import rerank_fuse
from hexlocal_core.search.sanitizer import STOPWORDS, light_stem

# The coverage ranking's weight next to the two arms' (each 1.0 for prose queries).
COVER_WEIGHT = 1.0


def fuse_packages(
    per_package: Sequence[Sequence[Hit]], engine: SearchEngine, query: str, limit: int
) -> tuple[Hit, ...]:
    """The packages' hits as one list, `final_rank` set; exact identifier hits lead."""
    tuning = engine.tuning
    fts_weight, vec_weight = tuning.arm_weights(plan_query(query, tuning).shape)
    k = tuning.rrf_k
    hits = [h for package_hits in per_package for h in package_hits]
    wanted = query_terms(query)
    cover = [len(wanted & query_terms(f"{h.title} {h.content}")) for h in hits]
    by_cover = sorted(range(len(hits)), key=lambda i: (-cover[i], hits[i].fused_rank or 0, i))
    cover_rank = {i: rank for rank, i in enumerate(by_cover, start=1)}

    def score(i: int) -> float:
        hit = hits[i]
        total = fts_weight / (k + hit.fts_rank) if hit.fts_rank else 0.0
        total += vec_weight / (k + hit.vec_rank) if hit.vec_rank else 0.0
        return total + (COVER_WEIGHT / (k + cover_rank[i]) if cover[i] else 0.0)

    order = sorted(range(len(hits)), key=lambda i: (-score(i), i))
    if order and all(hits[i].rerank_score is not None for i in order):
        scores = [float(hits[i].rerank_score or 0.0) for i in order]
        order = rerank_fuse(order, scores, k=k)
    # An exact identifier ('Jason.decode/2') names its item: it leads, as in one package.
    order = [i for i in order if hits[i].exact] + [i for i in order if not hits[i].exact]
    return tuple(
        attrs.evolve(hits[i], final_rank=rank) for rank, i in enumerate(order[:limit], start=1)
    )


def query_terms(text: str) -> frozenset[str]:
    """Lower-cased, stemmed words (identifier parts split), stopwords left out."""
    out: set[str] = set()
    for tok in tokens(text.lower()):
        for word in (tok, *split_parts(tok)):
            if word not in STOPWORDS and not word.isdigit():
                out.add(light_stem(word))
    return frozenset(out)


class ScopedSearcher:
    """`search(package, ...)` over a fixed set of packages, whatever `package` says: the
    engine once per package, then `fuse_packages`. The eval's project-scope mode uses it
    to drop each query's package; project-wide search_docs uses `search_many`."""

    def __init__(self, engine: SearchEngine, packages: Sequence[str]) -> None:
        self._engine = engine
        self._packages = tuple(packages)

    async def search(
        self,
        package: str,
        query: str,
        *,
        limit: int = 5,
        mode: str = "rerank",
        exact: bool = True,
    ) -> SearchOutcome:
        return await search_many(
            self._engine, self._packages, query, limit=limit, mode=mode, exact=exact
        )


async def search_many(
    engine: SearchEngine,
    packages: Sequence[str],
    query: str,
    *,
    limit: int,
    mode: str,
    exact: bool = True,
) -> SearchOutcome:
    """Every package in turn (the store's one connection serves them all; a package costs
    milliseconds next to the query's embedding), then one fused list. Notices are kept
    once per code; per-package `no_results` are dropped (the caller words one for all)."""
    started = time.perf_counter()
    per_package: list[tuple[Hit, ...]] = []
    notices: dict[str, Notice] = {}
    pool: list[int] = []
    for name in packages:
        outcome = await engine.search(name, query, limit=limit, mode=mode, exact=exact)
        per_package.append(outcome.hits)
        pool.extend(outcome.pool)
        for notice in outcome.notices:
            if notice.code != "no_results":
                notices.setdefault(notice.code, notice)
    hits = fuse_packages(per_package, engine, query, limit)
    ms = round((time.perf_counter() - started) * 1000, 2)
    return SearchOutcome(hits, tuple(notices.values()), {"total": ms}, tuple(pool))
