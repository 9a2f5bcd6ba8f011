"""Chunks first, vectors after: the write a search can answer from before its vectors exist,
on both engines through the seam (SQLite file, real PostgreSQL + pgvector)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import attrs
import numpy as np
import pytest

from hexlocal_core.index.pg.store import PgStore
from hexlocal_core.index.rows import PackageWrite, VectorRows
from hexlocal_core.index.seam import DocsStore
from hexlocal_core.index.sqlite.store import Store
from hexlocal_core.model import sha256_text
from hexlocal_core.ports import Vectors
from hexlocal_core.search.tuning import BM25_WEIGHTS
from tests.support.helpers import HashingEmbedder, chunk_of, item
from tests.support.pg import package_write

pytestmark = pytest.mark.integration

DOCS = [(f"Pool.html#f{n}/1", f"checkout a worker from the pool, variant {n}") for n in range(6)]


@pytest.fixture(params=["sqlite", "pg"])
def docs_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DocsStore]:
    store: DocsStore
    if request.param == "pg":
        store = PgStore(request.getfixturevalue("pg_url"))
    else:
        store = Store(tmp_path / "index.db")
    try:
        yield store
    finally:
        store.close()


def _write(version: str = "1.0.0") -> tuple[PackageWrite, Vectors]:
    """A write of DOCS without vectors, and the vectors it leaves out."""
    chunks = [chunk_of(item(ref, text, package="pool", version=version)) for ref, text in DOCS]
    full = package_write("pool", version, chunks)
    assert full.vectors is not None
    return attrs.evolve(full, vectors=None), full.vectors


def _rows(write: PackageWrite, ids: list[int], positions: list[int]) -> VectorRows:
    return VectorRows.of_write(write, ids).take(positions)


def _keyword(store: DocsStore) -> list[int]:
    hits = store.session().chunks.package_keyword_hits(
        ['"checkout"'], package="pool", depth=10, examples_only=False, weights=BM25_WEIGHTS
    )
    return [cid for cid, _ in hits]


def _nearest(store: DocsStore) -> list[int]:
    if not store.vector_tables_exist():  # as the engine asks first: no vector written yet
        return []
    query = HashingEmbedder().vector(DOCS[0][1])
    found = store.session().chunks.vector_hits(
        query.reshape(1, -1), package="pool", depth=10, examples_only=False
    )
    return [cid for cid, _ in found]


def test_chunks_answer_by_keyword_before_any_vector(docs_store: DocsStore) -> None:
    write, _ = _write()
    ids = docs_store.replace_package(write)
    assert len(ids) == len(DOCS)
    pkg = docs_store.package("pool")
    assert pkg is not None and (pkg.version, pkg.status) == ("1.0.0", "partial")
    assert sorted(_keyword(docs_store)) == sorted(ids)
    assert _nearest(docs_store) == []


def test_vectors_arrive_slice_by_slice_then_the_package_is_complete(
    docs_store: DocsStore,
) -> None:
    write, vectors = _write()
    ids = docs_store.replace_package(write)
    assert docs_store.add_vectors(_rows(write, ids, [0, 1, 2]), vectors[:3])
    assert sorted(_nearest(docs_store)) == sorted(ids[:3])  # only what has a vector
    hashes = [sha256_text(c.embedding_text()) for c in write.chunks]
    assert set(docs_store.cached_vectors(write.embed_model, hashes)) == set(hashes[:3])
    assert docs_store.add_vectors(_rows(write, ids, [3, 4, 5]), vectors[3:])
    assert docs_store.mark_complete("pool", "1.0.0")
    pkg = docs_store.package("pool")
    assert pkg is not None and pkg.status == "complete"
    assert sorted(_nearest(docs_store)) == sorted(ids)
    # Completing it again (another process finished it first) is no failure and no change.
    assert docs_store.mark_complete("pool", "1.0.0")
    assert docs_store.package("pool") == pkg


def test_a_write_replaced_meanwhile_adds_nothing(docs_store: DocsStore) -> None:
    # Two writers of one package (two processes on one file, two team servers): the
    # slower one's vectors must not land on the other's chunks.
    first, vectors = _write("1.0.0")
    first_ids = docs_store.replace_package(first)
    second, _ = _write("2.0.0")
    docs_store.replace_package(second)
    assert not docs_store.add_vectors(_rows(first, first_ids, [0]), vectors[:1])
    assert not docs_store.mark_complete("pool", "1.0.0")
    pkg = docs_store.package("pool")
    assert pkg is not None and (pkg.version, pkg.status) == ("2.0.0", "partial")
    assert _nearest(docs_store) == []


def test_two_finishers_of_one_partial_version_both_succeed_once_each(
    docs_store: DocsStore,
) -> None:
    # Two processes on one index finishing the same cut-short package (two MCP clients on
    # one project, two team servers): their slices overlap. The later slice skips what
    # the earlier one wrote (it failed on the vector table's key before), and the slower
    # finisher's last writes after the other completed are no error.
    write, vectors = _write()
    ids = docs_store.replace_package(write)
    assert docs_store.add_vectors(_rows(write, ids, [0, 1, 2, 3]), vectors[:4])  # one
    assert docs_store.add_vectors(_rows(write, ids, [2, 3, 4, 5]), vectors[2:])  # the other
    assert docs_store.mark_complete("pool", "1.0.0")
    assert docs_store.add_vectors(_rows(write, ids, [0, 1]), vectors[:2])  # the slower one
    assert docs_store.mark_complete("pool", "1.0.0")
    assert sorted(_nearest(docs_store)) == sorted(ids)  # one vector per chunk
    found = docs_store.session().chunks.stored_vectors("pool", ids)
    assert all(np.allclose(found[ids[i]], vectors[i], atol=1e-6) for i in range(len(ids)))


def test_a_write_with_its_vectors_is_complete_at_once(docs_store: DocsStore) -> None:
    _, vectors = _write()
    chunks = [chunk_of(item(ref, text, package="pool")) for ref, text in DOCS]
    ids = docs_store.replace_package(package_write("pool", "1.0.0", chunks, vectors))
    pkg = docs_store.package("pool")
    assert pkg is not None and pkg.status == "complete"
    assert sorted(_nearest(docs_store)) == sorted(ids)


def test_stored_vectors_are_the_ones_written(docs_store: DocsStore) -> None:
    # What relevance feedback reads: a chunk's own vector, none for a chunk without one.
    write, vectors = _write()
    ids = docs_store.replace_package(write)
    reads = docs_store.session().chunks
    assert reads.stored_vectors("pool", ids[:2]) == {}
    assert docs_store.add_vectors(_rows(write, ids, [0, 1]), vectors[:2])
    found = reads.stored_vectors("pool", [ids[1], ids[0], ids[4]])
    assert sorted(found) == sorted(ids[:2])
    for i in (0, 1):
        assert np.allclose(found[ids[i]], vectors[i], atol=1e-6)
    assert reads.stored_vectors("other", ids[:2]) == {}


def test_unembedded_is_what_a_partial_package_still_needs(docs_store: DocsStore) -> None:
    # What finishing a cut-short ingestion reads instead of the docs: the chunks without a
    # vector, each with the very text (and cache key) ingestion would have embedded.
    write, vectors = _write()
    ids = docs_store.replace_package(write)
    before = docs_store.unembedded("pool", "1.0.0")
    assert before is not None and before.rows.ids == tuple(ids)
    assert before.texts == tuple(c.embedding_text() for c in write.chunks)
    assert before.rows.text_hashes == tuple(sha256_text(t) for t in before.texts)
    assert docs_store.add_vectors(_rows(write, ids, [0, 2]), vectors[[0, 2]])
    after = docs_store.unembedded("pool", "1.0.0")
    assert after is not None and after.rows.ids == (ids[1], *ids[3:])
    assert after.package.chunk_count == len(DOCS)
    # The rows it names are the ones add_vectors takes: the package completes from them.
    assert docs_store.add_vectors(after.rows, vectors[[1, 3, 4, 5]])
    assert docs_store.mark_complete("pool", "1.0.0")
    assert sorted(_nearest(docs_store)) == sorted(ids)


def test_unembedded_is_none_unless_that_version_is_partial(docs_store: DocsStore) -> None:
    assert docs_store.unembedded("pool", "1.0.0") is None  # not indexed
    write, vectors = _write()
    ids = docs_store.replace_package(write)
    assert docs_store.unembedded("pool", "2.0.0") is None  # another version
    assert docs_store.add_vectors(VectorRows.of_write(write, ids), vectors)
    assert docs_store.mark_complete("pool", "1.0.0")
    assert docs_store.unembedded("pool", "1.0.0") is None  # complete
