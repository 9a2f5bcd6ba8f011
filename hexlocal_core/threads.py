"""Handing blocking work to a worker thread: the one way every layer does it.

Store calls (both engines' drivers block), parsing and chunking run in a worker thread
so the event loop keeps answering. A thread cannot be interrupted: a cancelled caller
waits for it (a transaction commits or rolls back whole, and the store is never closed
under it), and what the thread acquired for a caller that never sees the result is given
back. Reads the engine answers searches with use `asyncio.to_thread` directly: they hold
nothing, so a search cancelled mid-read leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TypeVar

log = logging.getLogger("hexlocal.threads")

T = TypeVar("T")


async def in_worker(work: Callable[[], T], *, undo: Callable[[T], None] | None = None) -> T:
    """`work()` in a worker thread that is always waited for, even when the caller is
    cancelled: the thread stops at its next cancel checkpoint (or commits its transaction),
    so nothing of a cancelled job still runs once its task has ended.

    `undo`: for work that acquires something (a lock, a queue row). A caller cancelled
    while the thread ran never receives the result, so `undo(result)` gives it back;
    without it the acquisition would outlive the task (a claim held until the process
    ends, and another service in this process waiting on it for ever)."""
    future = asyncio.ensure_future(asyncio.to_thread(work))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        await asyncio.wait([future])
        if not future.cancelled() and future.exception() is None and undo is not None:
            given_back = asyncio.ensure_future(asyncio.to_thread(undo, future.result()))
            await asyncio.wait([given_back])
            if not given_back.cancelled() and given_back.exception() is not None:
                # Reported, not raised: the cancellation is what the caller reports.
                log.warning(
                    "could not give back what a cancelled worker took: %r", given_back.exception()
                )
        raise
