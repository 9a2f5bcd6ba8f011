"""Waiting for what happens in the background: a bounded poll that fails loudly.

A test that waits for a state calls `await eventually(check, what=...)` (or `wait_until`
in a thread or a synchronous test): it returns the first truthy value `check` gives, or
fails the test saying what did not happen within the timeout, with the last value seen.
Never a bare `while` without a deadline, a `for _ in range(...)` that runs out silently
into a weaker assertion, or a sleep standing in for an event.

The timeout is a bound on a failure, never a speed assertion: generous, because the
machines that run the suite are shared and loaded.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

T = TypeVar("T")

WAIT_S = 20.0  # the default bound on a wait; a test passes its own when it needs more
POLL_S = 0.02


async def eventually(
    check: Callable[[], T] | Callable[[], Awaitable[T]],
    *,
    what: str,
    timeout: float = WAIT_S,
    every: float = POLL_S,
    detail: Callable[[], object] | None = None,
) -> T:
    """Polls `check` (sync or async) on the running loop until it gives something truthy
    and returns that; fails with `what`, the timeout and `detail()` (or the last value)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value: Any = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[no-any-return]
        if loop.time() >= deadline:
            _fail(what, timeout, detail() if detail is not None else value)
        await asyncio.sleep(every)


def wait_until(
    check: Callable[[], T],
    *,
    what: str,
    timeout: float = WAIT_S,
    every: float = POLL_S,
    detail: Callable[[], object] | None = None,
) -> T:
    """`eventually` for code without an event loop (a thread, a synchronous test)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            _fail(what, timeout, detail() if detail is not None else value)
        time.sleep(every)


def _fail(what: str, timeout: float, seen: object) -> None:
    pytest.fail(f"{what}: did not happen within {timeout:g} s; last seen: {seen!r}")
