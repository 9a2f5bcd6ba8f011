"""The durable queue of `hexlocal sync` (`sync_queue`): one row per package the project
runs, so a sync cut short by an exit resumes at the next start and a failure keeps its
reason. A worker claims a row (status 'running', its pid) before working on it, so two
processes on one index never index the same package at once.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

from attrs import frozen

from hexlocal_core.index.db import Connected, atomic, rows, utcnow

STATUSES = ("queued", "running", "done", "failed", "skipped")


@frozen
class SyncRow:
    package: str
    version: str
    kind: str  # hex | git | path | elixir | another SCM's name
    status: str  # one of STATUSES
    seq: int  # order of work
    reason: str | None = None  # failed / skipped: why; queued: why it waits
    retry: bool = True  # failed: whether a background sync tries it again
    pid: int | None = None  # running: the process working on it


@frozen
class QueueChanges:
    """What a sync run writes: rows to insert or replace, and packages to drop."""

    upsert: tuple[SyncRow, ...] = ()
    delete: tuple[str, ...] = ()


_SELECT = "SELECT package, version, kind, status, seq, reason, retry, pid FROM sync_queue"


def _row(r: Mapping[str, object]) -> SyncRow:
    pid = r["pid"]
    return SyncRow(
        package=str(r["package"]),
        version=str(r["version"]),
        kind=str(r["kind"]),
        status=str(r["status"]),
        seq=int(r["seq"]),  # type: ignore[call-overload]
        reason=None if r["reason"] is None else str(r["reason"]),
        retry=bool(r["retry"]),
        pid=None if pid is None else int(pid),  # type: ignore[call-overload]
    )


def all_rows(store: Connected) -> dict[str, SyncRow]:
    return {row.package: row for row in map(_row, rows(store.conn, _SELECT + " ORDER BY seq"))}


def update_queue(store: Connected, decide: Callable[[dict[str, SyncRow]], QueueChanges]) -> None:
    """Reads the queue, lets `decide` (pure) say what changes, writes it: one transaction,
    so a worker of another process cannot claim a row between the read and the write."""
    with atomic(store.conn) as conn:
        current = {r.package: r for r in map(_row, rows(conn, _SELECT))}
        changes = decide(current)
        for name in changes.delete:
            conn.execute("DELETE FROM sync_queue WHERE package = ?", (name,))
        now = utcnow()
        for r in changes.upsert:
            conn.execute(
                "INSERT OR REPLACE INTO sync_queue(package, version, kind, status, seq, reason,"
                " retry, pid, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (r.package, r.version, r.kind, r.status, r.seq, r.reason, int(r.retry), r.pid, now),
            )


def claim_next(store: Connected, skip: Sequence[str] = ()) -> SyncRow | None:
    """The first queued row (by seq), now marked running by this process; None when empty."""
    pid = os.getpid()
    with atomic(store.conn) as conn:
        for r in rows(conn, _SELECT + " WHERE status = 'queued' ORDER BY seq"):
            row = _row(r)
            if row.package in skip:
                continue
            conn.execute(
                "UPDATE sync_queue SET status = 'running', pid = ?, updated_at = ?"
                " WHERE package = ?",
                (pid, utcnow(), row.package),
            )
            return SyncRow(row.package, row.version, row.kind, "running", row.seq, pid=pid)
    return None


def finish(
    store: Connected,
    package: str,
    status: str,
    *,
    version: str | None = None,
    reason: str | None = None,
    retry: bool = True,
) -> None:
    """Ends this process's claim on a row: done, failed (with why), or queued again."""
    if status not in STATUSES or status == "running":
        raise ValueError(f"not a final sync status: {status!r}")
    with atomic(store.conn) as conn:
        conn.execute(
            "UPDATE sync_queue SET status = ?, version = coalesce(?, version), reason = ?,"
            " retry = ?, pid = NULL, updated_at = ? WHERE package = ?",
            (status, version, reason, int(retry), utcnow(), package),
        )


def note_waiting(store: Connected, reason: str | None) -> None:
    """Records why the queued rows wait (no embedder, another model), or clears it."""
    with atomic(store.conn) as conn:
        conn.execute(
            "UPDATE sync_queue SET reason = ?, updated_at = ? WHERE status = 'queued'",
            (reason, utcnow()),
        )
