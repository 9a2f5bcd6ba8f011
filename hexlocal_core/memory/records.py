"""Applying curation decisions to the stored memories, and the vector backfill.

The rows, FTS rows, vectors and log entries are written through `seam.MemoryQueries`; this
module decides which of them one decision writes, inside one transaction. `memory_vecs`
exists once an embedder's dimension is known; a memory whose text changed while no
embedder was available keeps no vector, so `missing_vectors` fills the gap later.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from attrs import frozen

from hexlocal_core.errors import StoreError
from hexlocal_core.index.rows import MemoryRow, MemoryText
from hexlocal_core.index.seam import DocsStore, Session
from hexlocal_core.memory import queue
from hexlocal_core.memory.policy import Action, Change, Decision, Neighbour, norm_hash, similarity
from hexlocal_core.memory.queue import QueueItem
from hexlocal_core.model import sha256_text
from hexlocal_core.ports import Vectors

MemoryVectors = Mapping[str, Vectors]  # text -> its unit vector


class StaleTarget(StoreError):
    """The memory a decision targets changed or vanished before it could be applied."""


@frozen
class EmbedIdentity:
    """Which model made the vectors being written (recorded with the index on first use)."""

    model: str

    @property
    def provider(self) -> str:
        # The same rule as ingestion: "local:..." -> "local", anything else is an API model.
        return self.model.split(":", 1)[0] if ":" in self.model else "api"


def knn(conn: Session, vector: Vectors, k: int) -> list[tuple[int, float]]:
    """(memory id, cosine distance), nearest first; [] before any vector was stored."""
    return conn.memories.memory_knn(vector, k)


def by_ids(conn: Session, ids: Sequence[int]) -> dict[int, MemoryRow]:
    return conn.memories.memories_by_ids(ids)


def neighbours(conn: Session, text: str, vector: Vectors | None, k: int) -> list[Neighbour]:
    """The k non-deprecated memories nearest `text`, plus any holding the same text.

    Deprecated memories keep their vectors (recall may ask for them), so the k-NN asks for
    as many more rows as there are deprecated memories and drops those afterwards.
    """
    sims: dict[int, float] = {}
    if vector is not None:
        hidden = conn.memories.deprecated_count()
        sims = {i: similarity(d) for i, d in knn(conn, vector, k + hidden)}
    same = conn.memories.live_ids_with_norm_hash(norm_hash(text))
    for memory_id in same:
        # Identical once normalised is a duplicate by definition, whatever the vectors say
        # (there may be none, and case or punctuation move them a little).
        sims[memory_id] = 1.0
    found = [
        Neighbour(r.id, r.text, sims[r.id], r.id in same, r.package, r.version)
        for r in by_ids(conn, list(sims)).values()
        if not r.deprecated
    ]
    found.sort(key=lambda n: (-n.similarity, n.id))
    return found[:k]


# -- writes (callers hold a transaction) -------------------------------------------------


def _text(text: str) -> MemoryText:
    return MemoryText(text, sha256_text(text), norm_hash(text))


def _vector_put(
    store: DocsStore,
    conn: Session,
    memory_id: int,
    text: str,
    embed: EmbedIdentity | None,
    vectors: MemoryVectors,
) -> None:
    """Stores the vector of `text`, or drops a stale one and marks the memory for backfill."""
    vector = vectors.get(text)
    if vector is None or embed is None:
        conn.memories.drop_memory_vector(memory_id)
        return
    # Memories claim the index's model like a first ingest does, so later docs from
    # another model are refused instead of mixing with these vectors.
    conn.claim_embedding(embed.model, int(np.asarray(vector).size), embed.provider)
    conn.memories.put_memory_vector(memory_id, vector, embed.model)


def _target(conn: Session, change: Change) -> MemoryRow:
    found = by_ids(conn, [change.target_id or -1]).get(change.target_id or -1)
    if found is None or found.deprecated or found.text != change.target_was:
        raise StaleTarget(f"memory {change.target_id} changed since it was compared; re-curating")
    return found


def _rewrite(conn: Session, target: MemoryRow, change: Change, item: QueueItem) -> None:
    sub = item.submission
    package, version = target.package, target.version
    if sub.package and (change.submission_wins or not package):
        package, version = sub.package, sub.version
    tags = list(dict.fromkeys([*target.tags, *sub.tags]))
    conn.memories.rewrite_memory(
        target.id,
        _text(change.target_text or ""),
        package=package,
        version=version,
        tags=tags,
    )


def log(
    conn: Session,
    request_id: str,
    action: str,
    memory_id: int | None,
    model: str | None,
    reason: str,
) -> None:
    conn.memories.log_curation(request_id, action, memory_id, model, reason)


def apply(
    store: DocsStore,
    conn: Session,
    item: QueueItem,
    decision: Decision,
    change: Change,
    vectors: MemoryVectors,
    embed: EmbedIdentity | None,
) -> int | None:
    """Applies one decision and marks its queue item done, in one transaction.

    Returns the memory the request ended in (None for a discard with no target). Raises
    StaleTarget (nothing written) when the target moved since the decision.
    """
    with conn.atomic():
        if not queue.claim(conn, item.request_id):
            return None  # already applied by another process sharing the database
        rid, model = item.request_id, decision.model
        result: int | None = change.target_id
        if change.target_text is not None:
            target = _target(conn, change)
            _rewrite(conn, target, change, item)
            _vector_put(store, conn, target.id, change.target_text, embed, vectors)
            log(conn, rid, decision.action.value, target.id, model, decision.reason)
        if change.deprecate:
            retired = _target(conn, change)
            conn.memories.deprecate_memory(retired.id)
            log(conn, rid, Action.DEPRECATE.value, retired.id, model, decision.reason)
        if change.new_text is not None:
            sub = item.submission
            result = conn.memories.insert_memory(
                _text(change.new_text),
                curated=decision.curated,
                package=sub.package,
                version=sub.version,
                tags=sub.tags,
            )
            _vector_put(store, conn, result, change.new_text, embed, vectors)
            reason = decision.reason
            if change.deprecate:
                reason = f"replaces deprecated memory {change.target_id}: {reason}"
            log(conn, rid, Action.CREATE.value, result, model, reason)
        if decision.action is Action.DISCARD:
            log(conn, rid, Action.DISCARD.value, result, model, decision.reason)
        queue.finish(
            conn,
            rid,
            action=decision.action.value,
            memory_id=result,
            reason=decision.reason,
            curated=decision.curated,
            model=model,
        )
    return result


# -- vector backfill ---------------------------------------------------------------------


def missing_vectors(conn: Session, model: str, limit: int) -> list[tuple[int, str]]:
    """Memories without a vector from `model` (none yet, another model's, or dropped)."""
    return conn.memories.missing_vectors(model, limit)


def put_vectors(
    store: DocsStore,
    conn: Session,
    pairs: Sequence[tuple[int, str]],
    vectors: Vectors,
    embed: EmbedIdentity,
) -> None:
    with conn.atomic():
        for (memory_id, text), vector in zip(pairs, vectors, strict=True):
            if conn.memories.memory_text(memory_id) == text:
                # A memory rewritten meanwhile is skipped; the next pass takes it.
                _vector_put(store, conn, memory_id, text, embed, {text: vector})
