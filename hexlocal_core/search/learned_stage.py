"""The learned-ranking stage of one search: the first fused candidates, described by what
the arms saw of them (`ArmsSaw`) as `learned_rank.Candidate`s, put in the learned order
with the rest of the fused order after them.

Apart from `engine.py` because it changes with the features (docs/architecture.md, "A
retrieval signal"): the evidence a feature needs is gathered here (each arm's rank and
BM25, the cosine to the query, the judge's score, what the anchor arm says of the item),
while the engine only decides when the stage runs and what it is handed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from attrs import frozen

from hexlocal_core.index.seam import ChunkReads
from hexlocal_core.ports import Vectors
from hexlocal_core.search.anchor_arm import AnchorArm, AnchorEvidence
from hexlocal_core.search.learned_rank import Candidate, learned_order
from hexlocal_core.search.query_shape import Shape
from hexlocal_core.search.rows import Rows, place


@frozen
class ArmsSaw:
    """What the arms saw of one query, for the learned ranking."""

    package: str
    shape: Shape
    fts_text: str  # what the keyword arm searched for (the query, or an error's parts)
    bm25: dict[int, float]
    fts_ids: list[int]
    vec_ids: list[int]
    vector: Vectors
    judged: dict[int, float] | None = None  # the reranker's scores, as learned features


def candidates(
    reads: ChunkReads,
    arms: ArmsSaw,
    fused: list[int],
    rows: Rows,
    *,
    depth: int,
    anchors: AnchorArm | None,
) -> list[Candidate]:
    """The first `depth` fused ids as candidates; with `anchors`, what they say of each
    candidate's item too."""
    head = fused[:depth]
    stored = reads.stored_vectors(arms.package, head)
    query = np.asarray(arms.vector, dtype=np.float32).reshape(-1)
    fused_place = {cid: n for n, cid in enumerate(fused, start=1)}
    read = rows.get(head)
    said: dict[str, AnchorEvidence] = {}
    if anchors is not None:
        refs = tuple(dict.fromkeys(row.ref for row in read))
        said = anchors.describe(arms.package, refs, arms.vector)
    return [
        Candidate(
            row=row,
            fused_rank=fused_place[row.id],
            fts_rank=place(arms.fts_ids, row.id),
            vec_rank=place(arms.vec_ids, row.id),
            cosine=_cosine(query, stored.get(row.id)),
            bm25=arms.bm25.get(row.id),
            judge=(arms.judged or {}).get(row.id),
            anchor_text=said[row.ref].text if row.ref in said else None,
            anchor_cosine=said[row.ref].cosine if row.ref in said else None,
        )
        for row in read
    ]


def reordered(
    arms: ArmsSaw, fused: list[int], pool: Sequence[Candidate], weight: float
) -> list[int]:
    """The candidates in the learned order (weighing `weight` against the fused order's
    1.0), then the rest of the fused ids."""
    ordered = learned_order(arms.shape, arms.fts_text, pool, weight)
    return list(dict.fromkeys([*ordered, *fused]))


def _cosine(query: npt.NDArray[np.float32], stored: npt.ArrayLike | None) -> float | None:
    if stored is None:
        return None
    return float(query @ np.asarray(stored, dtype=np.float32).reshape(-1))
