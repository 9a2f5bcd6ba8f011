"""`usage`, `issues`, `serve`, `doctor` and `models (list|pull|status)`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs
import click
from rich.markup import escape

from hexlocal_cli import common
from hexlocal_core.config import Settings

if TYPE_CHECKING:
    from hexlocal_core.model import IssueHit
    from hexlocal_core.service import Hexlocal
    from hexlocal_core.usage import UsageReport

PROBE_TIMEOUT_S = 3.0
PROBE_PACKAGE = "jason"  # any package hex.pm surely has

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
    table = common.table(
        "model",
        "kind",
        "local",
        "calls",
        "prompt",
        "completion",
        "total",
        "failures",
        title=f"Token usage {data['from']} to {data['until']} (UTC)",
    )
    for model, m in data["by_model"].items():
        table.add_row(
            model,
            ", ".join(m["kinds"]),
            "yes" if m["local"] else "no",
            *(
                f"{m[k]:,}"
                for k in ("calls", "prompt_tokens", "completion_tokens", "total_tokens", "failures")
            ),
        )
    totals = data["totals"]
    table.add_row(
        "[bold]total[/]",
        "",
        "",
        *(
            f"{totals[k]:,}"
            for k in ("calls", "prompt_tokens", "completion_tokens", "total_tokens", "failures")
        ),
    )
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
@click.option("--limit", type=click.IntRange(1, 50), default=10, show_default=True)
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
            f"{h.repo}#{h.number} ({kind})",
            h.state,
            escape(h.title),
            h.updated_at or "",
            h.html_url,
        )
    common.out().print(table)


# -- serve --------------------------------------------------------------------------------


@click.command()
def serve() -> None:
    """Run the MCP server on stdio (what MCP clients start; stdout is the protocol)."""
    from hexlocal_mcp.server import main

    main()


# -- doctor -------------------------------------------------------------------------------


@attrs.frozen
class Check:
    name: str
    status: str  # OK | WARN | FAIL
    detail: str
    fix: str = ""


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
def doctor(as_json: bool) -> None:
    """Check settings, the database, SQLite extensions, models and remote services.

    Exits 1 only when hexlocal cannot work locally; unreachable remote services are
    reported but do not fail the check (hexlocal works offline on indexed packages).
    """
    settings = Settings.from_env()
    checks = [
        *_settings_checks(settings),
        _database_check(settings),
        *_sqlite_checks(),
        *_model_checks(settings),
        *asyncio.run(_remote_checks(settings)),
    ]
    if as_json:
        common.emit_json({"settings": settings.describe(), "checks": common.jsonable(checks)})
    else:
        _print_doctor(settings, checks)
    if any(c.status == "FAIL" for c in checks):
        raise SystemExit(1)


def _print_doctor(settings: Settings, checks: list[Check]) -> None:
    console = common.out()
    table = common.table("setting", "value", title="Resolved settings")
    for name, value in settings.describe().items():
        table.add_row(name, escape(value))
    console.print(table)
    colours = {"OK": "green", "WARN": "yellow", "FAIL": "red"}
    for c in checks:
        line = f"[{colours[c.status]}]{c.status:<4}[/] {escape(c.name)}: {escape(c.detail)}"
        if c.fix:
            line += f"\n     fix: {escape(c.fix)}"
        console.print(line)


def _settings_checks(settings: Settings) -> list[Check]:
    return [
        Check("setting", "WARN", warning, "correct or unset the variable")
        for warning in settings.warnings
    ]


def _database_check(settings: Settings) -> Check:
    from hexlocal_core.errors import HexlocalError
    from hexlocal_core.index.db import connect, scalar
    from hexlocal_core.index.migrations import SCHEMA_VERSION, current_version

    path = settings.database_path
    if not path.exists():
        return Check("database", "OK", f"{path} (created on first use)")
    try:
        conn = connect(path, readonly=True)
        try:
            version = current_version(conn)
            packages = scalar(conn, "SELECT count(*) FROM packages") if version else 0
        finally:
            conn.close()
    except HexlocalError as exc:
        return Check("database", "FAIL", f"{path}: {exc}", "point DATABASE_PATH at another file")
    except Exception as exc:  # apsw raises its own tree; any of them means unusable
        return Check("database", "FAIL", f"{path}: {exc}", "point DATABASE_PATH at another file")
    if version > SCHEMA_VERSION:
        return Check(
            "database",
            "FAIL",
            f"{path}: schema {version} is newer than {SCHEMA_VERSION}",
            "upgrade hexlocal or use another DATABASE_PATH",
        )
    return Check(
        "database", "OK", f"{path}, schema {version}/{SCHEMA_VERSION}, {packages} package(s)"
    )


def _sqlite_checks() -> list[Check]:
    import apsw

    from hexlocal_core.errors import HexlocalError
    from hexlocal_core.index.db import connect, scalar

    checks = [
        Check("sqlite", "OK", f"SQLite {apsw.sqlite_lib_version()} (apsw {apsw.apsw_version()})")
    ]
    fts5 = "ENABLE_FTS5" in apsw.compile_options
    checks.append(
        Check("fts5", "OK", "available")
        if fts5
        else Check("fts5", "FAIL", "this SQLite lacks FTS5", "reinstall apsw from PyPI")
    )
    try:
        conn = connect(":memory:")
        vec = scalar(conn, "SELECT vec_version()")
        conn.close()
        checks.append(Check("sqlite-vec", "OK", str(vec)))
    except HexlocalError as exc:
        checks.append(Check("sqlite-vec", "FAIL", str(exc), "pip install 'sqlite-vec>=0.1.9'"))
    return checks


def _model_checks(settings: Settings) -> list[Check]:
    from hexlocal_core.adapters import model_sources

    rows = model_sources.status(settings)
    checks = []
    for which in model_sources.Which:
        mine = [r for r in rows if r.which is which]
        found = next((r for r in mine if r.found), None)
        if which is model_sources.Which.RERANKER and not settings.rerank_enabled:
            checks.append(Check("reranker model", "OK", "off (AI_RERANK_MODEL=off)"))
        elif found is not None:
            where = f"{found.step}: {found.path or found.detail}"
            checks.append(Check(f"{which.value} model", "OK", where))
        else:
            fix = next((r.fix for r in mine if r.fix), "")
            detail = "; ".join(f"{r.step}: {r.detail}" for r in mine) or "not found"
            checks.append(Check(f"{which.value} model", "WARN", detail, fix))
    return checks


# -- remote probes: one short GET each, run together ----------------------------------------

Probe = Callable[[], Awaitable[Check]]


async def _remote_checks(settings: Settings) -> list[Check]:
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=PROBE_TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        probes = [
            _probe(http, "hex.pm API", f"{settings.hex_api_url}/packages/{PROBE_PACKAGE}", {}),
            _probe(http, "hex.pm docs mirror", settings.hex_mirror, {}, any_status=True),
            _probe(
                http,
                "GitHub API",
                f"{settings.github_api_url}/rate_limit",
                _github_headers(settings),
            ),
        ]
        if settings.ai_api_key:
            headers = {"Authorization": f"Bearer {settings.ai_api_key.reveal()}"}
            probes.append(_probe(http, "AI API", f"{settings.ai_api_url}/models", headers))
        checks = list(await asyncio.gather(*probes))
    if not settings.ai_api_key:
        checks.append(Check("AI API", "OK", "not configured (optional: curation uses rules alone)"))
    return checks


def _github_headers(settings: Settings) -> dict[str, str]:
    if not settings.github_token:
        return {}
    return {"Authorization": f"Bearer {settings.github_token.reveal()}"}


async def _probe(
    http: Any, name: str, url: str, headers: dict[str, str], *, any_status: bool = False
) -> Check:
    """OK when the service answers (2xx, or any HTTP answer for a bare host); never raises."""
    try:
        async with http.get(url, headers=headers, allow_redirects=True) as response:
            status = int(response.status)
    except Exception as exc:  # timeouts, DNS, refused: all mean "not reachable from here"
        reason = str(exc) or type(exc).__name__
        return Check(name, "WARN", f"{url} did not answer ({reason})", _remote_fix(name))
    if any_status or 200 <= status < 300:
        return Check(name, "OK", f"{url} answered {status}")
    return Check(name, "WARN", f"{url} answered HTTP {status}", _remote_fix(name, status))


def _remote_fix(name: str, status: int | None = None) -> str:
    if status in (401, 403):
        return "check the token or key for this service"
    variable = {
        "hex.pm API": "HEX_API_URL",
        "hex.pm docs mirror": "HEX_MIRROR",
        "GitHub API": "GITHUB_API_URL",
        "AI API": "AI_API_URL",
    }[name]
    return f"check the network or proxy, or {variable}; indexed packages still work offline"


# -- models -------------------------------------------------------------------------------


@click.group()
def models() -> None:
    """The local models: which are used, where they come from, fetching them."""


@models.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def models_list(as_json: bool) -> None:
    """The models hexlocal is configured to use."""
    from hexlocal_core.adapters import model_sources

    settings = Settings.from_env()
    rows = {
        "embedder": model_sources.repo_id(settings, model_sources.Which.EMBEDDER)
        + ("" if settings.uses_local_embedder else " (cloud)"),
        "reranker": model_sources.repo_id(settings, model_sources.Which.RERANKER)
        if settings.rerank_enabled
        else "off",
        "chat (small)": settings.ai_chat_model_small
        if settings.ai_api_key
        else "off (no AI_API_KEY)",
        "chat (large)": settings.ai_chat_model_large
        if settings.ai_api_key
        else "off (no AI_API_KEY)",
    }
    if as_json:
        common.emit_json(rows)
        return
    table = common.table("role", "model")
    for role, model in rows.items():
        table.add_row(role, model)
    common.out().print(table)


@models.command(name="status")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def models_status(as_json: bool) -> None:
    """Every place each model is looked for, and what is missing."""
    from hexlocal_core.adapters import model_sources

    rows = model_sources.status(Settings.from_env())
    if as_json:
        common.emit_json(common.jsonable(list(rows)))
        return
    console = common.out()
    for r in rows:
        mark = "[green]found  [/]" if r.found else "[yellow]missing[/]"
        where = escape(str(r.path or r.detail))
        console.print(f"{r.which.value:<9} {mark} {escape(r.step)}: {where}")
        if r.fix and not r.found:
            console.print(f"{'':<17} fix: {escape(r.fix)}")


@models.command(name="pull")
@click.argument("which", type=click.Choice(("all", "embedder", "reranker")), default="all")
def models_pull(which: str) -> None:
    """Download the models from the Hugging Face hub (the only command that does)."""
    from hexlocal_core.adapters import model_sources

    settings = Settings.from_env()
    wanted = list(model_sources.Which) if which == "all" else [model_sources.Which(which)]
    if model_sources.Which.RERANKER in wanted and not settings.rerank_enabled:
        wanted.remove(model_sources.Which.RERANKER)
        common.err().print("reranker: AI_RERANK_MODEL is off, not pulled")
    for kind in wanted:
        with common.translated():
            files = model_sources.pull(settings, kind)
        common.out().print(f"{kind.value}: {files.name} -> {files.onnx_path} ({files.source})")


COMMANDS = (usage, issues, serve, doctor, models)
