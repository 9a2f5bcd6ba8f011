"""A loopback reverse proxy that breaks requests on purpose, in front of any fake.

    async with FaultProxy(upstream="http://127.0.0.1:PORT") as proxy:
        proxy.inject("/api/packages/*", "timeout")   # every matching request, until clear()
        ... aim the adapter at proxy.url instead of the upstream ...

One proxy gives every remote (hex.pm API, docs mirror, GitHub, the AI API) the same six
faults, whatever its own fake supports:

    timeout        hold the request longer than the client waits (then answer normally)
    reset          abort the TCP connection without an answer
    429            rate limited, `Retry-After: 0` (so clients retry at once)
    500            server error with a JSON body
    truncated      announce the full Content-Length, send half the body, close
    content_type   200 with an HTML sign-in page instead of JSON or a tarball
"""

from __future__ import annotations

import asyncio
import fnmatch

import aiohttp
from aiohttp import web

from tests.fakes.loopback import AsyncServerContext, root_url, serve

FAULTS = ("timeout", "reset", "429", "500", "truncated", "content_type")
HOLD_S = 3.0  # longer than the HEXLOCAL_HTTP_TIMEOUT_S the tests use
HTML = "<!DOCTYPE html><html><body><h1>Sign in to continue</h1></body></html>"
_HOP_BY_HOP = {"host", "content-length", "transfer-encoding", "connection", "accept-encoding"}


class FaultProxy(AsyncServerContext):
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.faults: list[tuple[str, str]] = []  # (path pattern, fault)
        self.hits: list[tuple[str, str]] = []  # (path, fault applied) for every faulted request
        self._closing = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        return root_url(self._runner, "FaultProxy")

    def inject(self, pattern: str, fault: str) -> None:
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}")
        self.faults.append((pattern, fault))

    def clear(self) -> None:
        self.faults.clear()

    async def start(self) -> FaultProxy:
        self._session = aiohttp.ClientSession(auto_decompress=False)
        app = web.Application(client_max_size=64 * 1024**2)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # handler_cancellation: a client that gave up cancels the held handler.
        self._runner = await serve(app, handler_cancellation=True)
        return self

    async def stop(self) -> None:
        self._closing.set()
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    # -- serving ----------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        fault = next((f for p, f in self.faults if fnmatch.fnmatchcase(request.path, p)), None)
        if fault is not None:
            self.hits.append((request.path, fault))
        if fault == "timeout":
            try:
                await asyncio.wait_for(self._closing.wait(), HOLD_S)
            except TimeoutError:
                pass
        elif fault == "reset":
            if request.transport is not None:
                request.transport.abort()
            return web.Response(status=500)  # never reaches the client
        elif fault in ("429", "500"):
            retry = {"Retry-After": "0"} if fault == "429" else {}
            error = {"message": "injected fault", "status": int(fault)}
            return web.json_response(error, status=int(fault), headers=retry)
        elif fault == "content_type":
            return web.Response(text=HTML, content_type="text/html")
        status, headers, body = await self._forward(request)
        if fault == "truncated" and status == 200:
            return await _truncated(request, headers, body)
        return web.Response(status=status, body=body, headers=headers)

    async def _forward(self, request: web.Request) -> tuple[int, dict[str, str], bytes]:
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        async with self._session.request(
            request.method,
            self.upstream + request.path_qs,
            headers=headers,
            data=await request.read(),
            allow_redirects=False,
        ) as upstream:
            body = await upstream.read()
            kept = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_BY_HOP}
            return upstream.status, kept, body


async def _truncated(
    request: web.Request, headers: dict[str, str], body: bytes
) -> web.StreamResponse:
    response = web.StreamResponse(status=200, headers=headers)
    response.content_length = len(body)
    await response.prepare(request)
    await response.write(body[: len(body) // 2])
    if request.transport is not None:
        request.transport.close()
    return response
