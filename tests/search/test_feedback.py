"""Relevance feedback on the vector arm: a prose query looks again from its vector moved
toward the first fusion's top chunks. Real SQLite and sqlite-vec; the vectors are placed
by hand so the geometry says what must move, and the query vector is given (no model).

    e1 is the query. A = e1 and D (mostly e1, some e2) lead; C (cos 0.33) beats B (cos 0.29)
    for the query alone, but B leans toward e2 as D does, so the query moved toward A and
    D (the top 2) must rank B above C.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from hexlocal_core.index.sqlite.store import Store
from hexlocal_core.search.engine import SearchEngine
from hexlocal_core.search.tuning import SearchTuning
from tests.support.helpers import HashingEmbedder, chunk_of, item, write_package

DIMS = 16


def unit(*parts: tuple[int, float]) -> np.ndarray:
    v = np.zeros(DIMS, dtype=np.float32)
    for axis, weight in parts:
        v[axis] = weight
    return v / np.linalg.norm(v)


PLACED = {
    "A": unit((0, 1.0)),
    "D": unit((0, 0.9), (1, 0.45)),
    "C": unit((0, 0.35), (2, 1.0)),
    "B": unit((0, 0.3), (1, 1.0)),
    "F": unit((3, 1.0)),
}
QUERY_VECTOR = unit((0, 1.0)).reshape(1, -1)
PROSE = "qqzz wwxx"  # prose that no chunk contains: the pool is the vector arm's order


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(tmp_path / "index.db")
    chunks = [chunk_of(item(f"M.html#{name}", f"text {name}", package="m")) for name in PLACED]
    write_package(opened, "m", chunks, np.stack(list(PLACED.values())))
    yield opened
    opened.close()


async def _order(store: Store, query: str, *, weight: float, mode: str = "rrf") -> list[str]:
    tuning = SearchTuning(feedback_weight=weight, feedback_depth=2)
    engine = SearchEngine(store, HashingEmbedder(dims=DIMS), None, tuning=tuning)
    outcome = await engine.search(
        "m", query, limit=5, mode=mode, exact=False, query_vector=QUERY_VECTOR
    )
    return [hit.ref.removeprefix("M.html#") for hit in outcome.hits]


async def test_the_query_alone_ranks_by_its_own_cosine(store: Store) -> None:
    assert await _order(store, PROSE, weight=0.0) == ["A", "D", "C", "B", "F"]


async def test_feedback_moves_the_query_toward_the_top_chunks(store: Store) -> None:
    assert await _order(store, PROSE, weight=0.6) == ["A", "D", "B", "C", "F"]


async def test_no_feedback_for_identifiers_errors_or_the_plain_vector_mode(store: Store) -> None:
    assert await _order(store, "M.fun/1", weight=0.6) == ["A", "D", "C", "B", "F"]
    paste = "** (ArgumentError) errors were found at the given arguments"
    assert await _order(store, paste, weight=0.6) == ["A", "D", "C", "B", "F"]
    assert await _order(store, PROSE, weight=0.6, mode="vector") == ["A", "D", "C", "B", "F"]
