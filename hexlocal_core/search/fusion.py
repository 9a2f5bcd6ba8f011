"""Reciprocal rank fusion, for retrieval arms and for the reranker's bounded authority,
and the two priors applied to the fused list (boilerplate pages, one chunk per item)."""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

from hexlocal_core.search.tuning import BOILERPLATE_WEIGHT, RRF_K

K = TypeVar("K", bound=Hashable)

# Pages about the project rather than its API (their weight: tuning.BOILERPLATE_WEIGHT).
BOILERPLATE_PAGE = re.compile(
    r"^(?:changelog|changes|history|news|release[-_]?notes|license|licence|notice"
    r"|code[-_]of[-_]conduct|contributing)\.html$",
    re.IGNORECASE,
)


def rrf(
    rankings: Sequence[Sequence[K]],
    *,
    k: int = RRF_K,
    weights: Sequence[float] | None = None,
    scale: Mapping[K, float] | None = None,
) -> list[K]:
    """Union of the rankings ordered by sum of weight / (k + rank); ties keep first-seen order.

    Union, not intersection: a document seen by one arm only still competes. `scale`
    multiplies a document's fused score (absent keys keep 1.0): a prior, not an arm.
    """
    scores: dict[K, float] = {}
    first_seen: dict[K, int] = {}
    ws = weights or [1.0] * len(rankings)
    for ranking, weight in zip(rankings, ws, strict=True):
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + weight / (k + rank)
            first_seen.setdefault(key, len(first_seen))
    for key, factor in (scale or {}).items():
        if key in scores:
            scores[key] *= factor
    return sorted(scores, key=lambda key: (-scores[key], first_seen[key]))


def boilerplate_scale(pages: Mapping[K, str], weight: float = BOILERPLATE_WEIGHT) -> dict[K, float]:
    """The fusion scale for documents on boilerplate pages (see BOILERPLATE_PAGE)."""
    if weight == 1.0:
        return {}
    return {key: weight for key, page in pages.items() if BOILERPLATE_PAGE.match(page)}


def one_per_key(ranked: Sequence[K], key_of: Mapping[K, Hashable]) -> list[K]:
    """The first (best-placed) document of each key, in order; unknown documents are kept.

    Used with an item's ref as the key: the chunks of one long section then occupy one
    slot, and the relevant part of it is the one the arms placed highest.
    """
    seen: set[Hashable] = set()
    out: list[K] = []
    for doc in ranked:
        key = key_of.get(doc, doc)
        if key not in seen:
            seen.add(key)
            out.append(doc)
    return out


def rerank_fuse(
    retrieval: Sequence[K],
    reranker_scores: Sequence[float],
    *,
    k: int = RRF_K,
    weight: float = 1.0,
) -> list[K]:
    """Fuse the reranker's order with the retrieval order (bounded authority).

    With equal weights and the same k, a document the reranker ranks first but retrieval
    ranks last can move up but cannot jump over one both place near the top. `weight` is
    the reranker order's against retrieval's 1.0: a little above 1 gives it the ties.
    """
    if len(retrieval) != len(reranker_scores):
        raise ValueError("one reranker score per retrieved document is required")
    by_score = sorted(range(len(retrieval)), key=lambda i: (-reranker_scores[i], i))
    reranked = [retrieval[i] for i in by_score]
    return rrf([list(retrieval), reranked], k=k, weights=[1.0, weight])
