"""Memory commands: `remember` (waits for curation, prints each outcome) and `recall`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape

from hexlocal_cli import common
from hexlocal_core import bounds

if TYPE_CHECKING:
    from hexlocal_core.service import Hexlocal

DEFAULT_WAIT_S = 120.0


@click.command()
@click.argument("texts", metavar="TEXT...", nargs=-1, required=True)
@click.option("--package", help="The Hex package the lessons are about.")
@click.option("--version", "version", help="The package version they were learned on.")
@click.option("--tag", "tags", multiple=True, help="A short tag (repeatable).")
@click.option(
    "--wait",
    type=click.FloatRange(0, 3600),
    default=DEFAULT_WAIT_S,
    show_default=True,
    help="Seconds to wait for curation before printing what is still queued.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcomes as JSON.")
def remember(
    texts: tuple[str, ...],
    package: str | None,
    version: str | None,
    tags: tuple[str, ...],
    wait: float,
    as_json: bool,
) -> None:
    """Remember lessons (one fact per TEXT); waits for curation and prints each outcome."""

    async def work(service: Hexlocal) -> list[dict[str, Any]]:
        queued = await service.remember(
            list(texts), package=package, version=version, tags=list(tags) or None
        )
        await service.drain_memory(wait)  # runs the curation worker until the queue is empty
        outcomes = service.remember_status([row["request_id"] for row in queued])
        # The status rows do not repeat the text; put it back for people reading them.
        return [{**row, "text": text} for row, text in zip(outcomes, texts, strict=True)]

    outcomes = common.with_service(work)
    if as_json:
        common.emit_json(outcomes)
        return
    table = common.table("status", "action", "memory", "text", "reason")
    for row in outcomes:
        table.add_row(
            str(row.get("status") or ""),
            str(row.get("action") or ""),
            str(row.get("memory_id") or ""),
            escape(row["text"]),
            escape(str(row.get("reason") or "")),
        )
    common.out().print(table)


@click.command()
@click.argument("query")
@click.option(
    "--limit", type=click.IntRange(1, bounds.MAX_RECALL_LIMIT), default=5, show_default=True
)
@click.option("--package", help="Only memories about this package.")
@click.option("--include-deprecated", is_flag=True, help="Also deprecated memories.")
@click.option("--json", "as_json", is_flag=True, help="Print the memories as JSON.")
def recall(
    query: str, limit: int, package: str | None, include_deprecated: bool, as_json: bool
) -> None:
    """Recall remembered lessons matching QUERY, best first."""

    async def work(service: Hexlocal) -> list[dict[str, Any]]:
        found = await service.recall(
            query, limit=limit, package=package, include_deprecated=include_deprecated
        )
        rows: list[dict[str, Any]] = common.jsonable(found)
        return rows

    rows = common.with_service(work)
    if as_json:
        common.emit_json(rows)
        return
    if not rows:
        common.err().print(f"No memory matches {query!r}.")
        return
    table = common.table("id", "package", "tags", "flags", "text")
    for m in rows:
        flags = [f for f in ("deprecated", "stale") if m.get(f)]
        if not m.get("curated"):
            flags.append("uncurated")
        if m.get("notices"):
            flags.append("flagged")
        scope = " ".join(x for x in (m.get("package"), m.get("version")) if x)
        table.add_row(
            str(m["id"]), scope, ", ".join(m.get("tags") or ()), ", ".join(flags), escape(m["text"])
        )
    common.out().print(table)
    common.print_notices([n for m in rows for n in m.get("notices") or ()])


COMMANDS = (remember, recall)
