"""Memories in SQLite: their rows, FTS rows and vectors, the remember queue, the curation log.

Every statement `memory/` runs is here, as functions over a connection that return typed
rows; the memory layer decides *what* to write (curation decisions, hashes) and owns the
transactions (`db.atomic`), because one decision spans several of these calls.

`memories_fts` is contentless (rowid = memory id), so its rows are written and deleted next
to every change of a memory's text. `memory_vecs` (rowid = memory id) exists once an
embedder's dimension is known; `memories.embed_model` names the model of a memory's vector,
NULL when it has none yet, so `missing_vectors` can find the gaps.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import apsw
from attrs import frozen

from hexlocal_core.index.db import scalar, utcnow
from hexlocal_core.index.tokens import split_terms
from hexlocal_core.index.vectors import MEMORY_VEC_TABLE, encode_vector
from hexlocal_core.ports import Vectors

MAX_KNN = 4_096  # sqlite-vec's limit on k


def _marks(n: int) -> str:
    return ",".join("?" * n)


def tags_of(raw: str | None) -> tuple[str, ...]:
    return tuple(str(t) for t in json.loads(raw or "[]"))


# -- memories ----------------------------------------------------------------------------


@frozen
class MemoryRow:
    id: int
    text: str
    curated: bool
    package: str | None
    version: str | None
    tags: tuple[str, ...]
    deprecated: bool
    embed_model: str | None
    created_at: str
    updated_at: str


MEMORY_COLUMNS = (
    "id, text, curated, package, version, tags, deprecated, embed_model, created_at, updated_at"
)


def memory_row(r: Sequence[Any]) -> MemoryRow:
    mid, text, curated, package, version, tags, deprecated, model, created, updated = r
    return MemoryRow(
        id=int(mid),
        text=text,
        curated=bool(curated),
        package=package,
        version=version,
        tags=tags_of(tags),
        deprecated=bool(deprecated),
        embed_model=model,
        created_at=created,
        updated_at=updated,
    )


def memories_by_ids(conn: apsw.Connection, ids: Sequence[int]) -> dict[int, MemoryRow]:
    if not ids:
        return {}
    sql = f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id IN ({_marks(len(ids))})"
    return {row.id: row for row in map(memory_row, conn.execute(sql, tuple(ids)))}


def memory_text(conn: apsw.Connection, memory_id: int) -> str | None:
    found = scalar(conn, "SELECT text FROM memories WHERE id = ?", (memory_id,))
    return None if found is None else str(found)


def deprecated_count(conn: apsw.Connection) -> int:
    return int(scalar(conn, "SELECT count(*) FROM memories WHERE deprecated = 1") or 0)


def live_ids_with_norm_hash(conn: apsw.Connection, norm_hash: str) -> set[int]:
    """Non-deprecated memories whose normalised text hashes to `norm_hash`."""
    sql = "SELECT id FROM memories WHERE norm_hash = ? AND deprecated = 0"
    return {int(r[0]) for r in conn.execute(sql, (norm_hash,))}


@frozen
class MemoryText:
    """A memory's text with the hashes stored beside it (computed by the memory layer)."""

    text: str
    text_hash: str
    norm_hash: str


def insert_memory(
    conn: apsw.Connection,
    text: MemoryText,
    *,
    curated: bool,
    package: str | None,
    version: str | None,
    tags: Sequence[str],
) -> int:
    """A new memory and its FTS row; returns its id."""
    now = utcnow()
    conn.execute(
        "INSERT INTO memories(text, text_hash, norm_hash, curated, package, version, tags,"
        " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            text.text,
            text.text_hash,
            text.norm_hash,
            int(curated),
            package,
            version,
            json.dumps(list(tags)),
            now,
            now,
        ),
    )
    memory_id = conn.last_insert_rowid()
    _fts_put(conn, memory_id, text.text, replace=False)
    return memory_id


def rewrite_memory(
    conn: apsw.Connection,
    memory_id: int,
    text: MemoryText,
    *,
    package: str | None,
    version: str | None,
    tags: Sequence[str],
) -> None:
    """A memory's new (curated) text, scope and tags, and its FTS row."""
    conn.execute(
        "UPDATE memories SET text = ?, text_hash = ?, norm_hash = ?, curated = 1, package = ?,"
        " version = ?, tags = ?, updated_at = ? WHERE id = ?",
        (
            text.text,
            text.text_hash,
            text.norm_hash,
            package,
            version,
            json.dumps(list(tags)),
            utcnow(),
            memory_id,
        ),
    )
    _fts_put(conn, memory_id, text.text, replace=True)


def deprecate_memory(conn: apsw.Connection, memory_id: int) -> None:
    conn.execute(
        "UPDATE memories SET deprecated = 1, updated_at = ? WHERE id = ?", (utcnow(), memory_id)
    )


def _fts_put(conn: apsw.Connection, memory_id: int, text: str, *, replace: bool) -> None:
    if replace:
        conn.execute("DELETE FROM memories_fts WHERE rowid = ?", (memory_id,))
    conn.execute(
        "INSERT INTO memories_fts(rowid, text, split_terms) VALUES (?, ?, ?)",
        (memory_id, text, split_terms(text)),
    )


# -- memory vectors ----------------------------------------------------------------------


def memory_vectors_exist(conn: apsw.Connection) -> bool:
    return bool(scalar(conn, "SELECT 1 FROM sqlite_master WHERE name = ?", (MEMORY_VEC_TABLE,)))


def memory_knn(conn: apsw.Connection, vector: Vectors, k: int) -> list[tuple[int, float]]:
    """(memory id, cosine distance), nearest first; [] before any vector was stored."""
    if k <= 0 or not memory_vectors_exist(conn):
        return []
    sql = f"SELECT rowid, distance FROM {MEMORY_VEC_TABLE} WHERE embedding MATCH ? AND k = ?"
    params = (encode_vector(vector), min(k, MAX_KNN))
    return [(int(r[0]), float(r[1])) for r in conn.execute(sql, params)]


def drop_memory_vector(conn: apsw.Connection, memory_id: int) -> None:
    """Removes the memory's vector (if any) and marks it as having none."""
    if memory_vectors_exist(conn):
        conn.execute(f"DELETE FROM {MEMORY_VEC_TABLE} WHERE rowid = ?", (memory_id,))
    conn.execute("UPDATE memories SET embed_model = NULL WHERE id = ?", (memory_id,))


def put_memory_vector(conn: apsw.Connection, memory_id: int, vector: Vectors, model: str) -> None:
    """Stores the memory's vector from `model` (the table exists: see Store.claim_embedding)."""
    conn.execute(f"DELETE FROM {MEMORY_VEC_TABLE} WHERE rowid = ?", (memory_id,))
    conn.execute(
        f"INSERT INTO {MEMORY_VEC_TABLE}(rowid, embedding) VALUES (?, ?)",
        (memory_id, encode_vector(vector)),
    )
    conn.execute("UPDATE memories SET embed_model = ? WHERE id = ?", (model, memory_id))


def missing_vectors(conn: apsw.Connection, model: str, limit: int) -> list[tuple[int, str]]:
    """(id, text) of memories without a vector from `model` (none yet, another's, dropped)."""
    sql = "SELECT id, text FROM memories WHERE embed_model IS NOT ?"
    if memory_vectors_exist(conn):
        sql += f" OR id NOT IN (SELECT rowid FROM {MEMORY_VEC_TABLE})"
    rows = conn.execute(sql + " ORDER BY id LIMIT ?", (model, limit))
    return [(int(r[0]), str(r[1])) for r in rows]


# -- recall ------------------------------------------------------------------------------


@frozen
class MemoryScope:
    """Which memories a recall may return: one package's (or all), deprecated or not."""

    package: str | None = None
    include_deprecated: bool = False

    def sql(self) -> tuple[str, tuple[object, ...]]:
        """Conditions on `memories m`, as ' AND ...' text and its parameters."""
        conditions: list[str] = []
        params: list[object] = []
        if not self.include_deprecated:
            conditions.append("m.deprecated = 0")
        if self.package is not None:
            conditions.append("m.package = ?")
            params.append(self.package)
        return "".join(f" AND {c}" for c in conditions), tuple(params)


def keyword_memory_ids(
    conn: apsw.Connection,
    match: str,
    scope: MemoryScope,
    *,
    depth: int,
    weights: tuple[float, float],
) -> list[int]:
    """Memory ids for a sanitized MATCH expression, best first, scope applied before LIMIT."""
    where, params = scope.sql()
    w = ", ".join(str(float(x)) for x in weights)
    sql = (
        f"SELECT m.id, bm25(memories_fts, {w}) AS score FROM memories_fts"
        " JOIN memories m ON m.id = memories_fts.rowid"
        f" WHERE memories_fts MATCH ?{where} ORDER BY score LIMIT ?"
    )
    return [int(r[0]) for r in conn.execute(sql, (match, *params, depth))]


def out_of_scope_count(conn: apsw.Connection, scope: MemoryScope) -> int:
    """How many memories the scope leaves out (k-NN cannot filter, so it asks for more)."""
    where, params = scope.sql()
    # coalesce: `m.package = ?` is NULL for a memory with no package, which NOT keeps NULL,
    # so without it such memories were never counted and k-NN asked for too few.
    sql = f"SELECT count(*) FROM memories m WHERE NOT coalesce((1 = 1{where}), 0)"
    return int(scalar(conn, sql, params) or 0)


def in_scope(conn: apsw.Connection, ids: Sequence[int], scope: MemoryScope) -> set[int]:
    """The ids among `ids` the scope allows."""
    if not ids:
        return set()
    where, params = scope.sql()
    sql = f"SELECT m.id FROM memories m WHERE m.id IN ({_marks(len(ids))}){where}"
    return {int(r[0]) for r in conn.execute(sql, (*ids, *params))}


# -- the curation log --------------------------------------------------------------------


@frozen
class CurationEntry:
    """One decision that touched a memory."""

    request_id: str
    action: str
    model: str | None
    reason: str | None
    at: str


def log_curation(
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


def curation_history(conn: apsw.Connection, ids: Sequence[int]) -> dict[int, list[CurationEntry]]:
    """The log entries that touched each memory, oldest first ([] for none)."""
    out: dict[int, list[CurationEntry]] = {i: [] for i in ids}
    if not ids:
        return out
    sql = (
        "SELECT memory_id, request_id, action, model, reason, at FROM curation_log"
        f" WHERE memory_id IN ({_marks(len(ids))}) ORDER BY id"
    )
    for memory_id, request_id, action, model, reason, at in conn.execute(sql, tuple(ids)):
        out[int(memory_id)].append(CurationEntry(request_id, action, model, reason, at))
    return out


# -- the remember queue ------------------------------------------------------------------


@frozen
class QueuedRow:
    """A pending submission, oldest first by `seq`."""

    seq: int
    request_id: str
    text: str
    package: str | None
    version: str | None
    tags: tuple[str, ...]


@frozen
class RequestRow:
    """What became of one request (the queue row, read back for remember_status)."""

    request_id: str
    status: str  # pending | done | failed
    action: str | None
    memory_id: int | None
    curated: bool | None  # None until decided
    reason: str | None
    model: str | None
    submitted_at: str
    processed_at: str | None


@frozen
class NewRequest:
    request_id: str
    text: str
    package: str | None
    version: str | None
    tags: tuple[str, ...]


def enqueue(conn: apsw.Connection, items: Sequence[NewRequest]) -> None:
    """Pending queue rows, all stamped with one submission time."""
    now = utcnow()
    for item in items:
        conn.execute(
            "INSERT INTO remember_queue(request_id, text, package, version, tags, status,"
            " submitted_at) VALUES (?, ?, ?, ?, ?, 'pending', ?)",
            (item.request_id, item.text, item.package, item.version, json.dumps(item.tags), now),
        )


def next_pending(conn: apsw.Connection) -> QueuedRow | None:
    sql = (
        "SELECT seq, request_id, text, package, version, tags FROM remember_queue"
        " WHERE status = 'pending' ORDER BY seq LIMIT 1"
    )
    for seq, request_id, text, package, version, tags in conn.execute(sql):
        return QueuedRow(int(seq), request_id, text, package, version, tags_of(tags))
    return None


def pending_count(conn: apsw.Connection) -> int:
    return int(scalar(conn, "SELECT count(*) FROM remember_queue WHERE status = 'pending'") or 0)


def request_status(conn: apsw.Connection, request_id: str) -> str | None:
    found = scalar(conn, "SELECT status FROM remember_queue WHERE request_id = ?", (request_id,))
    return None if found is None else str(found)


def finish_request(
    conn: apsw.Connection,
    request_id: str,
    *,
    status: str,
    action: str | None,
    memory_id: int | None,
    reason: str,
    curated: bool,
    model: str | None,
) -> None:
    conn.execute(
        "UPDATE remember_queue SET status = ?, action = ?, memory_id = ?, reason = ?,"
        " curated = ?, model = ?, processed_at = ? WHERE request_id = ?",
        (status, action, memory_id, reason, int(curated), model, utcnow(), request_id),
    )


def requests(conn: apsw.Connection, request_ids: Sequence[str]) -> dict[str, RequestRow]:
    """The queue rows of the ids that exist, by id."""
    if not request_ids:
        return {}
    sql = (
        "SELECT request_id, status, action, memory_id, curated, reason, model,"
        " submitted_at, processed_at FROM remember_queue"
        f" WHERE request_id IN ({_marks(len(request_ids))})"
    )
    out: dict[str, RequestRow] = {}
    for (
        rid,
        status,
        action,
        memory_id,
        curated,
        reason,
        model,
        submitted,
        processed,
    ) in conn.execute(sql, tuple(request_ids)):
        out[rid] = RequestRow(
            rid,
            status,
            action,
            memory_id,
            None if curated is None else bool(curated),
            reason,
            model,
            submitted,
            processed,
        )
    return out
