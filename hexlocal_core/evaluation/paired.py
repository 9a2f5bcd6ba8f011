"""Two runs of the same queries compared query by query: is the difference more than noise?

A threshold per set sits inside the noise of these sets: one query falling from rank 1 to
rank 2 moves a 50-query set's MRR@10 by 0.01. Pairing the queries (each query's reciprocal
rank in run B minus its own in run A) and resampling them with replacement gives the
difference with an interval. Resampling is stratified by set, so a pooled interval keeps
each set's share of the queries, as the pooled mean does.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from attrs import frozen

from hexlocal_core.evaluation.metrics import reciprocal_rank

RESAMPLES = 10_000
CONFIDENCE = 0.95


@frozen
class PairedDifference:
    """MRR@10 of run A and run B over the same queries, and B - A with its interval."""

    queries: int
    a: float
    b: float
    low: float  # the CONFIDENCE interval of b - a, from the paired bootstrap
    high: float
    better: int  # queries whose answer B ranks higher than A does
    worse: int

    @property
    def delta(self) -> float:
        return self.b - self.a


def paired_difference(
    a_ranks: Sequence[int | None],
    b_ranks: Sequence[int | None],
    strata: Sequence[str] | None = None,
    *,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> PairedDifference:
    """`a_ranks[i]` and `b_ranks[i]` are one query's first relevant rank in each run;
    `strata[i]` its set (queries are resampled within their set)."""
    if len(a_ranks) != len(b_ranks) or (strata is not None and len(strata) != len(a_ranks)):
        raise ValueError("both runs and the strata must cover the same queries")
    if not a_ranks:
        raise ValueError("no queries to compare")
    a = np.array([reciprocal_rank(r) for r in a_ranks])
    b = np.array([reciprocal_rank(r) for r in b_ranks])
    diff = b - a
    groups = _groups(strata or [""] * len(diff))
    rng = np.random.default_rng(seed)
    # One bootstrap mean per resample: each set's queries drawn from that set, with
    # replacement, as many as it has; the pooled mean over all of them.
    totals = np.zeros(resamples)
    for members in groups:
        picks = rng.integers(0, len(members), size=(resamples, len(members)))
        totals += diff[members][picks].sum(axis=1)
    means = totals / len(diff)
    tail = (1 - CONFIDENCE) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return PairedDifference(
        queries=len(diff),
        a=float(a.mean()),
        b=float(b.mean()),
        low=float(low),
        high=float(high),
        better=int((diff > 0).sum()),
        worse=int((diff < 0).sum()),
    )


def _groups(strata: Sequence[str]) -> list[np.ndarray]:
    index: dict[str, list[int]] = {}
    for i, name in enumerate(strata):
        index.setdefault(name, []).append(i)
    return [np.array(members) for members in index.values()]
