"""A learned linear ranking of the fused pool, fused back with the fused order.

The arms and their fusion see ranks; they do not see what a chunk is. Twenty-one features
of each of the first `tuning.LEARNED_DEPTH` fused candidates (the arms' ranks and raw
scores, how many of the query's words its title and body hold, its doc type, its length)
are weighed per query shape, and the order they give is fused with the fused order by
RRF, as the reranker's is (`fusion.rerank_fuse`): a candidate the weights like can rise,
not jump over one that both orders place near the top.

The weights were fitted once (pairwise logistic loss, L2 0.001) on the six spent query
sets (`benchmarks/bench_retrieval.py`: dev, examples, agent, confirm, errors,
heldout_errors) and chosen by leave-one-set-out cross-validation; lever 16 in
docs/lab/learned-ranking.md has every run and the held-out check. They were fitted on the fp32
embedder's candidates and kept when int8 became the default (judged with them). Refit
them when the features, the arms, the chunker or the model change: the fit is
`scripts/fit_learned_rank.py`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

from attrs import frozen

from hexlocal_core.index.chunks import ChunkRow
from hexlocal_core.search.fusion import rerank_fuse
from hexlocal_core.search.query_shape import Shape

# Words that say nothing about which chunk answers: dropped from the overlap features.
_STOP = frozenset(
    "a an the of to in on for and or is are be by with from as at it its this that how do i"
    " my can what when why which does use using get set not no into via".split()
)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
# Doc types the weights know, and the ones folded into them.
_DOC_TYPE = {"macrocallback": "macro", "opaque": "type"}

_SHARED = {
    "title_any": 0.156,
    "dt_behaviour": 0.645,
    "dt_protocol": 1.093,
    "dt_task": 0.461,
    "dt_macro": -0.114,
    "dt_callback": 0.501,
    "dt_type": -1.569,
    "clen": 3.123,
    "example": 0.257,
}
WEIGHTS: Mapping[Shape, Mapping[str, float]] = {
    Shape.PROSE: _SHARED
    | {
        "rrf": 1.313,
        "fts": 0.605,
        "vec": 1.948,
        "cos": 3.082,
        "bm25": 0.515,
        "title_ov": 0.466,
        "body_ov": 1.488,
        "dt_module": 0.547,
        "dt_exception": -1.709,
        "dt_function": 0.631,
        "dt_extras": -1.045,
        "moddoc": -0.138,
    },
    Shape.ERROR: _SHARED
    | {
        "rrf": 1.056,
        "fts": 0.681,
        "vec": 1.526,
        "cos": 2.741,
        "bm25": 1.998,
        "title_ov": 1.993,
        "body_ov": 2.247,
        "dt_module": 0.536,
        "dt_exception": -2.581,
        "dt_function": 0.748,
        "dt_extras": -0.218,
        "moddoc": 0.506,
    },
    Shape.IDENTIFIER: _SHARED
    | {
        "rrf": 1.187,
        "fts": 1.626,
        "vec": 0.977,
        "cos": 2.045,
        "bm25": 2.498,
        "title_ov": 2.283,
        "body_ov": 0.763,
        "dt_module": 0.951,
        "dt_exception": -1.448,
        "dt_function": 0.158,
        "dt_extras": -0.641,
        "moddoc": 0.549,
    },
}


@frozen
class Candidate:
    """One fused candidate and what the arms said about it (ranks are 1-based)."""

    row: ChunkRow
    fused_rank: int
    fts_rank: int | None
    vec_rank: int | None
    cosine: float | None  # to the query vector (before relevance feedback)
    bm25: float | None  # FTS5's bm25: negative, lower is better
    anchor_text: str | None = None  # what other docs say where they refer to its item
    anchor_cosine: float | None = None  # the query's best cosine to one of those sentences
    judge: float | None = None  # the reranker's score, when it judged this candidate


def words(text: str) -> frozenset[str]:
    """Lower-cased words of a text, identifiers split at case changes, a plural `s` cut."""
    # One pass over the whole text (a chunk body is read for every candidate of every
    # search), each distinct token once.
    lowered = {t.lower() for t in _WORD.findall(_CAMEL.sub(r"\1 \2", text))}
    return frozenset(
        w[:-1] if w.endswith("s") and len(w) > 3 else w
        for w in lowered
        if len(w) > 1 and w not in _STOP
    )


def _by_rank(rank: int | None) -> float:
    return 1.0 / math.log2(1 + rank) if rank else 0.0


def features(query_words: frozenset[str], pool: Sequence[Candidate]) -> list[dict[str, float]]:
    """The features of each candidate; raw scores are read against the pool's."""
    cosines = [c.cosine for c in pool if c.cosine is not None]
    floor = min(cosines, default=0.0)
    best_bm25 = min((c.bm25 for c in pool if c.bm25 is not None), default=None)
    out = [_features(query_words, c, floor, best_bm25) for c in pool]
    judged = sorted((c.judge for c in pool if c.judge is not None), reverse=True)
    for f, c in zip(out, pool, strict=True):
        if c.judge is not None:
            f["judged"] = 1.0
            f["judge_rel"] = c.judge - judged[0]
            f["judge_rank"] = _by_rank(judged.index(c.judge) + 1)
    return out


def _features(
    query_words: frozenset[str], c: Candidate, floor: float, best_bm25: float | None
) -> dict[str, float]:
    row = c.row
    title = words(f"{row.title} {row.ref.replace('#', ' ')}")
    body = words(row.content)
    share = 1.0 / len(query_words) if query_words else 0.0
    doc_type = _DOC_TYPE.get(row.doc_type, row.doc_type)
    out = {
        "rrf": _by_rank(c.fused_rank),
        "fts": _by_rank(c.fts_rank),
        "vec": _by_rank(c.vec_rank),
        "cos": floor if c.cosine is None else c.cosine,
        "bm25": c.bm25 / best_bm25 if c.bm25 is not None and best_bm25 else 0.0,
        "title_ov": len(query_words & title) * share,
        "body_ov": len(query_words & body) * share,
        "title_any": 1.0 if query_words & title else 0.0,
        "moddoc": 1.0 if "#" not in row.ref or "#module-" in row.ref else 0.0,
        "clen": math.log(1 + len(row.content)) / 8,
        "example": 1.0 if row.has_example else 0.0,
    }
    out[f"dt_{doc_type}"] = 1.0
    if c.anchor_text is not None:
        out["has_anc"] = 1.0
        out["anc_ov"] = len(query_words & words(c.anchor_text)) * share
        out["anc_cos"] = c.anchor_cosine or 0.0
    return out


def score(shape: Shape, query_words: frozenset[str], pool: Sequence[Candidate]) -> list[float]:
    weights = WEIGHTS[shape]
    return [
        sum(weights.get(name, 0.0) * value for name, value in f.items())
        for f in features(query_words, pool)
    ]


def learned_order(
    shape: Shape, query_text: str, pool: Sequence[Candidate], weight: float = 1.0
) -> list[int]:
    """The pool's chunk ids, the learned order (weighing `weight` against the fused
    order's 1.0) fused back with the fused one."""
    ranked = sorted(pool, key=lambda c: c.fused_rank)
    scores = score(shape, words(query_text), ranked)
    return rerank_fuse([c.row.id for c in ranked], scores, weight=weight)
