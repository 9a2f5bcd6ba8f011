"""`hexlocal eval`: run a retrieval query set through search and print the measures.

The command only parses options, builds the service, and formats; the evaluation itself
(relevance, ranks, metrics, fingerprint) lives in `hexlocal_core.evaluation`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hexlocal_cli import common

if TYPE_CHECKING:
    from hexlocal_core.config import Settings
    from hexlocal_core.evaluation import EvalOptions, EvalQuery, EvalReport, QueryResult
    from hexlocal_core.service import Hexlocal

# hexlocal_core.evaluation imports the store and numpy (0.9 s): it is imported when the
# command runs (or its help is shown), not when `hexlocal` starts; --modes and --only take
# their values from it then (LazyChoice, ModeList).


def _core_modes() -> tuple[str, ...]:
    from hexlocal_core.evaluation import EVAL_MODES

    return tuple(EVAL_MODES)


def _core_kinds() -> tuple[str, ...]:
    from hexlocal_core.evaluation import KINDS

    return tuple(KINDS)


class LazyChoice(click.Choice[str]):
    """A Choice whose values come from the core when first needed (help, parsing), so
    they are never repeated here and `hexlocal` starts without importing the evaluation."""

    def __init__(self, load: Callable[[], tuple[str, ...]]) -> None:
        self._load = load
        self._loaded: tuple[str, ...] | None = None
        super().__init__((), case_sensitive=True)

    @property
    def choices(self) -> tuple[str, ...]:
        if self._loaded is None:
            self._loaded = self._load()
        return self._loaded

    @choices.setter
    def choices(self, _value: object) -> None:
        pass  # click.Choice.__init__ assigns the (empty) placeholder


class ModeList(click.ParamType[tuple[str, ...], object]):
    """A comma-separated list of the core's search modes (EVAL_MODES)."""

    name = "modes"

    def __init__(self, load: Callable[[], tuple[str, ...]]) -> None:
        self._load = load

    @property
    def choices(self) -> tuple[str, ...]:
        return self._load()

    def get_metavar(self, param: click.Parameter, ctx: click.Context) -> str:
        return f"[{'|'.join(self.choices)}][,...]"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[str, ...]:
        if isinstance(value, tuple):
            return value
        modes = tuple(m.strip() for m in str(value).split(",") if m.strip())
        unknown = [m for m in modes if m not in self.choices]
        if unknown or not modes:
            named = ", ".join(unknown) or "(none)"
            self.fail(f"unknown mode(s) {named}; choose from {', '.join(self.choices)}", param, ctx)
        return modes


def eval_database(queries: Path) -> Path:
    """The evaluation's own index: `<user data>/hexlocal/eval/<set name>.db`, so `eval
    --ingest` never replaces a version the project's index holds (one version per
    package)."""
    import platformdirs

    base = Path(platformdirs.user_data_dir("hexlocal", appauthor=False))
    return base / "eval" / f"{queries.stem or 'queries'}.db"


def _eval_settings(settings: Settings, database: str | None, queries: Path) -> Settings:
    """The evaluation's index: --database (a file or a postgresql:// URL), else the set's
    own file; a team's DATABASE_URL is never written by an evaluation it did not name."""
    import attrs

    if database and database.startswith(("postgresql://", "postgres://")):
        return attrs.evolve(settings, database_url=database)
    target = Path(database).expanduser() if database else eval_database(queries)
    target.parent.mkdir(parents=True, exist_ok=True)
    return attrs.evolve(settings, database_path=target, database_url="")


async def evaluate(
    service: Hexlocal,
    queries: Sequence[EvalQuery],
    options: EvalOptions,
    *,
    source: str,
    ingest: bool,
) -> EvalReport:
    """Index the query set's packages if asked, then run the evaluation through the facade."""
    from hexlocal_core.evaluation import ingest_targets

    if ingest:
        for package, version in ingest_targets(queries):
            common.err().print(f"indexing {package} {version or '(resolved)'} ...")
            await service.ingest(package, version)
    return await service.evaluate(queries, options, source=source)


@click.command("eval")
@click.option(
    "--queries",
    "path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="JSONL query set: {id, kind, package, version, query, expect, note} per line "
    "(a checkout's research sets are in eval/).",
)
@click.option(
    "--modes",
    type=ModeList(_core_modes),
    help="Search modes to measure, comma-separated (default: all).",
)
@click.option("--only", type=LazyChoice(_core_kinds), help="Measure only one kind of query.")
@click.option(
    "--database",
    "database",
    help="The index to measure: a SQLite file or a postgresql:// URL (default: the query "
    "set's own, <user data>/hexlocal/eval/<set>.db; never the project's or DATABASE_URL's).",
)
@click.option(
    "--exact/--no-exact", default=True, show_default=True, help="Exact identifier lookup."
)
@click.option(
    "--all-packages",
    is_flag=True,
    help="Drop each query's package: search every package of the set at once "
    "(project-wide search_docs) and score that.",
)
@click.option("--verbose", "-v", is_flag=True, help="Per-query ranks for every mode.")
@click.option(
    "--show",
    type=click.IntRange(0, 10),
    default=0,
    help="Print the top N documents returned per query.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the whole report as JSON.")
@click.option("--ingest", is_flag=True, help="Index every package@version of the query set first.")
def eval_command(
    path: Path,
    modes: tuple[str, ...] | None,
    only: str | None,
    database: str | None,
    exact: bool,
    all_packages: bool,
    verbose: bool,
    show: int,
    as_json: bool,
    ingest: bool,
) -> None:
    """Measure search quality on a query set: recall@5, MRR@10, candidate pool, latency.

    Every query names a package@version and the refs that answer it. Queries whose
    package is not indexed at that version are reported NOT INDEXED (use --ingest), and
    those whose expected refs match no stored chunk are reported BROKEN; neither is scored.
    The evaluation has its own index (see --database): the project's is never changed.
    """
    from hexlocal_core.evaluation import EvalOptions, load_queries

    options = EvalOptions(
        modes=modes or _core_modes(), only=only, exact=exact, all_packages=all_packages
    )
    with common.translated():
        queries = load_queries(path)
    settings = _eval_settings(common.load_settings(), database, path)
    if not as_json:
        common.err().print(f"index: {escape(settings.database_location)}")
    report = common.with_service(
        lambda service: evaluate(service, queries, options, source=str(path), ingest=ingest),
        settings=settings,
    )
    if as_json:
        common.emit_json(report.to_dict())
        return
    print_report(common.out(), report, verbose=verbose, show=show)


# -- formatting ------------------------------------------------------------------------------


def scores_table(report: EvalReport) -> Table:
    table = Table(title="retrieval quality", title_justify="left")
    for name in ("mode", "kind", "n", "recall@5", "MRR@10", "cand", "median ms"):
        table.add_column(name, justify="left" if name in ("mode", "kind") else "right")
    previous = None
    for s in report.scores:
        if s.queries == 0 and s.kind != "all":
            continue  # e.g. --only symbol: no concept row to show
        if previous is not None and s.mode != previous:
            table.add_section()
        previous = s.mode
        style = "bold" if s.kind == "all" else None
        table.add_row(
            s.mode,
            s.kind,
            str(s.queries),
            f"{s.recall_at_5:.3f}",
            f"{s.mrr_at_10:.3f}",
            f"{s.cand:.3f}",
            f"{s.median_ms:.1f}",
            style=style,
        )
    return table


def _header(console: Console, report: EvalReport) -> None:
    from hexlocal_core.evaluation import QueryStatus

    fp = report.fingerprint
    names = ", ".join(f"{p.name} {p.version}" for p in fp.packages) or "(empty index)"
    console.print(
        f"corpus   {len(fp.packages)} packages, {fp.total_chunks:,} chunks, "
        f"embed {fp.embed_model or '-'} ({fp.embed_dims or '-'} dims), digest {fp.digest}"
    )
    console.print(f"         {escape(names)}", style="dim")
    models = ", ".join(f"{k} {v or 'none'}" for k, v in report.models.items())
    if models:
        console.print(f"models   {models}")
    counts = ", ".join(f"{len(report.by_status(s))} {s.value}" for s in QueryStatus)
    console.print(f"queries  {len(report.results)} from {escape(report.source)}: {counts}")


def _problems(console: Console, report: EvalReport) -> None:
    from hexlocal_core.evaluation import QueryStatus

    for result in report.by_status(QueryStatus.NOT_INDEXED):
        q = result.query
        have = f"indexed: {result.indexed_version}" if result.indexed_version else "not indexed"
        console.print(
            f"[yellow]NOT INDEXED[/] {escape(q.id)}: {escape(q.package)} {escape(q.version or '')}"
            f" ({have}; use --ingest)"
        )
    for result in report.by_status(QueryStatus.BROKEN):
        q = result.query
        what = escape(q.expect.describe())
        console.print(f"[red]BROKEN[/] {escape(q.id)}: no stored chunk matches {what}")


def _notice_summary(console: Console, report: EvalReport) -> None:
    seen: dict[tuple[str, str], int] = {}
    for result in report.results:
        for run in result.runs:
            for code in run.notices:
                seen[(run.mode, code)] = seen.get((run.mode, code), 0) + 1
    for (mode, code), n in sorted(seen.items()):
        console.print(f"[yellow]notice[/] {mode}: {code} on {n} queries")


def _rank_cell(result: QueryResult, mode: str) -> str:
    run = result.run(mode)
    if run is None:
        return ""
    if run.rank is not None:
        return str(run.rank)
    return "pool" if run.in_pool else "-"


def ranks_table(report: EvalReport) -> Table:
    from hexlocal_core.evaluation import QueryStatus

    modes = report.options.modes
    table = Table(title="ranks of the first relevant chunk (pool: in candidates only)")
    for name in ("id", "kind", *modes, "query"):
        table.add_column(name, justify="right" if name in modes else "left", overflow="fold")
    for result in report.by_status(QueryStatus.OK):
        q = result.query
        cells = (_rank_cell(result, m) for m in modes)
        table.add_row(escape(q.id), q.kind, *cells, escape(q.query))
    return table


def _shown(console: Console, report: EvalReport, n: int) -> None:
    from hexlocal_core.evaluation import QueryStatus

    for result in report.by_status(QueryStatus.OK):
        q = result.query
        expect = escape(q.expect.describe())
        console.print(f"\n[bold]{escape(q.id)}[/] {escape(q.query)}  [dim](expect {expect})[/]")
        for run in result.runs:
            for i, doc in enumerate(run.returned[:n], start=1):
                mark = "[green]✓[/]" if doc.relevant else " "
                console.print(f"  {run.mode:<7}{i:>3} {mark} {escape(doc.ref)}")


def print_report(
    console: Console, report: EvalReport, *, verbose: bool = False, show: int = 0
) -> None:
    _header(console, report)
    _problems(console, report)
    _notice_summary(console, report)
    console.print(scores_table(report))
    if verbose:
        console.print(ranks_table(report))
    if show:
        _shown(console, report, show)
