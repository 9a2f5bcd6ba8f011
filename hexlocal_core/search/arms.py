"""The two retrieval arms over the index's reads (depth and BM25 weights: `tuning.py`).

The SQL is the index's (`index.seam.ChunkReads`); scope (package, examples-only) is applied
inside each query, before the depth cut, so the budget is never spent on other packages.
"""

from __future__ import annotations

from collections.abc import Sequence

from hexlocal_core.index.seam import ChunkReads
from hexlocal_core.ports import Vectors
from hexlocal_core.search.tuning import ARM_DEPTH, BM25_WEIGHTS


def keyword_arm(
    reads: ChunkReads,
    phrases: Sequence[str],
    *,
    package: str,
    depth: int = ARM_DEPTH,
    examples_only: bool = False,
    weights: tuple[float, float, float] = BM25_WEIGHTS,
    package_stats: bool = True,
    rescore: int = 1,
) -> list[tuple[int, float]]:
    """(chunk id, bm25 score; lower is better) for sanitized phrases (`to_phrases`).

    `package_stats`: BM25's document frequencies from the package's own docs, not from
    every package in the index (see `index/sqlite/fts.py`).
    """
    if package_stats:
        return reads.package_keyword_hits(
            phrases,
            package=package,
            depth=depth,
            examples_only=examples_only,
            weights=weights,
            rescore=rescore,
        )
    return reads.keyword_hits(
        " OR ".join(phrases),
        package=package,
        depth=depth,
        examples_only=examples_only,
        weights=weights,
    )


def vector_arm(
    reads: ChunkReads,
    query_vector: Vectors,
    *,
    package: str,
    depth: int = ARM_DEPTH,
    examples_only: bool = False,
) -> list[tuple[int, float]]:
    """(chunk id, cosine distance) nearest first, inside the package partition."""
    return reads.vector_hits(
        query_vector, package=package, depth=depth, examples_only=examples_only
    )
