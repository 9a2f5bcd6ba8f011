"""`in_worker`: the thread of a cancelled caller is waited for, and what it acquired is
given back (the sync queue's row and the ingestion claim are taken this way)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from hexlocal_core.threads import in_worker


async def cancelled_while_working(
    outcome: str | Exception, undo: Callable[[str], None] | None = None
) -> list[object]:
    """Runs work that ends in `outcome` once its caller was cancelled; what `undo` got
    (the default undo records it)."""
    started, go = threading.Event(), threading.Event()
    undone: list[object] = []

    def work() -> str:
        started.set()
        go.wait(10)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    task = asyncio.create_task(in_worker(work, undo=undo or undone.append))
    await asyncio.to_thread(started.wait, 10)
    task.cancel()
    await asyncio.sleep(0.05)
    assert not task.done()  # the thread is still waited for
    go.set()
    with pytest.raises(asyncio.CancelledError):  # the cancel is what the caller reports
        await task
    return undone


async def test_a_result_the_cancelled_caller_never_sees_is_undone() -> None:
    assert await cancelled_while_working("row 7") == ["row 7"]


async def test_a_result_delivered_is_not_undone() -> None:
    undone: list[str] = []
    assert await in_worker(lambda: "row 7", undo=undone.append) == "row 7"
    assert undone == []


async def test_work_that_failed_has_nothing_to_undo() -> None:
    assert await cancelled_while_working(OSError("disk gone")) == []


async def test_an_undo_that_fails_is_logged_and_the_cancel_still_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def undo(_: str) -> None:
        raise OSError("lock file gone")

    await cancelled_while_working("row 7", undo=undo)
    ours = [r for r in caplog.records if r.name == "hexlocal.threads"]
    assert any("could not give back" in r.getMessage() for r in ours)
    assert any("lock file gone" in r.getMessage() for r in ours)
