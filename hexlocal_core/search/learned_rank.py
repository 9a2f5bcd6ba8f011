"""A learned linear ranking of the fused pool, fused back with the fused order.

The arms and their fusion see ranks; they do not see what a chunk is. Twenty-one features
of each of the first `tuning.LEARNED_DEPTH` fused candidates (the arms' ranks and raw
scores, how many of the query's words its title and body hold, its doc type, its length)
are weighed per query shape, and the order they give is fused with the fused order by
RRF, as the reranker's is (`fusion.rerank_fuse`): a candidate the weights like can rise,
not jump over one that both orders place near the top.

The weights are data, `fitted/learned_rank.json`, written by `scripts/fit_learned_rank.py
--out`; `fitted/learned_rank.provenance.json` beside them says how they were made (the
sets, the model, the commit, the date), and lever 16 in docs/lab/learned-ranking.md has
every run and the held-out check. Refit them when the features, the arms, the chunker or
the model change.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from attrs import frozen

from hexlocal_core.index.rows import ChunkRow
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

WEIGHTS_FILE = Path(__file__).with_name("fitted") / "learned_rank.json"


def load_weights(path: Path) -> Mapping[Shape, Mapping[str, float]]:
    """The weights of each query shape, as the fit script wrote them. Raises ValueError
    naming the file for one that is absent or not such weights: it ships in the wheel,
    so either means a broken install (reinstall hexlocal), never bad user input."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        shapes = data["shapes"]
        weights = {
            Shape(name): {str(k): float(v) for k, v in shapes[name].items()} for name in shapes
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"the learned ranking's weights {path} cannot be read: {exc!r}") from exc
    missing = [shape.value for shape in Shape if shape not in weights]
    if missing or not all(math.isfinite(v) for w in weights.values() for v in w.values()):
        raise ValueError(f"the learned ranking's weights {path} lack a shape or a number")
    return weights


WEIGHTS = load_weights(WEIGHTS_FILE)


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
