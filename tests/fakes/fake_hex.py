"""A fake Hex API and docs mirror on 127.0.0.1, serving the shared corpus.

    GET /api/packages/{name}                 corpus/hexapi/{name}.json
    GET /repo/docs/{name}-{version}.tar.gz   corpus/hexdocs/{name}-{version}.tar.gz
    GET /api/packages/{name}/releases/{v}    what `add_release` gave (the corpus has none)

Anything else answers 404 with Hex's JSON error body. Every request is recorded, and
faults can be injected per path pattern (fnmatch): delays, status codes (with
Retry-After), connection resets, truncated bodies, HTML instead of JSON, streamed bodies
without Content-Length, requests read and never answered (`hang`, a blackholed host as
a client sees it), requests held until the test releases them (`hold`), optionally only
for the first N matching requests. `refuse()` stops listening (connections are refused,
as from a host that is down) and `listen()` serves again on the same port.

Standalone (for stdio MCP tests and `make demo`):

    python -m tests.fakes.fake_hex --port 0

prints its base URL as the first line of stdout, then serves until killed. Point hexlocal
at it with HEX_API_URL=<base>/api and HEX_MIRROR=<base>/repo.
"""

from __future__ import annotations

import argparse
import asyncio
import fnmatch
import json
import os
import re
import signal
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from aiohttp import web
from attrs import define, field

from tests.fakes.loopback import (
    AsyncServerContext,
    RecordedRequest,
    bound_port,
    requests_matching,
    root_url,
    serve,
)

if TYPE_CHECKING:  # imported lazily: the standalone server needs none of hexlocal
    from hexlocal_core.adapters.hex import HexClient
    from hexlocal_core.config import Settings

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CORPUS = Path(os.environ.get("HEXLOCAL_SHARED", REPO_ROOT.parent / "shared")) / "corpus"

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,200}$")  # longer names: 404, not OSError
_DOCS_FILE = re.compile(r"^(?P<name>[a-z][a-z0-9_]*)-(?P<version>[0-9][0-9A-Za-z.+-]*)\.tar\.gz$")
_NOT_FOUND = {"status": 404, "message": "Page not found"}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@define
class Fault:
    """What to do to requests whose path matches `pattern`.

    `times` limits the fault to the first N matching requests (then they succeed);
    None means every matching request. `delay` is applied before anything else.
    """

    pattern: str
    status: int | None = None
    retry_after: str | None = None
    delay: float = 0.0
    reset: bool = False
    truncate: bool = False
    html: bool = False
    chunked: bool = False
    hang: bool = False
    gate: asyncio.Event | None = None  # held until the test sets it
    times: int | None = None
    hits: int = 0

    def matches(self, path: str) -> bool:
        return fnmatch.fnmatchcase(path, self.pattern) and (
            self.times is None or self.hits < self.times
        )


@define
class FakeHex(AsyncServerContext):
    """The fake server. `await start()` (or `async with`), then use `api_url`/`mirror_url`."""

    corpus: Path = DEFAULT_CORPUS
    host: str = "127.0.0.1"
    port: int = 0
    requests: list[RecordedRequest] = field(factory=list)
    faults: list[Fault] = field(factory=list)
    packages: dict[str, bytes] = field(factory=dict)  # extra API bodies by name
    tarballs: dict[str, bytes] = field(factory=dict)  # extra docs by file name
    releases: dict[tuple[str, str], bytes] = field(factory=dict)  # release data by (name, vsn)
    _runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        if self._runner is None and self.port:  # refusing: the address it will serve again
            return f"http://{self.host}:{self.port}"
        return root_url(self._runner, "FakeHex")

    @property
    def api_url(self) -> str:
        return f"{self.base_url}/api"

    @property
    def mirror_url(self) -> str:
        return f"{self.base_url}/repo"

    async def start(self) -> FakeHex:
        await self.listen()
        return self

    async def listen(self) -> None:
        """Serves (again): on `port`, which is the one first bound after a `refuse()`."""
        if self._runner is not None:
            return
        app = web.Application(middlewares=[self._middleware])
        app.router.add_get("/api/packages/{name}", self._package)
        app.router.add_get("/api/packages/{name}/releases/{version}", self._release)
        app.router.add_get("/repo/docs/{file}", self._docs)
        # handler_cancellation: a client that gave up (timeout tests) cancels the slow
        # handler, so shutdown does not wait for it.
        self._runner = await serve(app, self.host, self.port, handler_cancellation=True)
        self.port = bound_port(self._runner)  # a later listen() comes back on the same port

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def refuse(self) -> None:
        """Stops listening: connections to the port are refused until `listen()`. The URLs
        stay valid (`api_url` and `mirror_url` keep their port)."""
        await self.stop()

    # ------------------------------------------------------------------ test controls

    def fail(
        self,
        pattern: str,
        *,
        status: int | None = None,
        retry_after: str | float | None = None,
        delay: float = 0.0,
        reset: bool = False,
        truncate: bool = False,
        html: bool = False,
        chunked: bool = False,
        hang: bool = False,
        times: int | None = None,
    ) -> Fault:
        """Adds a fault for paths matching `pattern` (like "/api/packages/jason")."""
        fault = Fault(
            pattern=pattern,
            status=status,
            retry_after=None if retry_after is None else str(retry_after),
            delay=delay,
            reset=reset,
            truncate=truncate,
            html=html,
            chunked=chunked,
            hang=hang,
            times=times,
        )
        self.faults.append(fault)
        return fault

    def hold(self, pattern: str) -> asyncio.Event:
        """Requests matching `pattern` wait until the returned event is set (an answer held
        for exactly as long as the test needs, not for a guessed delay)."""
        gate = asyncio.Event()
        self.faults.append(Fault(pattern=pattern, gate=gate))
        return gate

    def reset(self) -> None:
        """Forgets faults, recorded requests and extra packages."""
        self.faults.clear()
        self.requests.clear()
        self.packages.clear()
        self.tarballs.clear()
        self.releases.clear()

    def add_package(self, name: str, data: Mapping[str, Any]) -> None:
        """Serves `data` as the API answer for `name` (on top of the corpus)."""
        self.packages[name] = json.dumps(data).encode()

    def add_release(self, name: str, version: str, requirements: Mapping[str, str]) -> None:
        """Serves a release's data as hex.pm shapes it: each requirement with its app."""
        reqs = {
            dep: {"app": dep, "optional": False, "requirement": req}
            for dep, req in requirements.items()
        }
        body = {"version": version, "has_docs": True, "requirements": reqs}
        self.releases[(name, version)] = json.dumps(body).encode()

    def add_docs(self, name: str, version: str, body: bytes) -> None:
        self.tarballs[f"{name}-{version}.tar.gz"] = body

    def requests_to(self, pattern: str) -> list[RecordedRequest]:
        return requests_matching(self.requests, pattern)

    # ------------------------------------------------------------------ serving

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        self.requests.append(RecordedRequest.of(request))
        fault = next((f for f in self.faults if f.matches(request.path)), None)
        if fault is None:
            return await handler(request)
        fault.hits += 1
        if fault.delay:
            await asyncio.sleep(fault.delay)
        if fault.gate is not None:
            await fault.gate.wait()
        if fault.hang:
            # Read, never answered: the client's timeout ends it (and cancels this handler).
            await asyncio.Event().wait()
        return await self._apply(fault, request, handler)

    async def _apply(
        self, fault: Fault, request: web.Request, handler: Handler
    ) -> web.StreamResponse:
        if fault.reset:
            if request.transport is not None:
                request.transport.abort()
            return web.Response(status=500)  # never reaches the client
        if fault.status is not None:
            headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
            error = {"status": fault.status, "message": "injected fault"}
            return web.json_response(error, status=fault.status, headers=headers)
        if fault.html:
            html = "<!DOCTYPE html><html><body><h1>Sign in to continue</h1></body></html>"
            return web.Response(text=html, content_type="text/html")
        response = await handler(request)
        if not isinstance(response, web.Response) or response.status != 200:
            return response
        body = response.body if isinstance(response.body, bytes) else b""
        if fault.truncate:
            return await _truncated(request, response, body)
        if fault.chunked:
            return await _streamed(request, response, body)
        return response

    async def _package(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        body = self.packages.get(name)
        path = self.corpus / "hexapi" / f"{name}.json"
        if body is None and _NAME.match(name) and path.is_file():
            body = path.read_bytes()
        if body is None:
            return web.json_response(_NOT_FOUND, status=404)
        return web.Response(body=body, content_type="application/json", charset="utf-8")

    async def _release(self, request: web.Request) -> web.StreamResponse:
        key = (request.match_info["name"], request.match_info["version"])
        body = self.releases.get(key)
        if body is None:
            return web.json_response(_NOT_FOUND, status=404)
        return web.Response(body=body, content_type="application/json", charset="utf-8")

    async def _docs(self, request: web.Request) -> web.StreamResponse:
        filename = request.match_info["file"]
        body = self.tarballs.get(filename)
        path = self.corpus / "hexdocs" / filename
        if body is None and _DOCS_FILE.match(filename) and path.is_file():
            body = path.read_bytes()
        if body is None:
            return web.json_response(_NOT_FOUND, status=404)
        return web.Response(body=body, content_type="application/octet-stream")


async def _truncated(request: web.Request, source: web.Response, body: bytes) -> web.StreamResponse:
    """Announces the full length, sends half, then drops the connection."""
    response = web.StreamResponse(status=200)
    response.content_type = source.content_type
    response.content_length = len(body)
    await response.prepare(request)
    await response.write(body[: len(body) // 2])
    if request.transport is not None:
        request.transport.close()
    return response


async def _streamed(request: web.Request, source: web.Response, body: bytes) -> web.StreamResponse:
    """The same body with chunked transfer encoding: no Content-Length to refuse early."""
    response = web.StreamResponse(status=200)
    response.content_type = source.content_type
    response.enable_chunked_encoding()
    await response.prepare(request)
    for start in range(0, len(body), 16 * 1024):
        await response.write(body[start : start + 16 * 1024])
    await response.write_eof()
    return response


# ---------------------------------------------------------------------- test helpers

FAST_BACKOFF_S = 0.001  # tests retry at once; the production default is half a second


def settings_for(fake: FakeHex, tmp_path: Path, **overrides: Any) -> Settings:
    """Settings aimed at `fake`, with the project and database under `tmp_path`."""
    from hexlocal_core.config import Settings

    project = tmp_path / "project"
    project.mkdir(parents=True, exist_ok=True)
    env = {
        "HEX_API_URL": fake.api_url,
        "HEX_MIRROR": fake.mirror_url,
        "PROJECT_ROOT": str(project),
        "DATABASE_PATH": str(tmp_path / "hexlocal.db"),
        "HEXLOCAL_HTTP_TIMEOUT_S": "5",
        # Calls wait for the whole ingestion, so what a test asserts after its first search
        # does not hang on how far the background embedding got; the tests of answering
        # while embedding pass answer_while_embedding=True.
        "HEXLOCAL_ANSWER_WHILE_EMBEDDING": "false",
        # The machine's own OTP stays out of a sync unless a test asks for it.
        "HEXLOCAL_SYNC_OTP": "false",
    }
    return Settings.from_env(env, **overrides)


def client_for(
    settings: Settings,
    *,
    attempts: int = 3,
    sleep: Callable[[float], Awaitable[None]] | None = None,
    **options: Any,
) -> HexClient:
    """A HexClient with test-friendly retry timing: millisecond backoff, Retry-After up to
    2 s honoured, and `sleep` (a recorder, say) instead of asyncio.sleep when given. Other
    options go to HexClient as they are (`retry=` replaces the whole policy)."""
    from hexlocal_core.adapters.hex import HexClient
    from hexlocal_core.adapters.http_policy import RetryPolicy

    policy = RetryPolicy(attempts=attempts, base_s=FAST_BACKOFF_S, max_retry_after_s=2.0)
    if sleep is not None:
        policy = attrs.evolve(policy, sleep=sleep)
    options.setdefault("retry", policy)
    return HexClient(settings, **options)


# ---------------------------------------------------------------------- standalone


async def _serve(args: argparse.Namespace) -> None:
    fake = FakeHex(corpus=Path(args.corpus), host=args.host, port=args.port)
    await fake.start()
    print(fake.base_url, flush=True)
    print(f"HEX_API_URL={fake.api_url} HEX_MIRROR={fake.mirror_url}", file=sys.stderr, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await fake.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A fake Hex API and docs mirror.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--corpus", default=str(DEFAULT_CORPUS), help="the shared corpus dir")
    asyncio.run(_serve(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
