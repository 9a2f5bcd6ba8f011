"""Items -> chunks (one transaction) -> vectors (a transaction per slice). Shared by every
docs source.

The caller runs the model guard once, before any download. The chunks are written first,
whole, with the package 'partial': keyword search and exact lookups answer from then on,
while the vectors (seconds to minutes on a CPU) are added slice by slice, each slice in its
own transaction, and the package is marked complete after the last. Vectors are reused by
(model, hash of the exact text embedded); only text never seen is embedded, so an
ingestion cut short (cancelled, failed, killed) and started again embeds only what it had
not. The cancel token is checked between steps and between slices; a cancelled ingestion
leaves the chunks and the vectors of the slices done, and the package 'partial'.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence

import numpy as np
from attrs import evolve, frozen

from hexlocal_core.cancel import checkpoint
from hexlocal_core.chunk import CHUNKER_VERSION, chunk_items
from hexlocal_core.errors import StoreError
from hexlocal_core.index.rows import PackageWrite, Unembedded, VectorRows
from hexlocal_core.index.seam import DocsStore
from hexlocal_core.model import (
    Chunk,
    DocItem,
    IngestProgress,
    IngestReport,
    Notice,
    Phase,
    ProgressFn,
    sha256_text,
)
from hexlocal_core.model_guard import provider_of
from hexlocal_core.ports import Embedder, Vectors
from hexlocal_core.threads import in_worker

log = logging.getLogger("hexlocal.ingest")


@frozen
class IngestRequest:
    package: str
    version: str
    source: str
    items: Sequence[DocItem]
    docs_html_url: str | None = None
    meta: dict[str, object] | None = None
    notices: tuple[Notice, ...] = ()
    skipped: dict[str, int] | None = None


@frozen
class EmbeddingPlan:
    """What a package's chunks need embedded: each text hash's chunk positions, the
    vectors the cache already has, and the texts never embedded (longest first)."""

    hashes: tuple[str, ...]
    positions: dict[str, list[int]]
    cached: dict[str, np.ndarray]
    todo: list[tuple[str, str]]

    @classmethod
    async def of(cls, store: DocsStore, model: str, chunks: Sequence[Chunk]) -> EmbeddingPlan:
        """Each text hashed once; the cache asked once, in a worker thread."""
        texts = [c.embedding_text() for c in chunks]
        return await cls.of_texts(store, model, texts, [sha256_text(t) for t in texts])

    @classmethod
    async def of_texts(
        cls, store: DocsStore, model: str, texts: Sequence[str], text_hashes: Sequence[str]
    ) -> EmbeddingPlan:
        """`texts[i]` is chunk i's embedded text, `text_hashes[i]` its hash."""
        hashes = tuple(text_hashes)
        positions: dict[str, list[int]] = {}
        for i, h in enumerate(hashes):
            positions.setdefault(h, []).append(i)  # one embedded text may serve several chunks
        cached = await in_worker(lambda: store.cached_vectors(model, list(positions)))
        missing = {h: t for t, h in zip(texts, hashes, strict=True) if h not in cached}
        # Longest first, so each slice holds texts of like length: the embedder pads a batch
        # to its longest text (plug: +10.8% padding -> +7.1%; elixir +9.1% -> +5.6%).
        todo = sorted(missing.items(), key=lambda item: len(item[1]), reverse=True)
        return cls(hashes, positions, {h: cached[h] for h in positions if h in cached}, todo)


async def embed_slices(
    embedder: Embedder, todo: Sequence[tuple[str, str]], slice_size: int
) -> AsyncIterator[dict[str, np.ndarray]]:
    """(hash -> vector) for `todo`, `slice_size` texts at a time (the adapter batches each
    slice its own way); the cancel token is checked before each slice."""
    step = max(1, slice_size)
    for start in range(0, len(todo), step):
        checkpoint()
        part = todo[start : start + step]
        vectors = await embedder.embed([t for _, t in part])
        yield {h: vector for (h, _), vector in zip(part, vectors, strict=True)}


async def embed_with_cache(
    store: DocsStore,
    embedder: Embedder,
    chunks: Sequence[Chunk],
    *,
    slice_size: int,
) -> tuple[Vectors, int]:
    """Vectors for the chunks (row i for chunk i), and how many texts were embedded now."""
    plan = await EmbeddingPlan.of(store, embedder.model_id, chunks)
    table = dict(plan.cached)
    async for fresh in embed_slices(embedder, plan.todo, slice_size):
        table.update(fresh)
    if not chunks:
        return np.zeros((0, embedder.dims or 1), dtype=np.float32), 0
    return np.stack([table[h] for h in plan.hashes]).astype(np.float32), len(plan.todo)


async def ingest_items(
    store: DocsStore,
    embedder: Embedder,
    request: IngestRequest,
    *,
    slice_size: int = 200,
    progress: ProgressFn | None = None,
    started: float | None = None,
    embed: bool = True,
) -> IngestReport:
    """Chunk, write the chunks (keyword search works from here), then embed them slice by
    slice, each slice's vectors written as it comes, and mark the package complete.
    `embed=False`: stop after the chunks, the package 'partial' (`finish_stored` ends it)."""
    t0 = started or time.perf_counter()

    report = _reporter(progress, request.package, request.version, len(request.items))
    report(Phase.CHUNKING, 0, 0)
    chunked = await in_worker(lambda: chunk_items(request.items))
    chunks = chunked.chunks
    total = len(chunks)
    model = embedder.model_id
    plan = await EmbeddingPlan.of(store, model, chunks)
    checkpoint()  # the last one before the chunks are written
    report(Phase.WRITING, 0, total)
    write = PackageWrite(
        name=request.package,
        version=request.version,
        source=request.source,
        chunker_version=CHUNKER_VERSION,
        item_count=len(request.items),
        chunks=chunks,
        vectors=None,
        embed_model=model,
        embed_provider=provider_of(embedder),
        docs_html_url=request.docs_html_url,
        meta=dict(request.meta or {}),
    )
    ids = await in_worker(lambda: store.replace_package(write))
    embedded = reused = 0
    if embed:
        rows = VectorRows.of_write(write, ids, plan.hashes)
        await _embed_into(store, embedder, rows, plan, slice_size, report, 0)
        embedded, reused = len(plan.todo), total - len(plan.todo)
    else:
        report(Phase.EMBEDDING, 0, total)  # searchable: the chunks answer by keyword
    log.info(
        "indexed %s %s: %d items, %d chunks, %d embedded, %d reused%s",
        request.package,
        request.version,
        len(request.items),
        total,
        embedded,
        reused,
        "" if embed else " (chunks only: its vectors come later)",
    )
    return IngestReport(
        package=request.package,
        version=request.version,
        source=request.source,
        items=len(request.items),
        chunks=total,
        embedded=embedded,
        reused=reused,
        seconds=round(time.perf_counter() - t0, 3),
        notices=tuple(request.notices) + chunked.notices(request.package, request.version),
        skipped=dict(request.skipped or {}),
    )


async def finish_stored(
    store: DocsStore,
    embedder: Embedder,
    stored: Unembedded,
    *,
    slice_size: int = 200,
    progress: ProgressFn | None = None,
    started: float | None = None,
) -> IngestReport:
    """Embeds a 'partial' package's stored chunks that lack a vector and marks it complete:
    an ingestion cut short after its chunks were written is finished without reading its
    docs again (no download, no parse: it works offline). The caller checked that the
    chunks are this chunker's and the model the embedder's."""
    t0 = started or time.perf_counter()
    package = stored.package
    total = package.chunk_count

    report = _reporter(progress, package.name, package.version, package.item_count)
    rows = evolve(stored.rows, embed_model=embedder.model_id, embed_provider=provider_of(embedder))
    plan = await EmbeddingPlan.of_texts(store, embedder.model_id, stored.texts, rows.text_hashes)
    await _embed_into(store, embedder, rows, plan, slice_size, report, total - len(rows.ids))
    log.info(
        "finished %s %s from its stored chunks: %d of %d chunks lacked a vector, %d embedded",
        package.name,
        package.version,
        len(rows.ids),
        total,
        len(plan.todo),
    )
    return IngestReport(
        package=package.name,
        version=package.version,
        source=package.source,
        items=package.item_count,
        chunks=total,
        embedded=len(plan.todo),
        reused=total - len(plan.todo),
        seconds=round(time.perf_counter() - t0, 3),
    )


Report = Callable[[Phase, int, int], None]  # (phase, chunks embedded, chunks in all)


def _reporter(progress: ProgressFn | None, package: str, version: str, items: int) -> Report:
    """The package version's progress updates, for `progress` (None: nobody listens)."""

    def report(phase: Phase, embedded: int, total: int) -> None:
        if progress:
            progress(IngestProgress(package, version, phase, items, total, embedded))

    return report


async def _embed_into(
    store: DocsStore,
    embedder: Embedder,
    rows: VectorRows,
    plan: EmbeddingPlan,
    slice_size: int,
    report: Report,
    done: int,
) -> None:
    """The cached vectors, then each embedded slice, written as they come (a transaction
    each); then the package marked complete. `done`: chunks that had a vector already."""
    total = done + len(rows.ids)
    done += await _add(store, rows, plan, plan.cached)
    report(Phase.EMBEDDING, done, total)
    async for fresh in embed_slices(embedder, plan.todo, slice_size):
        done += await _add(store, rows, plan, fresh)
        report(Phase.EMBEDDING, done, total)
    if not await in_worker(lambda: store.mark_complete(rows.name, rows.version)):
        raise _replaced(rows)
    report(Phase.DONE, total, total)


async def _add(
    store: DocsStore, rows: VectorRows, plan: EmbeddingPlan, vectors: dict[str, np.ndarray]
) -> int:
    """Writes the vectors of every chunk whose text is in `vectors`; how many chunks."""
    positions = [i for h in vectors for i in plan.positions[h]]
    if not positions:
        return 0
    matrix = np.stack([vectors[plan.hashes[i]] for i in positions]).astype(np.float32)
    if not await in_worker(lambda: store.add_vectors(rows.take(positions), matrix)):
        raise _replaced(rows)
    return len(positions)


def _replaced(rows: VectorRows) -> StoreError:
    return StoreError(
        f"{rows.name} {rows.version} was replaced by another writer while it was being "
        "embedded; the index holds that writer's version"
    )
