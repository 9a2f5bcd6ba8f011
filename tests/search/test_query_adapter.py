"""The error pastes' query adapter (search/query_adapter.py): the shipped map, its loading,
and where the engine uses it, over a real index of jason 1.4.4."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hexlocal_core.adapters.local_embedder import build_local_embedder
from hexlocal_core.config import Settings
from hexlocal_core.index.sqlite.store import Store
from hexlocal_core.search import engine as engine_module
from hexlocal_core.search.engine import SearchEngine, plan_query
from hexlocal_core.search.query_adapter import (
    ERROR_ADAPTER,
    QueryAdapter,
    adapted,
    load_adapter,
)
from hexlocal_core.search.query_rewrite import embed_mean
from hexlocal_core.search.query_shape import Shape
from hexlocal_core.search.rows import Rows
from hexlocal_core.search.tuning import SearchTuning
from tests.support.helpers import HashingEmbedder

PACKAGE = "jason"
ERROR = '** (Jason.DecodeError) unexpected byte at position 7: 0x7D ("}")'
PROSE = "how do I decode json into structs with atom keys"


def test_the_shipped_map_serves_the_default_local_model() -> None:
    # Renaming the default model without refitting would leave the map silently unused.
    shipped = load_adapter(ERROR_ADAPTER)
    assert shipped is not None
    embedder = build_local_embedder(Settings.from_env({}))
    assert shipped.model == embedder.model_id
    assert shipped.matrix.shape == (embedder.dims, embedder.dims)


def test_a_mapped_vector_is_a_unit_row_and_other_dims_pass_through() -> None:
    rng = np.random.default_rng(1)
    adapter = QueryAdapter("m", (0.1 * rng.standard_normal((8, 8))).astype(np.float32))
    q = rng.standard_normal((1, 8)).astype(np.float32)
    moved = np.asarray(adapter.apply(q))
    assert moved.shape == (1, 8)
    assert np.linalg.norm(moved) == pytest.approx(1.0, abs=1e-5)
    assert not np.allclose(moved, q / np.linalg.norm(q))
    other = np.ones((1, 4), dtype=np.float32)
    assert adapter.apply(other) is other
    assert adapted(q, "another model", adapter) is q
    assert adapted(q, "m", None) is q


@pytest.mark.parametrize(
    "content",
    [None, b"not a zip", "non-square"],
    ids=["absent", "corrupt", "non-square"],
)
def test_an_unusable_map_is_skipped_with_a_warning(
    tmp_path: Path, content: bytes | str | None, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "adapter.npz"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content == "non-square":
        np.savez(path, model=np.array("m"), matrix=np.zeros((3, 4), dtype=np.float32))
    assert load_adapter(path) is None
    assert "query adapter" in caplog.text


async def _vector_top(
    store: Store, query: str, adapter: QueryAdapter | None, on: bool, patch: pytest.MonkeyPatch
) -> str:
    patch.setattr(engine_module, "error_adapter", lambda: adapter)
    engine = SearchEngine(store, HashingEmbedder(), None, tuning=SearchTuning(error_adapter=on))
    outcome = await engine.search(PACKAGE, query, limit=5, mode="vector", exact=False)
    return outcome.hits[0].ref


async def _map_toward_last(store: Store, query: str) -> tuple[QueryAdapter, str, str]:
    """A map that turns the query's vector into that of the chunk its vector search ranks
    30th, the ref ranked first without it, and the 30th chunk's ref."""
    embedder = HashingEmbedder()
    q = np.asarray(await embed_mean(embedder, plan_query(query, SearchTuning()).vec_texts))
    q = q.reshape(-1)
    chunks = store.session().chunks
    found = chunks.vector_hits(q.reshape(1, -1), package=PACKAGE, depth=30, examples_only=False)
    target = np.asarray(chunks.stored_vectors(PACKAGE, [found[-1][0]])[found[-1][0]]).reshape(-1)
    # q + A q = target, for this q: A = (target - q) q^T / (q . q)
    matrix = np.outer(target - q, q) / float(q @ q)
    first, last = Rows(store).get([found[0][0], found[-1][0]])
    return QueryAdapter("test:hashing", matrix.astype(np.float32)), first.ref, last.ref


async def test_only_error_pastes_are_mapped_and_only_for_their_model(
    jason_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert plan_query(ERROR, SearchTuning()).shape is Shape.ERROR
    adapter, first, mapped_to = await _map_toward_last(jason_store, ERROR)
    assert first != mapped_to
    assert await _vector_top(jason_store, ERROR, None, True, monkeypatch) == first
    assert await _vector_top(jason_store, ERROR, adapter, True, monkeypatch) == mapped_to
    assert await _vector_top(jason_store, ERROR, adapter, False, monkeypatch) == first
    stranger = QueryAdapter("another:model", adapter.matrix)
    assert await _vector_top(jason_store, ERROR, stranger, True, monkeypatch) == first

    prose_map, prose_first, _ = await _map_toward_last(jason_store, PROSE)
    assert await _vector_top(jason_store, PROSE, prose_map, True, monkeypatch) == prose_first
