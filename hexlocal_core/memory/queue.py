"""The durable remember_queue: submissions wait here, in `seq` order, until curated.

A row turns `done` only inside the transaction that applies its decision (see
`records.apply`), so a crash or a stop between the two leaves it `pending`, to be curated
again at the next start: never lost, never applied twice.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

import apsw
from attrs import frozen

from hexlocal_core.index.db import atomic, rows, scalar
from hexlocal_core.index.store import utcnow
from hexlocal_core.memory.inputs import Submission


@frozen
class QueueItem:
    seq: int
    request_id: str
    submission: Submission


def enqueue(conn: apsw.Connection, items: Sequence[Submission]) -> list[str]:
    """Writes every submission in one transaction; returns their request ids, in order."""
    ids = [uuid.uuid4().hex for _ in items]
    now = utcnow()
    with atomic(conn):
        for request_id, sub in zip(ids, items, strict=True):
            conn.execute(
                "INSERT INTO remember_queue(request_id, text, package, version, tags, status,"
                " submitted_at) VALUES (?, ?, ?, ?, ?, 'pending', ?)",
                (request_id, sub.text, sub.package, sub.version, json.dumps(sub.tags), now),
            )
    return ids


def next_pending(conn: apsw.Connection) -> QueueItem | None:
    found = rows(
        conn,
        "SELECT seq, request_id, text, package, version, tags FROM remember_queue"
        " WHERE status = 'pending' ORDER BY seq LIMIT 1",
    )
    if not found:
        return None
    r = found[0]
    sub = Submission(r["text"], r["package"], r["version"], tuple(json.loads(r["tags"])))
    return QueueItem(r["seq"], r["request_id"], sub)


def pending_count(conn: apsw.Connection) -> int:
    return int(scalar(conn, "SELECT count(*) FROM remember_queue WHERE status = 'pending'") or 0)


def claim(conn: apsw.Connection, request_id: str) -> bool:
    """Inside the applying transaction: is the item still pending? (Another process sharing
    the database may have curated it meanwhile; then this one must not apply it again.)"""
    status = scalar(conn, "SELECT status FROM remember_queue WHERE request_id = ?", (request_id,))
    return bool(status == "pending")


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
    conn.execute(
        "UPDATE remember_queue SET status = ?, action = ?, memory_id = ?, reason = ?,"
        " curated = ?, model = ?, processed_at = ? WHERE request_id = ?",
        (status, action, memory_id, reason, int(curated), model, utcnow(), request_id),
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
        conn.execute(
            "INSERT INTO curation_log(request_id, action, memory_id, model, reason, at)"
            " VALUES (?, 'failed', NULL, NULL, ?, ?)",
            (request_id, reason, utcnow()),
        )


_UNKNOWN = "no such request id; pass ids returned by remember"


def statuses(conn: apsw.Connection, request_ids: Sequence[str]) -> list[dict[str, Any]]:
    """What became of each request, in the order asked."""
    marks = ",".join("?" * len(request_ids))
    found = {
        r["request_id"]: r
        for r in rows(
            conn,
            "SELECT request_id, status, action, memory_id, curated, reason, model,"
            f" submitted_at, processed_at FROM remember_queue WHERE request_id IN ({marks})",
            tuple(request_ids),
        )
    }
    out: list[dict[str, Any]] = []
    for request_id in request_ids:
        r = found.get(request_id)
        if r is None:
            out.append({"request_id": request_id, "status": "unknown", "reason": _UNKNOWN})
            continue
        out.append({**r, "curated": None if r["curated"] is None else bool(r["curated"])})
    return out
