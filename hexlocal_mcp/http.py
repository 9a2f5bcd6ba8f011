"""The MCP server over streamable HTTP: `hexlocal serve --http`, for agents that cannot
spawn a local stdio server (hosted coding agents, CI bots).

The same FastMCP server and tools as stdio, run by uvicorn, with three additions:

- a bearer token (HEXLOCAL_HTTP_TOKEN or HEXLOCAL_HTTP_TOKEN_FILE, compared in constant
  time) on every path but `/health`; without one the server refuses to start, unless it is
  bound to loopback and `--no-auth` is given explicitly;
- `GET /health`, unauthenticated and secret-free, for load balancers and `docker ps`;
- a bounded graceful shutdown on SIGTERM/SIGINT: stop accepting, let in-flight calls finish
  for up to HEXLOCAL_HTTP_SHUTDOWN_GRACE_S (default 7 s: under Docker's 10 s stop timeout,
  so the service is closed before a SIGKILL), then close the service, which cancels
  ingestion (the jobs resume at the next start).

Stateless HTTP: every POST is answered on its own (progress notifications still stream on
its response), so no session pins a client to one process, a replica behind a load
balancer can answer any request, and no idle GET stream holds the shutdown open.
Nothing goes to stdout: uvicorn's loggers get the same stderr/file handlers as the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import logging
import signal
import socket
from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import uvicorn
from attrs import frozen
from fastmcp import FastMCP
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from hexlocal_core.config import Settings

if TYPE_CHECKING:
    from hexlocal_core.service import Hexlocal

log = logging.getLogger("hexlocal.mcp.http")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
MCP_PATH = "/mcp"
HEALTH_PATH = "/health"
# A shorter token is guessable; say how to make a good one instead of accepting it.
MIN_TOKEN_CHARS = 16
TOKEN_HINT = "openssl rand -hex 32"  # 64 characters, nothing to install


@frozen
class HttpOptions:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    no_auth: bool = False


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def refusal(settings: Settings, options: HttpOptions) -> str | None:
    """Why the server must not start with these options, in one actionable line; else None."""
    token = settings.http_token.reveal()
    if options.no_auth:
        if token:
            return "--no-auth was given but an HTTP token is set; drop one of the two"
        if not is_loopback(options.host):
            return (
                f"--no-auth is only allowed on a loopback address, not {options.host}; set "
                f"HEXLOCAL_HTTP_TOKEN (make one with: {TOKEN_HINT})"
            )
        return None
    if not token:
        return (
            "serving over HTTP needs a bearer token: set HEXLOCAL_HTTP_TOKEN or "
            f"HEXLOCAL_HTTP_TOKEN_FILE (make one with: {TOKEN_HINT}), or pass --no-auth on "
            "127.0.0.1 for local experiments"
        )
    if len(token) < MIN_TOKEN_CHARS:
        return (
            f"the HTTP token is {len(token)} characters; use at least {MIN_TOKEN_CHARS} "
            f"(make one with: {TOKEN_HINT})"
        )
    return None


# -- the ASGI pieces ----------------------------------------------------------------------------


class BearerAuth:
    """Pure ASGI middleware (a BaseHTTPMiddleware would buffer the SSE responses): every
    HTTP request but the open paths needs `Authorization: Bearer <token>`, else 401."""

    def __init__(
        self, app: ASGIApp, token: str, open_paths: Sequence[str] = (HEALTH_PATH,)
    ) -> None:
        self.app = app
        self._expected = token.encode("utf-8")
        self._open = frozenset(open_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self._open:
            await self.app(scope, receive, send)
            return
        presented = _bearer(scope)
        # compare_digest: the time taken must not tell how much of a guess was right.
        if presented is None or not hmac.compare_digest(presented, self._expected):
            why = "missing" if presented is None else "wrong"
            log.warning("refused %s %s: %s bearer token", scope["method"], scope["path"], why)
            await _unauthorized(why)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _bearer(scope: Scope) -> bytes | None:
    headers: list[tuple[bytes, bytes]] = scope["headers"]
    for name, value in headers:
        if name == b"authorization":
            scheme, _, credentials = value.partition(b" ")
            if scheme.lower() == b"bearer" and credentials.strip():
                return credentials.strip()
            return None
    return None


def _unauthorized(why: str) -> Response:
    body = {
        "error": "unauthorized",
        "message": f"{why} bearer token: send the header `Authorization: Bearer <token>` "
        "with the server's HEXLOCAL_HTTP_TOKEN",
    }
    return Response(
        json.dumps(body),
        status_code=401,
        media_type="application/json",
        headers={"WWW-Authenticate": 'Bearer realm="hexlocal"'},
    )


class StartingService(Protocol):
    """The server's service host, as the health check sees it."""

    def ready(self) -> Hexlocal | None: ...

    def failed(self) -> bool: ...


class ServiceSlot(Protocol):
    """Where the running service host is found (empty before the lifespan and after)."""

    @property
    def host(self) -> StartingService | None: ...


def add_health_route(server: FastMCP[Any], slot: ServiceSlot, *, version: str) -> None:
    """`GET /health`: 200 when the service answers, 503 while it starts or if it failed.

    The body names no path, token or setting: anyone who can reach the port may read it.
    """

    @server.custom_route(HEALTH_PATH, methods=["GET"])
    async def health(_request: Request) -> Response:
        body: dict[str, Any] = {
            "status": "starting",
            "version": version,
            "database": "starting",
            "packages": None,
        }
        host = slot.host
        service = host.ready() if host is not None else None
        if service is not None:
            try:
                body["packages"] = len(service.list_packages())
                body["database"] = "ok"
            except Exception:
                log.exception("the health check could not read the index")
                body["database"] = "error"
        elif host is not None and host.failed():
            body["database"] = "error"  # the cause is in the log
        body["status"] = "ok" if body["database"] == "ok" else body["database"]
        return JSONResponse(body, status_code=200 if body["status"] == "ok" else 503)


def build_app(server: FastMCP[Any], settings: Settings, options: HttpOptions) -> ASGIApp:
    from starlette.middleware import Middleware

    token = settings.http_token.reveal()
    middleware = [Middleware(BearerAuth, token=token)] if token else []
    return server.http_app(
        path=MCP_PATH,
        transport="http",
        middleware=middleware,
        stateless_http=True,
        # Without a token, a web page could reach a loopback server through DNS rebinding;
        # fastmcp's Host/Origin guard stops that. With a token it is moot, and a reverse
        # proxy's Host header must not be refused.
        host_origin_protection="auto" if not token else False,
    )


# -- running --------------------------------------------------------------------------------------


class _Server(uvicorn.Server):
    """uvicorn's server, except that a stop signal ends the process with code 0: uvicorn
    re-raises the captured signal after its graceful shutdown, which would make every clean
    SIGTERM look like a crash (exit -15) to systemd and Docker."""

    def __init__(self, config: uvicorn.Config, grace_s: float) -> None:
        super().__init__(config)
        self.grace_s = grace_s

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        handled = (signal.SIGINT, signal.SIGTERM)
        original = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)

    def handle_exit(self, sig: int, frame: Any) -> None:
        if not self.should_exit:
            log.info("signal %s: stopping (in-flight calls get %.1f s)", sig, self.grace_s)
            loop = asyncio.get_running_loop()  # the handler runs on the loop's (main) thread
            loop.call_soon_threadsafe(loop.call_later, self.grace_s - 0.5, _end_streams)
        super().handle_exit(sig, frame)


def _hold_streams_open() -> None:
    """Keep SSE responses (a tool call's answer) open through the graceful shutdown.

    sse-starlette closes every stream the moment uvicorn sees a stop signal, which would
    cut each in-flight call off with no answer; its documented opt-out leaves the closing
    to us (`_end_streams`, just before uvicorn's own grace runs out).
    """
    from sse_starlette.sse import AppStatus

    AppStatus.enable_automatic_graceful_drain = False  # what disable_...() does, typed


def _end_streams() -> None:
    from sse_starlette.sse import AppStatus

    AppStatus.should_exit = True


def bind(options: HttpOptions) -> socket.socket:
    """The listening socket, bound before the service is built so a taken port fails fast."""
    family = socket.AF_INET6 if ":" in options.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((options.host.strip("[]"), options.port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


async def serve(app: ASGIApp, server: FastMCP[Any], sock: socket.socket, *, grace_s: float) -> None:
    config = uvicorn.Config(
        app,
        lifespan="on",
        log_config=None,  # uvicorn's own config sends access logs to stdout
        timeout_graceful_shutdown=max(1, round(grace_s)),
        ws="none",
    )
    # The outer lifespan entry (as fastmcp's run_http_async does) closes the service even
    # when a second signal makes uvicorn skip its own lifespan shutdown.
    _hold_streams_open()
    async with server._lifespan_manager():
        await _Server(config, grace_s).serve(sockets=[sock])
