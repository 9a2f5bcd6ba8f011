"""Cooperative cancellation for ingestion work running in threads.

Parsing and chunking run in `asyncio.to_thread`, which no task cancellation can stop. A job
therefore binds a `CancelToken` around its work, and the loops of the tarball reader, the
ExDoc parsers, the chunker and the BEAM reader call `checkpoint()`, which raises
`IngestCancelled` once the token is cancelled. The token travels in a context variable:
`asyncio.to_thread` copies the caller's context into the worker thread, so

    token = CancelToken()
    with bind(token):
        await asyncio.to_thread(parse, data)   # parse() sees the token
    ...
    token.cancel()                             # from anywhere, any thread

stops `parse` at its next checkpoint. With no token bound, `checkpoint()` does nothing.
A checkpoint costs one context-variable read and one attribute read, so loops call it
per member, item, block or line without measuring.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from hexlocal_core.errors import IngestError


class IngestCancelled(IngestError):
    """The ingestion was cancelled (the server is shutting down or the job was dropped)."""


class CancelToken:
    """A one-way flag: once cancelled it stays cancelled. Safe to share between threads."""

    __slots__ = ("_event", "reason")

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason = "ingestion was cancelled"

    def cancel(self, reason: str | None = None) -> None:
        if reason:
            self.reason = reason
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        """Raise `IngestCancelled` when cancelled."""
        if self._event.is_set():
            raise IngestCancelled(self.reason)


_CURRENT: ContextVar[CancelToken | None] = ContextVar("hexlocal_cancel_token", default=None)


@contextmanager
def bind(token: CancelToken) -> Iterator[CancelToken]:
    """Make `token` the one `checkpoint()` checks, for this context and threads started
    from it with `asyncio.to_thread` (or `contextvars.copy_context().run`)."""
    reset = _CURRENT.set(token)
    try:
        yield token
    finally:
        _CURRENT.reset(reset)


def current() -> CancelToken | None:
    """The token bound in this context, if any."""
    return _CURRENT.get()


def checkpoint() -> None:
    """Raise `IngestCancelled` if the bound token is cancelled; otherwise nothing."""
    token = _CURRENT.get()
    if token is not None and token._event.is_set():
        raise IngestCancelled(token.reason)
