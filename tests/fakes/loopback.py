"""What every loopback fake shares: serving an aiohttp app on 127.0.0.1 and `async with`."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Self

from aiohttp import web
from attrs import frozen


@frozen
class RecordedRequest:
    method: str
    path: str
    query: str
    headers: Mapping[str, str]

    @classmethod
    def of(cls, request: web.Request) -> RecordedRequest:
        return cls(request.method, request.path, request.query_string, dict(request.headers))


def requests_matching(requests: Sequence[RecordedRequest], pattern: str) -> list[RecordedRequest]:
    """The recorded requests whose path matches the shell-style `pattern`."""
    return [r for r in requests if fnmatch.fnmatchcase(r.path, pattern)]


async def serve(
    app: web.Application, host: str = "127.0.0.1", port: int = 0, **runner: Any
) -> web.AppRunner:
    """Start `app` on host:port (0: any free port); quick shutdown, no access log."""
    runner.setdefault("shutdown_timeout", 0.5)
    started = web.AppRunner(app, access_log=None, **runner)
    await started.setup()
    await web.TCPSite(started, host, port).start()
    return started


def bound_port(runner: web.AppRunner) -> int:
    return int(runner.addresses[0][1])


def root_url(runner: web.AppRunner | None, name: str) -> str:
    """`http://host:port` of a started fake; a clear error when it was never started."""
    if runner is None:
        raise RuntimeError(f"{name} is not started")
    host, port = runner.addresses[0][:2]
    return f"http://{host}:{port}"


class AsyncServerContext:
    """`async with fake:` starts and stops it; subclasses define start() and stop()."""

    async def start(self) -> Self:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
