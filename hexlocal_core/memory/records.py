"""Memories in SQLite: rows, their FTS rows and vectors, and the curation log.

`memories_fts` is contentless (rowid = memory id), so its rows are written and deleted
here, next to every change of a memory's text. `memory_vecs` (rowid = memory id) exists
once an embedder's dimension is known; `memories.embed_model` names the model of a
memory's vector, NULL when it has none yet (no embedder, or its text changed while none
was available), so `missing_vectors` can fill the gaps later.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import apsw
import numpy as np
from attrs import frozen

from hexlocal_core.errors import StoreError
from hexlocal_core.index.db import atomic, rows, scalar
from hexlocal_core.index.store import MEMORY_VEC_TABLE, Store, utcnow
from hexlocal_core.memory import queue
from hexlocal_core.memory.policy import Action, Change, Decision, Neighbour, norm_hash, similarity
from hexlocal_core.memory.queue import QueueItem
from hexlocal_core.model import sha256_text
from hexlocal_core.ports import Vectors
from hexlocal_core.search.tokens import split_terms

MAX_KNN = 4_096  # sqlite-vec's limit on k
MemoryVectors = Mapping[str, np.ndarray[Any, Any]]  # text -> its unit vector


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


def _blob(vector: np.ndarray[Any, Any]) -> bytes:
    return np.asarray(vector, dtype=np.float32).reshape(-1).tobytes()


def vectors_exist(conn: apsw.Connection) -> bool:
    return bool(scalar(conn, "SELECT 1 FROM sqlite_master WHERE name = ?", (MEMORY_VEC_TABLE,)))


def knn(conn: apsw.Connection, vector: Vectors, k: int) -> list[tuple[int, float]]:
    """(memory id, cosine distance), nearest first; [] before any vector was stored."""
    if k <= 0 or not vectors_exist(conn):
        return []
    sql = f"SELECT rowid, distance FROM {MEMORY_VEC_TABLE} WHERE embedding MATCH ? AND k = ?"
    return [(int(r[0]), float(r[1])) for r in conn.execute(sql, (_blob(vector), min(k, MAX_KNN)))]


def by_ids(conn: apsw.Connection, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    found = rows(conn, f"SELECT * FROM memories WHERE id IN ({marks})", tuple(ids))
    return {r["id"]: r for r in found}


def neighbours(conn: apsw.Connection, text: str, vector: Vectors | None, k: int) -> list[Neighbour]:
    """The k non-deprecated memories nearest `text`, plus any holding the same text.

    Deprecated memories keep their vectors (recall may ask for them), so the k-NN asks for
    as many more rows as there are deprecated memories and drops those afterwards.
    """
    sims: dict[int, float] = {}
    if vector is not None:
        hidden = int(scalar(conn, "SELECT count(*) FROM memories WHERE deprecated = 1") or 0)
        sims = {i: similarity(d) for i, d in knn(conn, vector, k + hidden)}
    same = {
        int(r[0])
        for r in conn.execute(
            "SELECT id FROM memories WHERE norm_hash = ? AND deprecated = 0", (norm_hash(text),)
        )
    }
    for memory_id in same:
        # Identical once normalised is a duplicate by definition, whatever the vectors say
        # (there may be none, and case or punctuation move them a little).
        sims[memory_id] = 1.0
    found = [
        Neighbour(r["id"], r["text"], sims[r["id"]], r["id"] in same, r["package"], r["version"])
        for r in by_ids(conn, list(sims)).values()
        if not r["deprecated"]
    ]
    found.sort(key=lambda n: (-n.similarity, n.id))
    return found[:k]


# -- writes (callers hold a transaction) -------------------------------------------------


def _fts_put(conn: apsw.Connection, memory_id: int, text: str, *, replace: bool) -> None:
    if replace:
        conn.execute("DELETE FROM memories_fts WHERE rowid = ?", (memory_id,))
    conn.execute(
        "INSERT INTO memories_fts(rowid, text, split_terms) VALUES (?, ?, ?)",
        (memory_id, text, split_terms(text)),
    )


def _vector_put(
    store: Store,
    conn: apsw.Connection,
    memory_id: int,
    text: str,
    embed: EmbedIdentity | None,
    vectors: MemoryVectors,
) -> None:
    """Stores the vector of `text`, or drops a stale one and marks the memory for backfill."""
    vector = vectors.get(text)
    if vectors_exist(conn):
        conn.execute(f"DELETE FROM {MEMORY_VEC_TABLE} WHERE rowid = ?", (memory_id,))
    if vector is None or embed is None:
        conn.execute("UPDATE memories SET embed_model = NULL WHERE id = ?", (memory_id,))
        return
    ensure_vector_table(store, conn, embed, int(np.asarray(vector).size))
    conn.execute(
        f"INSERT INTO {MEMORY_VEC_TABLE}(rowid, embedding) VALUES (?, ?)",
        (memory_id, _blob(vector)),
    )
    conn.execute("UPDATE memories SET embed_model = ? WHERE id = ?", (embed.model, memory_id))


def ensure_vector_table(
    store: Store, conn: apsw.Connection, embed: EmbedIdentity, dims: int
) -> None:
    """Creates memory_vecs, recording the model with the index when it is the first."""
    config = store.embedding_config()
    if config is None:
        # Memories claim the index's model like a first ingest does, so later docs from
        # another model are refused instead of mixing with these vectors.
        store._record_embedding(conn, embed.model, dims, embed.provider)
    elif (config.model, config.dims) != (embed.model, dims):
        raise StoreError(
            f"the index holds {config.model} vectors ({config.dims} dims), not {embed.model}"
        )
    else:
        store._ensure_vector_tables(conn, dims)


def _insert(conn: apsw.Connection, text: str, item: QueueItem, curated: bool) -> int:
    sub, now = item.submission, utcnow()
    conn.execute(
        "INSERT INTO memories(text, text_hash, norm_hash, curated, package, version, tags,"
        " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            text,
            sha256_text(text),
            norm_hash(text),
            int(curated),
            sub.package,
            sub.version,
            json.dumps(list(sub.tags)),
            now,
            now,
        ),
    )
    memory_id = conn.last_insert_rowid()
    _fts_put(conn, memory_id, text, replace=False)
    return memory_id


def _target(conn: apsw.Connection, change: Change) -> dict[str, Any]:
    found = by_ids(conn, [change.target_id or -1]).get(change.target_id or -1)
    if found is None or found["deprecated"] or found["text"] != change.target_was:
        raise StaleTarget(f"memory {change.target_id} changed since it was compared; re-curating")
    return found


def _rewrite(
    conn: apsw.Connection, target: dict[str, Any], change: Change, item: QueueItem
) -> None:
    sub, text = item.submission, change.target_text or ""
    package, version = target["package"], target["version"]
    if sub.package and (change.submission_wins or not package):
        package, version = sub.package, sub.version
    tags = list(dict.fromkeys([*json.loads(target["tags"]), *sub.tags]))
    conn.execute(
        "UPDATE memories SET text = ?, text_hash = ?, norm_hash = ?, curated = 1, package = ?,"
        " version = ?, tags = ?, updated_at = ? WHERE id = ?",
        (
            text,
            sha256_text(text),
            norm_hash(text),
            package,
            version,
            json.dumps(tags),
            utcnow(),
            target["id"],
        ),
    )
    _fts_put(conn, target["id"], text, replace=True)


def log(
    conn: apsw.Connection,
    request_id: str,
    action: str,
    memory_id: int | None,
    model: str | None,
    reason: str,
) -> None:
    conn.execute(
        "INSERT INTO curation_log(request_id, action, memory_id, model, reason, at)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (request_id, action, memory_id, model, reason, utcnow()),
    )


def apply(
    store: Store,
    conn: apsw.Connection,
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
    with atomic(conn):
        if not queue.claim(conn, item.request_id):
            return None  # already applied by another process sharing the database
        rid, model = item.request_id, decision.model
        result: int | None = change.target_id
        if change.target_text is not None:
            target = _target(conn, change)
            _rewrite(conn, target, change, item)
            _vector_put(store, conn, target["id"], change.target_text, embed, vectors)
            log(conn, rid, decision.action.value, target["id"], model, decision.reason)
        if change.deprecate:
            _target(conn, change)
            conn.execute(
                "UPDATE memories SET deprecated = 1, updated_at = ? WHERE id = ?",
                (utcnow(), change.target_id),
            )
            log(conn, rid, Action.DEPRECATE.value, change.target_id, model, decision.reason)
        if change.new_text is not None:
            result = _insert(conn, change.new_text, item, decision.curated)
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


def missing_vectors(conn: apsw.Connection, model: str, limit: int) -> list[tuple[int, str]]:
    """Memories without a vector from `model` (none yet, another model's, or dropped)."""
    sql = "SELECT id, text FROM memories WHERE embed_model IS NOT ?"
    if vectors_exist(conn):
        sql += f" OR id NOT IN (SELECT rowid FROM {MEMORY_VEC_TABLE})"
    return [
        (int(r[0]), str(r[1])) for r in conn.execute(sql + " ORDER BY id LIMIT ?", (model, limit))
    ]


def put_vectors(
    store: Store,
    conn: apsw.Connection,
    pairs: Sequence[tuple[int, str]],
    vectors: Vectors,
    embed: EmbedIdentity,
) -> None:
    with atomic(conn):
        for (memory_id, text), vector in zip(pairs, vectors, strict=True):
            current = scalar(conn, "SELECT text FROM memories WHERE id = ?", (memory_id,))
            if current == text:  # skip a memory rewritten meanwhile; the next pass takes it
                _vector_put(store, conn, memory_id, text, embed, {text: vector})
