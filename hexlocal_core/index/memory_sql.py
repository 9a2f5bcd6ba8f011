"""The memory statements both engines run alike: rows by id, scope, the curation log, the
remember queue's plain reads and writes.

`MemorySql` is the part of `seam.MemoryQueries` written once; `sqlite/memories.py` and
`pg/memories.py` inherit it and add what each does its own way: the full-text rows, the
vectors, and how a queue row is claimed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from hexlocal_core.index.rows import (
    CurationEntry,
    MemoryRow,
    MemoryScope,
    NewRequest,
    QueuedRow,
    RequestRow,
)
from hexlocal_core.index.sql import SqlRunner, utcnow

MEMORY_COLUMNS = (
    "id, text, curated, package, version, tags, deprecated, embed_model, created_at, updated_at"
)
QUEUED_COLUMNS = "seq, request_id, text, package, version, tags"


def tags_of(raw: str | None) -> tuple[str, ...]:
    return tuple(str(t) for t in json.loads(raw or "[]"))


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


def queued_row(r: Sequence[Any]) -> QueuedRow:
    seq, request_id, text, package, version, tags = r
    return QueuedRow(int(seq), request_id, text, package, version, tags_of(tags))


def scope_sql(scope: MemoryScope) -> tuple[str, list[Any]]:
    """The scope's conditions on `memories m`, as ' AND ...' text, and their parameters."""
    conditions: list[str] = []
    params: list[Any] = []
    if not scope.include_deprecated:
        conditions.append("NOT m.deprecated")
    if scope.package is not None:
        conditions.append("m.package = ?")
        params.append(scope.package)
    return "".join(f" AND {c}" for c in conditions), params


class MemorySql(SqlRunner):
    """`seam.MemoryQueries` but for full text, vectors and the queue's claims."""

    # -- memories --------------------------------------------------------------------------

    def memories_by_ids(self, ids: Sequence[int]) -> dict[int, MemoryRow]:
        if not ids:
            return {}
        where, params = self.dialect.one_of("id", ids, "bigint")
        found = self._select(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {where}", params)
        return {row.id: row for row in map(memory_row, found)}

    def deprecated_count(self) -> int:
        return int(self._value("SELECT count(*) FROM memories WHERE deprecated") or 0)

    def live_ids_with_norm_hash(self, norm_hash: str) -> set[int]:
        """Non-deprecated memories whose normalised text hashes to `norm_hash`."""
        sql = "SELECT id FROM memories WHERE norm_hash = ? AND NOT deprecated"
        return {int(r[0]) for r in self._select(sql, (norm_hash,))}

    def deprecate_memory(self, memory_id: int) -> None:
        sql = "UPDATE memories SET deprecated = TRUE, updated_at = ? WHERE id = ?"
        self._write(sql, (utcnow(), memory_id))

    # -- recall ----------------------------------------------------------------------------

    def out_of_scope_count(self, scope: MemoryScope) -> int:
        """How many memories the scope leaves out (k-NN cannot filter, so it asks for more).

        `IS NOT TRUE` counts a memory with no package as out of a package's scope.
        """
        where, params = scope_sql(scope)
        sql = f"SELECT count(*) FROM memories m WHERE (TRUE{where}) IS NOT TRUE"
        return int(self._value(sql, params) or 0)

    def in_scope(self, ids: Sequence[int], scope: MemoryScope) -> set[int]:
        """The ids among `ids` the scope allows."""
        if not ids:
            return set()
        among, params = self.dialect.one_of("m.id", ids, "bigint")
        where, scope_params = scope_sql(scope)
        sql = f"SELECT m.id FROM memories m WHERE {among}{where}"
        return {int(r[0]) for r in self._select(sql, [*params, *scope_params])}

    # -- the curation log ------------------------------------------------------------------

    def log_curation(
        self,
        request_id: str,
        action: str,
        memory_id: int | None,
        model: str | None,
        reason: str,
    ) -> None:
        self._write(
            "INSERT INTO curation_log(request_id, action, memory_id, model, reason, at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (request_id, action, memory_id, model, reason, utcnow()),
        )

    def curation_history(self, ids: Sequence[int]) -> dict[int, list[CurationEntry]]:
        """The log entries that touched each memory, oldest first ([] for none)."""
        out: dict[int, list[CurationEntry]] = {i: [] for i in ids}
        if not ids:
            return out
        where, params = self.dialect.one_of("memory_id", ids, "bigint")
        sql = (
            "SELECT memory_id, request_id, action, model, reason, at FROM curation_log"
            f" WHERE {where} ORDER BY id"
        )
        for memory_id, request_id, action, model, reason, at in self._select(sql, params):
            out[int(memory_id)].append(CurationEntry(request_id, action, model, reason, at))
        return out

    # -- the remember queue ----------------------------------------------------------------

    def enqueue(self, items: Sequence[NewRequest]) -> None:
        """Pending queue rows, all stamped with one submission time."""
        now = utcnow()
        for item in items:
            self._write(
                "INSERT INTO remember_queue(request_id, text, package, version, tags, status,"
                " submitted_at) VALUES (?, ?, ?, ?, ?, 'pending', ?)",
                (
                    *(item.request_id, item.text, item.package, item.version),
                    *(json.dumps(item.tags), now),
                ),
            )

    def pending_count(self) -> int:
        sql = "SELECT count(*) FROM remember_queue WHERE status = 'pending'"
        return int(self._value(sql) or 0)

    def finish_request(
        self,
        request_id: str,
        *,
        status: str,
        action: str | None,
        memory_id: int | None,
        reason: str,
        curated: bool,
        model: str | None,
    ) -> None:
        self._write(
            "UPDATE remember_queue SET status = ?, action = ?, memory_id = ?, reason = ?,"
            " curated = ?, model = ?, processed_at = ? WHERE request_id = ?",
            (status, action, memory_id, reason, curated, model, utcnow(), request_id),
        )

    def requests(self, request_ids: Sequence[str]) -> dict[str, RequestRow]:
        """The queue rows of the ids that exist, by id."""
        if not request_ids:
            return {}
        where, params = self.dialect.one_of("request_id", request_ids, "text")
        sql = (
            "SELECT request_id, status, action, memory_id, curated, reason, model,"
            f" submitted_at, processed_at FROM remember_queue WHERE {where}"
        )
        out: dict[str, RequestRow] = {}
        for rid, status, action, mid, curated, reason, model, submitted, processed in self._select(
            sql, params
        ):
            out[rid] = RequestRow(
                rid,
                status,
                action,
                None if mid is None else int(mid),
                None if curated is None else bool(curated),
                reason,
                model,
                submitted,
                processed,
            )
        return out
