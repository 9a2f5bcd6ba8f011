"""The search pipeline: sanitize -> both arms in scope -> RRF pool -> bounded rerank -> top N.

The pool is built at the item level: after fusion, only the best-placed chunk of each
item (ref) is kept, so one long section split into several chunks cannot fill the pool
with near-duplicates and push other answers out; and chunks of project boilerplate pages
(changelog, licence, ...) have their fused score halved (see `fusion.boilerplate_scale`).

Every stage degrades to the one beneath it with a Notice, never an exception:
no embedder or another model's index -> keyword arm alone; no reranker or a failing one ->
fused order; nothing matched -> empty results.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

from attrs import evolve, frozen

from hexlocal_core.errors import HexlocalError, UserInputError
from hexlocal_core.index.store import Store
from hexlocal_core.model import Hit, Notice
from hexlocal_core.ports import Embedder, Reranker
from hexlocal_core.search import notices
from hexlocal_core.search.arms import BM25_WEIGHTS, DEPTH, keyword_arm, vector_arm
from hexlocal_core.search.exact import Identifier, exact_chunk_ids, parse_identifier
from hexlocal_core.search.fusion import (
    BOILERPLATE_WEIGHT,
    RRF_K,
    boilerplate_scale,
    one_per_key,
    rerank_fuse,
    rrf,
)
from hexlocal_core.search.sanitizer import to_match

log = logging.getLogger("hexlocal.search")

POOL = 10
MODES = ("fts", "vector", "rrf", "rerank")
# The head of each chunk the cross-encoder reads: ~100 word pieces, plus the title line.
# ms-marco was trained on passages of about 60 words (~350 characters), so the opening
# of a chunk is what it judges best, and its cost grows faster than linearly with length
# (10 query-chunk pairs per call on 2 busy cores, p50: 1200 chars 1095 ms, 480: 773 ms,
# 360: 598 ms; only the ratios matter, the machine was shared).
RERANK_PASSAGE_CHARS = 360


@frozen
class SearchTuning:
    """The retrieval knobs in one value, so benchmarks and experiments vary them without
    patching modules. The defaults are the measured choice (docs/decisions.md)."""

    fts_depth: int = DEPTH
    vec_depth: int = DEPTH
    pool: int = POOL
    rrf_k: int = RRF_K
    fts_weight: float = 1.0
    vec_weight: float = 1.0
    bm25: tuple[float, float, float] = BM25_WEIGHTS
    boilerplate_weight: float = BOILERPLATE_WEIGHT
    one_chunk_per_item: bool = True


@frozen
class SearchOutcome:
    hits: tuple[Hit, ...]
    notices: tuple[Notice, ...]
    timings_ms: dict[str, float]
    pool: tuple[int, ...] = ()  # fused candidate ids (for eval: "answer in the pool")


class _Clock:
    def __init__(self) -> None:
        self.ms: dict[str, float] = {}

    def lap(self, name: str, since: float) -> float:
        now = time.perf_counter()
        self.ms[name] = round((now - since) * 1000, 2)
        return now


class SearchEngine:
    def __init__(
        self,
        store: Store,
        embedder: Embedder | None,
        reranker: Reranker | None,
        *,
        tuning: SearchTuning | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.reranker = reranker
        self.tuning = tuning or SearchTuning()
        self._warned: set[str] = set()

    def _warn_once(self, template: str, exc: Exception) -> None:
        """Log a degradation once per engine; every result still carries its notice."""
        message = template % (exc,)
        if message in self._warned:
            log.debug(message)
            return
        self._warned.add(message)
        log.warning(message)

    def vector_status(self) -> Notice | None:
        """Why the vector arm cannot run, or None when it can."""
        if self.embedder is None:
            return notices.NO_EMBEDDER
        config = self.store.embedding_config()
        if config is not None and config.model != self.embedder.model_id:
            return notices.model_mismatch(config.model, self.embedder.model_id)
        return None

    async def search(
        self,
        package: str,
        query: str,
        *,
        limit: int = 5,
        mode: str = "rerank",
        examples_only: bool = False,
        exact: bool = True,
    ) -> SearchOutcome:
        if mode not in MODES:
            raise UserInputError(
                f"unknown search mode {mode!r}; expected one of {', '.join(MODES)}"
            )
        clock = _Clock()
        out_notices: list[Notice] = []
        t = time.perf_counter()

        fts_ids: list[int] = []
        if mode != "vector":
            fts_ids = await asyncio.to_thread(self._keyword, package, query, examples_only)
        t = clock.lap("fts", t)

        vec_ids: list[int] = []
        if mode != "fts":
            vec_ids, notice = await self._vector(package, query, examples_only, clock)
            if notice:
                out_notices.append(notice)
        t = time.perf_counter()

        pool = self._fuse(fts_ids, vec_ids)  # one indexed lookup: cheaper than a thread hop
        t = clock.lap("fuse", t)

        ranked = pool
        scores: dict[int, float] = {}
        if mode == "rerank" and len(pool) > 1:
            ranked, scores, notice = await self._rerank(query, pool)
            if notice:
                out_notices.append(notice)
        clock.lap("rerank", t)

        exact_ids: list[int] = []
        if exact:
            ident = parse_identifier(query)
            if ident is not None:
                exact_ids = await asyncio.to_thread(
                    exact_chunk_ids, self.store.conn, package, ident
                )
        final = list(dict.fromkeys([*exact_ids, *ranked]))[:limit]
        hits = self._hits(final, fts_ids, vec_ids, pool, scores, set(exact_ids))
        if not hits:
            out_notices.append(notices.no_results(package, query))
        return SearchOutcome(tuple(hits), tuple(out_notices), clock.ms, tuple(pool))

    async def exact(self, package: str, ident: Identifier) -> tuple[Hit, ...]:
        """Every chunk of exactly that identifier's item (and its sub-items), in order."""
        ids = await asyncio.to_thread(exact_chunk_ids, self.store.conn, package, ident)
        return tuple(self._hits(ids, [], [], [], {}, set(ids)))

    def _fuse(self, fts_ids: list[int], vec_ids: list[int]) -> list[int]:
        """RRF of the arms, boilerplate demoted, one chunk per item, cut to the pool size."""
        t = self.tuning
        located = self._locate([*fts_ids, *vec_ids])
        scale = boilerplate_scale(
            {cid: page for cid, (_, page) in located.items()}, t.boilerplate_weight
        )
        fused = rrf(
            [fts_ids, vec_ids], k=t.rrf_k, weights=[t.fts_weight, t.vec_weight], scale=scale
        )
        if t.one_chunk_per_item:
            fused = one_per_key(fused, {cid: ref for cid, (ref, _) in located.items()})
        return fused[: t.pool]

    def _locate(self, ids: list[int]) -> dict[int, tuple[str, str]]:
        """(ref, page) of each chunk id, in one query."""
        unique = list(dict.fromkeys(ids))
        if not unique:
            return {}
        marks = ",".join("?" * len(unique))
        sql = f"SELECT id, ref, page FROM chunks WHERE id IN ({marks})"
        return {
            int(r[0]): (str(r[1]), str(r[2])) for r in self.store.conn.execute(sql, tuple(unique))
        }

    def _keyword(self, package: str, query: str, examples_only: bool) -> list[int]:
        match = to_match(query)
        if match is None:
            return []
        t = self.tuning
        found = keyword_arm(
            self.store.conn,
            match,
            package=package,
            depth=t.fts_depth,
            examples_only=examples_only,
            weights=t.bm25,
        )
        return [cid for cid, _ in found]

    async def _vector(
        self, package: str, query: str, examples_only: bool, clock: _Clock
    ) -> tuple[list[int], Notice | None]:
        blocked = self.vector_status()
        if blocked is not None or self.embedder is None:
            return [], blocked
        if not self.store.vector_tables_exist():
            return [], None
        t = time.perf_counter()
        try:
            vector = await self.embedder.embed_query(query)
        except HexlocalError as exc:
            self._warn_once("query embedding failed: %s", exc)
            return [], notices.embed_failed(str(exc))
        t = clock.lap("embed", t)
        found = await asyncio.to_thread(
            vector_arm,
            self.store.conn,
            vector,
            package=package,
            depth=self.tuning.vec_depth,
            examples_only=examples_only,
        )
        clock.lap("vec", t)
        return [cid for cid, _ in found], None

    async def _rerank(
        self, query: str, pool: list[int]
    ) -> tuple[list[int], dict[int, float], Notice | None]:
        if self.reranker is None:
            return pool, {}, notices.NO_RERANKER
        rows = self.store.hydrate(pool)
        passages = [_passage(r) for r in rows]
        try:
            raw = await self.reranker.score(query, passages)
        except HexlocalError as exc:
            self._warn_once("rerank failed: %s", exc)
            return pool, {}, notices.rerank_failed(str(exc))
        if len(raw) != len(rows):
            return (
                pool,
                {},
                notices.rerank_failed(
                    "the cross-encoder returned a score count that does not match"
                ),
            )
        ids = [r["id"] for r in rows]
        scores = dict(zip(ids, (float(s) for s in raw), strict=True))
        return rerank_fuse(ids, [scores[i] for i in ids]), scores, None

    def _hits(
        self,
        ids: Sequence[int],
        fts_ids: list[int],
        vec_ids: list[int],
        pool: list[int],
        scores: dict[int, float],
        exact_ids: set[int],
    ) -> list[Hit]:
        hits = []
        for final_rank, row in enumerate(self.store.hydrate(ids), start=1):
            hit = hit_from_row(row)
            cid = row["id"]
            hits.append(
                evolve(
                    hit,
                    fts_rank=_rank(fts_ids, cid),
                    vec_rank=_rank(vec_ids, cid),
                    fused_rank=_rank(pool, cid),
                    rerank_score=scores.get(cid),
                    final_rank=final_rank,
                    exact=cid in exact_ids,
                )
            )
        return hits


def _rank(ids: list[int], cid: int) -> int | None:
    try:
        return ids.index(cid) + 1
    except ValueError:
        return None


def _passage(row: dict[str, Any]) -> str:
    head = row["title"]
    if row.get("signature"):
        head = f"{head} {row['signature']}"
    return f"{head}\n{row['content'][:RERANK_PASSAGE_CHARS]}"


def hit_from_row(row: dict[str, Any]) -> Hit:
    return Hit(
        chunk_id=int(row["id"]),
        package=row["package"],
        version=row["version"],
        ref=row["ref"],
        title=row["title"],
        doc_type=row["doc_type"],
        content=row["content"],
        hexdocs_url=row["hexdocs_url"],
        source_url=row["source_url"],
        module=row["module"],
        function=row["function"],
        arity=row["arity"],
        signature=row["signature"],
        deprecated=row["deprecated"],
        source=row["source"],
        has_example=bool(row["has_example"]),
    )
