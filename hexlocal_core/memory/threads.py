"""Running store work off the event loop without ever cutting a transaction short."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from hexlocal_core.index.seam import DocsStore, Session

T = TypeVar("T")


async def in_thread(store: DocsStore, work: Callable[[Session], T]) -> T:
    """`work(conn)` in a worker thread, with that thread's own connection.

    The connection is taken inside the thread (apsw connections are per thread here). If
    the caller is cancelled (the worker being stopped), the thread's transaction cannot be
    interrupted anyway: wait for it to commit or roll back, so the store is never closed
    under it, then let the cancellation through.
    """
    task = asyncio.ensure_future(asyncio.to_thread(lambda: work(store.session())))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])
        if not task.cancelled():
            task.exception()  # retrieved: the item it belonged to is re-curated or logged
        raise
