"""The cross-encoder's stage of one engine's searches: the pool's rows as passages, the
scores checked, and the pool's order from them (fused back with retrieval's under bounded
authority, `SearchTuning.rerank_authority`); as a judge, only its scores, which the
learned ranking weighs as a feature.

Every way it can go wrong degrades to the order it was given, with a notice: no reranker
(said on the engine's first answer only: a plain install's state until the cross-encoder
is fetched), a model not on this machine yet (asked again every answer, so reranking
starts once it arrives), a failure, or scores that cannot be used.

Apart from `engine.py` because it changes with the reranker (its input, its failures, how
far its order is trusted), not with how the arms are run and fused. The engine hands it
the reranker on every call, so a caller may swap the engine's `reranker`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from hexlocal_core.errors import ModelUnavailable
from hexlocal_core.model import Notice
from hexlocal_core.ports import Reranker
from hexlocal_core.search import notices
from hexlocal_core.search.fusion import rerank_fuse
from hexlocal_core.search.rerank_input import passage, unusable_scores
from hexlocal_core.search.rows import Rows
from hexlocal_core.search.tuning import SearchTuning

log = logging.getLogger("hexlocal.search")

# Logs a degradation (once per message; a traceback for an exception that is a bug).
Warn = Callable[[str, BaseException | None], None]


class RerankStage:
    """One engine's reranking, and whether it has said yet that there is no reranker."""

    def __init__(self, warn: Warn) -> None:
        self._warn = warn
        self._told_absent = False

    def absent(self, reason: ModelUnavailable | None = None) -> Notice | None:
        """The short `rerank_unavailable` notice, on the engine's first answer only."""
        if self._told_absent:
            return None
        self._told_absent = True
        # Info, not a warning: no reranker is a plain install's normal state, and the notice
        # already tells the user (a CLI printed both).
        if reason is None:
            log.info(notices.NO_RERANKER.message)
        else:
            log.info("%s (%s)", notices.NO_RERANKER.message, reason)
        return notices.NO_RERANKER

    async def judge(
        self,
        reranker: Reranker | None,
        query: str,
        ids: list[int],
        rows: Rows,
        tuning: SearchTuning,
    ) -> tuple[dict[int, float], Notice | None]:
        """The reranker's scores of these candidates (empty when it cannot give them)."""
        if len(ids) < 2:
            return {}, None
        _, scores, notice = await self.rerank(reranker, query, ids, rows, tuning)
        return scores, notice

    async def rerank(
        self,
        reranker: Reranker | None,
        query: str,
        pool: list[int],
        rows: Rows,
        tuning: SearchTuning,
    ) -> tuple[list[int], dict[int, float], Notice | None]:
        """The pool in the reranker's order, its scores, and why not when it could not."""
        if reranker is None:
            return pool, {}, self.absent()
        read = await asyncio.to_thread(rows.get, pool)
        passages = [passage(r, tuning.rerank_chars) for r in read]
        try:
            raw = await reranker.score(query, passages)
        except ModelUnavailable as exc:
            # Not on this machine yet (or being fetched): the state of a fresh install, not
            # a failure. Asked again on every answer, so reranking starts once it arrives.
            return pool, {}, self.absent(exc)
        except Exception as exc:  # noqa: BLE001 - an optional stage must not fail the answer
            self._warn(f"rerank failed: {exc}", exc)
            return pool, {}, notices.rerank_failed(str(exc) or type(exc).__name__)
        problem = unusable_scores(raw, len(read))
        if problem is not None:
            self._warn(f"rerank failed: {problem}", None)
            return pool, {}, notices.rerank_failed(problem)
        ids = [r.id for r in read]
        scores = dict(zip(ids, (float(s) for s in raw), strict=True))
        if tuning.rerank_authority == "full":
            return sorted(ids, key=lambda i: -scores[i]), scores, None
        return rerank_fuse(ids, [scores[i] for i in ids]), scores, None
