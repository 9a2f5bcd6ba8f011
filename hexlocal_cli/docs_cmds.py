"""Docs commands: `search`, `get`, `ingest`, `list`.

Each parses its arguments, calls one service method and formats what comes back; the
service decides versions, indexing and ranking.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from hexlocal_cli import common
from hexlocal_core import bounds
from hexlocal_core.model import IngestProgress, ProgressFn, SearchMode

if TYPE_CHECKING:
    from hexlocal_core.model import IngestReport, SearchResult
    from hexlocal_core.service import Hexlocal

EXCERPT_CHARS = 600
# The full pipeline first, then the cheaper rankings, as --help lists them.
MODES = tuple(
    m.value for m in (SearchMode.RERANK, SearchMode.RRF, SearchMode.FTS, SearchMode.VECTOR)
)


# -- progress -----------------------------------------------------------------------------


@contextlib.contextmanager
def ingest_progress(enabled: bool = True) -> Iterator[ProgressFn]:
    """A rich progress bar on stderr fed by the service's ingestion callback."""
    if not enabled:
        yield lambda _p: None
        return
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} chunks"),
        TimeElapsedColumn(),
        console=common.err(),
        transient=True,
    )
    tasks: dict[str, TaskID] = {}

    def update(p: IngestProgress) -> None:
        key = f"{p.package} {p.version}"
        if key not in tasks:
            tasks[key] = progress.add_task(key, total=None)
        progress.update(
            tasks[key],
            description=f"{key}: {p.phase}",
            total=p.chunks_total or None,
            completed=p.chunks_embedded,
        )

    with progress:
        yield update


# -- search and get -----------------------------------------------------------------------


VERSION_HELP = "A Hex version or a requirement ('~> 1.4'); default: what mix.lock pins."


@click.command()
@click.argument("package", metavar="[PACKAGE]", required=False)
@click.argument("query", required=False)
@click.option(
    "--project",
    is_flag=True,
    help="Search the project's own docs (`hexlocal index-docs`) instead: QUERY only.",
)
@click.option(
    "--all",
    "all_packages",
    is_flag=True,
    help="Search every package the project runs (mix.lock, Elixir's apps): QUERY only.",
)
@click.option(
    "--in",
    "within",
    multiple=True,
    metavar="PACKAGE",
    help="With --all: only these packages (repeat the option).",
)
@click.option("--version", "version", help=VERSION_HELP)
@click.option(
    "--limit",
    type=click.IntRange(1, bounds.MAX_LIMIT),
    default=5,
    show_default=True,
    help="Hits to show.",
)
@click.option("--examples", is_flag=True, help="Only passages with code examples.")
@click.option(
    "--mode",
    type=click.Choice(MODES),
    default="rerank",
    show_default=True,
    help="Ranking: full pipeline, fused arms only, keyword only or vector only.",
)
@click.option("--refresh", is_flag=True, help="Re-download and re-index the docs first.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def search(
    ctx: click.Context,
    package: str | None,
    query: str | None,
    project: bool,
    all_packages: bool,
    within: tuple[str, ...],
    version: str | None,
    limit: int,
    examples: bool,
    mode: str,
    refresh: bool,
    as_json: bool,
) -> None:
    """Search the docs of PACKAGE for QUERY (indexing the package first if needed).

    With --project, search the project's own docs (README, docs/, guides/) for QUERY.
    With --all, search every package the project runs at its locked version (only those
    indexed; the others are named and queued for `hexlocal sync`).
    """
    if all_packages:
        _search_all(ctx, package, query, within, limit=limit, mode=mode, as_json=as_json)
        return
    if within:
        raise click.UsageError("--in applies to --all", ctx=ctx)
    if project:
        _search_project(ctx, package, query, limit=limit, as_json=as_json)
        return
    if package is None or query is None:
        raise click.UsageError(
            "give PACKAGE and QUERY (or --all QUERY for every package the project runs, "
            "--project QUERY for the project's own docs)",
            ctx=ctx,
        )

    async def work(service: Hexlocal) -> SearchResult:
        with ingest_progress(enabled=not as_json) as on_progress:
            return await service.search_docs(
                package,
                query,
                version,
                limit=limit,
                examples_only=examples,
                refresh=refresh,
                mode=mode,
                progress=on_progress,
            )

    show_result(common.with_service(work).to_dict(), as_json=as_json, full=False)


PACKAGE_ONLY = ("version", "examples", "mode", "refresh")  # options --project does not take
ONE_PACKAGE_ONLY = ("project", "version", "examples", "refresh")  # options --all does not take


def _search_all(
    ctx: click.Context,
    first: str | None,
    second: str | None,
    within: tuple[str, ...],
    *,
    limit: int,
    mode: str,
    as_json: bool,
) -> None:
    from click.core import ParameterSource

    given = [
        n for n in ONE_PACKAGE_ONLY if ctx.get_parameter_source(n) is ParameterSource.COMMANDLINE
    ]
    if given:
        named = ", ".join(f"--{n}" for n in given)
        raise click.UsageError(f"{named} apply to one package's docs, not to --all", ctx=ctx)
    if first is None or second is not None:
        raise click.UsageError("with --all, give only QUERY (no PACKAGE; use --in)", ctx=ctx)
    query = first
    packages = list(within) or None

    async def work(service: Hexlocal) -> SearchResult:
        return await service.search_project_deps(query, packages=packages, limit=limit, mode=mode)

    show_result(common.with_service(work).to_dict(), as_json=as_json, full=False)


def _search_project(
    ctx: click.Context, first: str | None, second: str | None, *, limit: int, as_json: bool
) -> None:
    from click.core import ParameterSource

    from hexlocal_mcp.formatting import project_answer

    given = [n for n in PACKAGE_ONLY if ctx.get_parameter_source(n) is ParameterSource.COMMANDLINE]
    if given:
        named = ", ".join(f"--{n}" for n in given)
        raise click.UsageError(f"{named} apply to a package's docs, not to --project", ctx=ctx)
    if first is None or second is not None:
        raise click.UsageError("with --project, give only QUERY (no PACKAGE)", ctx=ctx)
    query = first

    async def work(service: Hexlocal) -> SearchResult:
        return await service.search_project_docs(query, limit=limit)

    data = project_answer(common.with_service(work).to_dict())
    show_result(data, as_json=as_json, full=False)


@click.command()
@click.argument("first")
@click.argument("second", required=False)
@click.option("--version", "version", help=VERSION_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def get(first: str, second: str | None, version: str | None, as_json: bool) -> None:
    """Print the docs of one identifier: `get [PACKAGE] IDENTIFIER`.

    IDENTIFIER is Module, Module.fun/2, c:cb/1, t:t/0, or an Erlang one (:ets.new/2,
    ets:new/2). Without PACKAGE, the package its module belongs to is found (the project's
    deps, its own apps, Elixir, OTP); PACKAGE `erlang` or `otp` means the OTP apps.
    """
    package, identifier = (first, second) if second is not None else (None, first)

    async def work(service: Hexlocal) -> SearchResult:
        return await service.get_docs(package, identifier, version)

    show_result(common.with_service(work).to_dict(), as_json=as_json, full=True)


def show_result(data: dict[str, Any], *, as_json: bool, full: bool) -> None:
    from hexlocal_mcp.formatting import deprecation, exact_parts_joined

    if as_json:
        common.emit_json(data)
        return
    common.print_notices(data["notices"])
    console = common.out(soft_wrap=True)  # a URL or path stays one piece for the terminal
    hits = exact_parts_joined(data["results"]) if full else data["results"]
    source = f" (from {data['version_source']})" if data.get("version_source") else ""
    version = f" {data['version']}" if data.get("version") else ""
    console.print(
        f"[bold]{escape(data['package'])}{escape(version)}[/]{escape(source)}: "
        f"{len(hits)} result(s)"
    )
    for rank, hit in enumerate(hits, start=1):
        console.print()
        kind = "" if hit.get("path") else f" [dim]({hit['doc_type']})[/]"
        if not hit.get("path") and hit.get("package") != data["package"]:  # --all's answer
            label = escape(f"{hit['package']}@{hit['version']}")
            kind = f" [dim]({hit['doc_type']}, {label})[/]"
        console.print(f"[bold]{rank}. {escape(hit['title'])}[/]{kind}")
        if hit.get("deprecated"):
            console.print(f"   [red]{escape(deprecation(hit['deprecated']))}[/]")
        console.print(f"   [cyan]{escape(_where(hit))}[/]")
        if hit.get("hexdocs_url") and hit.get("local_source"):  # a dep whose source is in deps/
            console.print(f"   [dim]local: {escape(hit['local_source'])}[/]")
        text = hit["content"] if full else _excerpt(hit["content"])
        console.print(escape(_indent(text)))


def _where(hit: dict[str, Any]) -> str:
    """Where to read more: a project doc's file, the hexdocs URL, else the source file and
    line (the project's own modules have no URL), else the ref."""
    return str(hit.get("path") or hit["hexdocs_url"] or hit.get("local_source") or hit["ref"])


def _indent(text: str) -> str:
    return "\n".join(f"   {line}" if line else line for line in text.splitlines())


def _excerpt(text: str) -> str:
    text = text.strip()
    if len(text) <= EXCERPT_CHARS:
        return text
    cut = text[:EXCERPT_CHARS]
    return cut[: max(cut.rfind("\n"), EXCERPT_CHARS // 2)].rstrip() + " …"


# -- ingest -------------------------------------------------------------------------------


def parse_spec(spec: str) -> tuple[str, str | None]:
    """`name` or `name@version`; the service validates both parts."""
    name, at, version = spec.partition("@")
    if not name or (at and not version):
        raise click.BadParameter(f"{spec!r}: expected PACKAGE or PACKAGE@VERSION, like jason@1.4.4")
    return name, version or None


@click.command()
@click.argument("specs", metavar="PACKAGE[@VERSION]...", nargs=-1, required=True)
@click.option("--refresh", is_flag=True, help="Re-download and re-index even if indexed.")
@click.option("--json", "as_json", is_flag=True, help="Print the reports as JSON.")
def ingest(specs: tuple[str, ...], refresh: bool, as_json: bool) -> None:
    """Index packages now (default version: what mix.lock pins, else the latest stable)."""
    targets = [parse_spec(spec) for spec in specs]

    async def work(service: Hexlocal) -> list[dict[str, Any]]:
        outcomes = []
        with ingest_progress(enabled=not as_json) as on_progress:
            for name, version in targets:
                outcomes.append(await _ingest_one(service, name, version, refresh, on_progress))
        return outcomes

    outcomes = common.with_service(work)
    if as_json:
        common.emit_json(outcomes)
    else:
        _ingest_table(outcomes)
    if any(o["error"] for o in outcomes):
        raise SystemExit(1)


async def _ingest_one(
    service: Hexlocal, name: str, version: str | None, refresh: bool, on_progress: ProgressFn
) -> dict[str, Any]:
    """One package's outcome; a failure is recorded so the other packages still run."""
    from hexlocal_core.errors import HexlocalError, UserInputError

    outcome: dict[str, Any] = {"package": name, "requested_version": version, "error": None}
    try:
        report, notices = await service.ingest(name, version, refresh=refresh, progress=on_progress)
    except UserInputError:
        raise  # a bad argument stops the run: exit 2 like any usage error
    except HexlocalError as exc:
        outcome["error"] = str(exc)
        return outcome
    outcome.update(_report_dict(report), notices=[n.to_dict() for n in notices])
    return outcome


def _report_dict(report: IngestReport | None) -> dict[str, Any]:
    if report is None:  # already indexed at the resolved version: nothing to do
        return {"status": "already indexed"}
    return {"status": "indexed", "report": common.jsonable(report)}


def _ingest_table(outcomes: list[dict[str, Any]]) -> None:
    # 80 columns: `items` and `reused` are left to --json; a failure's reason goes below.
    table = common.table("package", "version", "status", "chunks", "embedded", "seconds")
    for o in outcomes:
        r = o.get("report") or {}
        status = "[red]failed[/]" if o["error"] else o["status"]
        table.add_row(
            escape(o["package"]),
            escape(r.get("version") or o["requested_version"] or ""),
            status,
            *(str(r.get(k, "")) for k in ("chunks", "embedded", "seconds")),
        )
    console = common.out()
    console.print(table)
    for o in outcomes:
        if o["error"]:
            console.print(
                f"{escape(o['package'])}: {escape(common.one_line(Exception(o['error'])))}"
            )
        common.print_notices(o.get("notices") or [])


# -- list ---------------------------------------------------------------------------------


@click.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print the packages as JSON.")
def list_packages(as_json: bool) -> None:
    """List the packages the project pins, with their state, and what is indexed here."""

    async def work(service: Hexlocal) -> list[dict[str, Any]]:
        indexed = common.jsonable(service.list_packages())
        return package_rows(await service.project_packages(), indexed)

    from hexlocal_mcp.formatting import package_rows

    rows = common.with_service(work, load_models=False)
    if as_json:
        common.emit_json(rows)
        return
    if not rows:
        common.err().print(
            "Nothing is indexed yet and no mix.lock pins anything here; `hexlocal sync`, "
            "`hexlocal ingest PACKAGE` or a search adds packages."
        )
        return
    models = sorted({p["embed_model"] for p in rows if p.get("embed_model")}) or ["none"]
    table = common.table(
        "package",
        "version",
        "state",
        "chunks",
        "detail",
        caption=f"embedding model: {', '.join(models)}",
    )
    for p in rows:
        chunks = p.get("chunk_count")
        table.add_row(
            escape(p["name"]),
            escape(p.get("version") or p.get("locked_version") or ""),
            escape(str(p.get("state") or p.get("status") or "")),
            f"{chunks:,}" if chunks is not None else "",
            escape(_list_detail(p)),
        )
    common.out().print(table)


# What a package is when it is not a dependency (sync's `kind`): in place of its source,
# which for these is always their beams.
_KIND_LABELS = {"otp": "OTP", "elixir": "Elixir", "project": "own app"}


def _list_detail(p: dict[str, Any]) -> str:
    """Where it came from and when, for an indexed package; else why it is not (yet)."""
    if p.get("ingested_at") and p.get("state") in ("indexed", None):
        origin = _KIND_LABELS.get(str(p.get("kind"))) or p.get("source")
        return f"{origin}, {_minute(p['ingested_at'])}"
    if p.get("state") == "indexing" and p.get("chunks_total"):
        return f"{p.get('phase') or 'indexing'} {p.get('chunks_embedded', 0)}/{p['chunks_total']}"
    if p.get("state") == "outdated":
        return f"locked {p.get('locked_version')}; `hexlocal sync` switches it"
    return str(p.get("reason") or "")


def _minute(stamp: str) -> str:
    """An ISO timestamp to the minute (`--json` has it whole): "2026-12-01 09:50"."""
    return stamp.replace("T", " ")[:16]


COMMANDS = (search, get, ingest, list_packages)
