"""`hexlocal index-docs`: index the project's own markdown, once or on every save.

Indexing is incremental (see `hexlocal_core.usecases.project_docs`): only chunk text never seen
before is embedded. `--watch` re-indexes when a markdown file under the given paths
changes; changes arriving within the debounce window make one run. SIGINT (Ctrl-C) and
SIGTERM set a stop event the watcher polls, so the process ends cleanly with exit 0
after any run in progress has committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape
from rich.table import Table

from hexlocal_cli import common

if TYPE_CHECKING:
    from hexlocal_core.service import Hexlocal
    from hexlocal_core.usecases.project_docs import ProjectIndexReport

DEBOUNCE_MS = 400  # an editor's save (write, rename, chmod) lands well within this
COUNTS = ("files", "chunks", "unchanged", "added", "removed", "changed", "embedded")

OnReport = Callable[["ProjectIndexReport", set[str]], None]
OnError = Callable[[Exception], None]


@click.command(name="index-docs")
@click.argument(
    "paths",
    metavar="[PATH]...",
    nargs=-1,
    type=click.Path(exists=True, path_type=Path),
)
@click.option("--watch", is_flag=True, help="Keep running and re-index on every save.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the report as JSON (with --watch: one JSON line per run).",
)
def index_docs_command(paths: tuple[Path, ...], watch: bool, as_json: bool) -> None:
    """Index the project's own docs so they can be searched like a package.

    PATHs are markdown files or folders inside PROJECT_ROOT (default: README.md, docs/
    and guides/). Only changed text is embedded again; deleted files leave the index.
    With --watch, Ctrl-C stops watching (exit 0).
    """
    settings = common.load_settings()
    targets = _targets(settings.project_root, paths)

    async def once(service: Hexlocal) -> ProjectIndexReport:
        return await service.index_project_docs(targets)

    if not watch:
        report = common.with_service(once)
        if as_json:
            common.emit_json(report.to_dict())
        else:
            _table(report)
            if not report.files:
                where = _describe(settings.project_root, targets)
                common.err().print(f"No markdown found in {escape(where)}.")
        return

    async def watching(service: Hexlocal) -> None:
        first = await once(service)
        _show(first, set(), as_json=as_json)
        stop = asyncio.Event()
        # The handlers first, then "Watching": a Ctrl-C that follows the line must find
        # them (a process started with SIGINT ignored, as under some parents, would
        # otherwise drop it and watch forever).
        with _stop_on_signals(stop):
            common.err().print(f"Watching {escape(_describe(settings.project_root, targets))}")
            await watch_docs(
                service,
                targets,
                root=settings.project_root,
                stop_event=stop,
                on_report=lambda r, changed: _show(r, changed, as_json=as_json),
                on_error=_show_error,
            )

    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C before the watcher took over
        common.with_service(watching)
    common.err().print("Stopped watching.")


def _targets(root: Path, paths: Sequence[Path]) -> list[Path] | None:
    """Absolute paths (relative ones are from the working directory, as in any shell)."""
    if not paths:
        return None  # the defaults: README.md, docs/, guides/
    resolved_root = root.resolve()
    out = []
    for path in paths:
        absolute = path.resolve()
        if not absolute.is_relative_to(resolved_root):
            raise click.BadParameter(
                f"{path} is outside PROJECT_ROOT ({resolved_root}); pass paths inside the project",
                param_hint="PATH",
            )
        out.append(absolute)
    return out


def _describe(root: Path, targets: Sequence[Path] | None) -> str:
    if targets is None:
        return f"README.md, docs/ and guides/ under {root}"
    return ", ".join(str(t) for t in targets)


# -- watching -------------------------------------------------------------------------------


class MarkdownFilter:
    """Accepts changes to markdown files under the targets (or a removed folder there)."""

    def __init__(self, root: Path, targets: Sequence[Path] | None) -> None:
        from hexlocal_core.ingest.markdown_files import DEFAULT_PATHS

        self.root = root.resolve()
        given = DEFAULT_PATHS if targets is None else targets
        self.targets = [t if t.is_absolute() else self.root / t for t in given]

    def __call__(self, change: Any, path: str) -> bool:
        from watchfiles import Change

        from hexlocal_core.ingest.markdown_files import EXTENSIONS, SKIP_DIRS

        candidate = Path(path)
        if not any(candidate == t or candidate.is_relative_to(t) for t in self.targets):
            return False
        inside = (
            candidate.relative_to(self.root).parts if candidate.is_relative_to(self.root) else ()
        )
        if any(part.startswith(".") or part in SKIP_DIRS for part in inside):
            return False
        # A deleted folder has no suffix but takes its markdown files with it.
        return candidate.suffix.lower() in EXTENSIONS or change == Change.deleted


async def watch_docs(
    service: Hexlocal,
    targets: Sequence[Path] | None,
    *,
    stop_event: asyncio.Event,
    on_report: OnReport,
    on_error: OnError,
    debounce_ms: int = DEBOUNCE_MS,
    root: Path | None = None,
) -> int:
    """Re-index after each debounced batch of changes until `stop_event`; returns the runs.

    The project root is watched (not only the targets), so a docs/ folder created after
    the start, or a file an editor saves by renaming over it, is still seen. `root`
    defaults to the service's project root.
    """
    from watchfiles import awatch

    from hexlocal_core.errors import HexlocalError

    if root is None:  # the project the service was built for
        root = Path(service.diagnostics().project_root)
    runs = 0
    async for changes in awatch(
        root,
        watch_filter=MarkdownFilter(root, targets),
        debounce=debounce_ms,
        stop_event=stop_event,
    ):
        changed = {path for _change, path in changes}
        try:
            report = await service.index_project_docs(targets)
        except HexlocalError as exc:
            on_error(exc)  # e.g. the embedder went away: say so and keep watching
            continue
        runs += 1
        on_report(report, changed)
    return runs


@contextlib.contextmanager
def _stop_on_signals(stop: asyncio.Event) -> Iterator[None]:
    loop = asyncio.get_running_loop()
    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not on every platform
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
    try:
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


# -- output ---------------------------------------------------------------------------------


def _table(report: ProjectIndexReport) -> None:
    # One row per count, not one column: nine columns do not fit 80 (they were cut).
    table = Table("", "", title="Project docs", show_header=False)
    data = report.to_dict()
    for key in COUNTS:
        table.add_row(key, f"{data[key]:,}", style="bold" if key == "embedded" else None)
    skipped = ", ".join(f"{k}: {v}" for k, v in sorted(report.skipped.items())) or "-"
    table.add_row("skipped", escape(skipped))
    table.add_row("seconds", f"{report.seconds:g}")
    common.out().print(table)
    if report.files:
        common.out().print("Search them with `hexlocal search --project QUERY`.")


def _show(report: ProjectIndexReport, changed: set[str], *, as_json: bool) -> None:
    if as_json:
        # One compact document per line: a consumer reads the stream line by line.
        click.echo(json.dumps({**report.to_dict(), "changed_paths": sorted(changed)}))
        return
    stamp = time.strftime("%H:%M:%S")
    counts = ", ".join(f"{getattr(report, k)} {k}" for k in COUNTS[2:])
    common.out().print(f"{stamp} {report.files} files, {report.chunks} chunks: {counts}")


def _show_error(exc: Exception) -> None:
    common.err().print(f"[red]indexing failed[/]: {escape(str(exc))}; still watching")
