"""Fusion and the pool's priors: RRF with a score scale, one chunk per item, boilerplate
pages demoted, checked as pure functions and through the engine on a real index."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexlocal_core.index.sqlite.store import Store
from hexlocal_core.model import Chunk, DocType
from hexlocal_core.search.engine import SearchEngine
from hexlocal_core.search.fusion import (
    BOILERPLATE_PAGE,
    boilerplate_scale,
    one_per_key,
    rerank_fuse,
    rrf,
)
from hexlocal_core.search.tuning import SearchTuning
from tests.support.helpers import HashingEmbedder, chunk_of, item, write_package


def test_rrf_scale_demotes_only_the_scaled_documents() -> None:
    rankings = [["a", "b", "c"], ["a", "b", "c"]]
    assert rrf(rankings) == ["a", "b", "c"]
    assert rrf(rankings, scale={"a": 0.5}) == ["b", "c", "a"]
    assert rrf(rankings, scale={"zzz": 0.1}) == ["a", "b", "c"]  # unknown keys are ignored


def test_one_per_key_keeps_the_best_placed_document_of_each_key() -> None:
    ranked = [1, 2, 3, 4, 5]
    keys = {1: "x", 2: "x", 3: "y", 4: "x"}
    assert one_per_key(ranked, keys) == [1, 3, 5]  # 5 has no key: kept as itself


@pytest.mark.parametrize(
    ("page", "boilerplate"),
    [
        ("changelog.html", True),
        ("CHANGELOG.html", True),
        ("license.html", True),
        ("licence.html", True),
        ("code_of_conduct.html", True),
        ("code-of-conduct.html", True),
        ("contributing.html", True),
        ("release-notes.html", True),
        ("readme.html", False),
        ("getting-started.html", False),
        ("Plug.Conn.html", False),
        ("changelog-guide.html", False),
    ],
)
def test_boilerplate_pages(page: str, boilerplate: bool) -> None:
    assert bool(BOILERPLATE_PAGE.match(page)) is boilerplate
    assert (boilerplate_scale({1: page}) == {1: 0.5}) is boilerplate
    assert boilerplate_scale({1: page}, 1.0) == {}


def _store(tmp_path: Path, chunks: list[Chunk]) -> Store:
    store = Store(tmp_path / "fusion.db")
    write_package(store, "pkg", chunks)
    return store


async def test_pool_holds_one_chunk_per_item(tmp_path: Path) -> None:
    long_item = item("Pool.html#start_link/1-options", "idle sockets " * 40, package="pkg")
    other = item("Pool.html#checkout/2", "checks out idle sockets once", package="pkg")
    chunks = [
        chunk_of(long_item, 0, "idle sockets are pinged " * 5),
        chunk_of(long_item, 1, "idle sockets are closed " * 5),
        chunk_of(other, 0),
    ]
    store = _store(tmp_path, chunks)
    engine = SearchEngine(store, HashingEmbedder(), None)
    outcome = await engine.search("pkg", "idle sockets", limit=10, mode="fts", exact=False)
    refs = [h.ref for h in outcome.hits]
    assert sorted(refs) == ["Pool.html#checkout/2", "Pool.html#start_link/1-options"]
    assert len(outcome.pool) == 2
    split = SearchEngine(
        store, HashingEmbedder(), None, tuning=SearchTuning(one_chunk_per_item=False)
    )
    outcome = await split.search("pkg", "idle sockets", limit=10, mode="fts", exact=False)
    assert len(outcome.hits) == 3


async def test_boilerplate_pages_rank_below_api_docs(tmp_path: Path) -> None:
    chunks = [
        chunk_of(
            item(
                "changelog.html#v1-0-0",
                "retry: retry requests answered 429 (too many requests), retry them all",
                package="pkg",
                doc_type=DocType.EXTRAS,
            )
        ),
        chunk_of(item("Req.Steps.html#run/1", "Sends requests again after a 429.", package="pkg")),
    ]
    store = _store(tmp_path, chunks)
    query = "retry 429 requests"
    flat = SearchEngine(store, HashingEmbedder(), None, tuning=SearchTuning(boilerplate_weight=1.0))
    outcome = await flat.search("pkg", query, limit=10, mode="fts", exact=False)
    assert [h.ref for h in outcome.hits] == ["changelog.html#v1-0-0", "Req.Steps.html#run/1"]
    engine = SearchEngine(store, HashingEmbedder(), None)
    outcome = await engine.search("pkg", query, limit=10, mode="fts", exact=False)
    assert [h.ref for h in outcome.hits] == ["Req.Steps.html#run/1", "changelog.html#v1-0-0"]


def test_a_reranker_weighed_a_little_above_retrieval_takes_the_ties_only() -> None:
    retrieval = ["a", "b", "c", "d", "e"]
    swap = [1.0, 2.0, 0.5, 0.4, 0.3]  # the reranker puts b before a: a tie at equal weights
    assert rerank_fuse(retrieval, swap)[:2] == ["a", "b"]
    assert rerank_fuse(retrieval, swap, weight=1.1)[:2] == ["b", "a"]
    last_first = [0.5, 0.4, 0.3, 0.2, 9.0]
    assert rerank_fuse(retrieval, last_first, weight=1.1)[0] == "a"
