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
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

import attrs
import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hexlocal_core.config import Settings
from hexlocal_core.errors import HexlocalError, StoreError, UserInputError
from hexlocal_core.model import DownloadProgress

if TYPE_CHECKING:
    from hexlocal_core.service import Hexlocal

T = TypeVar("T")
log = logging.getLogger("hexlocal.cli")

# A CLI run has no client to answer early to: when the process exits its ingestion job
# dies with it, so commands wait for indexing to finish (progress shows on stderr), the
# vectors included (an answer by keyword would leave the package partial, and the next
# run would download it again to finish).
CLI_INGEST_WAIT_MS = 3_600_000


def load_settings() -> Settings:
    """Settings from the environment, with the CLI's own ingestion wait."""
    return attrs.evolve(
        Settings.from_env(), ingest_timeout_ms=CLI_INGEST_WAIT_MS, answer_while_embedding=False
    )


def build_service(settings: Settings, *, load_models: bool = True) -> Hexlocal:
    """The composition root as the CLI uses it; tests replace this to inject fakes.
    A model's first-need download reports on stderr (stdout stays the answer)."""
    from hexlocal_core.service import build

    return build(settings, load_models=load_models, model_progress=download_progress())


def download_progress() -> DownloadProgress:
    """Prints a model download's progress on stderr, at most once per 10% (and at the end)."""
    shown: dict[str, int] = {}

    def report(message: str, done: int, total: int) -> None:
        step = done * 10 // total if total else 0
        key = message.split(":")[0]
        if shown.get(key) == step and done != total:
            return
        shown[key] = step
        size = f" ({done / 1e6:.0f}/{total / 1e6:.0f} MB)" if total else ""
        err().print(f"{escape(message)}{size}", highlight=False)

    return report


def with_service(
    work: Callable[[Hexlocal], Awaitable[T]],
    *,
    load_models: bool = True,
    settings: Settings | None = None,
) -> T:
    """Build the service, run `work` on it in a fresh event loop, close it, translate errors.

    `settings` defaults to `load_settings()` (`eval` passes its own database). The
    service's `start()` (resuming interrupted jobs) is for long-lived processes; a
    command that resumed jobs would only cancel them again when it exits.
    """
    with translated():
        return run_service(work, settings or load_settings(), load_models=load_models)


def run_service(
    work: Callable[[Hexlocal], Awaitable[T]], settings: Settings, *, load_models: bool = True
) -> T:
    """`with_service` without the translation: domain errors reach the caller (`doctor`)."""

    async def main() -> T:
        service = open_service(settings, load_models=load_models)
        async with service:
            return await work(service)

    return asyncio.run(main())


def open_service(settings: Settings, *, load_models: bool = True) -> Hexlocal:
    """`build_service`, with a failure to open the database named as one."""
    try:
        return build_service(settings, load_models=load_models)
    except StoreError as exc:
        if type(exc) is not StoreError:
            raise  # a specific store error (SchemaTooNew ...) already names its fix
        raise StoreError(open_failure(settings, exc)) from exc
    except HexlocalError:
        raise  # the core's message already names the fix
    except Exception as exc:
        # Trigger: the store raised something the core did not translate (a damaged
        # file, a full disk). Why: the user needs the path and a way out, not a type.
        log.debug("building the service failed", exc_info=True)
        raise StoreError(open_failure(settings, exc)) from exc


def open_failure(settings: Settings, exc: BaseException) -> str:
    """The one-line message for a database that cannot be opened (also used by MCP)."""
    reason = " ".join(str(exc).split()) or type(exc).__name__
    return (
        f"cannot open the index database {settings.database_path} ({reason}); point "
        "DATABASE_PATH at a writable file, or move the damaged one away and run the command "
        "again (`hexlocal doctor` checks the setup)"
    )


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Domain errors become click's: bad arguments exit 2, other failures exit 1.

    Anything else is a bug or an untranslated fault: one line on stderr (exit 1), the
    traceback only in the debug log (`-vv`), never raw on the terminal.
    """
    try:
        yield
    except UserInputError as exc:
        raise click.UsageError(one_line(exc), ctx=click.get_current_context(silent=True)) from exc
    except HexlocalError as exc:
        raise click.ClickException(one_line(exc)) from exc
    except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort, SystemExit):
        raise
    except Exception as exc:
        log.debug("unexpected error", exc_info=True)
        raise click.ClickException(
            f"unexpected {type(exc).__name__}: {one_line(exc)} (run with -vv for the "
            "traceback, and `hexlocal doctor` to check the setup)"
        ) from exc


def one_line(exc: BaseException, limit: int = 500) -> str:
    """An error message on one line, cut to `limit` characters (bad input is never echoed)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    # A surrogate (an argument that was not UTF-8) would make printing the error fail.
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_argv(args: Sequence[str]) -> None:
    """Refuse arguments that are not valid UTF-8 before any command sees them.

    Python hands such bytes over as lone surrogates (surrogateescape); they would fail
    much later, in SQLite or when printed, with an error naming nothing.
    """
    for position, arg in enumerate(args, start=1):
        bad = next((i for i, c in enumerate(arg) if "\ud800" <= c <= "\udfff"), None)
        if bad is not None:
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            raise click.UsageError(
                f"argument {position} ('{shown[:60]}') is not valid UTF-8 at character "
                f"{bad + 1}; pass UTF-8 text (check the terminal's or the script's encoding)"
            )


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


def out(*, soft_wrap: bool = False) -> Console:
    """Human output. Built per call so click's test runner captures it.

    The width is the terminal's, else COLUMNS, else 80, and lines wrap to it: tables and
    reports must read at 80 columns. `soft_wrap` leaves long lines to the terminal
    (search hits: a URL stays one piece to click or copy).
    """
    return Console(file=sys.stdout, highlight=False, soft_wrap=soft_wrap)


def table(*headers: str, first_wraps: bool = False, **options: Any) -> Table:
    """A table whose first column (the name) does not wrap unless `first_wraps`; the others
    fold when narrow, so the table stays within the console's width."""
    table = Table(**options)
    for i, header in enumerate(headers):
        table.add_column(header, no_wrap=i == 0 and not first_wraps, overflow="fold")
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
