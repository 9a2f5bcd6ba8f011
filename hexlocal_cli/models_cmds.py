"""`models (list|status|pull)`: which models are used, whether each is here, fetching them.

`status` prints one verdict per model (`model_sources.model_status`): present and where,
missing, broken, off or cloud, with the one fix; the lookup steps behind the verdict only
with `--verbose` or `--json` (printing every step as found/missing said "missing" for a
model a later step then found). `pull` downloads now, with progress on stderr.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import click
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

from hexlocal_cli import common
from hexlocal_core.config import Settings
from hexlocal_core.model import DownloadProgress

if TYPE_CHECKING:
    from hexlocal_core.adapters.model_sources import ModelStatus


@click.group()
def models() -> None:
    """The local models: which are used, whether they are here, fetching them."""


@models.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def models_list(as_json: bool) -> None:
    """The models hexlocal is configured to use."""
    from hexlocal_core.adapters import model_sources

    settings = Settings.from_env()
    chat = "off (no AI_API_KEY)"
    rows = {
        "embedder": model_sources.repo_id(settings, model_sources.Which.EMBEDDER)
        + ("" if settings.uses_local_embedder else " (cloud)"),
        "reranker": model_sources.repo_id(settings, model_sources.Which.RERANKER)
        if settings.rerank_enabled
        else "off",
        "chat (small)": settings.ai_chat_model_small if settings.ai_api_key else chat,
        "chat (large)": settings.ai_chat_model_large if settings.ai_api_key else chat,
    }
    if as_json:
        common.emit_json(rows)
        return
    table = common.table("role", "model")
    for role, model in rows.items():
        table.add_row(role, escape(model))
    common.out().print(table)


@models.command(name="status")
@click.option("--verbose", "-v", is_flag=True, help="Also every place each model is looked for.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON (with every lookup step).")
def models_status(verbose: bool, as_json: bool) -> None:
    """Whether each model is here (and where), or what to do about it."""
    from hexlocal_core.adapters import model_sources

    rows = model_sources.model_status(Settings.from_env())
    if as_json:
        common.emit_json([{**common.jsonable(r), "usable": r.usable} for r in rows])
        return
    console = common.out()
    for row in rows:
        console.print(escape(status_line(row)))
        if row.fix:
            console.print(f"  fix: {escape(row.fix)}")
        if verbose:
            for step in row.steps:
                mark = "found" if step.found else "-"
                where = step.path or step.detail
                console.print(f"    {mark:<5} {escape(step.step)}: {escape(str(where))}")


def status_line(row: ModelStatus) -> str:
    """`{which} {presence} {source}: {path}`, or the reason when it is not present."""
    if row.source is not None and row.path is not None:
        return f"{row.which.value} {row.presence.value} {row.source}: {row.path}"
    return f"{row.which.value} {row.presence.value}: {row.detail}"


@models.command(name="pull")
@click.argument("which", type=click.Choice(("all", "embedder", "reranker")), default="all")
def models_pull(which: str) -> None:
    """Download the models from the Hugging Face hub now (a search would on first need).

    HF_ENDPOINT and the standard cache are honoured; progress goes to stderr.
    """
    from hexlocal_core.adapters import model_fetch, model_sources

    settings = Settings.from_env()
    wanted = list(model_sources.Which) if which == "all" else [model_sources.Which(which)]
    if model_sources.Which.RERANKER in wanted and not settings.rerank_enabled:
        wanted.remove(model_sources.Which.RERANKER)
        common.err().print("reranker: AI_RERANK_MODEL is off, not pulled")
    if model_sources.Which.EMBEDDER in wanted and not settings.uses_local_embedder:
        wanted.remove(model_sources.Which.EMBEDDER)
        common.err().print(f"embedder: {settings.ai_embed_model} is a cloud model, not pulled")
    for kind in wanted:
        with common.translated(), download_progress(kind.value) as on_progress:
            files = model_fetch.pull(settings, kind, progress=on_progress)
        common.out().print(
            f"{kind.value}: {escape(files.name)} -> {files.onnx_path} ({escape(files.source)})"
        )


@contextlib.contextmanager
def download_progress(label: str) -> Iterator[DownloadProgress]:
    """A byte progress bar on stderr. The download reports from its worker thread; rich's
    Progress takes updates from any thread."""
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeElapsedColumn(),
        console=common.err(),
        transient=True,
    )
    task = bar.add_task(label, total=None)

    def update(message: str, done: int, total: int) -> None:
        bar.update(
            task, description=escape(f"{label}: {message}"), completed=done, total=total or None
        )

    with bar:
        yield update


COMMANDS = (models,)
