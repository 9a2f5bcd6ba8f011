"""The two retrieval arms. Scope (package, examples-only) is applied inside each query,
before the depth cut, so the budget is never spent on other packages."""

from __future__ import annotations

import apsw
import numpy as np

from hexlocal_core.index.store import CHUNK_VEC_TABLE
from hexlocal_core.ports import Vectors

# Candidates per arm. 30 rather than 15: once the pool keeps one chunk per item, deeper
# arms let more distinct items compete (measured: same MRR, +1-2 points of `cand`), and
# both arms stay ~1 ms at this depth.
DEPTH = 30
# bm25 column weights: title, body, split identifier parts. A title hit says far more
# about what a chunk is than a body mention does.
BM25_WEIGHTS = (8.0, 1.0, 1.5)


def keyword_arm(
    conn: apsw.Connection,
    match: str,
    *,
    package: str,
    depth: int = DEPTH,
    examples_only: bool = False,
    weights: tuple[float, float, float] = BM25_WEIGHTS,
) -> list[tuple[int, float]]:
    """(chunk id, bm25 score; lower is better) for a sanitized MATCH expression."""
    w = ", ".join(str(float(x)) for x in weights)
    sql = (
        f"SELECT c.id, bm25(chunks_fts, {w}) AS score FROM chunks_fts"
        " JOIN chunks c ON c.id = chunks_fts.rowid"
        " WHERE chunks_fts MATCH ? AND c.package = ?"
        + (" AND c.has_example = 1" if examples_only else "")
        + " ORDER BY score LIMIT ?"
    )
    return [(int(r[0]), float(r[1])) for r in conn.execute(sql, (match, package, depth))]


def vector_arm(
    conn: apsw.Connection,
    query_vector: Vectors,
    *,
    package: str,
    depth: int = DEPTH,
    examples_only: bool = False,
) -> list[tuple[int, float]]:
    """(chunk id, cosine distance) nearest first, inside the package partition."""
    blob = np.asarray(query_vector, dtype=np.float32).reshape(-1).tobytes()
    sql = (
        f"SELECT rowid, distance FROM {CHUNK_VEC_TABLE}"
        " WHERE embedding MATCH ? AND k = ? AND package = ?"
        + (" AND has_example = 1" if examples_only else "")
    )
    return [(int(r[0]), float(r[1])) for r in conn.execute(sql, (blob, depth, package))]
