"""remember / recall: curated knowledge memory, and the background curation worker.

`remember` only validates and writes the texts to the durable `remember_queue` (one
transaction) and returns request ids at once. One worker task curates the queue strictly
in submission order (`seq`): embed, compare with the nearest memories, let a chat model
(or, without one, a deterministic rule) choose create / append / merge / replace /
deprecate / discard, then apply the decision and mark the item done in one transaction.
Stopping the worker abandons at most the current item, which stays pending and is curated
again at the next start. Every decision is written to `curation_log`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from attrs import define

from hexlocal_core.config import Settings
from hexlocal_core.index.seam import DocsStore
from hexlocal_core.memory import inputs, queue, records
from hexlocal_core.memory.curator import Curator, embed_texts
from hexlocal_core.memory.queue import QueueItem
from hexlocal_core.memory.recall import lock_pins, search
from hexlocal_core.model import Memory
from hexlocal_core.ports import ChatModel, Embedder
from hexlocal_core.screening import screen_memories
from hexlocal_core.threads import in_worker

__all__ = ["MemoryPorts", "MemoryService"]

log = logging.getLogger("hexlocal.memory")

BACKFILL_BATCH = 64
DRAIN_POLL_S = 0.02


@define
class MemoryPorts:
    """What memory needs: the store, the models, and the settings it reads (thresholds,
    the project root whose mix.lock marks memories stale). Satisfies `MemoryHost`."""

    settings: Settings
    store: DocsStore
    embedder: Embedder | None
    chat: ChatModel | None


class MemoryService:
    """The memory use cases the facade delegates to: remember, remember_status, recall."""

    # Pauses before retrying an item whose curation raised unexpectedly (a busy database,
    # a bug); after the last one the item is marked failed, its text kept in the queue.
    RETRY_DELAYS_S: tuple[float, ...] = (0.2, 1.0)

    def __init__(self, host: MemoryPorts) -> None:
        self._host = host
        self._curator = Curator(host)
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        # Set while the worker waits for work: its start-up backfill is over and it found
        # nothing pending. drain() needs this as well as an empty queue.
        self._idle = asyncio.Event()

    # -- the faces' calls -------------------------------------------------------------

    async def remember(
        self,
        texts: list[str],
        *,
        package: str | None = None,
        version: str | None = None,
        tags: list[str] | None = None,
    ) -> list[dict[str, Any]]:
        """Queues the texts durably and returns one pending request per text, in order."""
        subs = inputs.submissions(texts, package, version, tags)
        ids = await in_worker(lambda: queue.enqueue(self._host.store.session(), subs))
        self._ensure_worker()
        self._wake.set()
        return [{"request_id": rid, "status": "pending"} for rid in ids]

    def remember_status(self, request_ids: list[str]) -> list[dict[str, Any]]:
        """What became of each request: status, action, memory_id, curated, reason, model."""
        ids = inputs.check_request_ids(request_ids)
        return queue.statuses(self._host.store.session(), ids)

    async def recall(
        self,
        query: str,
        *,
        limit: int = 5,
        package: str | None = None,
        include_deprecated: bool = False,
    ) -> list[Memory]:
        """Memories matching `query` (keyword and vector arms fused); [] when none do."""
        query = inputs.check_query(query)
        limit = inputs.check_limit(limit)
        package = inputs.check_package(package)
        host = self._host
        found, note = await embed_texts(host.store, host.embedder, [query])
        if note:
            log.info("recall by keywords only: %s", note)
        vector = None if found is None else found[0]
        root = host.settings.project_root
        memories = await in_worker(
            lambda: search(
                host.store.session(),
                query,
                vector,
                limit=limit,
                package=package,
                include_deprecated=include_deprecated,
                pins=lock_pins(root),
            ),
        )
        return screen_memories(memories)

    # -- the worker -----------------------------------------------------------------------

    async def start(self) -> None:
        """Resumes curating pending submissions (in submission order) in the background."""
        self._ensure_worker()

    async def stop(self) -> None:
        """Stops the worker; an item it was curating stays pending unless already applied."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        except Exception:  # noqa: BLE001 - a dead worker must not break the service's close
            log.exception("the memory curation worker had failed")

    async def drain(self, timeout: float | None = None) -> bool:
        """Waits until the worker is idle with nothing pending; False if `timeout` passed.

        Raises whatever stopped the worker, if it died.
        """
        self._ensure_worker()
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            pending = await self._pending()
            if not pending and self._idle.is_set():
                return True
            if pending:
                self._wake.set()  # they may come from another process sharing the database
            task = self._task
            if task is not None and task.done():
                task.result()  # re-raises the worker's failure
            if deadline is not None and loop.time() >= deadline:
                return False
            await asyncio.sleep(DRAIN_POLL_S)

    async def _pending(self) -> int:
        return await in_worker(lambda: queue.pending_count(self._host.store.session()))

    def _ensure_worker(self) -> None:
        if self._task is not None and self._task.done() and not self._task.cancelled():
            failure = self._task.exception()
            if failure is not None:
                log.error("restarting the memory curation worker after: %r", failure)
        if self._task is None or self._task.done():
            self._idle.clear()
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="hexlocal-memory-curation"
            )

    async def _run(self) -> None:
        await self._backfill()
        store = self._host.store
        while True:
            # Cleared before looking, so a remember() landing after the look still wakes us.
            self._wake.clear()
            item = await in_worker(lambda: queue.next_pending(store.session()))
            if item is None:
                self._idle.set()
                await self._wake.wait()
                self._idle.clear()
                continue
            await self._process(item)

    async def _process(self, item: QueueItem) -> None:
        failure = ""
        for attempt, delay in enumerate((*self.RETRY_DELAYS_S, None), start=1):
            try:
                await self._curator.process(item)
                return
            except records.StaleTarget as exc:
                # Nothing was written; decide again against the memories as they are now.
                failure = f"the memories it was compared with kept changing ({exc})"
                log.info("re-curating %s: %s", item.request_id, exc)
            except Exception as exc:  # noqa: BLE001 - one bad item must not stop the queue
                failure = f"curation failed after {attempt} attempts: {exc!r}"
                log.warning("curating %s failed (attempt %d): %r", item.request_id, attempt, exc)
                if delay is not None:
                    await asyncio.sleep(delay)
        await in_worker(
            lambda: queue.mark_failed(self._host.store.session(), item.request_id, failure)
        )

    async def _backfill(self) -> None:
        """Embeds memories stored without a vector of the current model (see records)."""
        embedder = self._host.embedder
        if embedder is None:
            return
        model = embedder.model_id
        try:
            todo = await in_worker(
                lambda: records.missing_vectors(self._host.store.session(), model, 100_000)
            )
            for start in range(0, len(todo), BACKFILL_BATCH):
                if not await self._backfill_batch(todo[start : start + BACKFILL_BATCH], model):
                    return
            if todo:
                log.info("embedded %d memories stored without a vector", len(todo))
        except Exception as exc:  # noqa: BLE001 - optional work must not stop the queue
            log.warning("memory vectors not backfilled: %r", exc)

    async def _backfill_batch(self, batch: list[tuple[int, str]], model: str) -> bool:
        store = self._host.store
        vectors, note = await embed_texts(store, self._host.embedder, [t for _, t in batch])
        if vectors is None:
            log.info("memory vectors not backfilled: %s", note)
            return False
        embed = records.EmbedIdentity(model)
        await in_worker(lambda: records.put_vectors(store, store.session(), batch, vectors, embed))
        return True
