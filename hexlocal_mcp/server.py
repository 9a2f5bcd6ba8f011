"""The hexlocal MCP server: fastmcp over stdio, a thin face over `hexlocal_core.service`.

Stdio is hexlocal's own transport (`stdio.py`): every line gets an answer, and the
process ends within EXIT_GRACE_S of stdin closing. Startup must answer `initialize`
fast, and fastmcp runs the lifespan before it reads stdin. So the lifespan only starts a
background task that builds the service (in a worker thread: importing the engine and
opening SQLite cost about a second) and then loads the models; tools await the built
service, never the models (a search while the models load simply loads them on first
use). Nothing but protocol goes to stdout.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import sys
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from fastmcp import FastMCP
from fastmcp.exceptions import ToolError, ValidationError
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools.base import ToolResult
from mcp_types import CallToolRequestParams
from pydantic import ValidationError as PydanticValidationError

from hexlocal_core.bounds import short_repr
from hexlocal_core.config import Settings
from hexlocal_core.errors import HexlocalError, StoreError
from hexlocal_mcp import logs, stdio, tools

if TYPE_CHECKING:
    from hexlocal_core.service import Hexlocal
    from hexlocal_mcp.http import HttpOptions

log = logging.getLogger("hexlocal.mcp")

ServiceFactory = Callable[[], "Hexlocal"]

INSTRUCTIONS = """\
hexlocal answers questions about Elixir Hex packages from the docs of the exact version the
project locks in mix.lock. Every docs call names ONE package; for a question about several
packages, call once per package. Write queries in the package's own vocabulary (module,
function and option names). Read the `notices` of each answer before its results. Use
get_docs for an exact identifier, search_docs for everything else. remember takes a list:
send all of a session's lessons in one call; recall them at the start of related work."""


class ServiceHost:
    """Owns the service for the server's lifetime: built in the background, awaited by tools."""

    # Shutdown waits this long for a start-up still in progress, so the service it is
    # building gets closed rather than abandoned in its worker thread. Short: the server
    # must be gone within 2 s of its client closing stdin (see EXIT_GRACE_S).
    CLOSE_WAIT_S = 1.0

    def __init__(self, factory: ServiceFactory, *, database_path: Path | str | None = None) -> None:
        self._factory = factory
        self._database_path = database_path
        self._boot: asyncio.Task[Hexlocal] | None = None
        self._warm: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._boot = asyncio.get_running_loop().create_task(self._build(), name="hexlocal-boot")

    async def _build(self) -> Hexlocal:
        try:
            service = await asyncio.to_thread(self._factory)
        except Exception:
            log.exception("building the hexlocal service failed")
            raise
        try:
            await service.start()
        except BaseException:
            log.exception("starting the hexlocal service failed")
            await service.aclose()
            raise
        # Models load after readiness: tools must not wait for them (the service loads lazily).
        self._warm = asyncio.get_running_loop().create_task(
            self._warm_up(service), name="hexlocal-warm"
        )
        log.info("hexlocal service ready")
        return service

    async def _warm_up(self, service: Hexlocal) -> None:
        try:
            await service.warm_up()
        except Exception:  # a model that fails to load must not take the server down
            log.exception("loading the models failed; searches will retry on first use")

    def ready(self) -> Hexlocal | None:
        """The service if it has started, else None (still starting, or failed: see `failed`)."""
        boot = self._boot
        if boot is None or not boot.done() or boot.cancelled() or boot.exception() is not None:
            return None
        return boot.result()

    def failed(self) -> bool:
        boot = self._boot
        return (
            boot is not None and boot.done() and (boot.cancelled() or boot.exception() is not None)
        )

    async def service(self) -> Hexlocal:
        """The built service; a failed start becomes a tool error naming the cause."""
        if self._boot is None:
            raise ToolError("the hexlocal service was never started; restart the MCP server")
        try:
            # shield: a cancelled tool call must not cancel the shared start-up.
            return await asyncio.shield(self._boot)
        except StoreError as exc:
            if type(exc) is not StoreError:  # SchemaTooNew & co. name their own fix
                raise ToolError(f"hexlocal could not start: {exc}") from exc
            raise ToolError(self._start_failure(exc)) from exc
        except HexlocalError as exc:
            raise ToolError(f"hexlocal could not start: {exc}") from exc
        except Exception as exc:  # already logged with its traceback by _build
            raise ToolError(self._start_failure(exc)) from exc

    def _start_failure(self, exc: Exception) -> str:
        """One line naming the database and the fix (start-up fails at opening it)."""
        reason = " ".join(str(exc).split())[:300] or type(exc).__name__
        if self._database_path is None:
            where = "its database"
        else:
            where = f"its index database {self._database_path}"
        kind = "" if isinstance(exc, StoreError) else f"{type(exc).__name__}: "
        return (
            f"hexlocal could not start: cannot open {where} ({kind}{reason}). "
            "Point DATABASE_PATH at a writable file (or DATABASE_URL at a reachable PostgreSQL), "
            "or move a damaged file away, then restart "
            "the MCP server; `hexlocal doctor` checks the setup."
        )

    async def close(self) -> None:
        if self._warm is not None and not self._warm.done():
            self._warm.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._warm
        boot = self._boot
        if boot is None:
            return
        await asyncio.wait({boot}, timeout=self.CLOSE_WAIT_S)
        if not boot.done():
            boot.cancel()
        try:
            service = await boot
        except (asyncio.CancelledError, Exception):
            return  # it never started (a failure was logged by _build)
        await service.aclose()


class ArgumentErrors(Middleware):
    """Turn pydantic's argument errors into one actionable line per bad argument."""

    async def on_call_tool(
        self,
        context: MiddlewareContext[CallToolRequestParams],
        call_next: CallNext[CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        try:
            return await call_next(context)
        except ValidationError as exc:
            cause = exc.__cause__
            if not isinstance(cause, PydanticValidationError):
                raise
            raise ToolError(argument_message(context.message.name, cause)) from exc


# Problems named in one error; a list of 13 bad ids made a 2,000-character line that says
# the same thing 13 times (found by the argument fuzzer).
MAX_PROBLEMS = 3


def argument_message(tool: str, error: PydanticValidationError) -> str:
    problems = []
    items = error.errors(include_url=False)
    for item in items[:MAX_PROBLEMS]:
        where = ".".join(_loc_part(part) for part in item["loc"]) or "arguments"
        got = "" if item["type"] == "missing" else f" (got {_described(item['input'])})"
        message = _PLAIN_WORDS.get(item["type"], item["msg"])
        problems.append(f"{where}: {message}{got}")
    if len(items) > MAX_PROBLEMS:
        problems.append(f"and {len(items) - MAX_PROBLEMS} more")
    return f"invalid arguments for {tool}: " + "; ".join(problems) + ". Fix them and call again."


# pydantic's words where they do not say what to do.
_PLAIN_WORDS = {
    "string_unicode": (
        "holds an unpaired UTF-16 surrogate (a character cut in half, e.g. inside an emoji); "
        "send valid Unicode text"
    ),
}


def _loc_part(part: object) -> str:
    """An argument name as sent; an odd one (a newline, 1 MB, a surrogate) is quoted short."""
    text = str(part)
    if text.isidentifier() or text.isdigit():
        return text
    return short_repr(text, 40).encode("utf-8", "backslashreplace").decode("utf-8")


def _described(value: object) -> str:
    """What was sent, short: a long text by its length, never echoed whole."""
    if isinstance(value, str | list) and len(value) > 80:
        unit = "characters" if isinstance(value, str) else "items"
        return f"{len(value):,} {unit}"
    return short_repr(value)


def default_factory(settings: Settings) -> ServiceFactory:
    def factory() -> Hexlocal:
        from hexlocal_core.service import build  # imported here: it is the slow part

        return build(settings)

    return factory


class HostSlot:
    """Where the running lifespan's ServiceHost can be found outside a tool call (the HTTP
    health endpoint reads it); empty before the lifespan starts and after it ends."""

    def __init__(self) -> None:
        self.host: ServiceHost | None = None


def create_server(
    service_factory: ServiceFactory | None = None,
    *,
    settings: Settings | None = None,
    slot: HostSlot | None = None,
) -> FastMCP[Any]:
    """The FastMCP server; tests inject `service_factory` to use fakes for remote ports."""
    if service_factory is None:
        settings = settings or Settings.from_env()
        factory = default_factory(settings)
    else:
        factory = service_factory
    database_path = settings.database_location if settings is not None else None

    @contextlib.asynccontextmanager
    async def lifespan(_server: FastMCP[Any]) -> AsyncIterator[dict[str, Any]]:
        host = ServiceHost(factory, database_path=database_path)
        host.start()
        if slot is not None:
            slot.host = host
        try:
            yield {tools.HOST_KEY: host}
        finally:
            if slot is not None:
                slot.host = None
            await host.close()

    mcp: FastMCP[Any] = FastMCP(
        "hexlocal",
        instructions=INSTRUCTIONS,
        version=server_version(),
        lifespan=lifespan,
        middleware=[ArgumentErrors()],
        mask_error_details=True,  # the tools translate errors; nothing else may leak internals
        on_duplicate="error",
    )
    for spec in tools.TOOLS:
        mcp.tool(
            spec.fn,
            name=spec.name,
            title=spec.title,
            annotations=spec.annotations(),
            output_schema=spec.output_schema,
        )
    return mcp


def server_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hexlocal")
    except PackageNotFoundError:
        return "0+unknown"


USAGE = """\
Usage: hexlocal-mcp [--help | --version | --http [--host H] [--port P] [--no-auth]]

  hexlocal's MCP server on stdio: an MCP client (Claude Code, Cursor, ...) starts it and
  talks JSON-RPC over stdin/stdout until it closes stdin. Logs go to stderr (and to
  MCP_LOG_FILE). Settings come from the environment: PROJECT_ROOT, DATABASE_PATH, ...;
  `hexlocal doctor` shows them resolved. `hexlocal serve` is the same server.

  With --http it serves the same tools over MCP's streamable HTTP at /mcp until SIGTERM,
  with a bearer token from HEXLOCAL_HTTP_TOKEN (or HEXLOCAL_HTTP_TOKEN_FILE) and an open
  GET /health; see docs/deployment.md.

Options:
  -h, --help  Show this message and exit.
  --version   Show the version and exit.
  --http      Serve over streamable HTTP instead of stdio.
  --host H    Address to bind with --http (default 127.0.0.1).
  --port P    Port to bind with --http (default 8765; 0 picks a free one).
  --no-auth   With --http on a loopback address only: no token required.
"""


def main(argv: Sequence[str] | None = None) -> None:
    """The `hexlocal-mcp` console script: serve on stdio until the client closes stdin.

    `--help` and `--version` print and exit instead: a person trying the command must not
    be left facing a silent server waiting for JSON-RPC. Any other argument is refused
    (exit 2), since the server takes its settings from the environment only.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if "--http" in args:
        raise SystemExit(_serve_http(args))
    if args:
        raise SystemExit(_answer_argv(args))
    logs.bootstrap()
    settings = Settings.from_env()
    logs.configure(settings)
    log.info("hexlocal MCP server starting (database %s)", settings.database_location)
    server = create_server(settings=settings)
    with contextlib.suppress(KeyboardInterrupt), stdio.claimed_stdio() as (in_fd, out_fd):
        anyio.run(
            functools.partial(stdio.serve, server, in_fd=in_fd, out_fd=out_fd, on_eof=exit_soon)
        )


def _serve_http(args: Sequence[str]) -> int:
    import argparse

    from hexlocal_mcp import http

    parser = argparse.ArgumentParser(prog="hexlocal-mcp", add_help=False)
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--host", default=http.DEFAULT_HOST)
    parser.add_argument("--port", type=int, default=http.DEFAULT_PORT)
    parser.add_argument("--no-auth", action="store_true")
    parsed = parser.parse_args(list(args))  # a bad argument: usage on stderr, exit 2
    if not 0 <= parsed.port <= 65535:
        parser.error(f"--port {parsed.port} is not a port (0-65535)")
    return _run_http(http.HttpOptions(host=parsed.host, port=parsed.port, no_auth=parsed.no_auth))


def _run_http(options: HttpOptions) -> int:
    """Serve over HTTP until SIGTERM/SIGINT; the exit code (0 after a clean stop).

    Here and not in http.py, which holds the transport's parts: this builds the server
    they carry, and http.py imports nothing of this module."""
    from hexlocal_mcp import http

    logs.bootstrap()
    settings = Settings.from_env()
    logs.configure(settings)
    problem = http.refusal(settings, options)
    if problem is not None:
        sys.stderr.write(f"Error: {problem}\n")
        return 2
    try:
        sock = http.bind(options)
    except OSError as exc:
        sys.stderr.write(
            f"Error: cannot listen on {options.host}:{options.port} ({exc.strerror or exc}); "
            "pick another --port or stop the process that holds it\n"
        )
        return 1
    host, port = sock.getsockname()[:2]
    auth = "bearer token" if settings.http_token else "NO AUTH (loopback only)"
    log.info(
        "hexlocal MCP server on http://%s:%s%s (%s; database %s)",
        f"[{host}]" if ":" in host else host,
        port,
        http.MCP_PATH,
        auth,
        settings.database_location,
    )
    if not http.is_loopback(options.host):
        log.warning(
            "listening on %s in plain HTTP: put a TLS reverse proxy in front (docs/deployment.md)",
            options.host,
        )
    slot = HostSlot()
    server = create_server(settings=settings, slot=slot)
    http.add_health_route(server, slot, version=server_version())
    app = http.build_app(server, settings, options)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(http.serve(app, server, sock, grace_s=settings.http_shutdown_grace_s))
    log.info("hexlocal MCP server stopped")
    # Work in a worker thread cannot be cancelled and would hold the interpreter open.
    exit_soon()
    return 0


def _answer_argv(args: Sequence[str]) -> int:
    """The exit code for a command line with arguments (help and version go to stdout)."""
    if args[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0
    if args[0] == "--version":
        sys.stdout.write(f"hexlocal-mcp, version {server_version()}\n")
        return 0
    shown = args[0].encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    sys.stderr.write(
        f"{USAGE.splitlines()[0]}\nError: unexpected argument {shown[:60]!r}; the server "
        "takes no arguments (settings come from the environment, see `hexlocal doctor`)\n"
    )
    return 2


# After stdin closes, the clean shutdown (cancel jobs, close the service) normally takes
# well under a second. Work in a thread cannot be cancelled, and the interpreter waits for
# such threads at exit: past this grace the process ends anyway. Nothing is lost: every
# write is one transaction, and the crash-safety tests SIGKILL mid-ingest.
EXIT_GRACE_S = 1.5


def exit_soon() -> None:
    """Arm a watchdog that ends the process EXIT_GRACE_S after the client went away."""
    timer = threading.Timer(EXIT_GRACE_S, _hard_exit)
    timer.daemon = True
    timer.start()


def _hard_exit() -> None:
    log.warning("shutdown took over %.1f s after stdin closed; exiting now", EXIT_GRACE_S)
    for name in logs.LOGGERS:
        for handler in logging.getLogger(name).handlers:
            with contextlib.suppress(Exception):
                handler.flush()
    os._exit(0)
