"""The two retrieval arms: how deep each looks and how BM25 weighs the columns.

The SQL is the index's (`index.seam.ChunkReads`); scope (package, examples-only) is applied
inside each query, before the depth cut, so the budget is never spent on other packages.
"""

from __future__ import annotations

from collections.abc import Sequence

from hexlocal_core.index.seam import ChunkReads
from hexlocal_core.ports import Vectors

# Candidates per arm. 30 rather than 15: once the pool keeps one chunk per item, deeper
# arms let more distinct items compete (measured: same MRR, +1-2 points of `cand`), and
# both arms stay ~1 ms at this depth.
DEPTH = 30
# bm25 column weights: title, body, split identifier parts. A title hit says far more
# about what a chunk is than a body mention does.
BM25_WEIGHTS = (8.0, 1.0, 1.5)


def keyword_arm(
    reads: ChunkReads,
    phrases: Sequence[str],
    *,
    package: str,
    depth: int = DEPTH,
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
    depth: int = DEPTH,
    examples_only: bool = False,
) -> list[tuple[int, float]]:
    """(chunk id, cosine distance) nearest first, inside the package partition."""
    return reads.vector_hits(
        query_vector, package=package, depth=depth, examples_only=examples_only
    )
