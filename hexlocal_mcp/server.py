"""The hexlocal MCP server: fastmcp over stdio, a thin face over `hexlocal_core.service`.

Startup must answer `initialize` fast, and fastmcp runs the lifespan before it reads
stdin. So the lifespan only starts a background task that builds the service (in a
worker thread: importing the engine and opening SQLite cost about a second) and then
loads the models; tools await the built service, never the models (a search while the
models load simply loads them on first use). Nothing but protocol goes to stdout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError, ValidationError
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools.base import ToolResult
from mcp_types import CallToolRequestParams
from pydantic import ValidationError as PydanticValidationError

from hexlocal_core.config import Settings
from hexlocal_core.errors import HexlocalError
from hexlocal_mcp import logs, tools

if TYPE_CHECKING:
    from hexlocal_core.service import Hexlocal

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
    # building gets closed rather than abandoned in its worker thread.
    CLOSE_WAIT_S = 10.0

    def __init__(self, factory: ServiceFactory) -> None:
        self._factory = factory
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
        log.info("hexlocal service ready (database %s)", service.settings.database_path)
        return service

    async def _warm_up(self, service: Hexlocal) -> None:
        try:
            await service.warm_up()
        except Exception:  # a model that fails to load must not take the server down
            log.exception("loading the models failed; searches will retry on first use")

    async def service(self) -> Hexlocal:
        """The built service; a failed start becomes a tool error naming the cause."""
        if self._boot is None:
            raise ToolError("the hexlocal service was never started; restart the MCP server")
        try:
            # shield: a cancelled tool call must not cancel the shared start-up.
            return await asyncio.shield(self._boot)
        except HexlocalError as exc:
            raise ToolError(f"hexlocal could not start: {exc}") from exc
        except Exception as exc:  # already logged with its traceback by _build
            raise ToolError(
                f"hexlocal could not start ({type(exc).__name__}: {exc}); see the server log "
                "and run `hexlocal doctor`"
            ) from exc

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


def argument_message(tool: str, error: PydanticValidationError) -> str:
    problems = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        got = "" if item["type"] == "missing" else f" (got {_short(item['input'])})"
        problems.append(f"{where}: {item['msg']}{got}")
    return f"invalid arguments for {tool}: " + "; ".join(problems) + ". Fix them and call again."


def _short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def default_factory(settings: Settings) -> ServiceFactory:
    def factory() -> Hexlocal:
        from hexlocal_core.service import build  # imported here: it is the slow part

        return build(settings)

    return factory


def create_server(
    service_factory: ServiceFactory | None = None, *, settings: Settings | None = None
) -> FastMCP[Any]:
    """The FastMCP server; tests inject `service_factory` to use fakes for remote ports."""
    factory = service_factory or default_factory(settings or Settings.from_env())

    @contextlib.asynccontextmanager
    async def lifespan(_server: FastMCP[Any]) -> AsyncIterator[dict[str, Any]]:
        host = ServiceHost(factory)
        host.start()
        try:
            yield {tools.HOST_KEY: host}
        finally:
            await host.close()

    mcp: FastMCP[Any] = FastMCP(
        "hexlocal",
        instructions=INSTRUCTIONS,
        version=_version(),
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


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hexlocal")
    except PackageNotFoundError:
        return "0+unknown"


def main() -> None:
    """The `hexlocal-mcp` console script: serve on stdio until the client closes stdin."""
    logs.bootstrap()
    settings = Settings.from_env()
    logs.configure(settings)
    server = create_server(settings=settings)
    with contextlib.suppress(KeyboardInterrupt):
        server.run(transport="stdio", show_banner=False)
