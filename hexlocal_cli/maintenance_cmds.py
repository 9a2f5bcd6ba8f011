"""Maintenance commands: `drift` (would re-indexing change the chunks?) and `reindex`
(re-embed every package under the configured embedding model).

The logic lives in `hexlocal_core.usecases` (drift, reindex); these commands format its
reports and turn verdicts into exit codes: `drift` exits 1 when anything drifted (so CI can gate on
it), `reindex` exits 1 when it stopped early, naming the packages still to do.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import attrs
import click
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from hexlocal_cli import common

if TYPE_CHECKING:
    # Imported lazily at run time: the engine's imports would slow down `hexlocal --help`.
    from hexlocal_core.service import Hexlocal
    from hexlocal_core.usecases.drift import DriftReport
    from hexlocal_core.usecases.reindex import ReindexPlan, ReindexProgress, ReindexReport


# -- drift ----------------------------------------------------------------------------------


@click.command(name="drift")
@click.argument("packages", metavar="[PACKAGE]...", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print the reports as JSON.")
def drift_command(packages: tuple[str, ...], as_json: bool) -> None:
    """Compare stored chunks with what the current code would make of each package.

    Re-reads every indexed package (or those named) from its source, chunks it again and
    counts unchanged, added, removed and changed chunks; nothing is embedded or written.
    Exits 0 when nothing drifted, 1 when something did (or could not be checked).
    """

    async def work(service: Hexlocal) -> list[DriftReport]:
        return await service.drift(packages)

    # Drift only reads and re-chunks: no model is needed, so none is loaded.
    reports = common.with_service(work, load_models=False)
    drifted = any(r.drifted for r in reports)
    if as_json:
        common.emit_json({"drifted": drifted, "packages": [r.to_dict() for r in reports]})
    elif not reports:
        common.err().print("Nothing is indexed yet, so nothing can drift.")
    else:
        _drift_table(reports)
    if drifted:
        raise SystemExit(1)


def _drift_table(reports: list[DriftReport]) -> None:
    from hexlocal_mcp.formatting import shown_package

    # 80 columns: the chunker versions go to the caption (or the status, where a package's
    # stored version differs from the others'); --json has every field.
    stored = {r.chunker_stored for r in reports}
    current = reports[0].chunker_current
    caption = f"chunker: current v{current}"
    if len(stored) == 1:
        caption += f", stored v{next(iter(stored))}"
    table = Table(title="Drift: stored chunks against the current chunker", caption=caption)
    table.add_column("package", overflow="fold")
    table.add_column("version", overflow="fold")
    for name in ("same", "added", "removed", "changed"):
        table.add_column(name, justify="right")
    table.add_column("status", overflow="fold")
    for r in reports:
        status = (
            "[red]error[/]" if r.error else "[yellow]drifted[/]" if r.drifted else "[green]ok[/]"
        )
        if len(stored) > 1:
            status += f" (v{r.chunker_stored})"
        table.add_row(
            escape(shown_package(r.package)),
            escape(r.version),
            *(str(n) for n in (r.unchanged, r.added, r.removed, r.changed)),
            status,
        )
    console = common.out()
    console.print(table)
    # Verdicts are sentences (a command to run, an error naming a URL): below, not squeezed.
    for r in reports:
        if r.drifted:
            console.print(f"{escape(shown_package(r.package))}: {escape(r.verdict)}")
    if not any(r.drifted for r in reports):
        console.print(f"No drift: {len(reports)} package(s) would be chunked exactly as stored.")


# -- reindex --------------------------------------------------------------------------------


@click.command(name="reindex")
@click.option("--dry-run", is_flag=True, help="Print the plan; embed and write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan or report as JSON.")
def reindex_command(dry_run: bool, as_json: bool) -> None:
    """Re-embed every indexed package under the configured embedding model.

    Run it after changing AI_EMBED_MODEL. Each package's vectors go to the embedding
    cache as they are made, and the index switches to the new model in one final step:
    until then searches keep using the old model. If it stops early, nothing is
    switched; run it again and finished packages come from the cache. Exits 1 when it
    stopped early.
    """

    async def work(service: Hexlocal) -> ReindexReport:
        with _progress(enabled=not (as_json or dry_run)) as on_progress:
            return await service.reindex(dry_run=dry_run, progress=on_progress)

    # The configured model, the default when AI_EMBED_MODEL is unset: not the index's own,
    # which every other command keeps serving it with (`Settings.served_with`).
    settings = attrs.evolve(common.load_settings(), embed_model_set=True)
    report = common.with_service(work, settings=settings)
    if as_json:
        common.emit_json({"dry_run": dry_run, **report.to_dict()})
    elif dry_run:
        _print_plan(report.plan)
    else:
        _print_outcome(report)
    if not dry_run and not report.switched:
        raise SystemExit(1)


@contextlib.contextmanager
def _progress(*, enabled: bool) -> Iterator[ReindexProgress | None]:
    """A progress bar on stderr counting texts embedded (stdout stays for the report)."""
    if not enabled:
        yield None
        return
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("texts"),
        TimeElapsedColumn(),
        console=common.err(),
        transient=True,
    )
    task = bar.add_task("reindex", total=None)

    def update(package: str, done: int, total: int) -> None:
        label = f"embedding {package}" if package else "switching"
        bar.update(task, description=escape(label), completed=done, total=total or None)

    with bar:
        yield update


def _print_plan(plan: ReindexPlan) -> None:
    from hexlocal_mcp.formatting import shown_package

    table = Table(show_header=False, title="Reindex plan (dry run: nothing is embedded or written)")
    table.add_row("from model", escape(plan.from_model or "(no vectors yet)"))
    table.add_row("to model", escape(plan.to_model))
    names = ", ".join(shown_package(name) for name in plan.packages) or "(none)"
    table.add_row(f"packages ({len(plan.packages)})", escape(names))
    table.add_row("chunks", f"{plan.chunks:,}")
    table.add_row("memories", f"{plan.memories:,}")
    table.add_row("texts to embed (after the cache)", f"{plan.texts_to_embed:,}")
    table.add_row("estimated tokens", f"~{plan.estimated_tokens:,}")
    common.out().print(table)
    if plan.from_model == plan.to_model:
        common.out().print(
            "The index already uses this model: a reindex would only rebuild its vectors."
        )


def _print_outcome(report: ReindexReport) -> None:
    plan = report.plan
    console = common.out()
    if report.switched:
        console.print(
            f"[green]Reindexed[/] {len(report.done)} package(s) under {escape(plan.to_model)}: "
            f"{report.embedded:,} texts embedded now, the rest from the cache "
            f"({plan.chunks:,} chunks and {plan.memories:,} memories in all)."
        )
        if plan.from_model and plan.from_model != plan.to_model:
            # A server with AI_EMBED_MODEL unset follows its index to the default model; one
            # that names another model searches this index by keyword until it is changed.
            console.print(
                "Running hexlocal servers with AI_EMBED_MODEL unset follow the index; restart"
                " any that name another model, with AI_EMBED_MODEL set to this one."
            )
        return
    was = escape(plan.from_model or "its previous model")
    lines = [
        f"[red]Reindex stopped[/]: {escape(report.error or 'unknown error')}",
        f"Finished (cached): {escape(_names(report.done) or 'none')}",
        f"Remaining: {escape(_names(report.remaining) or 'none; the final switch failed')}",
        f"The index is still wholly on {was}. Run `hexlocal reindex` again: finished "
        "packages come from the cache.",
    ]
    # A failure is an outcome for the person at the terminal: stderr, like click's errors.
    common.err().print("\n".join(lines))


def _names(packages: Sequence[str]) -> str:
    from hexlocal_mcp.formatting import shown_package

    return ", ".join(shown_package(name) for name in packages)
