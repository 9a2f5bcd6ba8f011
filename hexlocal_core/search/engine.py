"""The search pipeline: sanitize -> both arms in scope -> RRF -> learned order of the first
20, fused back (search/learned_rank.py) -> pool of 10 -> bounded rerank -> top N.

The pool is built at the item level: after fusion, only the best-placed chunk of each
item (ref) is kept, so one long section split into several chunks cannot fill the pool
with near-duplicates and push other answers out; and chunks of project boilerplate pages
(changelog, licence, ...) have their fused score halved (see `fusion.boilerplate_scale`).

Every stage degrades to the one beneath it with a Notice, never an exception:
no embedder or another model's index -> keyword arm alone; no reranker or a failing one ->
fused order; nothing matched -> empty results. An absent reranker is said once per engine
(one server session), on its first answer, not on every answer: it is the default state
until the cross-encoder is fetched, and a notice repeated on every answer is noise.

The engine runs the stages and fuses; the learned stage's evidence is gathered in
`learned_stage.py`, the cross-encoder's stage is `rerank_stage.py`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

from attrs import evolve, frozen

from hexlocal_core.bounds import check_mode
from hexlocal_core.errors import HexlocalError
from hexlocal_core.index.seam import DocsStore
from hexlocal_core.model import Hit, Notice, SearchMode
from hexlocal_core.ports import Embedder, Reranker, Vectors, serves_index
from hexlocal_core.search import notices
from hexlocal_core.search.anchor_arm import AnchorArm, AnchorRanking
from hexlocal_core.search.arms import keyword_arm, vector_arm
from hexlocal_core.search.exact import (
    Identifier,
    exact_chunk_ids,
    parse_identifier,
    usage_rules_lead,
)
from hexlocal_core.search.feedback import moved_query
from hexlocal_core.search.fusion import (
    boilerplate_scale,
    one_per_key,
    rrf,
)
from hexlocal_core.search.learned_rank import Candidate
from hexlocal_core.search.learned_stage import ArmsSaw, candidates, reordered
from hexlocal_core.search.query_adapter import adapted, error_adapter
from hexlocal_core.search.query_rewrite import embed_mean, texts_to_embed
from hexlocal_core.search.query_shape import Shape, asks_how_to_use, parse_error, shape_of
from hexlocal_core.search.rerank_stage import RerankStage
from hexlocal_core.search.rows import Rows, hits_from_rows
from hexlocal_core.search.sanitizer import to_phrases
from hexlocal_core.search.tuning import SearchTuning

log = logging.getLogger("hexlocal.search")


@frozen
class _Plan:
    """What each arm reads for one query: the raw text, or the parts of an error paste;
    the vector arm embeds the mean of `vec_texts`."""

    shape: Shape
    fts_text: str
    vec_texts: tuple[str, ...]


def plan_query(query: str, tuning: SearchTuning, package: str = "") -> _Plan:
    shape = shape_of(query)
    if shape is not Shape.ERROR or not tuning.error_queries:
        return _Plan(shape, query, texts_to_embed(query, package, shape, tuning.vector_rewrite))
    parsed = parse_error(query, calls=tuning.error_calls)
    words = [parsed.message, *parsed.functions]
    if tuning.error_exception_terms:
        words = [*parsed.exceptions, *words]
    fts_text = " ".join(words).strip() or query
    return _Plan(shape, fts_text, (parsed.text or query,))


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
        store: DocsStore,
        embedder: Embedder | None,
        reranker: Reranker | None,
        *,
        tuning: SearchTuning | None = None,
        anchors: AnchorArm | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.reranker = reranker
        self.tuning = tuning or SearchTuning()
        self.anchors = anchors
        self._warned: set[str] = set()
        self._reranking = RerankStage(self._warn_once)

    def _warn_once(self, message: str, exc: BaseException | None = None) -> None:
        """Log a degradation once per engine; every result still carries its notice.

        An exception that is not a HexlocalError is a bug in an adapter: its traceback is
        logged (once) so it can be fixed, while the answer still degrades.
        """
        if message in self._warned:
            log.debug(message)
            return
        self._warned.add(message)
        trace = exc is not None and not isinstance(exc, HexlocalError)
        log.warning(message, exc_info=exc if trace else None)

    def vector_status(self) -> Notice | None:
        """Why the vector arm cannot run, or None when it can."""
        if self.embedder is None:
            return notices.NO_EMBEDDER
        config = self.store.embedding_config()
        if config is not None and not serves_index(self.embedder, config.model):
            return notices.model_mismatch(config.model, self.embedder.model_id)
        return None

    async def search(
        self,
        package: str,
        query: str,
        *,
        limit: int = 5,
        mode: SearchMode | str = SearchMode.RERANK,
        examples_only: bool = False,
        exact: bool = True,
        query_vector: Vectors | None = None,
        feedback: bool = True,
    ) -> SearchOutcome:
        """`query_vector`: the query already embedded (a project-wide search embeds it once
        for all its packages); None embeds it here. `feedback`: relevance feedback on the
        vector arm (see `SearchTuning.feedback_weight`)."""
        mode = check_mode(mode)
        clock = _Clock()
        rows = Rows(self.store)
        out_notices: list[Notice] = []
        plan = plan_query(query, self.tuning, package)

        async def keyword() -> list[tuple[int, float]]:
            if mode is SearchMode.VECTOR:
                return []
            start = time.perf_counter()
            found = await asyncio.to_thread(self._keyword, package, plan.fts_text, examples_only)
            clock.lap("fts", start)
            return found

        async def vector() -> tuple[list[int], Notice | None, Vectors | None]:
            if mode is SearchMode.FTS:
                return [], None, None
            return await self._vector(package, plan, examples_only, clock, query_vector)

        # The keyword arm runs while the query is embedded (measured over stdio, 250 warm
        # calls: in-process p50 17.2 -> 16.0 ms, the same hits in every one).
        fts_hits, (vec_ids, notice, vector_used) = await asyncio.gather(keyword(), vector())
        fts_ids = [cid for cid, _ in fts_hits]
        if notice:
            out_notices.append(notice)
        t = time.perf_counter()
        depth = self.tuning.fused_depth(mode)
        anchored = AnchorRanking()
        if self.anchors is not None and self.tuning.anchors_for(mode, plan.shape):
            anchored = await asyncio.to_thread(self._anchored, package, plan, vector_used)
            t = clock.lap("anchors", t)

        # Store reads run in worker threads: on PostgreSQL each is a round trip, and the
        # event loop serves every other request meanwhile.
        fused = await asyncio.to_thread(self._fuse, fts_ids, vec_ids, plan.shape, depth, anchored)
        t = clock.lap("fuse", t)
        if feedback and vector_used is not None and self._feeds_back(mode, plan.shape, fused):
            query_vector_used, first = vector_used, fused

            def fed_back() -> tuple[list[int], list[int]]:
                return self._feed_back(
                    package,
                    fts_ids,
                    vec_ids,
                    first,
                    query_vector_used,
                    plan.shape,
                    examples_only,
                    depth,
                    anchored,
                )

            fused, vec_ids = await asyncio.to_thread(fed_back)
            t = clock.lap("feedback", t)
        pool = fused
        scores: dict[int, float] = {}
        judge_first = self.tuning.rerank_stage == "learned" and self.reranker is not None
        judged_used = False  # the reranker ran (or failed) inside the learned stage
        if self.tuning.learns(mode) and vector_used is not None and len(fused) > 1:
            judged = None
            if mode is SearchMode.RERANK and judge_first:
                judging = fused[: self.tuning.judge_depth]
                scores, notice = await self._reranking.judge(
                    self.reranker, query, judging, rows, self.tuning
                )
                judged = scores or None
                judged_used = True
                if notice:
                    out_notices.append(notice)
            bm25 = dict(fts_hits)
            arms = ArmsSaw(
                package, plan.shape, plan.fts_text, bm25, fts_ids, vec_ids, vector_used, judged
            )
            pool = await asyncio.to_thread(self._learned, arms, fused, rows)
            t = clock.lap("learned", t)
        pool = pool[: self.tuning.pool]

        ranked = pool
        if mode is SearchMode.RERANK and judged_used:
            pass  # the reranker's scores were weighed by the learned ranking (or it failed)
        elif mode is SearchMode.RERANK and self.reranker is None:
            notice = self._reranking.absent()
            if notice:
                out_notices.append(notice)
        elif mode is SearchMode.RERANK and len(pool) > 1:
            ranked, scores, notice = await self._reranking.rerank(
                self.reranker, query, pool, rows, self.tuning
            )
            if notice:
                out_notices.append(notice)
        clock.lap("rerank", t)

        ident = parse_identifier(query) if exact else None
        usage = asks_how_to_use(query)

        def answer() -> list[Hit]:
            reads = self.store.session().chunks
            exact_ids: list[int] = []
            if ident is not None:
                exact_ids = exact_chunk_ids(reads, package, ident)
            rules = usage_rules_lead(reads, package, [*ranked, *fused]) if usage else []
            final = list(dict.fromkeys([*exact_ids, *rules, *ranked]))[:limit]
            return hits_from_rows(rows.get(final), fts_ids, vec_ids, pool, scores, set(exact_ids))

        hits = await asyncio.to_thread(answer)
        if not hits:
            out_notices.append(notices.no_results(package, query))
        return SearchOutcome(tuple(hits), tuple(out_notices), clock.ms, tuple(pool))

    async def rerank_hits(
        self, query: str, hits: Sequence[Hit]
    ) -> tuple[tuple[Hit, ...], Notice | None]:
        """Hits already fused from several searches (a project-wide list), reranked once
        with the bounded authority of one package's pool; exact identifier hits keep the
        head, `final_rank` is renumbered. Degrades as `search` does: the order given."""
        if self.reranker is None:
            return tuple(hits), self._reranking.absent()
        head = [h for h in hits if h.exact]
        rest = [h for h in hits if not h.exact]
        if len(rest) < 2:
            return tuple(hits), None
        ids = [h.chunk_id for h in rest]
        ranked, scores, notice = await self._reranking.rerank(
            self.reranker, query, ids, Rows(self.store), self.tuning
        )
        by_id = {h.chunk_id: h for h in rest}
        moved = [evolve(by_id[cid], rerank_score=scores.get(cid)) for cid in ranked]
        out = [*head, *moved]
        return tuple(evolve(h, final_rank=n) for n, h in enumerate(out, start=1)), notice

    async def exact(self, package: str, ident: Identifier) -> tuple[Hit, ...]:
        """Every chunk of exactly that identifier's item (and its sub-items), in order."""

        def lookup() -> list[Hit]:
            ids = exact_chunk_ids(self.store.session().chunks, package, ident)
            return hits_from_rows(self.store.hydrate(ids), [], [], [], {}, set(ids))

        return tuple(await asyncio.to_thread(lookup))

    def _anchored(self, package: str, plan: _Plan, vector: Vectors | None) -> AnchorRanking:
        if self.anchors is None:
            return AnchorRanking()
        phrases = tuple(to_phrases(plan.fts_text))
        return self.anchors.rank(package, phrases, vector, self.tuning.fts_depth)

    def _fuse(
        self,
        fts_ids: list[int],
        vec_ids: list[int],
        shape: Shape,
        depth: int,
        anchored: AnchorRanking | None = None,
    ) -> list[int]:
        """RRF of the arms (and the anchor arm's rankings), boilerplate demoted, one chunk
        per item, cut to `depth`."""
        t = self.tuning
        anchored = anchored or AnchorRanking()
        extra = [*anchored.keyword, *anchored.vector]
        located = self.store.session().chunks.locate([*fts_ids, *vec_ids, *extra])
        scale = boilerplate_scale(
            {cid: page for cid, (_, page) in located.items()}, t.boilerplate_weight
        )
        fts_weight, vec_weight = t.arm_weights(shape)
        rankings = [fts_ids, vec_ids, list(anchored.keyword), list(anchored.vector)]
        weights = [fts_weight, vec_weight, *t.anchor_weights]
        fused = rrf(rankings, k=t.rrf_k, weights=weights, scale=scale)
        if t.one_chunk_per_item:
            fused = one_per_key(fused, {cid: ref for cid, (ref, _) in located.items()})
        return fused[:depth]

    def _feeds_back(self, mode: SearchMode, shape: Shape, pool: list[int]) -> bool:
        t = self.tuning
        return (
            t.feedback_weight > 0
            and t.feedback_depth > 0
            and mode.fuses
            and shape is Shape.PROSE
            and bool(pool)
        )

    def _feed_back(
        self,
        package: str,
        fts_ids: list[int],
        vec_ids: list[int],
        pool: list[int],
        vector: Vectors,
        shape: Shape,
        examples_only: bool,
        depth: int,
        anchored: AnchorRanking,
    ) -> tuple[list[int], list[int]]:
        """The pool and vector ranking again, from the query moved toward the pool's top."""
        t = self.tuning
        reads = self.store.session().chunks
        top = reads.stored_vectors(package, pool[: t.feedback_depth])
        moved = moved_query(vector, list(top.values()), t.feedback_weight)
        if moved is None:
            return pool, vec_ids
        found = vector_arm(
            reads,
            moved,
            package=package,
            depth=t.vec_depth,
            examples_only=examples_only,
        )
        again = [cid for cid, _ in found]
        return self._fuse(fts_ids, again, shape, depth, anchored), again

    def _learned(self, arms: ArmsSaw, fused: list[int], rows: Rows) -> list[int]:
        """The first `learned_depth` fused ids in the learned order, the rest after them."""
        pool = self._candidates(arms, fused, rows)
        return reordered(arms, fused, pool, self.tuning.learned_weight)

    def _candidates(self, arms: ArmsSaw, fused: list[int], rows: Rows) -> list[Candidate]:
        t = self.tuning
        anchors = self.anchors if t.anchor_features else None
        reads = self.store.session().chunks
        return candidates(reads, arms, fused, rows, depth=t.learned_depth, anchors=anchors)

    def _keyword(self, package: str, query: str, examples_only: bool) -> list[tuple[int, float]]:
        phrases = to_phrases(query)
        if not phrases:
            return []
        t = self.tuning
        found = keyword_arm(
            self.store.session().chunks,
            phrases,
            package=package,
            depth=t.fts_depth,
            examples_only=examples_only,
            weights=t.bm25,
            package_stats=t.bm25_package_stats,
            rescore=t.bm25_rescore,
        )
        return found

    async def _vector(
        self,
        package: str,
        plan: _Plan,
        examples_only: bool,
        clock: _Clock,
        given: Vectors | None = None,
    ) -> tuple[list[int], Notice | None, Vectors | None]:
        """The vector arm's ids, why it could not run, and the query vector it used."""

        def ready() -> tuple[Notice | None, bool]:
            return self.vector_status(), self.store.vector_tables_exist()

        # Off the event loop (on PostgreSQL these are round trips), and before embedding: a
        # mismatched or vector-less index must not load (or download) a model.
        blocked, tables = await asyncio.to_thread(ready)
        if blocked is not None or self.embedder is None:
            return [], blocked, None
        if not tables:
            return [], None, None
        t = time.perf_counter()
        try:
            vector = given if given is not None else await embed_mean(self.embedder, plan.vec_texts)
        except Exception as exc:  # noqa: BLE001 - an optional arm must not fail the answer
            self._warn_once(f"query embedding failed: {exc}", exc)
            return [], notices.embed_failed(str(exc) or type(exc).__name__), None
        if self.tuning.error_adapter and plan.shape is Shape.ERROR:
            vector = adapted(vector, self.embedder.model_id, error_adapter())
        t = clock.lap("embed", t)
        found = await asyncio.to_thread(
            lambda: vector_arm(
                self.store.session().chunks,  # the worker thread's connection (SQLite)
                vector,
                package=package,
                depth=self.tuning.vec_depth,
                examples_only=examples_only,
            )
        )
        clock.lap("vec", t)
        return [cid for cid, _ in found], None, vector
