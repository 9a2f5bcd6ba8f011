"""The durable remember_queue: submissions wait here, in `seq` order, until curated.

A row turns `done` only inside the transaction that applies its decision (see
`records.apply`), so a crash or a stop between the two leaves it `pending`, to be curated
again at the next start: never lost, never applied twice. The SQL is in
`index/memory_sql.py` and the engines' `memories.py`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from attrs import asdict, frozen

from hexlocal_core.index.rows import NewRequest
from hexlocal_core.index.seam import Session
from hexlocal_core.memory.inputs import Submission


@frozen
class QueueItem:
    seq: int
    request_id: str
    submission: Submission


def enqueue(conn: Session, items: Sequence[Submission]) -> list[str]:
    """Writes every submission in one transaction; returns their request ids, in order."""
    ids = [uuid.uuid4().hex for _ in items]
    rows = [
        NewRequest(request_id, sub.text, sub.package, sub.version, tuple(sub.tags))
        for request_id, sub in zip(ids, items, strict=True)
    ]
    with conn.atomic():
        conn.memories.enqueue(rows)
    return ids


def next_pending(conn: Session) -> QueueItem | None:
    row = conn.memories.next_pending()
    if row is None:
        return None
    sub = Submission(row.text, row.package, row.version, row.tags)
    return QueueItem(row.seq, row.request_id, sub)


def pending_count(conn: Session) -> int:
    return conn.memories.pending_count()


def claim(conn: Session, request_id: str) -> bool:
    """Inside the applying transaction: is the item still pending? (Another process sharing
    the database may have curated it meanwhile; then this one must not apply it again.)"""
    return conn.memories.request_status(request_id) == "pending"


def finish(
    conn: Session,
    request_id: str,
    *,
    action: str | None,
    memory_id: int | None,
    reason: str,
    curated: bool,
    model: str | None,
    status: str = "done",
) -> None:
    conn.memories.finish_request(
        request_id,
        status=status,
        action=action,
        memory_id=memory_id,
        reason=reason,
        curated=curated,
        model=model,
    )


def mark_failed(conn: Session, request_id: str, reason: str) -> None:
    """Gives up on an item (its text stays in the queue row) and logs why; an item another
    server has meanwhile decided keeps that decision."""
    with conn.atomic():
        if not claim(conn, request_id):
            return
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
        conn.memories.log_curation(request_id, "failed", None, None, reason)


_UNKNOWN = "no such request id; pass ids returned by remember"


def statuses(conn: Session, request_ids: Sequence[str]) -> list[dict[str, Any]]:
    """What became of each request, in the order asked (the remember_status answer)."""
    found = conn.memories.requests(request_ids)
    out: list[dict[str, Any]] = []
    for request_id in request_ids:
        row = found.get(request_id)
        if row is None:
            out.append({"request_id": request_id, "status": "unknown", "reason": _UNKNOWN})
        else:
            out.append(asdict(row))
    return out
