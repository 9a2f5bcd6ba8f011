"""AI_API_KEY and GITHUB_TOKEN never show: not in logs, errors, tool results or CLI output.

A representative flow through the real MCP server (in-memory Client) with the real cloud
adapters against the fake AI API and the fake GitHub: ingest and search through API
embeddings, curated memories through the chat API, live issue search; then the same
remotes failing in every way that could carry a secret back: 401s whose bodies echo the
key (real APIs echo part of it), 5xx, rate limits, resets and truncated bodies (aiohttp's
response errors carry the request headers). Everything said is collected: every log
record at DEBUG (caplog, tracebacks included), the MCP_LOG_FILE, every tool result, and
`hexlocal doctor` / `usage` output; none may contain either secret.
"""

from __future__ import annotations

import base64
import json
import logging
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from fastmcp import Client
from fastmcp.client.client import CallToolResult
from mcp_types import TextContent

from hexlocal_core.adapters.github import GitHubIssues
from hexlocal_core.adapters.http_policy import RetryPolicy
from hexlocal_core.adapters.openai_api import OpenAIChat, OpenAIEmbedder
from hexlocal_core.config import Settings
from hexlocal_core.index.sqlite.db import connect
from hexlocal_core.service import Hexlocal, build
from hexlocal_mcp import logs
from hexlocal_mcp.server import create_server
from tests.fakes.fake_github import FakeGitHub, Fault
from tests.fakes.fake_hex import FakeHex, client_for
from tests.fakes.fake_openai import FakeOpenAI, Scripted
from tests.fakes.fault_proxy import FaultProxy
from tests.support.harness import CliHarness
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

AI_KEY = "sk-SECRETai7f3a9c1e5b2d4f6a8c0e"
GH_TOKEN = "ghp_SECRETgh0123456789abcdefABCDEF"
SECRETS = (AI_KEY, GH_TOKEN, AI_KEY[3:], GH_TOKEN[4:])  # also without their prefixes
FAST = RetryPolicy(attempts=2, base_s=0.01, cap_s=0.05)


@pytest.fixture
def logged(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> Iterator[Path]:
    """The MCP server's logging as `main()` sets it up, at DEBUG, plus caplog on the same
    loggers (they do not propagate to the root, where caplog listens by default)."""
    log_file = tmp_path / "mcp.log"
    names = (*logs.LOGGERS, "aiohttp")
    saved = {n: _logger_state(logging.getLogger(n)) for n in names}
    settings = Settings.from_env({"MCP_LOG_FILE": str(log_file), "MCP_LOG_LEVEL": "debug"})
    logs.configure(settings)
    for name in names:
        logger = logging.getLogger(name)
        logger.addHandler(caplog.handler)
        logger.setLevel(logging.DEBUG)
    try:
        yield log_file
    finally:
        for name, state in saved.items():
            logger = logging.getLogger(name)
            for handler in list(logger.handlers):
                if handler not in state[0] and handler is not caplog.handler:
                    handler.close()
            logger.handlers[:] = state[0]
            logger.setLevel(state[1])
            logger.propagate = state[2]


def _logger_state(logger: logging.Logger) -> tuple[list[logging.Handler], int, bool]:
    return list(logger.handlers), logger.level, logger.propagate


@pytest.fixture
async def remotes(
    corpus: Path,
) -> AsyncIterator[tuple[FakeHex, FakeGitHub, FakeOpenAI, FaultProxy, FaultProxy]]:
    async with FakeHex(corpus=corpus) as hex_pm, FakeGitHub() as gh, FakeOpenAI(dims=8) as ai:
        async with (
            FaultProxy(gh.url) as gh_proxy,
            FaultProxy(ai.url.removesuffix("/v1")) as ai_proxy,
        ):
            yield hex_pm, gh, ai, gh_proxy, ai_proxy


def settings_for(
    tmp_path: Path, hex_pm: FakeHex, gh_proxy: FaultProxy, ai_proxy: FaultProxy
) -> Settings:
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    return Settings.from_env(
        {
            "PROJECT_ROOT": str(project),
            "DATABASE_PATH": str(tmp_path / "index.db"),
            "HEX_API_URL": hex_pm.api_url,
            "HEX_MIRROR": hex_pm.mirror_url,
            "GITHUB_API_URL": gh_proxy.url,
            "GITHUB_TOKEN": GH_TOKEN,
            "AI_API_URL": f"{ai_proxy.url}/v1",
            "AI_API_KEY": AI_KEY,
            "AI_EMBED_MODEL": "fake-embed-v1",
            "AI_RERANK_MODEL": "off",
            "HEXLOCAL_HTTP_TIMEOUT_S": "0.5",
            "MEMORY_CREATE_BELOW": "0",
            # A failing embeddings API must be the call's error here, with its echo scrubbed.
            "HEXLOCAL_ANSWER_WHILE_EMBEDDING": "false",
        }
    )


def make_service(settings: Settings) -> Hexlocal:
    return build(
        settings,
        embedder=OpenAIEmbedder(settings, retry=FAST),
        reranker=None,
        chat=OpenAIChat(settings, retry=FAST),
        registry=client_for(settings),
        issues=GitHubIssues(settings, retry=FAST),
        load_models=False,
    )


class Transcript:
    """Everything the client saw."""

    def __init__(self, client: Client[Any]) -> None:
        self.client = client
        self.seen: list[str] = []

    async def call(self, tool: str, **arguments: Any) -> CallToolResult:
        result = await self.client.call_tool(tool, arguments, raise_on_error=False)
        self.seen.extend(b.text for b in result.content if isinstance(b, TextContent))
        self.seen.append(json.dumps(result.structured_content, default=str))
        return result


async def test_secrets_never_appear(
    remotes: tuple[FakeHex, FakeGitHub, FakeOpenAI, FaultProxy, FaultProxy],
    logged: Path,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hex_pm, gh, ai, gh_proxy, ai_proxy = remotes
    settings = settings_for(tmp_path, hex_pm, gh_proxy, ai_proxy)
    assert AI_KEY not in repr(settings) and GH_TOKEN not in str(settings)
    async with Client(create_server(lambda: make_service(settings))) as client:
        t = Transcript(client)
        await happy_path(t, ai)
        await ai_failures(t, ai, ai_proxy)
        await github_failures(t, gh, gh_proxy)
    # The fakes did receive the secrets: the flow really was authenticated.
    assert any(r.headers.get("Authorization") == f"Bearer {AI_KEY}" for r in ai.requests)
    assert any(GH_TOKEN in r.headers.get("Authorization", "") for r in gh.requests)

    cli = CliHarness(monkeypatch)
    cli.use(settings)
    monkeypatch.setenv("AI_API_KEY", AI_KEY)
    monkeypatch.setenv("GITHUB_TOKEN", GH_TOKEN)
    for args in (("doctor", "--json"), ("doctor",), ("usage", "--json"), ("-vv", "list")):
        result = await cli.run(*args)
        t.seen.append(result.output)

    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    records = [formatter.format(r) for r in caplog.records]
    assert len(records) > 20, records  # DEBUG logging really was on
    log_text = logged.read_text()
    assert "hexlocal" in log_text
    everything = {"log records": "\n".join(records), "MCP_LOG_FILE": log_text}
    everything["tool results and CLI output"] = "\n".join(t.seen)
    for where, text in everything.items():
        for secret in SECRETS:
            assert secret not in text, f"a secret appears in the {where}"


async def happy_path(t: Transcript, ai: FakeOpenAI) -> None:
    found = await t.call(
        "search_docs", package="nimble_pool", query="checkout a worker", version="1.1.0"
    )
    assert not found.is_error, t.seen[-2]
    first = await t.call("remember", texts=["NimblePool workers are checked out lazily"])
    await drain(t, first)
    ai.reply('{"action": "create", "target_id": null, "text": null, "reason": "distinct"}')
    second = await t.call("remember", texts=["NimblePool.checkout!/4 takes a timeout"])
    await drain(t, second)
    await t.call("recall", query="checkout timeout")
    issues = await t.call("search_github_issues", query="session", repo="zoedsoupe/anubis-mcp")
    assert not issues.is_error, t.seen[-2]
    await t.call("get_token_usage")


async def ai_failures(t: Transcript, ai: FakeOpenAI, proxy: FaultProxy) -> None:
    echo = {"error": {"message": f"Incorrect API key provided: {AI_KEY}", "code": 401}}
    ai.script("embeddings", Scripted(401, body=echo))
    failed = await t.call("search_docs", package="jason", query="decode", version="1.4.4")
    assert failed.is_error and "AI_API_KEY" in t.seen[-2], t.seen[-2]
    ai.script("embeddings", Scripted(500, body={"error": {"message": f"boom {AI_KEY}"}}))
    ai.script("embeddings", Scripted(500, body={"error": {"message": f"boom {AI_KEY}"}}))
    await t.call("search_docs", package="nimble_pool", query="pool", version="1.1.0")
    ai.script("chat/completions", Scripted(401, body=echo))
    await drain(t, await t.call("remember", texts=["NimblePool pools need a worker module"]))
    for fault in ("reset", "truncated", "429", "content_type", "timeout"):
        proxy.inject("/v1/*", fault)
        await t.call("search_docs", package="nimble_pool", query="lazy", version="1.1.0")
        await drain(t, await t.call("remember", texts=[f"NimblePool note about {fault}"]))
        proxy.clear()


async def github_failures(t: Transcript, gh: FakeGitHub, proxy: FaultProxy) -> None:
    args = {"query": "session", "repo": "zoedsoupe/anubis-mcp"}
    gh.fail_next(Fault(401, {"message": f"Bad credentials: {GH_TOKEN}"}))
    rejected = await t.call("search_github_issues", **args)
    assert rejected.is_error and "GITHUB_TOKEN" in t.seen[-2], t.seen[-2]
    gh.fail_next(Fault(500, f"upstream said {GH_TOKEN}"), times=2)
    await t.call("search_github_issues", **args)
    gh.rate_limit_403(reset_epoch=1_900_000_000)
    await t.call("search_github_issues", **args)
    gh.fail_next(Fault(422, {"message": "Validation Failed", "errors": [{"message": GH_TOKEN}]}))
    await t.call("search_github_issues", **args)
    for fault in ("reset", "truncated", "content_type", "timeout"):
        proxy.inject("/search/issues", fault)
        await t.call("search_github_issues", **args)
        proxy.clear()


async def drain(t: Transcript, remembered: CallToolResult) -> None:
    """Waits until curation has handled the request (bounded), recording its status."""
    assert remembered.structured_content is not None, t.seen[-2]
    ids = [r["request_id"] for r in remembered.structured_content["requests"]]

    async def handled() -> bool:
        status = await t.call("remember_status", request_ids=ids)
        assert status.structured_content is not None
        return all(r["status"] != "pending" for r in status.structured_content["requests"])

    await eventually(handled, what="curation handling the request", every=0.05)


# -- credentials in the URLs, hostile echoes, server-supplied strings ----------------------

HEX_PASS, HEX_QUERY = "hexPASSurl4471", "hexQUERYtok9902"
MIRROR_PASS, MIRROR_QUERY = "mirrorPASS5521", "mirrorQUERY7730"
GH_URL_PASS, GH_URL_QUERY = "ghPASSurl3318", "ghQUERYtok6604"
AI_URL_PASS, AI_URL_QUERY = "aiPASSurl8812", "aiQUERYkey2207"
URL_SECRETS = (HEX_PASS, HEX_QUERY, MIRROR_PASS, MIRROR_QUERY)
URL_SECRETS += (GH_URL_PASS, GH_URL_QUERY, AI_URL_PASS, AI_URL_QUERY)
ALL_SECRETS = SECRETS + URL_SECRETS
_ERROR_PREFIX = '{"error": {"message": "'  # what the fake's JSON error body starts with


def credential_settings(
    tmp_path: Path, hex_pm: FakeHex, gh_proxy: FaultProxy, ai_proxy: FaultProxy
) -> Settings:
    """The same rig as `settings_for`, with credentials in all four URLs: userinfo (as
    private mirrors use) and a query-string token."""
    hex_host = hex_pm.base_url.removeprefix("http://")
    gh_host = gh_proxy.url.removeprefix("http://")
    ai_host = ai_proxy.url.removeprefix("http://")
    base = settings_for(tmp_path, hex_pm, gh_proxy, ai_proxy)
    return attrs.evolve(
        base,
        hex_api_url=f"http://hexuser:{HEX_PASS}@{hex_host}/api?token={HEX_QUERY}",
        hex_mirror=f"http://mirror:{MIRROR_PASS}@{hex_host}/repo?api_key={MIRROR_QUERY}",
        github_api_url=f"http://ghuser:{GH_URL_PASS}@{gh_host}?access_token={GH_URL_QUERY}",
        ai_api_url=f"http://aiuser:{AI_URL_PASS}@{ai_host}/v1?api_key={AI_URL_QUERY}",
    )


def cut_inside_the_key(shown: int) -> str:
    """An echo whose 300-character excerpt cut falls inside the key, `shown` chars in."""
    pad = 300 - len(_ERROR_PREFIX) - len("Incorrect API key provided: ") - shown
    return "p" * pad + "Incorrect API key provided: " + AI_KEY


async def test_url_credentials_and_hostile_echoes_never_appear(
    remotes: tuple[FakeHex, FakeGitHub, FakeOpenAI, FaultProxy, FaultProxy],
    logged: Path,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    hex_pm, gh, ai, gh_proxy, ai_proxy = remotes
    settings = credential_settings(tmp_path, hex_pm, gh_proxy, ai_proxy)
    ai.echo_authorization = True  # every answer names "Bearer <key>" as its model
    async with Client(create_server(lambda: make_service(settings))) as client:
        t = Transcript(client)
        await hex_failures(t, hex_pm)
        found = await t.call(
            "search_docs", package="nimble_pool", query="checkout a worker", version="1.1.0"
        )
        assert not found.is_error, t.seen[-2]
        ai.reply('{"action": "create", "target_id": null, "text": null, "reason": "distinct"}')
        await drain(t, await t.call("remember", texts=["NimblePool workers start lazily"]))
        await drain(t, await t.call("remember", texts=["NimblePool.checkout!/4 has a timeout"]))
        await t.call("get_token_usage")
        await hostile_ai_echoes(t, ai)
        await github_failures(t, gh, gh_proxy)
        await github_url_echoes(t, gh)
    # The credentials were really used: Basic auth from the hex URLs' userinfo, the query
    # tokens as queries, the key as a Bearer header.
    basic = "Basic " + base64.b64encode(f"hexuser:{HEX_PASS}".encode()).decode()
    assert any(r.headers.get("Authorization") == basic for r in hex_pm.requests)
    assert any(r.query == f"api_key={MIRROR_QUERY}" for r in hex_pm.requests_to("/repo/*"))
    assert any(r.headers.get("Authorization") == f"Bearer {AI_KEY}" for r in ai.requests)

    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    records = [formatter.format(r) for r in caplog.records]
    assert len(records) > 20, records
    everything = {
        "log records": "\n".join(records),
        "MCP_LOG_FILE": logged.read_text(),
        "tool results": "\n".join(t.seen),
        **database_text(settings.database_path),
    }
    assert "embeddings" in everything["table ingest_jobs"]  # the failures were recorded
    assert "fake-embed-v1" in everything["table packages"]  # the configured model, not the echo
    assert "****@" in everything["tool results"]  # URLs were shown, masked
    for where, text in everything.items():
        plain = unescaped(text)  # an escaped echo shown as it came is a leak too
        for secret in ALL_SECRETS:
            assert secret not in text and secret not in plain, f"{secret!r} appears in the {where}"


def unescaped(text: str) -> str:
    """`text` with JSON's \\uXXXX and \\/ escapes undone (once and twice)."""
    for _ in range(2):
        text = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)
        text = text.replace("\\/", "/")
    return text


async def hex_failures(t: Transcript, hex_pm: FakeHex) -> None:
    """Every hex.pm message names a URL: unknown package, a version without docs, a broken
    mirror, a long rate limit, a login page. Ingest failures land in ingest_jobs.error."""
    unknown = await t.call("search_docs", package="no_such_pkg", query="x")
    assert unknown.is_error and "no_such_pkg?token=****" in t.seen[-2], t.seen[-2]
    await t.call("search_docs", package="telemetry", query="attach", version="1.4.1")
    for fault in ({"status": 500}, {"status": 418}, {"html": True}, {"reset": True}):
        hex_pm.fail("/repo/docs/*", **fault)  # type: ignore[arg-type]
        failed = await t.call("search_docs", package="jason", query="decode", version="1.4.4")
        assert failed.is_error, t.seen[-2]
        hex_pm.faults.clear()
    hex_pm.fail("/api/packages/*", status=429, retry_after=3600)
    await t.call("search_docs", package="plug", query="conn")
    hex_pm.faults.clear()


async def hostile_ai_echoes(t: Transcript, ai: FakeOpenAI) -> None:
    """401s echoing the key: cut at the excerpt boundary, JSON-escaped, with `\\/`, and
    echoing the URL's own credentials."""
    escaped = AI_KEY.replace("-", "\\u002d")
    every_char = "".join(f"\\u{ord(c):04x}" for c in AI_KEY)
    raws = [
        json.dumps({"error": {"message": cut_inside_the_key(n), "code": 401}})
        for n in (2, 9, len(AI_KEY) - 1)
    ]
    raws += [
        '{"error": {"message": "Incorrect API key provided: ' + escaped + '"}}',
        '{"error": {"message": "see https:\\/\\/x\\/keys: ' + every_char + '"}}',
        '{"error": {"message": "' + f"{AI_URL_PASS} and {AI_URL_QUERY} rejected" + '"}}',
    ]
    for raw in raws:
        ai.script("embeddings", Scripted(401, raw=raw))
        failed = await t.call("search_docs", package="jason", query="decode", version="1.4.4")
        assert failed.is_error and "AI_API_KEY" in t.seen[-2], t.seen[-2]
    ai.script("chat/completions", Scripted(401, raw=raws[3]))
    await drain(t, await t.call("remember", texts=["NimblePool pools need a worker module"]))


async def github_url_echoes(t: Transcript, gh: FakeGitHub) -> None:
    args = {"query": "session", "repo": "zoedsoupe/anubis-mcp"}
    echo = f"{GH_URL_PASS} {GH_URL_QUERY} " + GH_TOKEN.replace("_", "\\u005f")
    gh.fail_next(Fault(401, {"message": echo}))
    rejected = await t.call("search_github_issues", **args)
    assert rejected.is_error and "****@" in t.seen[-2], t.seen[-2]
    gh.fail_next(Fault(403, {"message": "m" * 280 + " " + GH_TOKEN}))
    await t.call("search_github_issues", **args)


def database_text(path: Path) -> dict[str, str]:
    """Every row of every ordinary table (vec0 and FTS5 shadow tables included), as text."""
    conn = connect(path, readonly=True)
    try:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
                " AND sql NOT LIKE 'CREATE VIRTUAL TABLE%' ORDER BY name"
            )
        ]
        tables = {}
        for name in names:
            cells = [
                v.decode("utf-8", "ignore") if isinstance(v, bytes) else str(v)
                for row in conn.execute(f'SELECT * FROM "{name}"')
                for v in row
            ]
            tables[f"table {name}"] = "\n".join(cells)
        assert {"table packages", "table ingest_jobs", "table usage_events"} <= set(tables)
        return tables
    finally:
        conn.close()


async def test_doctor_masks_url_credentials(
    remotes: tuple[FakeHex, FakeGitHub, FakeOpenAI, FaultProxy, FaultProxy],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hex_pm, _, _, gh_proxy, ai_proxy = remotes
    settings = credential_settings(tmp_path, hex_pm, gh_proxy, ai_proxy)
    cli = CliHarness(monkeypatch)
    cli.use(settings)
    monkeypatch.setenv("AI_API_URL", settings.ai_api_url)
    monkeypatch.setenv("AI_API_KEY", AI_KEY)
    outputs = [(await cli.run(*args)).output for args in (("doctor", "--json"), ("doctor",))]
    for output in outputs:
        assert "hexlocal" in output.lower() or "database" in output.lower(), output
        for secret in URL_SECRETS + SECRETS:
            assert secret not in output, secret
