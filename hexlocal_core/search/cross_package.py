"""One ranked list from several packages' searches, fair to small packages.

The engine runs per package (its BM25 statistics and vector partition are the package's
own); these functions fuse the per-package answers by reciprocal rank, never by raw
BM25 scores. A hit's score is sum(weight / (k + rank)) over the rankings that placed it,
the formula the engine uses inside one package: rank 1 of a 30-chunk package weighs what
rank 1 of a 5,000-chunk package weighs, so size cannot drown a small package.

Per-package ranks alone cannot tell packages apart (every package matching a word at all
has a rank 1), so the fusion also reads signals on one scale for every package:

* the query's cosine distance to each hit (one model embeds every package): when the
  vector arm ran, its ranking is the union ordered by distance, not each package's ranks;
* query-term coverage: how many of the query's words a hit contains, ties broken by how
  rare those words are among every package's candidates (`idf_coverage`); all a
  keyword-only search has on one scale, so it weighs twice as much there.

Measured (all-packages eval against per-package, MiniLM, dev 44 queries / examples 54,
recall@5 and MRR@10 ratios, before -> after): rrf 0.952/0.930 and 0.860/0.901 ->
0.976/0.961 and 0.980/0.961; vector 0.952/0.934 and 0.978/0.971 -> 1.000/0.971 and
1.022/1.015; fts 0.878/0.896 and 0.938/0.944 -> 0.976/0.949 and 1.000/0.963. Exact
identifier hits lead, in their package's own order (an item's chunks read top-down).
In rerank mode the packages are searched without it and the cross-encoder reads the
fused list's top `pool` once (one call of 10 pairs, not 10 per package: on a 40-package
lock that was 400 pairs a query), with the same bounded authority as in a package.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
from collections import Counter
from collections.abc import Mapping, Sequence

import attrs

from hexlocal_core.bounds import check_mode
from hexlocal_core.index.tokens import TOKEN_RE, split_parts, tokens
from hexlocal_core.model import Hit, Notice, SearchMode
from hexlocal_core.notice_codes import NoticeCode
from hexlocal_core.ports import Vectors
from hexlocal_core.search.arms import vector_arm
from hexlocal_core.search.engine import SearchEngine, SearchOutcome, plan_query
from hexlocal_core.search.query_rewrite import embed_mean
from hexlocal_core.search.sanitizer import STOPWORDS, light_stem

log = logging.getLogger("hexlocal.search")

# The coverage ranking's weight next to the arms' (each 1.0 for prose queries): with the
# cosine ranking beside it, and alone as the one-scale signal of a keyword-only search.
# 2.0 rather than 1.0 there: recall@5 / MRR@10 of per-package 0.951/0.928 -> 0.976/0.949
# (dev), 1.021/0.966 -> 1.000/0.963 (examples); beside the cosine ranking, 2.0 lost
# examples recall (0.980 -> 0.960, word counts only).
COVER_WEIGHT = 1.0
COVER_WEIGHT_KEYWORD_ONLY = 2.0
# Stage timings summed over the packages (the engine's keys), then this module's own.
ENGINE_STAGES = ("embed", "fts", "vec", "fuse", "rerank")


def fuse_packages(
    per_package: Sequence[Sequence[Hit]],
    engine: SearchEngine,
    query: str,
    limit: int,
    *,
    distances: Mapping[int, float] | None = None,
) -> tuple[Hit, ...]:
    """The packages' hits as one list, `final_rank` set; exact identifier hits lead.

    `distances`: the query's cosine distance by chunk id, for the chunks the vector arm
    saw (`query_distances`); without it, each package's own vector ranks are used.
    """
    tuning = engine.tuning
    fts_weight, vec_weight = tuning.arm_weights(plan_query(query, tuning).shape)
    k = tuning.rrf_k
    hits = [h for package_hits in per_package for h in package_hits]
    wanted = query_terms(query)
    found = [wanted & query_terms(f"{h.title} {h.content}") for h in hits]
    cover = [len(words) for words in found]
    rarity = idf_coverage(found)
    # How many of the query's words first, then how rare they are among the candidates:
    # rarity alone over few candidates (3 packages) let a page with two words the others
    # lack ('json', 'maps' in mime) beat jason's chunks with three.
    by_cover = sorted(
        range(len(hits)), key=lambda i: (-cover[i], -rarity[i], hits[i].fused_rank or 0, i)
    )
    cover_rank = {i: rank for rank, i in enumerate(by_cover, start=1)}
    vec_rank = _vector_ranks(hits, distances)
    cover_weight = COVER_WEIGHT if distances is not None else COVER_WEIGHT_KEYWORD_ONLY

    def score(i: int) -> float:
        hit = hits[i]
        total = fts_weight / (k + hit.fts_rank) if hit.fts_rank else 0.0
        total += vec_weight / (k + vec_rank[i]) if i in vec_rank else 0.0
        return total + (cover_weight / (k + cover_rank[i]) if cover[i] else 0.0)

    order = sorted(range(len(hits)), key=lambda i: (-score(i), i))
    # An exact identifier ('Jason.decode/2') names its item: it leads, as in one package,
    # and its chunks keep the package's order (the item's own, top-down).
    place = {i: n for n, i in enumerate(order)}
    exact = sorted(
        (i for i in order if hits[i].exact), key=lambda i: (hits[i].final_rank or 0, place[i])
    )
    order = exact + [i for i in order if not hits[i].exact]
    return tuple(
        attrs.evolve(hits[i], final_rank=rank) for rank, i in enumerate(order[:limit], start=1)
    )


def idf_coverage(found: Sequence[frozenset[str]]) -> list[float]:
    """The query words each hit contains, each weighed by its rarity among the candidates
    of every package, log((n + 1) / (df + 0.5)) for n hits of which df contain it. A word
    most packages' hits share ('options') tells them apart less than one only the answer
    holds ('multiplexed')."""
    n = len(found)
    df = Counter(word for words in found for word in words)
    weight = {word: math.log((n + 1) / (count + 0.5)) for word, count in df.items()}
    return [sum(weight[word] for word in words) for words in found]


def _vector_ranks(hits: Sequence[Hit], distances: Mapping[int, float] | None) -> dict[int, int]:
    """Index in `hits` -> vector rank: by distance over every package when distances are
    known, else the hit's rank inside its own package."""
    if distances is None:
        return {i: h.vec_rank for i, h in enumerate(hits) if h.vec_rank}
    seen = [i for i, h in enumerate(hits) if h.vec_rank and h.chunk_id in distances]
    seen.sort(key=lambda i: (distances[hits[i].chunk_id], i))
    return {i: rank for rank, i in enumerate(seen, start=1)}


def query_terms(text: str) -> frozenset[str]:
    """Lower-cased, stemmed words (identifier parts split), stopwords left out."""
    out: set[str] = set()
    for tok in set(TOKEN_RE.findall(text.lower())):
        out.update(_token_terms(tok))
    return frozenset(out)


# Coverage reads every word of up to 10 hits a package (400 on a 40-package lock): each
# distinct token is split and stemmed once, then comes from the cache (docs vocabularies
# are a few thousand words). Examples set, 10 packages, loaded 2 cores: 185 -> 47 ms a query.
@functools.lru_cache(maxsize=1 << 16)
def _token_terms(tok: str) -> tuple[str, ...]:
    if not tokens(tok):
        return ()  # no letter or digit: not a token to FTS5 either
    words = (tok, *split_parts(tok))
    return tuple(light_stem(w) for w in words if w not in STOPWORDS and not w.isdigit())


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
        mode: SearchMode | str = SearchMode.RERANK,
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
    mode: SearchMode | str,
    exact: bool = True,
) -> SearchOutcome:
    """Every package in turn (the store's one connection serves them all), then one fused
    list. Notices are kept once per code; per-package `no_results` are dropped (the
    caller words one for all). Timings: the engine's stages summed over the packages,
    then `distances` (`query_distances`), `merge` (the fusion), `rerank` (once, over the
    fused top) and `total`."""
    started = time.perf_counter()
    mode = check_mode(mode)
    per_package: list[tuple[Hit, ...]] = []
    notices: dict[str, Notice] = {}
    pool: list[int] = []
    timings = dict.fromkeys(ENGINE_STAGES, 0.0)
    t = time.perf_counter()
    vector = await embed_once(engine, query) if mode is not SearchMode.FTS else None
    timings["embed"] = _ms(t)
    rerank = mode is SearchMode.RERANK
    for name in packages:
        outcome = await engine.search(
            name,
            query,
            limit=max(limit, engine.tuning.pool) if rerank else limit,
            mode=SearchMode.RRF if rerank else mode,
            exact=exact,
            query_vector=vector,
            # The fusion across packages ranks by the query's own distances (one scale for
            # every package); a per-package feedback query would rank on another.
            feedback=False,
        )
        per_package.append(outcome.hits)
        pool.extend(outcome.pool)
        for stage in ENGINE_STAGES:
            timings[stage] += outcome.timings_ms.get(stage, 0.0)
        for notice in outcome.notices:
            if notice.code != NoticeCode.NO_RESULTS:
                notices.setdefault(notice.code, notice)
    t = time.perf_counter()
    distances = await query_distances(engine, packages, vector) if vector is not None else None
    timings["distances"] = _ms(t)
    t = time.perf_counter()
    width = max(limit, engine.tuning.pool) if rerank else limit
    hits = fuse_packages(per_package, engine, query, width, distances=distances)
    timings["merge"] = _ms(t)
    if rerank:
        t = time.perf_counter()
        hits, said = await engine.rerank_hits(query, hits)
        hits = hits[:limit]
        if said is not None:
            notices.setdefault(said.code, said)
        timings["rerank"] = _ms(t)
    timings["total"] = _ms(started)
    return SearchOutcome(hits, tuple(notices.values()), timings, tuple(pool))


async def embed_once(engine: SearchEngine, query: str) -> Vectors | None:
    """The query embedded once for every package (measured at 40 packages: embedding per
    package was the largest stage, 649 ms of a 920 ms p50), or None when the vector arm
    cannot run or the embedding fails (each package's search then says why)."""
    if engine.embedder is None:
        return None

    def ready() -> bool:  # off the event loop: round trips on PostgreSQL
        return engine.vector_status() is None and engine.store.vector_tables_exist()

    if not await asyncio.to_thread(ready):
        return None
    try:
        return await embed_mean(engine.embedder, plan_query(query, engine.tuning).vec_texts)
    except Exception as exc:  # noqa: BLE001 - the engine's answers carry the notice
        log.debug("query embedding failed: %s", exc)
        return None


async def query_distances(
    engine: SearchEngine, packages: Sequence[str], vector: Vectors
) -> dict[int, float]:
    """The query's cosine distance to each package's nearest chunks (the vector arm's own
    candidates, so to every hit it placed): each package's nearest-neighbour lookup once
    more (a few ms a package), as hits carry the arm's ranks, not its distances."""
    depth = engine.tuning.vec_depth

    def lookup() -> dict[int, float]:
        reads = engine.store.session().chunks  # the worker thread's connection (SQLite)
        return {
            cid: distance
            for name in packages
            for cid, distance in vector_arm(reads, vector, package=name, depth=depth)
        }

    return await asyncio.to_thread(lookup)


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 2)
