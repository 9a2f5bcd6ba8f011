"""The retrieval knobs in one value (`SearchTuning`), and every default they start from.

The numbers live here and nowhere else: the arms, the fusion, the learned ranking and the
reranker's input take them as arguments (their defaults name these constants), so a
benchmark varies one by passing a `SearchTuning`, never by patching a module.
"""

from __future__ import annotations

from attrs import frozen

from hexlocal_core.model import SearchMode
from hexlocal_core.search.query_shape import Shape

POOL = 10  # hits a search returns at most, and the pool the reranker judges
# Candidates per arm. 30 rather than 15: once the pool keeps one chunk per item, deeper
# arms let more distinct items compete (measured: same MRR, +1-2 points of `cand`), and
# both arms stay ~1 ms at this depth.
ARM_DEPTH = 30
# bm25 column weights: title, body, split identifier parts. A title hit says far more
# about what a chunk is than a body mention does.
BM25_WEIGHTS = (8.0, 1.0, 1.5)
RRF_K = 60  # reciprocal rank fusion's k, for the arms and for the reranker's authority
# Pages about the project rather than its API (fusion.BOILERPLATE_PAGE): release notes
# mention every function once and licences match every legal word. They stay reachable
# when nothing else matches, but at half the fused score they no longer take the slots
# of the docs that explain.
BOILERPLATE_WEIGHT = 0.5
# Fused candidates the learned ranking re-orders (cross-validated: 20 held every set).
LEARNED_DEPTH = 20
# The head of each chunk the cross-encoder reads: ~100 word pieces, plus the title line.
# ms-marco was trained on passages of about 60 words (~350 characters), so the opening
# of a chunk is what it judges best, and its cost grows faster than linearly with length
# (10 query-chunk pairs per call on 2 busy cores, p50: 1200 chars 1095 ms, 480: 773 ms,
# 360: 598 ms; only the ratios matter, the machine was shared).
RERANK_PASSAGE_CHARS = 360


@frozen
class SearchTuning:
    """The retrieval knobs in one value, so benchmarks and experiments vary them without
    patching modules. The defaults are the measured choice (docs/decisions/, docs/lab/)."""

    fts_depth: int = ARM_DEPTH
    vec_depth: int = ARM_DEPTH
    pool: int = POOL
    rrf_k: int = RRF_K
    fts_weight: float = 1.0
    vec_weight: float = 1.0
    bm25: tuple[float, float, float] = BM25_WEIGHTS
    boilerplate_weight: float = BOILERPLATE_WEIGHT
    one_chunk_per_item: bool = True
    bm25_package_stats: bool = True  # BM25 statistics per package (index/sqlite/fts.py)
    bm25_rescore: int = 1  # candidates re-scored with them: this many times the depth
    # Error pastes (see search/query_shape.py): both arms read the message without its
    # noise, plus the functions it names. Measured (agent set, 31 error queries, rrf):
    # recall@5 0.742 -> 0.871, MRR@10 0.574 -> 0.635. Dropping the exception module from
    # the keyword terms lost recall (0.806); adding the named functions' own chunks as a
    # third fused ranking lost both (0.839 / 0.602): the function that raised is often not
    # the item that explains the cause.
    error_queries: bool = True
    error_exception_terms: bool = True  # keep the exception module among the FTS terms
    # Read the calls an error paste prints with their arguments (`parse_error(calls=)`);
    # off: not kept on the held-out OTP set (docs/lab/otp-retrieval.md).
    error_calls: bool = False
    # Error pastes' query vector mapped toward the explaining chunks (search/query_adapter.py,
    # lever 21), when the map was fitted for the embedder's model. Judged with maps fitted
    # without the query's package (heldout_sixth, 30 errors): MRR@10 0.734 -> 0.757.
    error_adapter: bool = True
    # (fts, vector) weights per query shape; a shape not named (or None): fts_weight /
    # vec_weight. Error pastes lean on the keyword arm, which alone matched the fusion on
    # both error sets written for the check (lever 15, docs/lab/retrieval-levers.md):
    # MRR@10 held-out errors 0.524 -> 0.562, agent errors 0.635 -> 0.648, recall@5 held or up.
    shape_weights: tuple[tuple[str, float, float], ...] | None = (("error", 2.0, 1.0),)
    # Relevance feedback on the vector arm, prose queries in rrf/rerank (search/feedback.py,
    # where the measurements are); 0 turns it off.
    feedback_weight: float = 0.6
    feedback_depth: int = 3
    # Prose queries embed as the mean of the query and its plain words (search/query_rewrite.py).
    vector_rewrite: bool = True
    # The learned ranking of the first `learned_depth` fused candidates, fused back with the
    # fused order (search/learned_rank.py); rrf and rerank, both arms present.
    learned_rank: bool = True
    learned_depth: int = LEARNED_DEPTH
    learned_weight: float = 1.0  # the learned order's weight against the fused order's 1.0
    # The anchor arm (search/anchor_arm.py), when the engine has one: its (keyword, vector)
    # rankings' weights in the fusion (0: not fused), the query shapes they run for, and
    # whether the learned ranking's candidates carry what the anchors say about them.
    anchor_weights: tuple[float, float] = (0.0, 0.0)
    anchor_shapes: tuple[str, ...] = ("prose",)
    anchor_features: bool = True
    # The reranker's input and authority: the characters of each chunk it reads (after the
    # title line), and whether its order is fused back with retrieval's ("bounded", see
    # `fusion.rerank_fuse`) or taken as is ("full").
    rerank_chars: int = RERANK_PASSAGE_CHARS
    rerank_authority: str = "bounded"
    # Where the reranker's scores go in rerank mode: "after", it re-orders the pool the
    # learned ranking made; "learned", its scores of the first `judge_depth` fused
    # candidates are features of the learned ranking (search/learned_rank.py).
    rerank_stage: str = "after"
    judge_depth: int = 10

    def fused_depth(self, mode: SearchMode) -> int:
        """How deep the fused list is cut: the pool, or the learned ranking's depth."""
        return max(self.pool, self.learned_depth) if self.learns(mode) else self.pool

    def learns(self, mode: SearchMode) -> bool:
        return self.learned_rank and self.learned_depth > 0 and mode.fuses

    def anchors_for(self, mode: SearchMode, shape: Shape) -> bool:
        return any(self.anchor_weights) and mode.fuses and shape.value in self.anchor_shapes

    def arm_weights(self, shape: Shape) -> tuple[float, float]:
        for name, fts, vec in self.shape_weights or ():
            if name == shape.value:
                return fts, vec
        return self.fts_weight, self.vec_weight
