"""What every command shares: settings and the service, running async work, translating
errors into exit codes, JSON output and rich consoles.

Exit codes: 0 ok, 1 failure (any other `HexlocalError`), 2 usage error (click's own
argument errors and `UserInputError`). With `--json`, stdout carries one JSON document and
nothing else; progress, notices for people and logs go to stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

import attrs
import click
from rich.console import Console
from rich.table import Table

from hexlocal_core.config import Settings
from hexlocal_core.errors import HexlocalError, UserInputError

if TYPE_CHECKING:
    from hexlocal_core.service import Hexlocal

T = TypeVar("T")

# A CLI run has no client to answer early to: when the process exits its ingestion job
# dies with it, so commands wait for indexing to finish (progress shows on stderr).
CLI_INGEST_WAIT_MS = 3_600_000


def load_settings() -> Settings:
    """Settings from the environment, with the CLI's own ingestion wait."""
    return attrs.evolve(Settings.from_env(), ingest_timeout_ms=CLI_INGEST_WAIT_MS)


def build_service(settings: Settings, *, load_models: bool = True) -> Hexlocal:
    """The composition root as the CLI uses it; tests replace this to inject fakes."""
    from hexlocal_core.service import build

    return build(settings, load_models=load_models)


def with_service(work: Callable[[Hexlocal], Awaitable[T]], *, load_models: bool = True) -> T:
    """Build the service, run `work` on it in a fresh event loop, close it, translate errors.

    The service's `start()` (resuming interrupted jobs) is for long-lived processes; a
    command that resumed jobs would only cancel them again when it exits.
    """

    async def main() -> T:
        service = build_service(load_settings(), load_models=load_models)
        async with service:
            return await work(service)

    with translated():
        return asyncio.run(main())


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Domain errors become click's: bad arguments exit 2, other failures exit 1."""
    try:
        yield
    except UserInputError as exc:
        raise click.UsageError(str(exc), ctx=click.get_current_context(silent=True)) from exc
    except HexlocalError as exc:
        raise click.ClickException(str(exc)) from exc


# -- output -------------------------------------------------------------------------------


def emit_json(data: Any) -> None:
    """One JSON document on stdout (dates and paths as text)."""
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def jsonable(value: Any) -> Any:
    """attrs values (and lists of them) as plain dicts for `emit_json`."""
    if attrs.has(type(value)):
        return attrs.asdict(value)
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def out() -> Console:
    """Human output (tables). Built per call so click's test runner captures it."""
    return Console(file=sys.stdout, highlight=False, soft_wrap=True)


def table(*headers: str, **options: Any) -> Table:
    """A table whose first column (the name) never wraps; the others fold when narrow."""
    table = Table(**options)
    for i, header in enumerate(headers):
        table.add_column(header, no_wrap=i == 0, overflow="fold")
    return table


def err() -> Console:
    """Progress bars, notices and hints: stderr, so `--json` stdout stays clean."""
    return Console(file=sys.stderr, highlight=False)


def print_notices(notices: list[dict[str, Any]], console: Console | None = None) -> None:
    from rich.markup import escape

    console = console or err()
    for notice in notices:
        console.print(
            f"[yellow]notice[/] [bold]{escape(notice['code'])}[/]: {escape(notice['message'])}"
        )


# -- logging ------------------------------------------------------------------------------


class _StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever sys.stderr is at the time (click's test runner swaps it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass


def setup_logging(verbosity: int) -> None:
    """Warnings (or more with -v/-vv) of hexlocal's loggers on stderr, never stdout."""
    level = {0: logging.WARNING, 1: logging.INFO}.get(verbosity, logging.DEBUG)
    logger = logging.getLogger("hexlocal")
    for old in [h for h in logger.handlers if isinstance(h, _StderrHandler)]:
        logger.removeHandler(old)
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level)
