"""The measures, computed here from ranks (never taken from the engine).

* recall@k: share of queries with a relevant chunk among the first k returned. With one
  expected answer per query (or several equally good ones) this is success@k.
* MRR@k: mean of 1/rank of the first relevant chunk, 0 when none is in the first k.
* cand: share of queries whose relevant chunk is anywhere in the fused candidate pool;
  the ceiling any reranking of that pool could reach.
* median ms: wall time of the search call, as a caller sees it.

Ranks count chunks, not distinct items: that is what a caller reads.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from attrs import frozen

RECALL_K = 5
MRR_K = 10


def recall_at(ranks: Sequence[int | None], k: int = RECALL_K) -> float:
    if not ranks:
        return 0.0
    return sum(1 for r in ranks if r is not None and r <= k) / len(ranks)


def reciprocal_rank(rank: int | None, k: int = MRR_K) -> float:
    """1/rank of the first relevant chunk, 0 when none is in the first k."""
    return 1.0 / rank if rank is not None and 0 < rank <= k else 0.0


def mrr_at(ranks: Sequence[int | None], k: int = MRR_K) -> float:
    if not ranks:
        return 0.0
    return sum(reciprocal_rank(r, k) for r in ranks) / len(ranks)


def share(flags: Sequence[bool]) -> float:
    return sum(flags) / len(flags) if flags else 0.0


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (p50, p95): an observed value, never an interpolation."""
    if not values:
        return 0.0
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, math.ceil(pct / 100 * len(ordered)) - 1))
    return float(ordered[index])


@frozen
class ModeScore:
    mode: str
    kind: str  # one of queries.KINDS present in the query set, or "all"
    queries: int
    recall_at_5: float
    mrr_at_10: float
    cand: float
    median_ms: float

    def to_dict(self) -> dict[str, float | int | str]:
        return {
            "mode": self.mode,
            "kind": self.kind,
            "queries": self.queries,
            "recall@5": round(self.recall_at_5, 4),
            "mrr@10": round(self.mrr_at_10, 4),
            "cand": round(self.cand, 4),
            "median_ms": round(self.median_ms, 2),
        }


def score_runs(
    mode: str, kind: str, ranks: Sequence[int | None], in_pool: Sequence[bool], ms: Sequence[float]
) -> ModeScore:
    """One row of the table: the measures over the given per-query outcomes."""
    return ModeScore(
        mode=mode,
        kind=kind,
        queries=len(ranks),
        recall_at_5=recall_at(ranks),
        mrr_at_10=mrr_at(ranks),
        cand=share(in_pool),
        median_ms=median(ms),
    )
