"""The durable remember_queue: submissions wait here, in `seq` order, until curated.

A row turns `done` only inside the transaction that applies its decision (see
`records.apply`), so a crash or a stop between the two leaves it `pending`, to be curated
again at the next start: never lost, never applied twice. The SQL is in
`index/memory_store.py`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import apsw
from attrs import asdict, frozen

from hexlocal_core.index import memory_store as ms
from hexlocal_core.index.db import atomic
from hexlocal_core.memory.inputs import Submission


@frozen
class QueueItem:
    seq: int
    request_id: str
    submission: Submission


def enqueue(conn: apsw.Connection, items: Sequence[Submission]) -> list[str]:
    """Writes every submission in one transaction; returns their request ids, in order."""
    ids = [uuid.uuid4().hex for _ in items]
    rows = [
        ms.NewRequest(request_id, sub.text, sub.package, sub.version, tuple(sub.tags))
        for request_id, sub in zip(ids, items, strict=True)
    ]
    with atomic(conn):
        ms.enqueue(conn, rows)
    return ids


def next_pending(conn: apsw.Connection) -> QueueItem | None:
    row = ms.next_pending(conn)
    if row is None:
        return None
    sub = Submission(row.text, row.package, row.version, row.tags)
    return QueueItem(row.seq, row.request_id, sub)


def pending_count(conn: apsw.Connection) -> int:
    return ms.pending_count(conn)


def claim(conn: apsw.Connection, request_id: str) -> bool:
    """Inside the applying transaction: is the item still pending? (Another process sharing
    the database may have curated it meanwhile; then this one must not apply it again.)"""
    return ms.request_status(conn, request_id) == "pending"


def finish(
    conn: apsw.Connection,
    request_id: str,
    *,
    action: str | None,
    memory_id: int | None,
    reason: str,
    curated: bool,
    model: str | None,
    status: str = "done",
) -> None:
    ms.finish_request(
        conn,
        request_id,
        status=status,
        action=action,
        memory_id=memory_id,
        reason=reason,
        curated=curated,
        model=model,
    )


def mark_failed(conn: apsw.Connection, request_id: str, reason: str) -> None:
    """Gives up on an item (its text stays in the queue row) and logs why."""
    with atomic(conn):
        finish(
            conn,
            request_id,
            action=None,
            memory_id=None,
            reason=reason,
            curated=False,
            model=None,
            status="failed",
        )
        ms.log_curation(conn, request_id, "failed", None, None, reason)


_UNKNOWN = "no such request id; pass ids returned by remember"


def statuses(conn: apsw.Connection, request_ids: Sequence[str]) -> list[dict[str, Any]]:
    """What became of each request, in the order asked (the remember_status answer)."""
    found = ms.requests(conn, request_ids)
    out: list[dict[str, Any]] = []
    for request_id in request_ids:
        row = found.get(request_id)
        if row is None:
            out.append({"request_id": request_id, "status": "unknown", "reason": _UNKNOWN})
        else:
            out.append(asdict(row))
    return out
