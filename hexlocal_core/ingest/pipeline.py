"""Items -> chunks -> vectors -> one transaction. Shared by every docs source.

The model guard runs first (one row read) so a mismatched index is refused before any
download. Vectors are reused by (model, hash of the exact text embedded); only text never
seen is embedded. Any failure before the commit leaves the database exactly as it was.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np
from attrs import frozen

from hexlocal_core.chunk import CHUNKER_VERSION, SectionChunker
from hexlocal_core.errors import ModelMismatch
from hexlocal_core.index.store import PackageWrite, Store
from hexlocal_core.model import Chunk, DocItem, IngestProgress, IngestReport, Notice, sha256_text
from hexlocal_core.ports import Embedder, Vectors

log = logging.getLogger("hexlocal.ingest")

ProgressFn = Callable[[IngestProgress], None]
PROGRESS_BATCH = 64  # embed in slices this size so progress moves during long jobs


@frozen
class IndexRequest:
    package: str
    version: str
    source: str
    items: Sequence[DocItem]
    docs_html_url: str | None = None
    meta: dict[str, object] | None = None
    notices: tuple[Notice, ...] = ()
    skipped: dict[str, int] | None = None


def model_guard(store: Store, embedder: Embedder) -> None:
    """Refuse to add vectors of another model to an index (costs one row read)."""
    config = store.embedding_config()
    if config is not None and config.model != embedder.model_id:
        raise ModelMismatch(
            f"this index was built with {config.model} ({config.dims} dims) but the configured "
            f"embedder is {embedder.model_id}. Run `hexlocal reindex` to re-embed every package "
            "under the configured model, or set AI_EMBED_MODEL back."
        )


def provider_of(embedder: Embedder) -> str:
    return embedder.model_id.split(":", 1)[0] if ":" in embedder.model_id else "api"


def chunk_items(items: Sequence[DocItem], chunker: SectionChunker | None = None) -> list[Chunk]:
    chunker = chunker or SectionChunker()
    out: list[Chunk] = []
    for item in items:
        out.extend(chunker.chunk(item))
    return out


async def embed_with_cache(
    store: Store,
    embedder: Embedder,
    chunks: Sequence[Chunk],
    *,
    batch_size: int,
    on_progress: Callable[[int], None] | None = None,
) -> tuple[Vectors, int]:
    """Vectors for the chunks (row i for chunk i) and how many were embedded now."""
    texts = [c.embedding_text() for c in chunks]
    hashes = [sha256_text(t) for t in texts]
    cached = await asyncio.to_thread(store.cached_vectors, embedder.model_id, hashes)
    missing: dict[str, str] = {}
    for text, h in zip(texts, hashes, strict=True):
        if h not in cached:
            missing.setdefault(h, text)
    todo = list(missing.items())
    uses = Counter(hashes)  # one embedded text may serve several chunks
    done = len(chunks) - sum(uses[h] for h in missing)
    if on_progress:
        on_progress(done)
    step = max(1, min(batch_size, PROGRESS_BATCH))
    fresh: dict[str, np.ndarray] = {}
    for start in range(0, len(todo), step):
        part = todo[start : start + step]
        vectors = await embedder.embed([t for _, t in part])
        for (h, _), vector in zip(part, vectors, strict=True):
            fresh[h] = vector
        done += sum(uses[h] for h, _ in part)
        if on_progress:
            on_progress(done)
    if not chunks:
        return np.zeros((0, embedder.dims or 1), dtype=np.float32), 0
    table = {**cached, **fresh}
    return np.stack([table[h] for h in hashes]).astype(np.float32), len(todo)


async def index_items(
    store: Store,
    embedder: Embedder,
    request: IndexRequest,
    *,
    batch_size: int = 200,
    progress: ProgressFn | None = None,
    started: float | None = None,
) -> IngestReport:
    """Chunk, embed (reusing cached vectors) and write one package version atomically."""
    t0 = started or time.perf_counter()
    model_guard(store, embedder)

    def report(phase: str, embedded: int = 0, total: int = 0) -> None:
        if progress:
            progress(
                IngestProgress(
                    request.package, request.version, phase, len(request.items), total, embedded
                )
            )

    chunks = await asyncio.to_thread(chunk_items, request.items)
    total = len(chunks)
    report("embedding", 0, total)
    vectors, embedded = await embed_with_cache(
        store,
        embedder,
        chunks,
        batch_size=batch_size,
        on_progress=lambda n: report("embedding", n, total),
    )
    report("writing", total, total)
    write = PackageWrite(
        name=request.package,
        version=request.version,
        source=request.source,
        chunker_version=CHUNKER_VERSION,
        item_count=len(request.items),
        chunks=chunks,
        vectors=vectors,
        embed_model=embedder.model_id,
        embed_provider=provider_of(embedder),
        docs_html_url=request.docs_html_url,
        meta=dict(request.meta or {}),
    )
    await asyncio.to_thread(store.replace_package, write)
    report("done", total, total)
    log.info(
        "indexed %s %s: %d items, %d chunks, %d embedded, %d reused",
        request.package,
        request.version,
        len(request.items),
        total,
        embedded,
        total - embedded,
    )
    return IngestReport(
        package=request.package,
        version=request.version,
        source=request.source,
        items=len(request.items),
        chunks=total,
        embedded=embedded,
        reused=total - embedded,
        seconds=round(time.perf_counter() - t0, 3),
        notices=request.notices,
        skipped=dict(request.skipped or {}),
    )
