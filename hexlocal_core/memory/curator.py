"""Curating one queue item: embed -> nearest memories -> decide -> apply in one transaction.

Every failure of a model degrades instead of losing the text: no embedder, another
model's index or a failed embedding -> stored for keyword recall only; no chat model ->
the deterministic policy; a failed or malformed chat answer -> created uncurated. The
reason recorded for the decision says which of these happened.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
from attrs import evolve

from hexlocal_core.config import Settings
from hexlocal_core.errors import HexlocalError
from hexlocal_core.index.seam import DocsStore
from hexlocal_core.memory import policy, prompt, records
from hexlocal_core.memory.policy import MAX_MEMORY_CHARS, Action, Decision, Neighbour, Thresholds
from hexlocal_core.memory.queue import QueueItem
from hexlocal_core.ports import ChatModel, Embedder, Vectors, serves_index
from hexlocal_core.threads import in_worker

log = logging.getLogger("hexlocal.memory")

TOP_NEIGHBOURS = 5


class MemoryHost(Protocol):
    """What memory needs from the service facade (`service.Hexlocal` provides it)."""

    settings: Settings
    store: DocsStore
    embedder: Embedder | None
    chat: ChatModel | None


def vector_block(store: DocsStore, embedder: Embedder | None) -> str | None:
    """Why memory vectors cannot be used now, or None when they can."""
    if embedder is None:
        return "no embedding model: stored for keyword recall only"
    config = store.embedding_config()
    if config is not None and not serves_index(embedder, config.model):
        return (
            f"the index was built by {config.model}, not {embedder.model_id}: stored for "
            "keyword recall only (run `hexlocal reindex` to switch models)"
        )
    return None


async def embed_texts(
    store: DocsStore, embedder: Embedder | None, texts: Sequence[str]
) -> tuple[Vectors | None, str | None]:
    """Unit vectors for `texts`, or None and the reason they are unavailable."""
    block = vector_block(store, embedder)
    if block is not None or embedder is None:
        return None, block
    try:
        vectors = np.asarray(await embedder.embed(list(texts)), dtype=np.float32)
    except HexlocalError as exc:
        return None, f"embedding failed ({exc}): stored for keyword recall only for now"
    if vectors.ndim != 2 or vectors.shape[0] != len(texts):
        return None, "the embedder returned unusable output: stored for keyword recall only"
    return vectors, None


class Curator:
    """Decides and applies one submission at a time; the worker calls `process`."""

    def __init__(self, host: MemoryHost) -> None:
        self.host = host

    @property
    def thresholds(self) -> Thresholds:
        return Thresholds.from_settings(self.host.settings)

    async def process(self, item: QueueItem) -> int | None:
        """Curates and applies `item`; returns the memory it ended in.

        Raises records.StaleTarget when a target moved meanwhile (nothing was written).
        """
        store, text = self.host.store, item.submission.text
        found, note = await embed_texts(store, self.host.embedder, [text])
        vector = None if found is None else found[0]
        near = await in_worker(
            lambda: records.neighbours(store.session(), text, vector, TOP_NEIGHBOURS)
        )
        decision = await self.decide(item, near)
        if note:
            decision = evolve(decision, reason=f"{decision.reason}; {note}")
        change = policy.plan(decision, text, near)
        vectors = await self._vectors_for(change, text, vector)
        embedder = self.host.embedder
        embed = records.EmbedIdentity(embedder.model_id) if embedder and vectors else None
        memory_id = await in_worker(
            lambda: records.apply(store, store.session(), item, decision, change, vectors, embed),
        )
        log.info(
            "memory request %s: %s -> %s (%s)",
            item.request_id,
            decision.action.value,
            memory_id,
            decision.reason,
        )
        return memory_id

    async def decide(self, item: QueueItem, near: Sequence[Neighbour]) -> Decision:
        th, text = self.thresholds, item.submission.text
        floor = policy.below_floor(near, th)
        if floor is not None:
            return floor
        chat = self.host.chat
        if chat is None:
            return policy.decide_without_model(text, near, th)
        shown = policy.candidates(near, th)
        try:
            decision = await self._ask(chat, item, shown)
        except Exception as exc:  # noqa: BLE001 - a failing model must never lose the text
            if not isinstance(exc, HexlocalError):
                log.warning("curation model raised %r", exc, exc_info=True)
            return Decision(
                Action.CREATE,
                f"curation model failed ({exc}); kept uncurated",
                curated=False,
                model=chat.model_id,
            )
        return policy.enforce(decision, text, shown, th)

    async def _ask(self, chat: ChatModel, item: QueueItem, shown: Sequence[Neighbour]) -> Decision:
        sub = item.submission
        reply = await chat.complete(
            prompt.messages(
                sub.text,
                package=sub.package,
                version=sub.version,
                neighbours=shown,
                th=self.thresholds,
                max_chars=MAX_MEMORY_CHARS,
            ),
            json_schema=prompt.DECISION_SCHEMA,
        )
        model = reply.model or chat.model_id
        return prompt.parse_answer(reply.text, shown, model=model, max_chars=MAX_MEMORY_CHARS)

    async def _vectors_for(
        self, change: policy.Change, text: str, vector: np.ndarray[Any, Any] | None
    ) -> dict[str, np.ndarray[Any, Any]]:
        """Vectors for every text the change writes; the submission's is already known."""
        if vector is None:
            return {}  # no usable embedder now: the memories are backfilled at a later start
        known = {text: vector}
        todo = [t for t in (change.new_text, change.target_text) if t and t not in known]
        if todo:
            found, note = await embed_texts(self.host.store, self.host.embedder, todo)
            if found is None:
                log.info("rewritten memory not embedded: %s", note)
                return known
            known.update(zip(todo, found, strict=True))
        return known
