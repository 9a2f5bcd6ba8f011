"""Where a judge and anchor text enter the engine: the reranker's input and authority, its
scores as features of the learned ranking, and the anchor arm's rankings and evidence.

Over jason 1.4.4 (the `jason_store` fixture: real parse and ingest, hashing embedder) with
rerankers and an anchor arm whose opinions are known.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from attrs import evolve

from hexlocal_core.index.sqlite.store import Store
from hexlocal_core.ports import Reranker, Vectors
from hexlocal_core.search import learned_rank
from hexlocal_core.search.anchor_arm import AnchorEvidence, AnchorRanking
from hexlocal_core.search.engine import SearchEngine, SearchOutcome
from hexlocal_core.search.learned_stage import ArmsSaw
from hexlocal_core.search.rows import Rows
from hexlocal_core.search.tuning import POOL, SearchTuning
from tests.support.helpers import HashingEmbedder, ScriptedReranker

PACKAGE = "jason"
QUERY = "encode a map to JSON"


def reverse(n: int) -> list[float]:
    return [float(i) for i in range(n)]


def agree(n: int) -> list[float]:
    return [float(n - i) for i in range(n)]


class Recording(SearchEngine):
    """Keeps the candidates the learned stage read."""

    pools: list[list[learned_rank.Candidate]]

    def _learned(self, arms: ArmsSaw, fused: list[int], rows: Rows) -> list[int]:
        self.pools.append(self._candidates(arms, fused, rows))
        return super()._learned(arms, fused, rows)


class PassageRecorder(ScriptedReranker):
    def __init__(self) -> None:
        super().__init__(agree)
        self.passages: list[str] = []

    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        self.passages.extend(passages)
        return await super().score(query, passages)


class FixedAnchors:
    """An anchor arm with a known opinion: one keyword ranking, one piece of evidence."""

    def __init__(self, keyword: tuple[int, ...], evidence: dict[str, AnchorEvidence]) -> None:
        self.keyword = keyword
        self.evidence = evidence
        self.ranked = 0

    def rank(
        self, package: str, phrases: tuple[str, ...], vector: Vectors | None, depth: int
    ) -> AnchorRanking:
        self.ranked += 1
        return AnchorRanking(self.keyword[:depth], ())

    def describe(
        self, package: str, refs: tuple[str, ...], vector: Vectors | None
    ) -> dict[str, AnchorEvidence]:
        return {r: e for r, e in self.evidence.items() if r in refs}


def _engine(
    store: Store,
    reranker: Reranker | None = None,
    anchors: FixedAnchors | None = None,
    **tune: object,
) -> Recording:
    engine = Recording(
        store,
        HashingEmbedder(),  # type: ignore[arg-type]
        reranker,
        tuning=evolve(SearchTuning(), **tune),  # type: ignore[arg-type]
        anchors=anchors,
    )
    engine.pools = []
    return engine


async def _search(engine: SearchEngine, mode: str = "rerank") -> SearchOutcome:
    return await engine.search(PACKAGE, QUERY, limit=POOL, mode=mode, exact=False)


def _ids(outcome: SearchOutcome) -> list[int]:
    return [h.chunk_id for h in outcome.hits]


async def test_full_authority_takes_the_judges_order(jason_store: Store) -> None:
    outcome = await _search(
        _engine(jason_store, ScriptedReranker(reverse), rerank_authority="full")
    )
    assert _ids(outcome) == list(reversed(outcome.pool))


async def test_the_judge_reads_as_many_characters_as_tuned(jason_store: Store) -> None:
    recorder = PassageRecorder()
    await _search(_engine(jason_store, recorder, rerank_chars=40))
    assert recorder.passages
    for text in recorder.passages:
        _, _, body = text.partition("\n")
        assert len(body) <= 40


async def test_judge_scores_become_features_of_the_learned_ranking(jason_store: Store) -> None:
    judge = ScriptedReranker(agree)
    engine = _engine(jason_store, judge, rerank_stage="learned", judge_depth=6)
    outcome = await _search(engine)

    assert judge.calls == [(QUERY, 6)]  # once, the first six fused candidates, no second pass
    judged = [c for c in engine.pools[0] if c.judge is not None]
    assert len(judged) == 6
    features = learned_rank.features(learned_rank.words(QUERY), engine.pools[0])
    best = max(features, key=lambda f: f.get("judge_rel", -1e9))
    assert best["judged"] == 1.0 and best["judge_rel"] == 0.0 and best["judge_rank"] == 1.0
    # The shipped weights know no judge feature yet: the order is the learned one of rrf.
    plain = await _search(_engine(jason_store), mode="rrf")
    assert _ids(outcome) == _ids(plain)
    assert outcome.notices == ()


async def test_a_failing_judge_in_the_learned_stage_is_said_once(jason_store: Store) -> None:
    class Failing(ScriptedReranker):
        async def score(self, query: str, passages: Sequence[str]) -> list[float]:
            self.calls.append((query, len(passages)))
            raise RuntimeError("boom")

    judge = Failing(agree)
    outcome = await _search(_engine(jason_store, judge, rerank_stage="learned"))
    assert len(judge.calls) == 1
    assert [n.code for n in outcome.notices] == ["rerank_failed"]
    plain = await _search(_engine(jason_store), mode="rrf")
    assert _ids(outcome) == _ids(plain)


async def test_the_anchor_arm_is_not_fused_by_default(jason_store: Store) -> None:
    plain = await _search(_engine(jason_store), mode="rrf")
    arm = FixedAnchors((plain.pool[-1],), {})
    outcome = await _search(_engine(jason_store, anchors=arm), mode="rrf")
    assert arm.ranked == 0
    assert _ids(outcome) == _ids(plain)


async def test_a_fused_anchor_ranking_lifts_what_it_ranks(jason_store: Store) -> None:
    plain = await _search(_engine(jason_store), mode="rrf")
    last = plain.pool[-1]
    arm = FixedAnchors((last,), {})
    tuned = _engine(jason_store, anchors=arm, anchor_weights=(3.0, 0.0), learned_rank=False)
    outcome = await _search(tuned, mode="rrf")
    assert arm.ranked == 1
    assert _ids(outcome).index(last) < _ids(plain).index(last)


async def test_candidates_carry_what_the_anchors_say(jason_store: Store) -> None:
    plain = await _search(_engine(jason_store), mode="rrf")
    ref = plain.hits[0].ref
    said = AnchorEvidence("turns a map into JSON text", 0.5)
    engine = _engine(jason_store, anchors=FixedAnchors((), {ref: said}))
    await _search(engine, mode="rrf")
    carried = [c for c in engine.pools[0] if c.anchor_text is not None]
    assert carried and all(c.row.ref == ref for c in carried)
    (features,) = [
        f
        for f, c in zip(
            learned_rank.features(learned_rank.words(QUERY), engine.pools[0]),
            engine.pools[0],
            strict=True,
        )
        if c.anchor_text is not None
    ][:1]
    assert features["has_anc"] == 1.0 and features["anc_cos"] == 0.5
    assert features["anc_ov"] > 0  # "map" and "json" are query words


@pytest.mark.parametrize("mode", ["fts", "vector"])
async def test_modes_without_fusion_never_ask_the_anchor_arm(jason_store: Store, mode: str) -> None:
    arm = FixedAnchors((), {})
    await _search(_engine(jason_store, anchors=arm, anchor_weights=(1.0, 1.0)), mode=mode)
    assert arm.ranked == 0
