"""Memories in SQLite: `seam.MemoryQueries`, the twin of `pg/memories.py`.

The statements both engines share are `memory_sql.MemorySql`'s; here is what SQLite does
its own way. The memory layer decides *what* to write (curation decisions, hashes) and
owns the transactions (`Session.atomic()`), because one decision spans several calls.

`memories_fts` is contentless (rowid = memory id), so its rows are written and deleted next
to every change of a memory's text. `memory_vecs` (rowid = memory id) exists once an
embedder's dimension is known; `memories.embed_model` names the model of a memory's vector,
NULL when it has none yet, so `missing_vectors` can find the gaps. One writer at a time
(BEGIN IMMEDIATE): inside `atomic()` a queue row is already this process's, so
`request_status` only reads it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import apsw

from hexlocal_core.index.memory_sql import QUEUED_COLUMNS, MemorySql, queued_row, scope_sql
from hexlocal_core.index.rows import MemoryScope, MemoryText, QueuedRow
from hexlocal_core.index.sql import utcnow
from hexlocal_core.index.sqlite.db import SqliteRunner
from hexlocal_core.index.sqlite.vectors import MEMORY_VEC_TABLE, encode_vector
from hexlocal_core.index.tokens import split_terms
from hexlocal_core.ports import Vectors

MAX_KNN = 4_096  # sqlite-vec's limit on k


class SqliteMemoryQueries(MemorySql, SqliteRunner):
    """`seam.MemoryQueries` on one connection (inside its `atomic()` if one is open)."""

    def __init__(self, conn: apsw.Connection) -> None:
        self._conn = conn

    @property
    def conn(self) -> apsw.Connection:
        return self._conn

    # -- memories --------------------------------------------------------------------------

    def memory_text(self, memory_id: int) -> str | None:
        found = self._value("SELECT text FROM memories WHERE id = ?", (memory_id,))
        return None if found is None else str(found)

    def insert_memory(
        self,
        text: MemoryText,
        *,
        curated: bool,
        package: str | None,
        version: str | None,
        tags: Sequence[str],
    ) -> int:
        """A new memory and its FTS row; returns its id."""
        now = utcnow()
        self._conn.execute(
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
        memory_id = self._conn.last_insert_rowid()
        self._fts_put(memory_id, text.text, replace=False)
        return memory_id

    def rewrite_memory(
        self,
        memory_id: int,
        text: MemoryText,
        *,
        package: str | None,
        version: str | None,
        tags: Sequence[str],
    ) -> None:
        """A memory's new (curated) text, scope and tags, and its FTS row."""
        self._conn.execute(
            "UPDATE memories SET text = ?, text_hash = ?, norm_hash = ?, curated = 1,"
            " package = ?, version = ?, tags = ?, updated_at = ? WHERE id = ?",
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
        self._fts_put(memory_id, text.text, replace=True)

    def _fts_put(self, memory_id: int, text: str, *, replace: bool) -> None:
        if replace:
            self._conn.execute("DELETE FROM memories_fts WHERE rowid = ?", (memory_id,))
        self._conn.execute(
            "INSERT INTO memories_fts(rowid, text, split_terms) VALUES (?, ?, ?)",
            (memory_id, text, split_terms(text)),
        )

    # -- memory vectors --------------------------------------------------------------------

    def memory_vectors_exist(self) -> bool:
        sql = "SELECT 1 FROM sqlite_master WHERE name = ?"
        return bool(self._value(sql, (MEMORY_VEC_TABLE,)))

    def memory_knn(self, vector: Vectors, k: int) -> list[tuple[int, float]]:
        """(memory id, cosine distance), nearest first; [] before any vector was stored."""
        if k <= 0 or not self.memory_vectors_exist():
            return []
        sql = f"SELECT rowid, distance FROM {MEMORY_VEC_TABLE} WHERE embedding MATCH ? AND k = ?"
        params = (encode_vector(vector), min(k, MAX_KNN))
        return [(int(r[0]), float(r[1])) for r in self._conn.execute(sql, params)]

    def drop_memory_vector(self, memory_id: int) -> None:
        """Removes the memory's vector (if any) and marks it as having none."""
        if self.memory_vectors_exist():
            self._conn.execute(f"DELETE FROM {MEMORY_VEC_TABLE} WHERE rowid = ?", (memory_id,))
        self._conn.execute("UPDATE memories SET embed_model = NULL WHERE id = ?", (memory_id,))

    def put_memory_vector(self, memory_id: int, vector: Vectors, model: str) -> None:
        """Stores the memory's vector from `model` (the table exists: see
        `store.claim_embedding`)."""
        self._conn.execute(f"DELETE FROM {MEMORY_VEC_TABLE} WHERE rowid = ?", (memory_id,))
        self._conn.execute(
            f"INSERT INTO {MEMORY_VEC_TABLE}(rowid, embedding) VALUES (?, ?)",
            (memory_id, encode_vector(vector)),
        )
        self._conn.execute("UPDATE memories SET embed_model = ? WHERE id = ?", (model, memory_id))

    def missing_vectors(self, model: str, limit: int) -> list[tuple[int, str]]:
        """(id, text) of memories without a vector from `model` (none yet, another's,
        dropped)."""
        sql = "SELECT id, text FROM memories WHERE embed_model IS NOT ?"
        if self.memory_vectors_exist():
            sql += f" OR id NOT IN (SELECT rowid FROM {MEMORY_VEC_TABLE})"
        rows = self._conn.execute(sql + " ORDER BY id LIMIT ?", (model, limit))
        return [(int(r[0]), str(r[1])) for r in rows]

    # -- recall ----------------------------------------------------------------------------

    def keyword_memory_ids(
        self, match: str, scope: MemoryScope, *, depth: int, weights: tuple[float, float]
    ) -> list[int]:
        """Memory ids for a sanitized MATCH expression, best first, scope applied before
        LIMIT."""
        where, params = scope_sql(scope)
        w = ", ".join(str(float(x)) for x in weights)
        sql = (
            f"SELECT m.id, bm25(memories_fts, {w}) AS score FROM memories_fts"
            " JOIN memories m ON m.id = memories_fts.rowid"
            f" WHERE memories_fts MATCH ?{where} ORDER BY score LIMIT ?"
        )
        return [int(r[0]) for r in self._conn.execute(sql, (match, *params, depth))]

    # -- the remember queue ----------------------------------------------------------------

    def next_pending(self) -> QueuedRow | None:
        sql = (
            f"SELECT {QUEUED_COLUMNS} FROM remember_queue"
            " WHERE status = 'pending' ORDER BY seq LIMIT 1"
        )
        found = self._select(sql)
        return queued_row(found[0]) if found else None

    def request_status(self, request_id: str) -> str | None:
        sql = "SELECT status FROM remember_queue WHERE request_id = ?"
        found = self._value(sql, (request_id,))
        return None if found is None else str(found)
