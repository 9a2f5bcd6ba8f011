"""`hexlocal serve --http` as a hosted agent meets it: the real server in a subprocess on
127.0.0.1, driven by the official `mcp` SDK's streamable HTTP client, against the fake
hex.pm serving a real tarball, with the real default build (local embedder; reranker off).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from hexlocal_core.config import Settings
from hexlocal_mcp.http import HttpOptions, refusal
from tests.fakes.fake_hex import FakeHex, Fault
from tests.support.mcp_servers import (
    PACKAGE,
    TOKEN,
    VERSION,
    Running,
    free_port,
    mcp_http_client,
    server_env,
    wait_healthy,
)
from tests.support.paths import REPO_ROOT
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

# Long enough for a first ingestion on a loaded test machine to finish after SIGTERM.
GRACE_S = 60.0


@pytest.fixture
def grace_s() -> float:
    return GRACE_S


@pytest.fixture
async def http_server(fake_hex: FakeHex, tmp_path: Path, grace_s: float) -> AsyncIterator[Running]:
    env = server_env(fake_hex, tmp_path)
    env.update(
        HEXLOCAL_SYNC_ON_START="false",
        HEXLOCAL_HTTP_TOKEN=TOKEN,
        HEXLOCAL_HTTP_SHUTDOWN_GRACE_S=str(grace_s),
    )
    port = free_port()
    log = tmp_path / "stderr.log"
    with log.open("wb") as errors:
        process = subprocess.Popen(
            [sys.executable, "-m", "hexlocal_cli", "serve", "--http", "--port", str(port)],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errors,
        )
    running = Running(process, port, log)
    try:
        yield running
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        assert process.stdout is not None
        process.stdout.close()


async def test_http_serves_tools_with_the_token_and_refuses_without(
    http_server: Running, fake_hex: FakeHex
) -> None:
    health = await wait_healthy(http_server)
    body = health.json()
    assert body["status"] == "ok" and body["database"] == "ok", body
    assert body["packages"] == 0 and body["version"]
    assert TOKEN not in health.text and "index.db" not in health.text

    async with mcp_http_client(TOKEN) as http:
        async with streamable_http_client(f"{http_server.base}/mcp", http_client=http) as (r, w):
            async with ClientSession(r, w) as session:
                init = await session.initialize()
                assert init.server_info.name == "hexlocal"
                names = {tool.name for tool in (await session.list_tools()).tools}
                assert {"search_docs", "get_docs", "remember", "recall"} <= names
                result = await session.call_tool(
                    "search_docs",
                    {"package": PACKAGE, "query": "checkout a worker"},
                    read_timeout_seconds=180,
                )
    assert not result.is_error, (result.content, http_server.stderr())
    data = result.structured_content
    assert data is not None, result.content
    assert (data["version"], data["version_source"]) == (VERSION, "mix.lock")
    hits = {hit["ref"]: hit for hit in data["results"]}
    assert "NimblePool.html#checkout!/4" in hits, list(hits)
    assert hits["NimblePool.html#checkout!/4"]["hexdocs_url"].endswith(
        f"/{VERSION}/NimblePool.html#checkout!/4"
    )
    # The health endpoint now counts the package the call indexed.
    async with httpx2.AsyncClient() as plain:
        assert (await plain.get(f"{http_server.base}/health")).json()["packages"] == 1

    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}
    for headers in (
        accept,
        {**accept, "Authorization": f"Bearer {TOKEN}x"},
        {**accept, "Authorization": f"Bearer {TOKEN[:-1]}"},
        {**accept, "Authorization": TOKEN},  # no scheme
    ):
        async with httpx2.AsyncClient() as plain:
            refused = await plain.post(f"{http_server.base}/mcp", json=initialize, headers=headers)
        assert refused.status_code == 401, (headers, refused.text)
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert TOKEN not in refused.text

    # The SDK client without the token fails on the 401 instead of talking to the server.
    with pytest.raises(BaseException) as failed:  # noqa: B017 - the SDK's error type varies
        async with mcp_http_client(None) as http:
            url = f"{http_server.base}/mcp"
            async with streamable_http_client(url, http_client=http) as (r, w):
                async with ClientSession(r, w) as session:
                    await asyncio.wait_for(session.initialize(), 30)
    # (the SDK reports a 401 as a generic "error response"; the server's log names it)
    assert "error response" in _messages(failed.value), repr(failed.value)
    assert "refused POST /mcp: missing bearer token" in http_server.stderr()

    http_server.process.send_signal(signal.SIGTERM)
    code = await asyncio.to_thread(http_server.process.wait, 15)
    assert code == 0, http_server.stderr()
    assert http_server.process.stdout is not None
    assert http_server.process.stdout.read() == b"", "the HTTP server wrote to stdout"
    assert "hexlocal MCP server stopped" in http_server.stderr()
    assert len(fake_hex.requests_to(f"/repo/docs/{PACKAGE}-{VERSION}.tar.gz")) == 1


async def call_search(base: str, answers: list[dict[str, object]] | None = None) -> None:
    """One search_docs call; its structured answer is appended to `answers` as soon as it
    arrives (after a SIGTERM the client's own teardown may fail: the server is gone)."""
    answers = [] if answers is None else answers
    async with mcp_http_client(TOKEN) as http:
        async with streamable_http_client(f"{base}/mcp", http_client=http) as (r, w):
            async with ClientSession(r, w) as session:
                await session.initialize()
                # Listed first, as agents do: the SDK otherwise lists the tools after the
                # answer (to check it against the output schema), which a server that has
                # stopped accepting connections cannot serve.
                await session.list_tools()
                result = await session.call_tool(
                    "search_docs",
                    {"package": PACKAGE, "query": "checkout a worker"},
                    read_timeout_seconds=180,
                )
                assert not result.is_error, result.content
                assert result.structured_content is not None
                answers.append(result.structured_content)


async def sigterm_while_downloading(
    running: Running, fake_hex: FakeHex, delay: float, answers: list[dict[str, object]]
) -> tuple[asyncio.Task[None], int, float]:
    """Start a search whose docs download takes `delay` s, SIGTERM the server once the
    download has begun; (the call's task, the exit code, seconds from signal to exit)."""
    fake_hex.faults.append(Fault(f"/repo/docs/{PACKAGE}-*", delay=delay))
    await wait_healthy(running)
    in_flight = asyncio.create_task(call_search(running.base, answers))

    def downloading() -> bool:
        assert not in_flight.done(), running.stderr()
        return bool(fake_hex.requests_to(f"/repo/docs/{PACKAGE}-{VERSION}.tar.gz"))

    await eventually(
        downloading, what="the server asking for the docs", timeout=60, detail=running.stderr
    )
    started = time.monotonic()
    running.process.send_signal(signal.SIGTERM)
    code = await asyncio.to_thread(running.process.wait, GRACE_S + 30)
    return in_flight, code, time.monotonic() - started


@pytest.mark.timeout(240)  # the server's grace (GRACE_S) and its exit are bounded inside
async def test_sigterm_lets_an_in_flight_call_finish(
    http_server: Running, fake_hex: FakeHex
) -> None:
    answers: list[dict[str, object]] = []
    in_flight, code, _ = await sigterm_while_downloading(http_server, fake_hex, 2.0, answers)
    await asyncio.wait_for(in_flight, 10)
    assert code == 0, http_server.stderr()
    assert answers, f"the call was cut off by the signal:\n{http_server.stderr()}"
    refs = [hit["ref"] for hit in answers[0]["results"]]  # type: ignore[attr-defined]
    assert "NimblePool.html#checkout!/4" in refs, (refs, http_server.stderr())
    assert "hexlocal MCP server stopped" in http_server.stderr()


@pytest.mark.parametrize("grace_s", [3.0])
@pytest.mark.timeout(240)
async def test_sigterm_bounds_a_call_that_would_outlast_the_grace(
    http_server: Running, fake_hex: FakeHex
) -> None:
    answers: list[dict[str, object]] = []
    in_flight, code, took = await sigterm_while_downloading(http_server, fake_hex, 300, answers)
    in_flight.cancel()
    with contextlib.suppress(BaseException):
        await in_flight
    assert code == 0, http_server.stderr()
    assert took < 3.0 + 15, http_server.stderr()  # generous: a loaded machine
    assert not answers
    assert "hexlocal MCP server stopped" in http_server.stderr()


def run_serve(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    keep = ("HEXLOCAL_MODEL_CACHE", "HOME", "PATH")
    base = {name: os.environ[name] for name in keep if name in os.environ}
    base.update(PYTHONPATH=str(REPO_ROOT), DATABASE_PATH=str(tmp_path / "i.db"), **env)
    return subprocess.run(
        [sys.executable, "-m", "hexlocal_mcp", "--http", *args],
        cwd=REPO_ROOT,
        env=base,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_http_without_a_token_refuses_to_start(tmp_path: Path) -> None:
    result = run_serve(tmp_path, "--port", "0")
    assert result.returncode == 2, result
    assert "HEXLOCAL_HTTP_TOKEN" in result.stderr and not result.stdout
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "i.db").exists()  # refused before anything was opened


@pytest.mark.parametrize(
    ("token", "options", "refused_for"),
    [
        ("", HttpOptions(), "needs a bearer token"),
        ("short", HttpOptions(), "at least 16"),
        ("", HttpOptions(host="0.0.0.0", no_auth=True), "only allowed on a loopback"),
        (TOKEN, HttpOptions(no_auth=True), "drop one"),
        (TOKEN, HttpOptions(), None),
        (TOKEN, HttpOptions(host="0.0.0.0"), None),
        ("", HttpOptions(host="::1", no_auth=True), None),
        ("", HttpOptions(host="localhost", no_auth=True), None),
    ],
)
def test_when_the_http_server_refuses_to_start(
    token: str, options: HttpOptions, refused_for: str | None, tmp_path: Path
) -> None:
    settings = Settings.from_env({"HEXLOCAL_HTTP_TOKEN": token, "PROJECT_ROOT": str(tmp_path)})
    problem = refusal(settings, options)
    if refused_for is None:
        assert problem is None
    else:
        assert problem is not None and refused_for in problem
        assert token == "" or token not in problem


def test_settings_mask_the_http_token(tmp_path: Path) -> None:
    settings = Settings.from_env({"HEXLOCAL_HTTP_TOKEN": TOKEN, "PROJECT_ROOT": str(tmp_path)})
    assert settings.http_token.reveal() == TOKEN
    assert TOKEN not in repr(settings) and TOKEN not in str(settings)
    assert TOKEN not in str(settings.describe())


def test_the_token_can_come_from_a_file(tmp_path: Path) -> None:
    secret = tmp_path / "token"
    secret.write_text(f"{TOKEN}\n")
    env = {"HEXLOCAL_HTTP_TOKEN_FILE": str(secret), "PROJECT_ROOT": str(tmp_path)}
    settings = Settings.from_env(env)
    assert settings.http_token.reveal() == TOKEN and not settings.warnings
    assert TOKEN not in repr(settings)

    missing = Settings.from_env({**env, "HEXLOCAL_HTTP_TOKEN_FILE": str(tmp_path / "nope")})
    assert not missing.http_token
    assert any("HEXLOCAL_HTTP_TOKEN_FILE" in w for w in missing.warnings)
    # An unreadable file leaves no token, so the server refuses rather than opening up.
    assert refusal(missing, HttpOptions()) is not None


def _messages(error: BaseException) -> str:
    """Every message in an exception and the groups and causes it wraps."""
    parts = [str(error)]
    for inner in getattr(error, "exceptions", ()):
        parts.append(_messages(inner))
    if error.__cause__ is not None:
        parts.append(_messages(error.__cause__))
    return " | ".join(parts)
