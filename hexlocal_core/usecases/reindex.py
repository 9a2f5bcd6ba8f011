"""`reindex`: re-embed everything under the configured model.

Each package's vectors go into the embedding cache in its own transaction; then the
whole index switches in one final transaction, so an interruption leaves the index fully
on the old model and a re-run embeds only what the cache lacks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from attrs import asdict, frozen

from hexlocal_core.errors import ModelError
from hexlocal_core.index.rows import Vector
from hexlocal_core.index.seam import DocsStore
from hexlocal_core.model_guard import provider_of
from hexlocal_core.ports import Embedder
from hexlocal_core.threads import in_worker

log = logging.getLogger("hexlocal.maintenance")

# (package, texts embedded so far, texts to embed in all): texts, not packages, because
# one large package (Elixir's own docs) can take minutes with the local model.
ReindexProgress = Callable[[str, int, int], None]


@frozen
class ReindexPlan:
    from_model: str | None
    to_model: str
    packages: tuple[str, ...]
    chunks: int
    memories: int
    texts_to_embed: int  # after the cache
    estimated_tokens: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@frozen
class ReindexReport:
    plan: ReindexPlan
    done: tuple[str, ...]
    remaining: tuple[str, ...]
    switched: bool
    embedded: int = 0  # texts embedded by this run (the rest came from the cache)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "plan": self.plan.to_dict()}


def _require(embedder: Embedder | None) -> Embedder:
    if embedder is None:
        raise ModelError("no embedding model is available; see `hexlocal models status`")
    return embedder


def _uncached(store: DocsStore, model: str, texts: list[tuple[str, str]]) -> dict[str, str]:
    """hash -> text of the texts with no vector under `model` yet (each text once)."""
    cached = store.cached_vectors(model, [h for h, _ in texts])
    return {h: t for h, t in texts if h not in cached}


async def plan_reindex(store: DocsStore, embedder: Embedder | None) -> ReindexPlan:
    """What a reindex would do; reads only."""
    model = _require(embedder).model_id

    def read() -> ReindexPlan:
        config = store.embedding_config()
        packages = store.packages()
        texts = [t for p in packages for t in store.reindex.embedded_texts(p.name)]
        todo = _uncached(store, model, texts)
        memories = store.reindex.memory_texts()
        chars = sum(len(t) for t in todo.values()) + sum(len(t) for _, t in memories)
        return ReindexPlan(
            from_model=config.model if config else None,
            to_model=model,
            packages=tuple(p.name for p in packages),
            chunks=len(texts),
            memories=len(memories),
            texts_to_embed=len(todo) + len(memories),
            estimated_tokens=chars // 4,  # ~4 characters per word piece for English prose
        )

    return await in_worker(read)


async def reindex(
    store: DocsStore,
    embedder: Embedder | None,
    *,
    batch_size: int,
    dry_run: bool = False,
    progress: ReindexProgress | None = None,
) -> ReindexReport:
    """Re-embed every package under the configured model; switch only when all are done.

    A failure is a value: the report names the packages still to do, the index stays
    wholly on the old model, and a re-run embeds only what the cache lacks.
    """
    plan = await plan_reindex(store, embedder)
    if dry_run:
        return ReindexReport(plan, (), plan.packages, switched=False)
    model = _require(embedder)
    counter = _Counter(plan.texts_to_embed, progress)
    done: list[str] = []
    for index, name in enumerate(plan.packages):
        try:
            await _embed_package_into_cache(store, model, name, counter, batch_size)
        except Exception as exc:  # noqa: BLE001 - any failure: report exactly what remains
            log.warning("reindex of %s failed: %s", name, exc)
            remaining = plan.packages[index:]
            return ReindexReport(plan, tuple(done), remaining, False, counter.done, str(exc))
        done.append(name)
    try:
        memory_vectors = await _memory_vectors(store, model, counter)
        counter.finish()  # everything is embedded: what remains is the switch
        model_id, provider, dims = model.model_id, provider_of(model), model.dims
        await in_worker(
            lambda: store.reindex.switch_model(model_id, provider, dims, memory_vectors)
        )
    except Exception as exc:  # noqa: BLE001 - the switch rolled back; the cache is kept
        log.warning("reindex switch failed: %s", exc)
        return ReindexReport(plan, tuple(done), (), False, counter.done, str(exc))
    return ReindexReport(plan, tuple(done), (), True, counter.done)


class _Counter:
    """Counts embedded texts and forwards them to the progress callback."""

    def __init__(self, total: int, progress: ReindexProgress | None) -> None:
        self.total = total
        self.done = 0
        self._progress = progress

    def add(self, package: str, n: int) -> None:
        self.done += n
        if self._progress is not None:
            self._progress(package, self.done, self.total)

    def finish(self) -> None:
        if self._progress is not None:
            self._progress("", self.total, self.total)


async def _embed_package_into_cache(
    store: DocsStore, embedder: Embedder, name: str, counter: _Counter, batch_size: int
) -> None:
    """All of a package's vectors under the new model land in the cache in one transaction."""
    model = embedder.model_id
    todo = await in_worker(lambda: _uncached(store, model, store.reindex.embedded_texts(name)))
    counter.add(name, 0)
    if not todo:
        return
    hashes = list(todo)
    parts = []
    for start in range(0, len(hashes), batch_size):
        part = hashes[start : start + batch_size]
        parts.append(await embedder.embed([todo[h] for h in part]))
        counter.add(name, len(part))
    vectors = [v for block in parts for v in block]
    await in_worker(lambda: store.reindex.cache_vectors(model, hashes, vectors))


async def _memory_vectors(
    store: DocsStore, embedder: Embedder, counter: _Counter
) -> dict[int, Vector]:
    """Memories are few and have no cache: they are embedded right before the switch."""
    memories = await in_worker(lambda: store.reindex.memory_texts())
    if not memories:
        return {}
    vectors = await embedder.embed([t for _, t in memories])
    counter.add("memories", len(memories))
    return {mid: vector for (mid, _), vector in zip(memories, vectors, strict=True)}
