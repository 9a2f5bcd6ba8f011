"""The learned ranking of the fused pool: its features, its bounded authority, and where the
engine applies it (a real index of jason 1.4.4, the hashing embedder)."""

from __future__ import annotations

from typing import Any

import pytest
from attrs import evolve

from hexlocal_core.index.rows import ChunkRow
from hexlocal_core.index.sqlite.store import Store
from hexlocal_core.search import learned_rank
from hexlocal_core.search.engine import SearchEngine
from hexlocal_core.search.learned_rank import Candidate, features, learned_order, words
from hexlocal_core.search.query_shape import Shape
from hexlocal_core.search.tuning import LEARNED_DEPTH, SearchTuning
from tests.support.helpers import HashingEmbedder

PACKAGE = "jason"  # 1.4.4, the `jason_index` fixture (conftest.py)


def row(n: int, **fields: Any) -> ChunkRow:
    base: dict[str, Any] = {
        "id": n,
        "package": "ecto",
        "version": "3.14.2",
        "ordinal": 0,
        "ref": f"Ecto.Repo.html#f{n}/1",
        "page": "Ecto.Repo.html",
        "title": f"f{n}/1",
        "doc_type": "function",
        "module": "Ecto.Repo",
        "function": f"f{n}",
        "arity": 1,
        "signature": None,
        "deprecated": None,
        "since": None,
        "content": "Returns the thing.",
        "content_hash": "",
        "embed_hash": "",
        "split_terms": "",
        "hexdocs_url": "",
        "source_url": None,
        "source": "hexdocs",
        "has_example": False,
    }
    return ChunkRow(**(base | fields))


def cand(n: int, **fields: Any) -> Candidate:
    arms = {k: fields.pop(k) for k in ("fts_rank", "vec_rank", "cosine", "bm25") if k in fields}
    return Candidate(
        row=row(n, **fields),
        fused_rank=n,
        fts_rank=arms.get("fts_rank", n),
        vec_rank=arms.get("vec_rank", n),
        cosine=arms.get("cosine", 0.5),
        bm25=arms.get("bm25", -1.0),
    )


def test_words_split_identifiers_and_drop_what_says_nothing() -> None:
    assert words("How do I put_resp_header in Plug.Conn?") == {
        "put",
        "resp",
        "header",
        "plug",
        "conn",
    }
    assert words("the Changesets of insertAll") == {"changeset", "insert", "all"}


def test_raw_scores_are_read_against_the_pool() -> None:
    pool = [
        cand(1, bm25=-8.0, cosine=0.6, title="insert_all/3"),
        cand(2, bm25=-2.0, cosine=None),
        cand(3, bm25=None, cosine=0.2),
    ]
    f = features(words("insert many rows at once"), pool)
    assert [x["bm25"] for x in f] == [1.0, 0.25, 0.0]
    # A chunk without a stored vector is read as the pool's least similar, not as 0.
    assert f[1]["cos"] == 0.2
    # "insert", one of its four words ("at" says nothing), is in the title.
    assert f[0]["title_ov"] == pytest.approx(1 / 4) and f[0]["title_any"] == 1.0
    assert f[2]["title_ov"] == 0.0 and f[0]["dt_function"] == 1.0


def test_doc_types_outside_the_weights_fold_into_their_kin() -> None:
    pool = [cand(1, doc_type="macrocallback"), cand(2, doc_type="opaque")]
    f = features(frozenset({"x"}), pool)
    assert f[0]["dt_macro"] == 1.0 and f[1]["dt_type"] == 1.0


def test_every_shape_has_a_weight_for_every_feature() -> None:
    names = set(features(frozenset({"x"}), [cand(1)])[0]) - {"dt_function"}
    names |= {f"dt_{t}" for t in ("module", "behaviour", "protocol", "exception", "task")}
    names |= {f"dt_{t}" for t in ("function", "macro", "callback", "type", "extras")}
    for shape in Shape:
        assert set(learned_rank.WEIGHTS[shape]) == names


def test_an_error_paste_lifts_the_function_that_explains_over_the_exception_module() -> None:
    """Fusion puts the exception module first (its name is in the paste); the function whose
    doc explains the message takes the head."""
    message = "connection not available and request was dropped from queue after 2000ms"
    exception = cand(
        1,
        ref="DBConnection.ConnectionError.html",
        title="DBConnection.ConnectionError",
        doc_type="exception",
        content="An error raised when a connection fails.",
    )
    explains = cand(
        2,
        ref="DBConnection.html#start_link/2",
        title="start_link/2",
        content="Options: :queue_target and :queue_interval. When a connection is not"
        " available and the request was dropped from the queue after waiting, raise the"
        " pool size or the queue target. " * 3,
    )
    order = learned_order(Shape.ERROR, message, [exception, explains, cand(3)])
    assert order[0] == 2


def test_the_fused_first_keeps_the_head_when_the_weights_agree_it_is_good() -> None:
    """Bounded authority: the weights' favourite, fused last, rises but cannot jump over the
    one both orders place near the top."""
    long_doc = "insert many rows at once with insert_all " * 20
    first = cand(1, title="insert_all/3", content=long_doc[:400])
    middle = [cand(n, content="Other.") for n in range(2, 10)]
    favourite = cand(10, title="insert_all/3", content=long_doc, cosine=0.9, bm25=-9.0)
    order = learned_order(Shape.PROSE, "insert many rows at once", [first, *middle, favourite])
    assert order[0] == 1
    assert order.index(10) < 9


@pytest.fixture
def store(jason_store: Store) -> Store:
    return jason_store


QUERIES = ("pretty print JSON with indentation", "decode a big number exactly", "Jason.encode!/2")


async def _pool(
    store: Store, query: str, *, learned: bool, mode: str = "rrf", embedder: bool = True
) -> list[int]:
    tuning = evolve(SearchTuning(), learned_rank=learned)
    engine = SearchEngine(store, HashingEmbedder() if embedder else None, None, tuning=tuning)
    outcome = await engine.search(PACKAGE, query, limit=10, mode=mode, exact=False)
    return list(outcome.pool)


@pytest.mark.parametrize("query", QUERIES)
async def test_rrf_draws_the_pool_from_the_first_twenty_fused(store: Store, query: str) -> None:
    pool = await _pool(store, query, learned=True)
    tuning = evolve(SearchTuning(), learned_rank=False, pool=LEARNED_DEPTH)
    engine = SearchEngine(store, HashingEmbedder(), None, tuning=tuning)
    fused = (await engine.search(PACKAGE, query, limit=30, mode="rrf", exact=False)).pool
    assert len(pool) == SearchTuning().pool
    assert set(pool) <= set(fused) and len(fused) == LEARNED_DEPTH


async def test_the_learned_order_differs_from_fusion_somewhere(store: Store) -> None:
    changed = [
        q
        for q in QUERIES
        if await _pool(store, q, learned=True) != await _pool(store, q, learned=False)
    ]
    assert changed


@pytest.mark.parametrize("query", QUERIES)
async def test_one_arm_alone_keeps_its_fused_order(store: Store, query: str) -> None:
    """The weights were fitted on both arms' signals: with the keyword arm alone (fts mode,
    or no embedder) the stage stands aside rather than rank on half its features."""
    for mode, embedder in (("fts", True), ("vector", True), ("rrf", False)):
        on = await _pool(store, query, learned=True, mode=mode, embedder=embedder)
        off = await _pool(store, query, learned=False, mode=mode, embedder=embedder)
        assert on == off
