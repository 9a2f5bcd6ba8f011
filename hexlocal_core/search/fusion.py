"""Reciprocal rank fusion, for retrieval arms and for the reranker's bounded authority."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)

RRF_K = 60


def rrf(rankings: Sequence[Sequence[K]], *, k: int = RRF_K, weights: Sequence[float] | None = None) -> list[K]:
    """Union of the rankings ordered by sum of weight / (k + rank); ties keep first-seen order.

    Union, not intersection: a document seen by one arm only still competes.
    """
    scores: dict[K, float] = {}
    first_seen: dict[K, int] = {}
    ws = weights or [1.0] * len(rankings)
    for ranking, weight in zip(rankings, ws, strict=True):
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + weight / (k + rank)
            first_seen.setdefault(key, len(first_seen))
    return sorted(scores, key=lambda key: (-scores[key], first_seen[key]))


def rerank_fuse(retrieval: Sequence[K], reranker_scores: Sequence[float], *, k: int = RRF_K) -> list[K]:
    """Fuse the reranker's order with the retrieval order (bounded authority).

    With equal weights and the same k, a document the reranker ranks first but retrieval
    ranks last can move up but cannot jump over one both place near the top.
    """
    if len(retrieval) != len(reranker_scores):
        raise ValueError("one reranker score per retrieved document is required")
    by_score = sorted(range(len(retrieval)), key=lambda i: (-reranker_scores[i], i))
    reranked = [retrieval[i] for i in by_score]
    return rrf([list(retrieval), reranked], k=k)
