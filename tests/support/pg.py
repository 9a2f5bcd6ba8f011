"""Helpers of the PostgreSQL store tests: a store per test, package writes, vectors."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from hexlocal_core.index.pg.store import PgStore
from hexlocal_core.index.rows import PackageWrite
from hexlocal_core.model import Chunk
from tests.support.helpers import HashingEmbedder, chunk_of, item


@pytest.fixture
def store(pg_url: str) -> Iterator[PgStore]:
    s = PgStore(pg_url)
    try:
        yield s
    finally:
        s.close()


def write_docs(
    store: PgStore,
    name: str,
    docs: Sequence[tuple[str, str]],
    vecs: np.ndarray[Any, Any] | None = None,
    *,
    version: str = "1.0.0",
) -> None:
    chunks = [chunk_of(item(ref, text, package=name, version=version)) for ref, text in docs]
    store.replace_package(package_write(name, version, chunks, vecs))


def package_write(
    name: str, version: str, chunks: Sequence[Chunk], vecs: np.ndarray[Any, Any] | None = None
) -> PackageWrite:
    emb = HashingEmbedder()
    if vecs is None:
        vecs = np.stack([emb.vector(c.embedding_text()) for c in chunks])
    return PackageWrite(
        name=name,
        version=version,
        source="hexdocs",
        chunker_version=1,
        item_count=len(chunks),
        chunks=chunks,
        vectors=vecs.astype(np.float32),
        embed_model=emb.model_id,
        embed_provider="test",
    )


def unit_rows(rng: np.random.Generator, n: int, dims: int = 16) -> np.ndarray[Any, Any]:
    rows = rng.standard_normal((n, dims)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)
