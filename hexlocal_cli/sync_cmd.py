"""`sync`: index every package the project runs (mix.lock's deps, Elixir's own apps).

A CLI process cannot leave work behind (its jobs end with it), so the command waits for
the queue to empty, showing progress on stderr. Interrupted (Ctrl-C), it leaves the rest
queued: the next `hexlocal sync`, or the MCP server's start, carries on. `states_table`
renders package states for `list` too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from hexlocal_cli import common

if TYPE_CHECKING:
    from hexlocal_core.model import PackageState
    from hexlocal_core.service import Hexlocal
    from hexlocal_core.usecases.sync import SyncProgress, SyncReport

REASON_CHARS = 160  # a failure's reason in the table; `--json` has it whole


@click.command(name="sync")
@click.option("--json", "as_json", is_flag=True, help="Print every package's state as JSON.")
@click.option(
    "--keep-failed",
    is_flag=True,
    help="Do not retry packages whose docs were missing last time (network failures are).",
)
def sync_command(as_json: bool, keep_failed: bool) -> None:
    """Index every package mix.lock pins, and Elixir's own apps, at the project's versions.

    One package at a time; what is indexed at its version already is left alone. The MCP
    server does this in the background when it starts (HEXLOCAL_SYNC_ON_START=false turns
    that off; HEXLOCAL_SYNC_ELIXIR=false leaves Elixir's apps out).
    """

    async def work(service: Hexlocal) -> SyncReport:
        with sync_progress(enabled=not as_json) as progress:
            return await service.sync(wait=True, progress=progress, retry_failed=not keep_failed)

    report = common.with_service(work)
    if as_json:
        common.emit_json(report.to_dict())
        return
    common.print_notices([n.to_dict() for n in report.notices])
    if not report.packages:
        common.err().print("Nothing to sync.")
        return
    common.out().print(states_table(report.packages, title=_summary(report)))
    failed = [p for p in report.packages if p.locked and str(p.state) == "failed"]
    if failed:
        raise click.ClickException(
            f"{len(failed)} package(s) could not be indexed (see the table); "
            "`hexlocal sync` tries them again"
        )


def _summary(report: SyncReport) -> str:
    counts: dict[str, int] = {}
    for p in report.packages:
        if p.locked:
            counts[str(p.state)] = counts.get(str(p.state), 0) + 1
    parts = ", ".join(f"{n} {state}" for state, n in counts.items())
    return f"sync: {parts} in {report.seconds:.1f} s"


def states_table(states: Sequence[PackageState], *, title: str | None = None) -> Table:
    """package | version | state | detail: fits 80 columns (the detail folds)."""
    table = common.table("package", "version", "state", "detail", title=title)
    for p in states:
        table.add_row(
            escape(p.name),
            escape(p.locked_version or p.indexed_version or ""),
            str(p.state) if p.locked else f"{p.state} (not locked)",
            escape(_detail(p)),
        )
    return table


def _detail(p: PackageState) -> str:
    state = str(p.state)
    if state == "indexing":
        phase = str(p.phase) if p.phase else "starting"
        if p.chunks_total:
            return f"{phase} {p.chunks_embedded}/{p.chunks_total} chunks"
        return phase
    if state in ("failed", "skipped") or (state == "queued" and p.reason):
        return common.one_line(Exception(p.reason or ""), REASON_CHARS)
    if state == "outdated":
        return f"indexed {p.indexed_version}; `hexlocal sync` switches it"
    if state == "indexed":
        return f"{p.chunks} chunks"
    return ""


@contextlib.contextmanager
def sync_progress(enabled: bool = True) -> Iterator[SyncProgress | None]:
    """A rich progress line per package on stderr, fed by the sync's state updates."""
    if not enabled:
        yield None
        return
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=common.err(),
        transient=True,
    )
    tasks: dict[str, TaskID] = {}

    def update(p: PackageState) -> None:
        task = tasks.get(p.name)
        if task is None:
            task = tasks[p.name] = progress.add_task(p.name, total=None)
        fields: dict[str, Any] = {"description": f"{p.name}: {_detail(p) or p.state}"}
        if str(p.state) == "indexing":
            fields.update(total=p.chunks_total or None, completed=p.chunks_embedded)
        else:
            progress.remove_task(task)
            del tasks[p.name]
            mark = "[green]ok[/]" if str(p.state) == "indexed" else f"[red]{p.state}[/]"
            progress.console.print(f"{mark} {escape(p.name)} {escape(_detail(p))}")
            return
        progress.update(task, **fields)

    with progress:
        yield update
