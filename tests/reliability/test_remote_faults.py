"""Every remote call, broken six ways: the caller gets a clear message, the index is not
touched, and the MCP server answers the next call.

Remotes: the hex.pm API, the docs tarball mirror, GitHub search, the AI API's embeddings
(at ingest and at query time) and chat (curation). Faults (see `fault_proxy.py`):
timeout, connection reset, 429, 500, truncated body, wrong content type. Each remote's
fake sits behind a `FaultProxy`; the server is the real one (`create_server`) driven by
the in-memory fastmcp Client, on a service with fast retries.

"Not touched" is a digest of every table except the two that record attempts on
purpose: `ingest_jobs` (a failed job is kept with its error) and `usage_events` (failed
AI calls are accounted).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from fastmcp import Client
from fastmcp.client.client import CallToolResult
from mcp_types import TextContent

from hexlocal_core.adapters.github import GitHubIssues
from hexlocal_core.adapters.hex import HexClient
from hexlocal_core.adapters.http_policy import RetryPolicy
from hexlocal_core.adapters.openai_api import OpenAIChat, OpenAIEmbedder
from hexlocal_core.config import Settings
from hexlocal_core.index.sqlite.db import connect
from hexlocal_core.ports import Embedder
from hexlocal_core.service import Hexlocal, build
from hexlocal_mcp.server import create_server
from tests.fakes.fake_github import FakeGitHub
from tests.fakes.fake_hex import FakeHex, client_for
from tests.fakes.fake_openai import FakeOpenAI
from tests.fakes.fault_proxy import FAULTS, FaultProxy
from tests.support.harness import consistency, db_digest
from tests.support.helpers import HashingEmbedder
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

BOOKKEEPING = ("ingest_jobs", "usage_events")
AI_KEY = "sk-faults-0123456789"
FAST = RetryPolicy(attempts=2, base_s=0.01, cap_s=0.05)
EMBED_MODEL = "fake-embed-v1"


@attrs.define
class Rig:
    """The fakes, their proxies, and an MCP client on a service aimed at the proxies."""

    settings: Settings
    hex_proxy: FaultProxy
    gh_proxy: FaultProxy
    ai_proxy: FaultProxy
    ai: FakeOpenAI
    client: Client[Any]
    registry: HexClient

    @property
    def db(self) -> Path:
        return self.settings.database_path

    def digest(self) -> str:
        return db_digest(self.db, skip=BOOKKEEPING)

    def clear(self) -> None:
        for proxy in (self.hex_proxy, self.gh_proxy, self.ai_proxy):
            proxy.clear()

    async def call(self, tool: str, **arguments: Any) -> CallToolResult:
        return await self.client.call_tool(tool, arguments, raise_on_error=False)


def partial_packages(path: Path) -> list[str]:
    conn = connect(path, readonly=True)
    try:
        rows = conn.execute("SELECT name FROM packages WHERE status = 'partial'")
        return [str(r[0]) for r in rows]
    finally:
        conn.close()


def text_of(result: CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


def factory(settings: Settings, registry: HexClient, *, cloud: bool) -> Callable[[], Hexlocal]:
    """Cloud: the real OpenAI-compatible adapters; else the HashingEmbedder and no chat."""

    def make() -> Hexlocal:
        embedder: Embedder = OpenAIEmbedder(settings, retry=FAST) if cloud else HashingEmbedder()
        return build(
            settings,
            embedder=embedder,
            reranker=None,
            chat=OpenAIChat(settings, retry=FAST) if cloud else None,
            registry=registry,
            issues=GitHubIssues(settings, retry=FAST),
            load_models=False,
        )

    return make


@pytest.fixture
async def fakes(corpus: Path) -> AsyncIterator[tuple[FakeHex, FakeGitHub, FakeOpenAI]]:
    async with FakeHex(corpus=corpus) as hex_pm, FakeGitHub() as gh, FakeOpenAI(dims=8) as ai:
        ai.model = EMBED_MODEL
        yield hex_pm, gh, ai


async def make_rig(
    fakes: tuple[FakeHex, FakeGitHub, FakeOpenAI], tmp_path: Path, *, cloud: bool
) -> AsyncIterator[Rig]:
    hex_pm, gh, ai = fakes
    async with (
        FaultProxy(hex_pm.base_url) as hex_proxy,
        FaultProxy(gh.url) as gh_proxy,
        FaultProxy(ai.url.removesuffix("/v1")) as ai_proxy,
    ):
        project = tmp_path / "project"
        project.mkdir(exist_ok=True)
        env = {
            "PROJECT_ROOT": str(project),
            "DATABASE_PATH": str(tmp_path / "index.db"),
            "HEX_API_URL": f"{hex_proxy.url}/api",
            "HEX_MIRROR": f"{hex_proxy.url}/repo",
            "GITHUB_API_URL": gh_proxy.url,
            "AI_API_URL": f"{ai_proxy.url}/v1",
            "AI_API_KEY": AI_KEY,
            "AI_EMBED_MODEL": EMBED_MODEL,
            "AI_RERANK_MODEL": "off",
            "HEXLOCAL_HTTP_TIMEOUT_S": "0.5",
            # Every remembered text with any neighbour goes to the chat model.
            "MEMORY_CREATE_BELOW": "0",
            # A search waits for its ingestion, so an embeddings fault is the call's error
            # (answering by keyword meanwhile is tested in tests/usecases/test_ingest_service.py).
            "HEXLOCAL_ANSWER_WHILE_EMBEDDING": "false",
        }
        settings = Settings.from_env(env)
        # A hex.pm that did not answer at all is remembered; checked again on the next call.
        registry = client_for(settings, attempts=2, recheck_s=0.0)
        async with Client(create_server(factory(settings, registry, cloud=cloud))) as client:
            rig = Rig(settings, hex_proxy, gh_proxy, ai_proxy, ai, client, registry)
            # The server builds its service in the background: wait for it (and its
            # migrations) before any snapshot is taken.
            ready = await rig.call("list_indexed_packages")
            assert not ready.is_error, text_of(ready)
            yield rig


@pytest.fixture
async def rig(fakes: tuple[FakeHex, FakeGitHub, FakeOpenAI], tmp_path: Path) -> AsyncIterator[Rig]:
    async for r in make_rig(fakes, tmp_path, cloud=False):
        yield r


@pytest.fixture
async def cloud_rig(
    fakes: tuple[FakeHex, FakeGitHub, FakeOpenAI], tmp_path: Path
) -> AsyncIterator[Rig]:
    async for r in make_rig(fakes, tmp_path, cloud=True):
        yield r


# Attempts one failing call makes under FAST (two tries): each adapter retries what its
# policy calls transient. A search is interactive, so GitHub retries only 429 and 5xx; the
# AI API does not repeat a timeout (a slow model is not helped by asking again).
ATTEMPTS = {
    "hex": {"timeout": 2, "reset": 2, "429": 2, "500": 2, "truncated": 2, "content_type": 1},
    "github": {"timeout": 1, "reset": 1, "429": 2, "500": 2, "truncated": 1, "content_type": 1},
    "ai": {"timeout": 1, "reset": 2, "429": 2, "500": 2, "truncated": 2, "content_type": 1},
}


def assert_attempts(proxy: FaultProxy, remote: str, fault: str, calls: int = 1) -> None:
    """The faulted requests the proxy saw: the retries really happened (or really did not)."""
    expected = ATTEMPTS[remote][fault] * calls
    seen = len(proxy.hits)
    if fault == "reset" and remote != "ai":
        # aiohttp itself resends a GET once after a dropped connection (RFC 9112 9.3.1).
        assert expected <= seen <= 2 * expected, proxy.hits
    else:
        assert seen == expected, proxy.hits


def assert_clear_error(result: CallToolResult, *names: str) -> str:
    """An error result that names what failed (a URL, a package) and leaks no internals."""
    text = text_of(result)
    assert result.is_error, text
    assert "Traceback" not in text and "internal error" not in text, text
    assert any(name in text for name in names), (names, text)
    return text


# -- hex.pm: the API and the docs mirror -------------------------------------------------------


async def answers_after_its_check(rig: Rig, fault: str, tool: str, **arguments: Any) -> None:
    """After a timeout hex.pm is known not to answer: the next call fails at once, without
    a request, and starts the check that finds it back for the call after it."""
    if fault != "timeout":
        return
    fast = await rig.call(tool, **arguments)
    assert "not sent: the host is unreachable since" in assert_clear_error(fast, "jason")
    await rig.registry.http.checks_done()


@pytest.mark.parametrize("fault", FAULTS)
async def test_hex_api_fault(rig: Rig, fault: str) -> None:
    before = rig.digest()
    rig.hex_proxy.inject("/api/packages/*", fault)
    failed = await rig.call("search_docs", package="jason", query="decode")
    assert_clear_error(failed, f"{rig.hex_proxy.url}/api/packages/jason")
    assert_attempts(rig.hex_proxy, "hex", fault)
    assert rig.digest() == before
    rig.clear()
    await answers_after_its_check(rig, fault, "search_docs", package="jason", query="decode")
    ok = await rig.call("search_docs", package="jason", query="decode")
    assert not ok.is_error and ok.structured_content is not None, text_of(ok)
    assert ok.structured_content["results"]
    assert consistency(rig.db) == []


@pytest.mark.parametrize("fault", FAULTS)
async def test_docs_tarball_fault(rig: Rig, fault: str) -> None:
    before = rig.digest()
    rig.hex_proxy.inject("/repo/docs/*", fault)
    failed = await rig.call("search_docs", package="jason", query="decode", version="1.4.4")
    assert_clear_error(failed, "/repo/docs/jason-1.4.4.tar.gz")
    assert_attempts(rig.hex_proxy, "hex", fault)
    assert rig.digest() == before
    rig.clear()
    args = {"package": "jason", "query": "decode", "version": "1.4.4"}
    await answers_after_its_check(rig, fault, "search_docs", **args)
    ok = await rig.call("search_docs", package="jason", query="decode", version="1.4.4")
    assert not ok.is_error, text_of(ok)
    assert consistency(rig.db) == []


# -- GitHub -----------------------------------------------------------------------------------


@pytest.mark.parametrize("fault", FAULTS)
async def test_github_fault(rig: Rig, fault: str) -> None:
    before = rig.digest()
    rig.gh_proxy.inject("/search/issues", fault)
    args = {"query": "session not found", "repo": "zoedsoupe/anubis-mcp"}
    failed = await rig.call("search_github_issues", **args)
    assert_clear_error(failed, rig.gh_proxy.url, "GitHub")
    assert_attempts(rig.gh_proxy, "github", fault)
    assert rig.digest() == before
    rig.clear()
    ok = await rig.call("search_github_issues", **args)
    assert not ok.is_error, text_of(ok)


# -- the AI API -------------------------------------------------------------------------------


@pytest.mark.parametrize("fault", FAULTS)
async def test_embeddings_fault(cloud_rig: Rig, fault: str) -> None:
    rig = cloud_rig
    args = {"package": "nimble_pool", "query": "checkout a worker", "version": "1.1.0"}
    before = rig.digest()
    rig.ai_proxy.inject("/v1/embeddings", fault)
    failed = await rig.call("search_docs", **args)  # the ingest needs embeddings
    assert_clear_error(failed, f"{rig.ai_proxy.url}/v1/embeddings")
    assert_attempts(rig.ai_proxy, "ai", fault)
    assert AI_KEY not in text_of(failed)
    # The chunks were written before the vectors: they stay, 'partial', and nothing else.
    assert partial_packages(rig.db) == ["nimble_pool"]
    assert consistency(rig.db) == []
    assert rig.digest() != before
    rig.clear()
    indexed = await rig.call("search_docs", **args)
    assert not indexed.is_error and indexed.structured_content is not None, text_of(indexed)
    assert indexed.structured_content["results"]
    # Indexed now: a broken query embedding degrades to the keyword arm, with a notice.
    rig.ai_proxy.inject("/v1/embeddings", fault)
    degraded = await rig.call("search_docs", **args)
    assert not degraded.is_error and degraded.structured_content is not None
    data = degraded.structured_content
    assert data["results"] and data["notices"], data
    assert_attempts(rig.ai_proxy, "ai", fault, calls=2)
    assert AI_KEY not in text_of(degraded)
    assert consistency(rig.db) == []


@pytest.mark.parametrize("fault", FAULTS)
async def test_chat_fault(cloud_rig: Rig, fault: str) -> None:
    rig = cloud_rig
    first = await rig.call("remember", texts=["Ecto.Multi runs steps in one transaction"])
    assert not first.is_error, text_of(first)
    await wait_done(rig, first)
    rig.ai_proxy.inject("/v1/chat/completions", fault)
    second = await rig.call("remember", texts=["Ecto.Multi.run/3 takes a function"])
    [status] = await wait_done(rig, second)
    # The text is never lost: kept uncurated, and the reason names the failed call.
    assert status["curated"] is False and "curation model failed" in status["reason"]
    assert f"{rig.ai_proxy.url}/v1/chat/completions" in status["reason"], status
    assert_attempts(rig.ai_proxy, "ai", fault)
    assert AI_KEY not in str(status)
    rig.clear()
    rig.ai.reply('{"action": "create", "target_id": null, "text": null, "reason": "new"}')
    # The fake's vectors are seeded by text: this one lies near the first (cosine 0.41),
    # so the chat model is consulted (MEMORY_CREATE_BELOW=0).
    third = await rig.call("remember", texts=["Ecto.Multi.update/4 names each step"])
    [curated] = await wait_done(rig, third)
    assert curated["curated"] is True, str(curated)
    assert consistency(rig.db) == []


async def wait_done(rig: Rig, remembered: CallToolResult) -> list[dict[str, Any]]:
    assert remembered.structured_content is not None, text_of(remembered)
    ids = [r["request_id"] for r in remembered.structured_content["requests"]]

    async def handled() -> list[dict[str, Any]] | None:
        status = await rig.call("remember_status", request_ids=ids)
        assert status.structured_content is not None, text_of(status)
        rows: list[dict[str, Any]] = status.structured_content["requests"]
        return rows if all(r["status"] != "pending" for r in rows) else None

    return await eventually(handled, what="curation handling the request", every=0.05)
