"""Small builders shared by tests: DocItems, chunks and a deterministic hashing embedder.

The hashing embedder stands in for the Embedder port where a test is about storage or
fusion, not about embedding quality; search-quality tests use the real ONNX model.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import apsw
import numpy as np
import pytest

from hexlocal_core.index.rows import PackageWrite
from hexlocal_core.index.sqlite.db import connect
from hexlocal_core.index.sqlite.store import Store
from hexlocal_core.model import Chunk, DocItem, DocType
from hexlocal_core.ports import NoLifecycle, Vectors

if TYPE_CHECKING:
    from hexlocal_core.service import Hexlocal


def db(service: Hexlocal) -> apsw.Connection:
    """A connection of the test's own to the service's database file (the facade exposes
    no store): what the test reads is what another process would see."""
    return connect(Path(service.diagnostics().database_path))


def project_root(service: Hexlocal) -> Path:
    return Path(service.diagnostics().project_root)


def item(
    ref: str,
    markdown: str,
    *,
    package: str = "pkg",
    version: str = "1.0.0",
    title: str | None = None,
    doc_type: DocType = DocType.FUNCTION,
    module: str | None = None,
    function: str | None = None,
    arity: int | None = None,
) -> DocItem:
    return DocItem(
        package=package,
        version=version,
        ref=ref,
        title=title or ref,
        doc_type=doc_type,
        markdown=markdown,
        module=module,
        function=function,
        arity=arity,
        hexdocs_url=f"https://hexdocs.pm/{package}/{version}/{ref}",
    )


def chunk_of(doc: DocItem, ordinal: int = 0, content: str | None = None) -> Chunk:
    text = doc.markdown if content is None else content
    return Chunk(
        item=doc, ordinal=ordinal, content=text, has_example="```" in text or "iex>" in text
    )


class HashingEmbedder(NoLifecycle):
    """Deterministic unit vectors from a text hash; records every batch it is given."""

    def __init__(self, dims: int = 16, model_id: str = "test:hashing") -> None:
        self._dims = dims
        self._model_id = model_id
        self.batches: list[list[str]] = []

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dims(self) -> int:
        return self._dims

    def vector(self, text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        v = np.random.default_rng(seed).standard_normal(self._dims).astype(np.float32)
        return v / np.linalg.norm(v)

    async def embed(self, texts: Sequence[str]) -> Vectors:
        self.batches.append(list(texts))
        if not texts:
            return np.zeros((0, self._dims), dtype=np.float32)
        return np.stack([self.vector(t) for t in texts])

    async def embed_query(self, text: str) -> Vectors:
        return self.vector(text).reshape(1, -1)


class GatedEmbedder(HashingEmbedder):
    """Embeds nothing until `gate` is set: the vectors of a real model on a CPU, minutes
    for a project, held still so that what answers before them can be seen."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    async def embed(self, texts: Sequence[str]) -> Vectors:
        await self.gate.wait()
        return await super().embed(texts)


def write_package(
    store: Store, name: str, chunks: Sequence[Chunk], vectors: np.ndarray | None = None
) -> None:
    """Store chunks as one package version, with HashingEmbedder vectors unless given."""
    if vectors is None:
        emb = HashingEmbedder()
        vectors = np.stack([emb.vector(c.embedding_text()) for c in chunks])
    store.replace_package(
        PackageWrite(
            name=name,
            version="1.0.0",
            source="hexdocs",
            chunker_version=1,
            item_count=len(chunks),
            chunks=chunks,
            vectors=vectors.astype(np.float32),
            embed_model=HashingEmbedder().model_id,
            embed_provider="test",
        )
    )


def index_corpus_package(path: Path, tarball: Path, package: str, version: str) -> Path:
    """A real index of one corpus tarball at `path` (the real parsers and pipeline; the
    hashing embedder, so no model is needed): what engine tests rank against."""
    import asyncio

    from hexlocal_core.ingest.hexdocs import parse_hexdocs
    from hexlocal_core.ingest.pipeline import IngestRequest, ingest_items
    from hexlocal_core.ingest.tarball import read_docs_tarball

    parsed = parse_hexdocs(
        read_docs_tarball(tarball.read_bytes(), max_bytes=50_000_000),
        package=package,
        version=version,
    )
    store = Store(path)
    try:
        request = IngestRequest(package, version, "hexdocs", parsed.items)
        asyncio.run(ingest_items(store, HashingEmbedder(), request))
    finally:
        store.close()
    return path


def cli_builds_with_fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    """CLI commands get a service on the hashing embedder, no reranker and a hex client
    with test timings, pointed at whatever fake HEX_API_URL / HEX_MIRROR name."""
    from hexlocal_cli import common
    from hexlocal_core.config import Settings
    from hexlocal_core.service import build
    from tests.fakes.fake_hex import client_for

    def fake_build(settings: Settings, *, load_models: bool = True) -> Hexlocal:
        return build(
            settings,
            embedder=HashingEmbedder(),
            reranker=None,
            registry=client_for(settings),
            load_models=False,
        )

    monkeypatch.setattr(common, "build_service", fake_build)


class ScriptedReranker(NoLifecycle):
    """A reranker with a known opinion: `scorer(n)` gives the scores of n passages in the
    order they were passed (the pool order). Records what it was asked."""

    def __init__(
        self, scorer: Callable[[int], list[float]], model_id: str = "test:scripted"
    ) -> None:
        self._scorer = scorer
        self._model_id = model_id
        self.calls: list[tuple[str, int]] = []

    @property
    def model_id(self) -> str:
        return self._model_id

    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        self.calls.append((query, len(passages)))
        return self._scorer(len(passages))
