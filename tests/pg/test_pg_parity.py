"""One real package (the corpus's jason docs) written through the same pipeline into a
SQLite store and a PostgreSQL store: every read of the seam gives the same answer.

The keyword arm is the one place the engines compute differently (FTS5's bm25() there,
BM25 summed from `ts_rank_cd` frequencies here); with one package in the index its own
statistics are the table's, so the two must agree to the ranking and nearly the score.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hexlocal_core.index.pg.store import PgStore
from hexlocal_core.index.rows import ItemQuery
from hexlocal_core.index.seam import DocsStore
from hexlocal_core.index.sqlite.store import Store
from hexlocal_core.ingest.pipeline import IngestRequest, ingest_items
from hexlocal_core.search.engine import SearchEngine
from hexlocal_core.search.sanitizer import to_phrases
from hexlocal_core.search.tuning import BM25_WEIGHTS
from tests.support.helpers import HashingEmbedder

pytestmark = pytest.mark.integration

QUERIES = [
    "decode JSON keys to atoms",
    "Jason.encode!/2",
    "pretty print with indentation",
    "escape html safe javascript",
    "derive the encoder for a struct only some fields",
    "decode! raises on invalid input",
    "Jason.Fragment",
    "maps ordered objects",
]


def _index(store: DocsStore, corpus: Path) -> None:
    from hexlocal_core.ingest.hexdocs import parse_hexdocs
    from hexlocal_core.ingest.tarball import read_docs_tarball

    tarball = corpus / "hexdocs" / "jason-1.4.4.tar.gz"
    parsed = parse_hexdocs(
        read_docs_tarball(tarball.read_bytes(), max_bytes=50_000_000),
        package="jason",
        version="1.4.4",
    )
    request = IngestRequest("jason", "1.4.4", "hexdocs", parsed.items)
    asyncio.run(ingest_items(store, HashingEmbedder(), request))


@pytest.fixture(scope="module")
def stores(
    corpus: Path, pg_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Store, PgStore]]:
    import psycopg

    with psycopg.connect(pg_server.get_uri(), autocommit=True) as conn:
        conn.execute('DROP DATABASE IF EXISTS "parity"')
        conn.execute('CREATE DATABASE "parity"')
    sqlite = Store(tmp_path_factory.mktemp("parity") / "x.db")
    pg = PgStore(str(pg_server.get_uri("parity")))
    try:
        _index(sqlite, corpus)
        _index(pg, corpus)
        yield sqlite, pg
    finally:
        sqlite.close()
        pg.close()


def test_rows_and_records_are_the_same(stores: tuple[Store, PgStore]) -> None:
    sqlite, pg = stores
    ids = list(range(1, sqlite.chunk_count() + 1))
    assert pg.chunk_count() == len(ids) > 50
    assert pg.hydrate(ids) == sqlite.hydrate(ids)
    assert pg.stored_hashes("jason") == sqlite.stored_hashes("jason")
    assert [p.name for p in pg.packages()] == [p.name for p in sqlite.packages()]
    assert pg.package_meta("jason") == sqlite.package_meta("jason")
    a, b = sqlite.session().chunks, pg.session().chunks
    assert b.package_stats() == a.package_stats()
    assert list(b.content_hashes()) == list(a.content_hashes())
    assert b.locate(ids[:40]) == a.locate(ids[:40])
    hashes = [row.embed_hash for row in sqlite.hydrate(ids[:20])]
    cached_a = sqlite.cached_vectors("test:hashing", hashes)
    cached_b = pg.cached_vectors("test:hashing", hashes)
    assert sorted(cached_a) == sorted(cached_b)
    for key, vector in cached_a.items():
        np.testing.assert_array_equal(cached_b[key], vector)
    assert pg.embedding_config().model == sqlite.embedding_config().model  # type: ignore[union-attr]


def test_exact_lookups_are_the_same(stores: tuple[Store, PgStore]) -> None:
    sqlite, pg = stores
    a, b = sqlite.session().chunks, pg.session().chunks
    modules = sorted({row.module for row in sqlite.hydrate(range(1, 200)) if row.module})
    assert modules
    for module in modules:
        for item in (ItemQuery(module), ItemQuery(module, not_doc_types=("function", "macro"))):
            assert b.exact_ids("jason", item, limit=20) == a.exact_ids("jason", item, limit=20)
        assert b.titles_in_module("jason", module, 50) == a.titles_in_module("jason", module, 50)
    for function, arity in (("decode", 2), ("encode", 2), ("encode_to_iodata!", 2)):
        for prefer in ("Jason", "Jason.Encode", None):
            item = ItemQuery(prefer, function, arity)
            assert b.exact_ids("jason", item, limit=20) == a.exact_ids("jason", item, limit=20)
            assert b.titles_named("jason", function, prefer, 10) == a.titles_named(
                "jason", function, prefer, 10
            )
    assert b.member_titles("jason", 500) == a.member_titles("jason", 500)
    assert b.module_names("jason", 50) == a.module_names("jason", 50) == modules
    assert a.member_titles("jason", 500)
    targets = [("Jason.html#decode/2", "Jason.html#decode/2-"), ("readme.html", "readme.html#")]
    assert b.ids_by_ref("jason", targets) == a.ids_by_ref("jason", targets)
    for module in ("Jason", "Jason.Encoder", "Nope"):
        assert b.packages_with_module(module) == a.packages_with_module(module)
    assert a.packages_with_module("Jason") == ["jason"] and a.packages_with_module("Nope") == []


@pytest.mark.parametrize("query", QUERIES)
def test_keyword_ranks_are_the_same(stores: tuple[Store, PgStore], query: str) -> None:
    sqlite, pg = stores
    a, b = sqlite.session().chunks, pg.session().chunks
    phrases = to_phrases(query)
    for examples_only in (False, True):
        kw: dict[str, Any] = {
            "package": "jason",
            "depth": 30,
            "examples_only": examples_only,
            "weights": BM25_WEIGHTS,
        }
        for name, got, want in (
            (
                "table",
                b.keyword_hits(" OR ".join(phrases), **kw),
                a.keyword_hits(" OR ".join(phrases), **kw),
            ),
            (
                "package",
                b.package_keyword_hits(phrases, **kw),
                a.package_keyword_hits(phrases, **kw),
            ),
        ):
            assert [i for i, _ in got[:10]] == [i for i, _ in want[:10]], name
            np.testing.assert_allclose([s for _, s in got], [s for _, s in want], rtol=1e-6)


def test_vector_ranks_are_the_same(stores: tuple[Store, PgStore]) -> None:
    sqlite, pg = stores
    emb = HashingEmbedder()
    for query in QUERIES:
        q = emb.vector(query)
        for examples_only in (False, True):
            want = sqlite.session().chunks.vector_hits(
                q, package="jason", depth=30, examples_only=examples_only
            )
            got = pg.session().chunks.vector_hits(
                q, package="jason", depth=30, examples_only=examples_only
            )
            assert [i for i, _ in got] == [i for i, _ in want]
            np.testing.assert_allclose([d for _, d in got], [d for _, d in want], atol=1e-5)


@pytest.mark.parametrize("mode", ["rrf", "fts"])
async def test_whole_searches_are_the_same(stores: tuple[Store, PgStore], mode: str) -> None:
    """Arms, fusion, feedback and the learned ranking (which reads raw bm25 scores and
    stored vectors) give one answer on both engines."""
    sqlite, pg = stores
    for query in QUERIES:
        want = await SearchEngine(sqlite, HashingEmbedder(), None).search(
            "jason", query, limit=10, mode=mode
        )
        got = await SearchEngine(pg, HashingEmbedder(), None).search(
            "jason", query, limit=10, mode=mode
        )
        assert [h.ref for h in got.hits] == [h.ref for h in want.hits], query
