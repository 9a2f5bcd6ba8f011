"""`usage`, `issues` and `serve` (`doctor` and `models` have modules of their own)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
from rich.markup import escape

from hexlocal_cli import common
from hexlocal_core import bounds

if TYPE_CHECKING:
    from hexlocal_core.model import IssueHit
    from hexlocal_core.service import Hexlocal
    from hexlocal_core.usage import UsageReport

# -- usage --------------------------------------------------------------------------------


@click.command()
@click.option("--from", "from_", metavar="YYYY-MM-DD", help="First UTC day (default: --until).")
@click.option("--until", metavar="YYYY-MM-DD", help="Last UTC day, included (default: today).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def usage(from_: str | None, until: str | None, as_json: bool) -> None:
    """Tokens spent per model over a range of days."""

    async def work(service: Hexlocal) -> UsageReport:
        return service.get_token_usage(from_, until)

    report = common.with_service(work, load_models=False)
    data = report.to_dict()
    if as_json:
        common.emit_json(data)
        return
    # Fits 80 columns: the model folds, `local` and `total` are left to --json (a local
    # model's id starts with "local:"; total is prompt + completion).
    table = common.table(
        "model",
        "kind",
        "calls",
        "prompt",
        "completion",
        "failed",
        title=f"Token usage {data['from']} to {data['until']} (UTC)",
        first_wraps=True,
    )
    counts = ("calls", "prompt_tokens", "completion_tokens", "failures")
    for model, m in data["by_model"].items():
        table.add_row(escape(model), ", ".join(m["kinds"]), *(f"{m[k]:,}" for k in counts))
    totals = data["totals"]
    table.add_row("[bold]total[/]", "", *(f"{totals[k]:,}" for k in counts))
    common.out().print(table)
    common.out().print(f"Cloud tokens: {totals['cloud_tokens']:,}")


# -- issues -------------------------------------------------------------------------------


@click.command()
@click.argument("query")
@click.option("--package", help="A Hex package: search its GitHub repository (from hex.pm).")
@click.option("--repo", help="A GitHub repository, owner/name.")
@click.option("--org", help="A GitHub user or organisation.")
@click.option("--type", "type_", type=click.Choice(("issue", "pr")), help="Only issues or PRs.")
@click.option("--state", type=click.Choice(("open", "closed")), help="Only open or closed.")
@click.option(
    "--limit", type=click.IntRange(1, bounds.MAX_ISSUE_LIMIT), default=10, show_default=True
)
@click.option("--json", "as_json", is_flag=True, help="Print the hits as JSON.")
def issues(
    query: str,
    package: str | None,
    repo: str | None,
    org: str | None,
    type_: str | None,
    state: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """Search GitHub issues and pull requests live (nothing is stored)."""

    async def work(service: Hexlocal) -> list[IssueHit]:
        return await service.search_github_issues(
            query, package=package, repo=repo, org=org, type=type_, state=state, limit=limit
        )

    hits = common.with_service(work, load_models=False)
    if as_json:
        common.emit_json(common.jsonable(hits))
        return
    if not hits:
        common.err().print("No issue or pull request matched.")
        return
    table = common.table("issue", "state", "title", "updated", "url")
    for h in hits:
        kind = "PR" if h.is_pr else "issue"
        table.add_row(
            f"{h.repo}#{h.number} ({kind})" + (" flagged" if h.notices else ""),
            h.state,
            escape(h.title),
            h.updated_at or "",
            h.html_url,
        )
    common.out().print(table)
    common.print_notices([n.to_dict() for h in hits for n in h.notices])


# -- serve --------------------------------------------------------------------------------


@click.command()
@click.option("--http", "http_", is_flag=True, help="Serve MCP over streamable HTTP at /mcp.")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind with --http (0.0.0.0 for every interface).",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="Port to bind with --http (0 picks a free one).",
)
@click.option(
    "--no-auth",
    is_flag=True,
    help="With --http on a loopback address only: accept requests without a token.",
)
def serve(http_: bool, host: str, port: int, no_auth: bool) -> None:
    """Run the MCP server on stdio (what MCP clients start; stdout is the protocol).

    With --http, serve the same tools over streamable HTTP until SIGTERM: every request
    needs `Authorization: Bearer $HEXLOCAL_HTTP_TOKEN` (or the token in
    HEXLOCAL_HTTP_TOKEN_FILE), except GET /health. See docs/deployment.md.
    """
    from hexlocal_mcp.server import main

    if not http_:
        if no_auth or host != "127.0.0.1" or port != 8765:
            raise click.UsageError("--host, --port and --no-auth need --http")
        main([])  # not sys.argv: "serve" is this command's name, not a server argument
        return
    args = ["--http", "--host", host, "--port", str(port)]
    main([*args, "--no-auth"] if no_auth else args)


COMMANDS = (usage, issues, serve)
