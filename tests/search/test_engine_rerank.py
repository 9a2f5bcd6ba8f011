"""The search engine with a reranker: the fused order, the reranker's bounded authority, and
every notice a degraded stage returns, over a real index of a real package's docs.

The index is jason 1.4.4 from the shared corpus (parse + `ingest_items`, the ingest write
path), embedded by the deterministic hashing embedder: these tests are about what the
engine does with the arms and the reranker, not about embedding quality. Rerankers are
either the stand-in cross-encoder (real ONNX runtime, a seeded random head) or small
deterministic fakes whose opinion is known, so the fusion can be checked against it.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from hexlocal_core.adapters.cross_encoder import build_local_reranker
from hexlocal_core.errors import ModelError, ModelUnavailable
from hexlocal_core.index.sqlite.store import Store
from hexlocal_core.ports import Reranker, Vectors
from hexlocal_core.search.engine import SearchEngine, SearchOutcome
from hexlocal_core.search.exact import parse_identifier
from hexlocal_core.search.tuning import POOL
from tests.support.helpers import HashingEmbedder, ScriptedReranker
from tests.support.model_fixtures import model_settings

PACKAGE = "jason"  # 1.4.4, the `jason_index` fixture (conftest.py)
QUERY = "encode a map to JSON"
# The guarantee users rely on: however wrong a reranker is, the hit retrieval placed first
# stays in the top half of the pool. Stated here, not read from the code's constants.
TOP_HIT_FLOOR = POOL // 2

Scorer = Callable[[int], list[float]]  # passages in pool order -> one score each


@pytest.fixture
def store(jason_store: Store) -> Store:
    return jason_store


class RaisingReranker(ScriptedReranker):
    def __init__(self, error: Exception) -> None:
        super().__init__(lambda n: [0.0] * n, "test:raising")
        self.error = error

    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        self.calls.append((query, len(passages)))
        raise self.error


def agree(n: int) -> list[float]:
    return [float(n - i) for i in range(n)]


def reverse(n: int) -> list[float]:
    return [float(i) for i in range(n)]


def demote_top(n: int) -> list[float]:
    """The retrieval top hit judged the worst; the rest keep their order."""
    return [-1.0, *(float(n - i) for i in range(1, n))]


def promote_last(n: int) -> list[float]:
    """The retrieval last hit judged the best; the rest keep their order."""
    return [*(float(n - i) for i in range(n - 1)), float(n + 1)]


def _engine(store: Store, reranker: Reranker | None, **kwargs: object) -> SearchEngine:
    return SearchEngine(store, HashingEmbedder(), reranker, **kwargs)  # type: ignore[arg-type]


async def _search(engine: SearchEngine, query: str = QUERY, **kwargs: object) -> SearchOutcome:
    options: dict[str, object] = {"limit": POOL, "exact": False, **kwargs}
    return await engine.search(PACKAGE, query, **options)  # type: ignore[arg-type]


def _ids(outcome: SearchOutcome) -> list[int]:
    return [h.chunk_id for h in outcome.hits]


def _codes(outcome: SearchOutcome) -> list[str]:
    return [n.code for n in outcome.notices]


# -- order and bounded authority ---------------------------------------------------------


async def test_a_reranker_that_agrees_keeps_the_retrieval_order(store: Store) -> None:
    reranker = ScriptedReranker(agree)
    outcome = await _search(_engine(store, reranker))

    assert len(outcome.pool) == POOL  # the package has enough items to fill the pool
    assert reranker.calls == [(QUERY, POOL)]  # one call, the whole pool
    assert _ids(outcome) == list(outcome.pool)
    assert outcome.notices == ()
    assert [h.rerank_score for h in outcome.hits] == agree(POOL)
    assert [h.fused_rank for h in outcome.hits] == list(range(1, POOL + 1))
    assert [h.final_rank for h in outcome.hits] == list(range(1, POOL + 1))


@pytest.mark.parametrize("scorer", [reverse, demote_top], ids=["reverses", "demotes the top"])
async def test_a_hostile_reranker_cannot_bury_the_retrieval_top_hit(
    store: Store, scorer: Scorer
) -> None:
    outcome = await _search(_engine(store, ScriptedReranker(scorer)))

    top = outcome.pool[0]
    rank = _ids(outcome).index(top) + 1
    assert rank <= TOP_HIT_FLOOR, f"the retrieval top hit fell to rank {rank}"
    assert sorted(_ids(outcome)) == sorted(outcome.pool)  # reordered, nothing lost or added
    assert outcome.notices == ()


async def test_the_reranker_has_authority_within_its_bound(store: Store) -> None:
    demoted = await _search(_engine(store, ScriptedReranker(demote_top)))
    assert _ids(demoted)[0] != demoted.pool[0]  # its verdict moved the top hit down

    promoted = await _search(_engine(store, ScriptedReranker(promote_last)))
    last = promoted.pool[-1]
    rank = _ids(promoted).index(last) + 1
    assert 1 < rank < POOL  # its favourite rose, but not over what both place near the top
    assert _ids(promoted)[0] == promoted.pool[0]


async def test_the_stand_in_cross_encoder_reranks_the_pool(
    store: Store, stand_in_reranker_dir: Path
) -> None:
    reranker = build_local_reranker(
        model_settings(HEXLOCAL_RERANK_MODEL_DIR=str(stand_in_reranker_dir))
    )
    assert reranker is not None
    engine = _engine(store, reranker)

    first = await _search(engine)
    again = await _search(engine)

    assert first.notices == ()
    assert sorted(_ids(first)) == sorted(first.pool)
    scores = [h.rerank_score for h in first.hits]
    assert all(s is not None and math.isfinite(s) for s in scores)
    assert len(set(scores)) > 1  # a real model's scores, not a constant
    assert _ids(again) == _ids(first)  # deterministic
    assert _ids(first).index(first.pool[0]) + 1 <= TOP_HIT_FLOOR
    # The reranker's own best passage moved up (or was first already).
    best = max(first.hits, key=lambda h: h.rerank_score or -math.inf)
    assert best.final_rank is not None and best.fused_rank is not None
    assert best.final_rank <= best.fused_rank


# -- notices -----------------------------------------------------------------------------


def _warnings(
    caplog: pytest.LogCaptureFixture, needle: str, level: int = logging.WARNING
) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.levelno == level and needle in r.getMessage()
    ]


def _absent_logged(caplog: pytest.LogCaptureFixture) -> int:
    """How often the absent reranker was logged: at info, since the notice tells the user
    (a CLI showed a warning and the notice, the same thing twice)."""
    assert _warnings(caplog, "cross-encoder") == []
    return len(_warnings(caplog, "cross-encoder", logging.INFO))


async def test_an_absent_reranker_is_said_once_per_engine_in_one_short_sentence(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hexlocal.search")
    engine = _engine(store, None)

    plain = await _search(engine, mode="rrf")  # no rerank asked: nothing owed, nothing spent
    first = await _search(engine)
    later = [await _search(engine, q) for q in (QUERY, "decode JSON", "pretty print")]

    assert plain.notices == ()
    assert _codes(first) == ["rerank_unavailable"]
    message = first.notices[0].message
    assert len(message) < 120 and "AI_RERANK_MODEL=off" in message
    assert message.count(". ") == 0  # one sentence
    assert _ids(first) == list(first.pool)  # the fused order
    assert all(o.notices == () for o in later)
    assert _absent_logged(caplog) == 1

    fresh = await _search(_engine(store, None))  # a new engine is a new server session
    assert _codes(fresh) == ["rerank_unavailable"]


class ArrivingReranker(ScriptedReranker):
    """A cross-encoder still being downloaded: unavailable until `arrive()`."""

    def __init__(self) -> None:
        super().__init__(agree, "test:arriving")
        self.present = False

    def arrive(self) -> None:
        self.present = True

    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        self.calls.append((query, len(passages)))
        if not self.present:
            raise ModelUnavailable("the cross-encoder is downloading", pending=True)
        return agree(len(passages))


async def test_a_reranker_not_there_yet_is_absent_not_failed_until_it_arrives(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hexlocal.search")
    reranker = ArrivingReranker()
    engine = _engine(store, reranker)

    waiting = [await _search(engine, q) for q in (QUERY, "decode JSON", QUERY)]
    reranker.arrive()
    arrived = await _search(engine)

    assert [_codes(o) for o in waiting] == [["rerank_unavailable"], [], []]
    assert all(_ids(o) == list(o.pool) for o in waiting)
    assert len(reranker.calls) == 4  # asked every time, so reranking starts when it can
    assert arrived.notices == () and all(h.rerank_score is not None for h in arrived.hits)
    assert _absent_logged(caplog) == 1
    assert _warnings(caplog, "rerank failed") == []  # absence is not a failure


@pytest.mark.parametrize(
    ("reranker", "reason"),
    [
        (RaisingReranker(ModelError("the reranker failed to run: boom")), "boom"),
        (RaisingReranker(RuntimeError("adapter bug")), "adapter bug"),
        (ScriptedReranker(lambda n: agree(n)[:-1]), "scores for"),
        (ScriptedReranker(lambda n: [math.nan] * n), "not a finite number"),
        (ScriptedReranker(lambda n: [*agree(n - 1), math.inf]), "not a finite number"),
    ],
    ids=["raises ModelError", "raises a bug", "too few scores", "NaN scores", "inf score"],
)
async def test_a_failing_reranker_degrades_to_the_fused_order(
    store: Store,
    reranker: ScriptedReranker,
    reason: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="hexlocal.search")
    engine = _engine(store, reranker)

    outcomes = [await _search(engine) for _ in range(3)]

    for outcome in outcomes:  # a failure is told on every answer it affects
        assert _codes(outcome) == ["rerank_failed"]
        assert reason in outcome.notices[0].message
        assert _ids(outcome) == list(outcome.pool)
        assert all(h.rerank_score is None for h in outcome.hits)
    assert len(reranker.calls) == 3  # tried each time: the failure may be transient
    assert len(_warnings(caplog, "rerank failed")) == 1  # logged once


class FailingQueryEmbedder(HashingEmbedder):
    """The index's own model, whose query embedding fails (documents still embed)."""

    async def embed_query(self, text: str) -> Vectors:
        raise ModelError("the embedding model failed to run: out of memory")


async def test_a_failing_query_embedding_leaves_the_keyword_arm(store: Store) -> None:
    engine = SearchEngine(store, FailingQueryEmbedder(), ScriptedReranker(agree))

    outcome = await _search(engine)

    assert _codes(outcome) == ["vector_arm_failed"]
    assert "out of memory" in outcome.notices[0].message
    assert outcome.hits, "the keyword arm still answers"
    assert all(h.vec_rank is None and h.fts_rank is not None for h in outcome.hits)


@pytest.mark.parametrize(
    ("package", "query", "mode"),
    [
        (PACKAGE, "zyxwvut qqqqq", "fts"),  # no keyword matches
        ("not_indexed", QUERY, "rerank"),  # both arms empty: nothing of that package stored
    ],
    ids=["no keyword match", "package not indexed"],
)
async def test_nothing_matched_is_an_empty_answer_with_a_notice(
    store: Store, package: str, query: str, mode: str
) -> None:
    reranker = ScriptedReranker(agree)
    outcome = await _engine(store, reranker).search(package, query, mode=mode, exact=False)

    assert outcome.hits == ()
    assert _codes(outcome) == ["no_results"]
    assert package in outcome.notices[0].message
    assert reranker.calls == []  # nothing to rerank


# -- the event loop ------------------------------------------------------------------------


class _Watched:
    """A proxy recording, for every store call made through it, whether it ran on the
    thread of the event loop (on PostgreSQL each call is a network round trip)."""

    def __init__(self, target: object, on_loop: list[str], loop_thread: int) -> None:
        self._target = target
        self._on_loop = on_loop
        self._loop_thread = loop_thread

    def __getattr__(self, name: str) -> object:
        value = getattr(self._target, name)
        if name in ("session", "chunks", "memories"):  # navigation, then watched below
            if callable(value):
                return lambda *a, **k: _Watched(value(*a, **k), self._on_loop, self._loop_thread)
            return _Watched(value, self._on_loop, self._loop_thread)
        if not callable(value):
            return value

        def call(*args: object, **kwargs: object) -> object:
            if threading.get_ident() == self._loop_thread:
                self._on_loop.append(name)
            return value(*args, **kwargs)

        return call


@pytest.mark.parametrize("query", [QUERY, "Jason.encode/2", "Jason.encode/2 options"])
async def test_no_store_read_runs_on_the_event_loop(store: Store, query: str) -> None:
    # A server answering many clients (team mode over HTTP) stalls every one of them while
    # a search blocks its loop on a database round trip.
    on_loop: list[str] = []
    watched = _Watched(store, on_loop, threading.get_ident())
    engine = SearchEngine(
        watched,  # type: ignore[arg-type]
        HashingEmbedder(),
        ScriptedReranker(agree),
    )
    outcome = await engine.search(PACKAGE, query, limit=5, mode="rerank")
    assert outcome.hits
    hits = await engine.exact(PACKAGE, parse_identifier("Jason.encode/2"))  # type: ignore[arg-type]
    assert hits
    assert on_loop == []


async def test_one_search_reads_each_chunk_row_once(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The learned stage reads the first 20 fused rows, the reranker 10 of them and the
    # answer its hits: on PostgreSQL every read is a round trip, so none is read twice.
    read: list[int] = []
    hydrate = store.hydrate

    def counted(ids: Sequence[int]) -> list[object]:
        read.extend(ids)
        return hydrate(ids)  # type: ignore[return-value]

    monkeypatch.setattr(store, "hydrate", counted)
    reranker = ScriptedReranker(agree)
    outcome = await _search(_engine(store, reranker), mode="rerank", limit=5, exact=True)

    assert reranker.calls == [(QUERY, POOL)]
    assert len(outcome.hits) == 5 and all(h.content for h in outcome.hits)
    assert {h.chunk_id for h in outcome.hits} <= set(read)
    assert len(read) == len(set(read)), "a chunk row was read twice"
