"""`hexlocal doctor`: what is present, what is missing, and the one fix for each.

Checks, in the order a search needs them: settings, the project's mix.lock, the
Erlang/OTP and Elixir installs (and whether the OTP's docs are installed), the index
database, the models, then the remote services (one short request each, run together).
Exit 1 when something a search needs is missing: no usable embedder (absent and not
downloadable, or downloadable from a hub that does not answer), or a database that
cannot be opened. Everything shown passes through `hexlocal_core.redact`: URLs may carry
credentials (userinfo, query tokens) and exception texts quote URLs.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import attrs
import click
from rich.markup import escape

from hexlocal_cli import common
from hexlocal_core import install
from hexlocal_core.config import Settings
from hexlocal_core.redact import redact_url, redact_urls

if TYPE_CHECKING:
    import aiohttp

    from hexlocal_core.adapters.model_sources import ModelStatus
    from hexlocal_core.service import Hexlocal

PROBE_TIMEOUT_S = 3.0
PROBE_PACKAGE = "jason"  # any package hex.pm surely has
PROBE_VERSION = "1.4.4"  # its docs tarball, when the API did not name the latest release
OK, WARN, FAIL = "OK", "WARN", "FAIL"


@attrs.frozen
class Check:
    name: str
    status: str  # OK | WARN | FAIL
    detail: str
    fix: str = ""


def shown(text: str) -> str:
    """Text as doctor may print it: one line, every URL in it redacted."""
    return redact_urls(" ".join(text.split()))


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
def doctor(as_json: bool) -> None:
    """Check settings, mix.lock, OTP and Elixir, the database, the models and remote services.

    Says what is present, what is missing and the one fix for each. Exits 1 when a
    search cannot work: no usable embedding model (and none can be downloaded), or a
    database that cannot be opened. Unreachable remote services are warnings: indexed
    packages still work offline.
    """
    # The values the MCP server runs with: the CLI's own (`load_settings`) wait an hour for
    # an ingestion, which is not what a user reading doctor about the server should see.
    settings = Settings.from_env()
    models = _model_statuses(settings)
    checks = [
        _install_check(),
        *_settings_checks(settings),
        _lock_check(settings),
        *_otp_checks(settings),
        *_database_checks(settings),
        *(_model_check(status) for status in models),
    ]
    remote = asyncio.run(_remote_checks(settings, _hub_needed(models)))
    checks.extend(remote)
    checks = _escalate_hub(checks, models)
    if as_json:
        described = {k: shown(v) for k, v in settings.describe().items()}
        common.emit_json({"settings": described, "checks": common.jsonable(checks)})
    else:
        _print(settings, checks)
    if any(c.status == FAIL for c in checks):
        raise SystemExit(1)


def _print(settings: Settings, checks: list[Check]) -> None:
    console = common.out()
    title = "Resolved settings (as the MCP server reads them)"
    table = common.table("setting", "value", title=title)
    for name, value in settings.describe().items():
        table.add_row(name, escape(shown(value)))
    console.print(table)
    colours = {OK: "green", WARN: "yellow", FAIL: "red"}
    for c in checks:
        console.print(f"[{colours[c.status]}]{c.status:<4}[/] {escape(c.name)}: {escape(c.detail)}")
        if c.fix:
            console.print(f"     fix: {escape(c.fix)}")
    failed = [c.name for c in checks if c.status == FAIL]
    if failed:
        console.print(f"[red]Searches cannot work yet[/]: fix {escape(', '.join(failed))}.")


# -- local checks -----------------------------------------------------------------------------


def _install_check() -> Check:
    """How hexlocal was installed: the fixes it prints (models, upgrades) depend on it."""
    here = install.detect()
    source = f", from {here.source}" if here.source else ""
    return Check("installation", OK, f"{here.kind} ({here.prefix}{source})")


def _settings_checks(settings: Settings) -> list[Check]:
    return [
        Check("setting", WARN, shown(warning), "correct or unset the variable")
        for warning in settings.warnings
    ]


def _lock_check(settings: Settings) -> Check:
    """The mix.lock that pins the versions: found (from any subfolder)? parsed? how many?"""
    from hexlocal_core.versions import MalformedLock, find_lock, find_mix_root, load_lock

    root = settings.project_root
    path = find_lock(root)
    mix_root = find_mix_root(root) if path is None else None
    if mix_root is not None:  # `mix new` writes no lock until a dependency is fetched
        return Check(
            "mix.lock",
            OK,
            f"none yet in {mix_root}: the project locks no dependencies (`mix deps.get` "
            "writes it once it has some)",
        )
    if path is None:
        return Check(
            "mix.lock",
            WARN,
            f"none at or above {root}",
            "set PROJECT_ROOT to your Mix project's folder (without a lock, searches use the "
            "indexed or the latest stable version)",
        )
    try:
        lock = load_lock(path)
    except MalformedLock as exc:
        return Check(
            "mix.lock",
            WARN,
            shown(str(exc)),
            "run `mix deps.get` to rewrite it (meanwhile searches use the indexed or latest "
            "version)",
        )
    entries = list(lock.entries.values())
    hex_count = sum(1 for e in entries if e.kind == "hex")
    other = len(entries) - hex_count
    detail = f"{path}: {hex_count} Hex package(s)"
    if other:
        detail += f", {other} other dep(s) (git, path)"
    if not lock.problems:
        return Check("mix.lock", OK, detail)
    first = next(iter(lock.problems.values()))
    detail += f"; {len(lock.problems)} entry(ies) unusable, e.g. {shown(first)}"
    return Check("mix.lock", WARN, detail, "run `mix deps.get` to rewrite the lock")


def _otp_checks(settings: Settings) -> list[Check]:
    """The Erlang/OTP whose docs answer for the OTP apps, and the Elixir for its own apps."""
    from hexlocal_core.ingest.beam_sources import find_elixir_lib
    from hexlocal_core.ingest.otp_source import INSTALL_DOCS, installed_docs, otp_paths
    from hexlocal_core.versions.otp_probe import find_otp

    p = otp_paths(settings)
    found = asyncio.run(find_otp(p.project_root, otp_root=p.otp_root, path=p.path, home=p.home))
    said = "; ".join(shown(n.message) for n in found.notices)
    install = found.install
    if install is None:
        fix = (
            "install Erlang (`erl` on PATH), pin it (`erlang 27.3.4.1` in .tool-versions) or "
            "set HEXLOCAL_OTP_ROOT; Hex packages do not need it"
        )
        checks = [Check("Erlang/OTP", WARN, said or "none found: no OTP docs", fix)]
    else:
        how = f", found by {found.how}" if found.how else ""
        where = installed_docs(install)
        detail = f"OTP {install.release} at {install.root}{how}; docs {where or 'not installed'}"
        if where is None:
            checks = [Check("Erlang/OTP", WARN, detail, INSTALL_DOCS)]
        elif said:  # a pinned release that is not this one, an ignored HEXLOCAL_OTP_ROOT
            checks = [Check("Erlang/OTP", WARN, f"{detail}; {said}")]
        else:
            checks = [Check("Erlang/OTP", OK, detail)]
    elixir = find_elixir_lib("elixir", p.elixir_home, path=p.path)
    if elixir is None:
        checks.append(
            Check("Elixir", OK, "none found: Elixir's own docs come from hex.pm's docs tarballs")
        )
    else:
        checks.append(Check("Elixir", OK, f"{elixir.version} at {elixir.ebin.parents[2]}"))
    return checks


def _database_checks(settings: Settings) -> list[Check]:
    """The database and SQLite as the service sees them (`Hexlocal.diagnostics()`)."""
    from hexlocal_core.errors import HexlocalError

    path = settings.database_path
    if not settings.database_url and not path.exists():
        return [Check("database", OK, f"{path} (created on first use)")]

    async def work(service: Hexlocal) -> dict[str, Any]:
        return service.diagnostics().to_dict()

    try:
        facts = common.run_service(work, settings, load_models=False)
    except HexlocalError as exc:  # the message names the path and the fix
        return [
            Check(
                "database",
                FAIL,
                shown(str(exc)),
                "point DATABASE_PATH (or DATABASE_URL) at a database you can use",
            )
        ]
    model = facts.get("embedding_model")
    embedded = f", vectors by {model} ({facts.get('embedding_dims')} dims)" if model else ""
    if settings.served_with(model) is not settings:
        embedded += (
            f", kept while AI_EMBED_MODEL is unset (`hexlocal reindex` moves them to the "
            f"default, {settings.ai_embed_model})"
        )
    return [
        Check(
            "database",
            OK,
            f"{facts['database_path']}, schema {facts['schema_version']}/{facts['schema_known']}, "
            f"{facts['packages']} package(s), {facts['chunks']:,} chunks{embedded}",
        ),
        # The store only opens with its search extensions loaded: reaching here proves them.
        Check("engine", OK, str(facts["engine"])),
    ]


def _model_statuses(settings: Settings) -> tuple[ModelStatus, ...]:
    from hexlocal_core.adapters import model_sources

    return model_sources.model_status(settings)


def _model_check(status: ModelStatus) -> Check:
    """One model: present (where), off, cloud, or missing with the one fix.

    A missing embedder fails the check unless it downloads on first use (the hub check
    below then decides); a missing reranker only warns, since searches keep the fused order.
    """
    from hexlocal_core.adapters.model_sources import Presence, Which

    name = f"{status.which.value} model"
    if status.presence is Presence.PRESENT:
        return Check(name, OK, f"present ({status.source}): {status.path}")
    if status.usable or status.presence is Presence.OFF:
        return Check(name, OK, f"{status.presence.value}: {shown(status.detail)}")
    needed = status.which is Which.EMBEDDER
    detail = f"{status.presence.value} ({status.repo}): {shown(status.detail)}"
    if status.downloads_on_first_use:
        detail += "; downloads on first use"
        return Check(name, WARN, detail, shown(status.fix))
    return Check(name, FAIL if needed else WARN, detail, shown(status.fix))


def _hub_needed(models: tuple[ModelStatus, ...]) -> list[str]:
    """The repos the first searches would download (the hub is probed only for them)."""
    return [m.repo for m in models if m.downloads_on_first_use]


def _escalate_hub(checks: list[Check], models: tuple[ModelStatus, ...]) -> list[Check]:
    """A missing embedder whose hub does not answer: no search can embed, so FAIL."""
    hub = next((c for c in checks if c.name == "model hub"), None)
    embedder_waits = any(m.which.value == "embedder" and m.downloads_on_first_use for m in models)
    if hub is None or hub.status == OK or not embedder_waits:
        return checks
    return [
        attrs.evolve(c, status=FAIL, fix=c.fix or hub.fix) if c.name == "embedder model" else c
        for c in checks
    ]


# -- remote probes: one short request each, run together ---------------------------------------


async def _remote_checks(settings: Settings, hub_repos: list[str]) -> list[Check]:
    import aiohttp

    from hexlocal_core.adapters.http import join_url

    timeout = aiohttp.ClientTimeout(total=PROBE_TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        probes = [
            _hex_checks(http, settings),
            _one(
                _probe(
                    http,
                    "GitHub API",
                    join_url(settings.github_api_url, "/rate_limit"),
                    _bearer(settings.github_token.reveal() if settings.github_token else ""),
                    "GITHUB_API_URL",
                )
            ),
        ]
        if settings.ai_api_key:
            ai_url = join_url(settings.ai_api_url, "/models")
            headers = _bearer(settings.ai_api_key.reveal())
            probes.append(_one(_probe(http, "AI API", ai_url, headers, "AI_API_URL")))
        if hub_repos:
            probes.append(_one(_hub_check(http, hub_repos[0])))
        checks = [c for group in await asyncio.gather(*probes) for c in group]
    if not settings.ai_api_key:
        checks.append(Check("AI API", OK, "not configured (optional: curation uses rules alone)"))
    return checks


async def _one(check: Any) -> list[Check]:
    return [await check]


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


async def _hex_checks(http: aiohttp.ClientSession, settings: Settings) -> list[Check]:
    """The API, then the docs mirror: a HEAD of a docs tarball the API just named."""
    from hexlocal_core.adapters.http import join_url

    api_url = join_url(settings.hex_api_url, f"/packages/{PROBE_PACKAGE}")
    api, body = await _request(http, "hex.pm API", api_url, {}, "HEX_API_URL", read_json=True)
    version = body.get("latest_stable_version") if isinstance(body, dict) else None
    tarball = f"/docs/{PROBE_PACKAGE}-{version if isinstance(version, str) else PROBE_VERSION}"
    mirror_url = join_url(settings.hex_mirror, f"{tarball}.tar.gz")
    mirror, _ = await _request(
        http, "hex.pm docs mirror", mirror_url, {}, "HEX_MIRROR", method="HEAD"
    )
    return [api, mirror]


async def _hub_check(http: aiohttp.ClientSession, repo: str) -> Check:
    """The Hugging Face hub the models would come from (HF_ENDPOINT), asked about `repo`."""
    from hexlocal_core.adapters.hub import HubConfig

    hub = HubConfig.from_env()
    if hub.endpoint is None:
        from huggingface_hub import constants  # its default endpoint, not a copy of it

        endpoint = constants.ENDPOINT
    else:
        endpoint = hub.endpoint
    url = f"{endpoint.rstrip('/')}/api/models/{repo}"
    check = await _probe(http, "model hub", url, {}, "HF_ENDPOINT")
    if check.status == OK:
        return attrs.evolve(check, detail=f"{check.detail}: {repo} downloads on first use")
    return attrs.evolve(
        check,
        fix="check the network, proxy or HF_ENDPOINT, or install the model offline "
        "(`hexlocal models status` names how)",
    )


async def _probe(
    http: aiohttp.ClientSession, name: str, url: str, headers: dict[str, str], variable: str
) -> Check:
    check, _ = await _request(http, name, url, headers, variable)
    return check


async def _request(
    http: aiohttp.ClientSession,
    name: str,
    url: str,
    headers: dict[str, str],
    variable: str,
    *,
    method: str = "GET",
    read_json: bool = False,
) -> tuple[Check, Any]:
    """OK only for a 2xx answer (a 404 means the URL is wrong); never raises."""
    safe = redact_url(url)
    try:
        async with http.request(method, url, headers=headers, allow_redirects=True) as response:
            status = int(response.status)
            body = await response.json(content_type=None) if read_json and status < 300 else None
    except Exception as exc:  # timeouts, DNS, refused, bad JSON: all "not usable from here"
        reason = shown(str(exc)) or type(exc).__name__
        return Check(name, WARN, f"{safe} did not answer ({reason})", _remote_fix(variable)), None
    if 200 <= status < 300:
        return Check(name, OK, f"{safe} answered {status}"), body
    return Check(name, WARN, f"{safe} answered HTTP {status}", _remote_fix(variable, status)), None


def _remote_fix(variable: str, status: int | None = None) -> str:
    if status in (401, 403):
        return "check the token or key for this service"
    if status == 404:
        return f"check {variable}: the service answered but has no such path"
    return f"check the network or proxy, or {variable}; indexed packages still work offline"
