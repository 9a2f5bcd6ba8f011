"""What the cross-encoder is given (each chunk as a passage) and what of its output can be
used (one finite score per passage). Pure; `rerank_stage.py` calls the reranker."""

from __future__ import annotations

import math
from collections.abc import Sequence

from hexlocal_core.index.rows import ChunkRow
from hexlocal_core.search.tuning import RERANK_PASSAGE_CHARS


def passage(row: ChunkRow, chars: int = RERANK_PASSAGE_CHARS) -> str:
    head = row.title
    if row.signature:
        head = f"{head} {row.signature}"
    return f"{head}\n{row.content[:chars]}"


def unusable_scores(raw: Sequence[float], expected: int) -> str | None:
    """Why the reranker's output cannot be used, or None when it can."""
    if len(raw) != expected:
        return f"the cross-encoder returned {len(raw)} scores for {expected} passages"
    try:
        finite = all(math.isfinite(float(s)) for s in raw)
    except (TypeError, ValueError):
        finite = False
    if not finite:
        return "the cross-encoder returned a score that is not a finite number"
    return None
