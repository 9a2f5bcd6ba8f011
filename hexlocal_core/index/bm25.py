"""BM25 as FTS5's `bm25()` computes it, for the scores both engines compute themselves.

SQLite re-scores FTS5's candidates with one package's statistics (`sqlite/fts.py`);
PostgreSQL has no BM25 and scores every matching row (`pg/fts.py`). Both use this
formula, so a package's keyword ranks are the same on either engine: k1 = 1.2, b = 0.75,
idf floored at 1e-6, as FTS5 does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

K1 = 1.2
B = 0.75
IDF_FLOOR = 1e-6  # FTS5's: a term in more than half the documents still counts a little


def idf(documents: int, with_term: int) -> float:
    value = math.log((documents - with_term + 0.5) / (with_term + 0.5))
    return max(value, IDF_FLOOR)


def score(terms: Iterable[tuple[float, float]], length: int, avgdl: float) -> float:
    """BM25 of one row of `length` tokens: `terms` are (idf, weighted frequency) of each
    phrase it holds; `avgdl` the average row length."""
    norm = K1 * (1 - B + B * length / avgdl) if avgdl > 0 else K1
    return sum(weight * f * (K1 + 1) / (f + norm) for weight, f in terms)
