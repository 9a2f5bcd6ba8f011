"""The MCP tools through an in-process `fastmcp.Client`: the contract, every tool, error
results, progress, background continuation and one ingestion per package.

The service is the real one over real SQLite and the real parser, fed by the fake hex.pm
serving real tarballs; the embedder is the deterministic HashingEmbedder (these tests are
about the MCP face, not ranking quality).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from fastmcp import Client
from fastmcp.client.client import CallToolResult
from mcp_types import TextContent

from hexlocal_core.config import Settings
from hexlocal_core.errors import ConfigError
from hexlocal_core.model import HexPackageInfo
from hexlocal_core.service import Hexlocal, build
from hexlocal_mcp.server import ServiceFactory, create_server
from tests.fakes.fake_github import FakeGitHub
from tests.fakes.fake_hex import FakeHex
from tests.support.helpers import HashingEmbedder
from tests.support.hex_fixtures import client_for, settings_for
from tests.support.paths import REPO_ROOT
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

PACKAGE = "nimble_pool"
VERSION = "1.1.0"
DOCS = f"/repo/docs/{PACKAGE}-{VERSION}.tar.gz"
API = f"/api/packages/{PACKAGE}"

# name -> (parameters in order, required, readOnlyHint, openWorldHint)
CONTRACT: dict[str, tuple[list[str], list[str], bool, bool]] = {
    "search_docs": (
        ["query", "package", "packages", "version", "limit", "examples_only"],
        ["query"],
        True,
        True,
    ),
    "get_docs": (["identifier", "package", "version"], ["identifier"], True, True),
    "diff_versions": (
        ["package", "from_version", "to_version", "kind", "limit", "offset"],
        ["package"],
        True,
        True,
    ),
    "upgrade_impact": (["package", "to_version", "from_version"], ["package"], True, True),
    "ingestion_status": (["package"], [], True, False),
    "search_project_docs": (["query", "limit"], ["query"], True, False),
    "list_indexed_packages": ([], [], True, False),
    "remember": (["texts", "package", "version", "tags"], ["texts"], False, False),
    "remember_status": (["request_ids"], ["request_ids"], True, False),
    "recall": (
        ["query", "limit", "package", "include_deprecated"],
        ["query"],
        True,
        False,
    ),
    "search_github_issues": (
        ["query", "package", "repo", "org", "type", "state", "limit"],
        ["query"],
        True,
        True,
    ),
    "get_token_usage": (["from", "until"], [], True, False),
}


class SlowEmbedder(HashingEmbedder):
    """Takes `delay` seconds per batch, so a job lasts long enough to watch."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    async def embed(self, texts: Sequence[str]) -> Any:
        await asyncio.sleep(self.delay)
        return await super().embed(texts)


def factory_for(
    settings: Settings,
    embedder: HashingEmbedder | None = None,
    patch: Callable[[Hexlocal], None] | None = None,
) -> ServiceFactory:
    def factory() -> Hexlocal:
        service = build(
            settings,
            embedder=embedder or HashingEmbedder(),
            reranker=None,
            registry=client_for(settings),
            load_models=False,
        )
        if patch is not None:
            patch(service)
        return service

    return factory


@pytest.fixture
async def fake_github() -> AsyncIterator[FakeGitHub]:
    async with FakeGitHub() as gh:
        yield gh


@pytest.fixture
def settings(fake_hex: FakeHex, fake_github: FakeGitHub, tmp_path: Path) -> Settings:
    return settings_for(fake_hex, tmp_path, ai_rerank_model="off", github_api_url=fake_github.url)


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[Client[Any]]:
    async with Client(create_server(factory_for(settings))) as c:
        yield c


def text_of(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def call(client: Client[Any], tool: str, **arguments: Any) -> CallToolResult:
    return await client.call_tool(tool, arguments, raise_on_error=False)


# -- the contract -----------------------------------------------------------------------------


async def test_tool_contract(client: Client[Any]) -> None:
    tools = {t.name: t for t in await client.list_tools()}
    assert sorted(tools) == sorted(CONTRACT)
    for name, (params, required, read_only, open_world) in CONTRACT.items():
        tool = tools[name]
        schema = tool.input_schema
        assert list(schema["properties"]) == params, name
        assert sorted(schema.get("required", [])) == sorted(required), name
        for param in params:
            assert schema["properties"][param].get("description"), (name, param)
        hints = tool.annotations
        assert hints is not None and hints.title and tool.title == hints.title, name
        assert hints.read_only_hint is read_only, name
        assert hints.open_world_hint is open_world, name
        assert hints.destructive_hint is False, name
        assert tool.description and tool.output_schema, name
    assert tools["search_docs"].input_schema["properties"]["limit"]["maximum"] == 20


# -- every tool, on a real ingestion ---------------------------------------------------------


async def test_search_then_every_docs_tool(client: Client[Any], fake_hex: FakeHex) -> None:
    found = await call(client, "search_docs", package=PACKAGE, query="checkout", version=VERSION)
    assert not found.is_error, text_of(found)
    data = found.structured_content
    assert data is not None and data["package"] == PACKAGE and data["version"] == VERSION
    refs = [hit["ref"] for hit in data["results"]]
    assert "NimblePool.html#checkout!/4" in refs
    text = text_of(found)
    checkout = next(h for h in data["results"] if h["ref"] == "NimblePool.html#checkout!/4")
    assert f"ref: {checkout['ref']}" in text and f"url: {checkout['hexdocs_url']}" in text

    exact = await call(client, "get_docs", package=PACKAGE, identifier="NimblePool.checkout!/4")
    assert not exact.is_error, text_of(exact)
    assert exact.structured_content is not None
    hit = exact.structured_content["results"][0]
    assert hit["ref"] == "NimblePool.html#checkout!/4" and hit["exact"]
    assert hit["hexdocs_url"] in text_of(exact)

    status = await call(client, "ingestion_status", package=PACKAGE)
    assert status.structured_content is not None
    assert status.structured_content["jobs"][0]["state"] in ("indexed", "done")

    listed = await call(client, "list_indexed_packages")
    assert listed.structured_content is not None
    assert [(p["name"], p["version"]) for p in listed.structured_content["packages"]] == [
        (PACKAGE, VERSION)
    ]
    assert len(fake_hex.requests_to("/repo/docs/*")) == 1


async def test_notices_lead_the_text(client: Client[Any]) -> None:
    await call(client, "search_docs", package="jason", query="decode", version="1.4.4")
    switched = await call(client, "search_docs", package="jason", query="decode", version="1.2.2")
    assert switched.structured_content is not None
    codes = [n["code"] for n in switched.structured_content["notices"]]
    assert "version_replaced" in codes
    assert text_of(switched).startswith("NOTICE [version_replaced]")


async def test_memory_tools(client: Client[Any]) -> None:
    lessons = [
        "NimblePool.checkout!/4 runs the function in the caller; keep it short.",
        "Use NimblePool.stop/3 in test teardown to avoid leaking workers.",
    ]
    queued = await call(client, "remember", texts=lessons, package=PACKAGE, tags=["pooling"])
    assert not queued.is_error, text_of(queued)
    assert queued.structured_content is not None
    ids = [row["request_id"] for row in queued.structured_content["requests"]]
    assert len(ids) == 2 and "remember_status" in text_of(queued)

    async def curated() -> list[dict[str, Any]] | None:  # the worker runs in the background
        status = await call(client, "remember_status", request_ids=ids)
        assert status.structured_content is not None
        rows: list[dict[str, Any]] = status.structured_content["requests"]
        return rows if all(row["status"] != "pending" for row in rows) else None

    await eventually(curated, what="curation handling both remembered lessons", every=0.05)

    recalled = await call(client, "recall", query="NimblePool teardown stop", package=PACKAGE)
    assert not recalled.is_error, text_of(recalled)
    assert recalled.structured_content is not None
    texts = [m["text"] for m in recalled.structured_content["memories"]]
    assert any("stop/3" in t for t in texts), texts


async def test_github_issues_and_usage(client: Client[Any], fake_github: FakeGitHub) -> None:
    issues = await call(client, "search_github_issues", query="decode", repo="michalmuskala/jason")
    assert not issues.is_error, text_of(issues)
    assert issues.structured_content is not None
    hits = issues.structured_content["issues"]
    assert hits and all(h["repo"] == "michalmuskala/jason" for h in hits)
    assert hits[0]["html_url"] in text_of(issues)

    usage = await call(client, "get_token_usage", **{"from": "2025-01-01", "until": "2025-01-02"})
    assert not usage.is_error, text_of(usage)
    assert usage.structured_content is not None
    assert usage.structured_content["from"] == "2025-01-01"
    assert "Token usage" in text_of(usage)


# -- errors are results, with messages that say what to fix --------------------------------------


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("search_docs", {"package": "no_such_pkg", "query": "x"}, "no_such_pkg"),
        ("search_docs", {"package": PACKAGE, "query": "x", "version": "1.x"}, "1.x"),
        ("search_docs", {"package": PACKAGE, "query": "   "}, "query is empty"),
        ("search_docs", {"package": PACKAGE, "query": "x", "limit": 50}, "limit"),
        ("search_docs", {"package": PACKAGE, "query": "x", "limit": 0}, "limit"),
        ("search_docs", {"package": "Not A Name", "query": "x"}, "Not A Name"),
        ("get_docs", {"package": PACKAGE, "identifier": "how do I pool?"}, "not an identifier"),
        ("recall", {"query": ""}, "query is empty"),
        ("remember", {"texts": []}, "texts"),
        ("remember_status", {"request_ids": []}, "request_ids"),
        ("get_token_usage", {"from": "May 1st"}, "YYYY-MM-DD"),
        ("search_github_issues", {"query": "x"}, "repo"),
    ],
)
async def test_errors_are_actionable_results(
    client: Client[Any], tool: str, arguments: dict[str, Any], expected: str
) -> None:
    result = await call(client, tool, **arguments)
    assert result.is_error
    message = text_of(result)
    assert expected in message, message
    assert "Traceback" not in message


async def test_limit_error_names_the_range(client: Client[Any]) -> None:
    message = text_of(await call(client, "search_docs", package=PACKAGE, query="x", limit=50))
    assert "limit" in message and "20" in message and "50" in message


async def test_unexpected_error_is_generic_and_server_survives(settings: Settings) -> None:
    def boom() -> list[Any]:
        raise RuntimeError("secret internals")

    def patch(service: Hexlocal) -> None:
        service.list_packages = boom  # type: ignore[method-assign]

    async with Client(create_server(factory_for(settings, patch=patch))) as c:
        failed = await call(c, "list_indexed_packages")
        assert failed.is_error
        assert "internal error" in text_of(failed) and "secret" not in text_of(failed)
        again = await call(c, "ingestion_status")
        assert not again.is_error


async def test_failed_start_is_reported_by_every_tool() -> None:
    def factory() -> Hexlocal:
        raise ConfigError("DATABASE_PATH points at a directory; point it at a file")

    async with Client(create_server(factory)) as c:
        result = await call(c, "list_indexed_packages")
        assert result.is_error and "could not start" in text_of(result)
        assert "DATABASE_PATH" in text_of(result)


# -- progress, background continuation, one job per package --------------------------------------


async def test_progress_is_reported_while_ingesting(settings: Settings) -> None:
    slow = attrs.evolve(settings, embed_batch_size=4, ingest_timeout_ms=60_000)
    updates: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        updates.append((value, total, message))

    async with Client(create_server(factory_for(slow, embedder=SlowEmbedder(0.1)))) as c:
        result = await c.call_tool(
            "search_docs",
            {"package": PACKAGE, "query": "checkout", "version": VERSION},
            progress_handler=on_progress,
        )
    assert not result.is_error
    assert len(updates) >= 3, updates
    values = [u[0] for u in updates]
    assert values == sorted(values) and all(u[1] == 100.0 for u in updates)
    assert any(u[2] and "embedding" in u[2] and PACKAGE in u[2] for u in updates), updates


async def test_slow_ingestion_continues_in_background(
    settings: Settings, fake_hex: FakeHex
) -> None:
    quick = attrs.evolve(settings, embed_batch_size=4, ingest_timeout_ms=200)
    args = {"package": PACKAGE, "query": "checkout", "version": VERSION}
    async with Client(create_server(factory_for(quick, embedder=SlowEmbedder(0.1)))) as c:
        first = await call(c, "search_docs", **args)
        assert not first.is_error, text_of(first)
        assert first.structured_content is not None
        assert first.structured_content["ingestion"]["state"] == "running"
        assert not first.structured_content["results"]
        assert text_of(first).startswith("NOTICE [ingestion_in_progress]")

        async def ended() -> str | None:
            status = await call(c, "ingestion_status", package=PACKAGE)
            assert status.structured_content is not None
            state: str = status.structured_content["jobs"][0]["state"]
            return None if state == "running" else state

        assert await eventually(ended, what="the background ingestion ending", every=0.05) == "done"

        second = await call(c, "search_docs", **args)
        assert second.structured_content is not None
        assert not second.structured_content["ingestion"]
        assert "NimblePool.html#checkout!/4" in [
            h["ref"] for h in second.structured_content["results"]
        ]
    assert len(fake_hex.requests_to(DOCS)) == 1


async def test_search_answers_by_keyword_while_the_vectors_are_made(
    settings: Settings, fake_hex: FakeHex
) -> None:
    # What an MCP client sees of a package new to the index: hits from the keyword arm as
    # soon as its chunks are written, one notice saying so, the job still going.
    early = attrs.evolve(settings, embed_batch_size=4, answer_while_embedding=True)
    args = {"package": PACKAGE, "query": "checkout a worker", "version": VERSION}
    async with Client(create_server(factory_for(early, embedder=SlowEmbedder(0.1)))) as c:
        first = await call(c, "search_docs", **args)
        assert not first.is_error, text_of(first)
        data = first.structured_content
        assert data is not None and not data["ingestion"]
        assert "NimblePool.html#checkout!/4" in [h["ref"] for h in data["results"]]
        assert [n["code"] for n in data["notices"]] == ["embedding_in_progress"]
        assert "NOTICE [embedding_in_progress]" in text_of(first)
        status = await call(c, "ingestion_status", package=PACKAGE)
        assert status.structured_content is not None
        assert status.structured_content["jobs"][0]["progress"]["phase"] == "embedding"


async def test_concurrent_calls_start_one_ingestion(settings: Settings, fake_hex: FakeHex) -> None:
    # The first call's download is held until the second call has its version from the
    # registry (the step before it decides): the second arrives while the first job is in
    # flight, however loaded the machine.
    calls: set[asyncio.Task[Any]] = set()  # the tasks of the tool calls, not the job's

    def factory() -> Hexlocal:
        registry = client_for(settings)
        lookup = registry.package_info

        async def package_info(name: str) -> HexPackageInfo:
            info = await lookup(name)
            task = asyncio.current_task()
            if task is not None and not task.get_name().startswith("ingest:"):
                calls.add(task)
            return info

        registry.package_info = package_info  # type: ignore[method-assign]
        return build(
            settings,
            embedder=HashingEmbedder(),
            reranker=None,
            registry=registry,
            load_models=False,
        )

    held = fake_hex.hold(DOCS)
    args = {"package": PACKAGE, "query": "checkout", "version": VERSION}
    async with Client(create_server(factory)) as c:
        both = asyncio.gather(call(c, "search_docs", **args), call(c, "search_docs", **args))
        await eventually(
            lambda: fake_hex.requests_to(DOCS) and len(calls) == 2,
            what="the first download held and both calls past their version lookup",
            detail=lambda: (len(calls), [r.path for r in fake_hex.requests]),
        )
        held.set()
        one, two = await both
    for result in (one, two):
        assert not result.is_error, text_of(result)
        assert result.structured_content is not None and result.structured_content["results"]
    assert len(fake_hex.requests_to(DOCS)) == 1


# -- the examples that tell clients and assistants how to use the server -----------------------


def test_example_configs_and_assistant_guides() -> None:
    examples = REPO_ROOT / "examples"
    for name in ("claude-code.mcp.json", "cursor.mcp.json", "antigravity.mcp_config.json"):
        servers = json.loads((examples / "mcp" / name).read_text(encoding="utf-8"))["mcpServers"]
        assert servers["hexlocal"]["command"] == "hexlocal-mcp", name
        assert {s["command"] for s in servers.values()} & {"uvx", "pipx"}, name
        for server in servers.values():
            # No PyPI release exists: a runner must be given a wheel or a git URL, exactly.
            if server["command"] == "uvx":
                flag, spec, script = server["args"]
                assert flag == "--from", name
            elif server["command"] == "pipx":
                run, flag, spec, script = server["args"]
                assert (run, flag) == ("run", "--spec"), name
            else:
                continue
            assert spec.endswith(".whl") or spec.startswith("git+"), (name, spec)
            assert script == "hexlocal-mcp", name
    guide = (examples / "AGENTS.md").read_text(encoding="utf-8")
    assert guide == (examples / "CLAUDE.md").read_text(encoding="utf-8")
    for tool in ("search_docs", "get_docs", "remember", "recall", "ingestion_status"):
        assert f"`{tool}" in guide, tool


# -- the project's own docs, model downloads and phases ---------------------------------------


async def test_project_docs_answer_names_files_not_internal_keys(settings: Settings) -> None:
    project = settings.project_root
    (project / "README.md").write_text("# My app\n\nEvery test runs in a database sandbox.\n")
    async with build(settings, embedder=HashingEmbedder(), reranker=None, load_models=False) as s:
        await s.index_project_docs()
    async with Client(create_server(factory_for(settings))) as c:
        found = await call(c, "search_project_docs", query="database sandbox")
        listed = await call(c, "list_indexed_packages")
    assert not found.is_error, text_of(found)
    data = found.structured_content
    assert data is not None and data["package"] == "project docs"
    assert data["results"][0]["path"] == str((project / "README.md").resolve())
    assert text_of(found).startswith("project docs: 1 result(s)")
    assert f"file: {(project / 'README.md').resolve()}" in text_of(found)
    for shown in (text_of(found), json.dumps(data), text_of(listed)):
        assert "__project__" not in shown and "vlocal" not in shown and "url: \n" not in shown


DOWNLOADING = "downloading the embedder model"


class DownloadingEmbedder(HashingEmbedder):
    """Downloads its model on first use (as the local embedder does), reporting as it goes.
    Each step lasts until the client has seen it: a step is never lost between two polls
    of a loaded machine, and no step waits longer than it must."""

    STEPS = 4

    def __init__(self, updates: list[tuple[float, str | None]]) -> None:
        super().__init__()
        from hexlocal_core.adapters.model_fetch import FetchState

        self.download_state = FetchState(running=False)
        self._fetched = False
        self._updates = updates

    def _shown(self) -> int:
        return len({m for _, m in self._updates if m and DOWNLOADING in m})

    async def embed(self, texts: Sequence[str]) -> Any:
        from hexlocal_core.adapters.model_fetch import FetchState

        if not self._fetched:
            total = 90_000_000
            for step in range(self.STEPS):
                done = step * total // self.STEPS
                self.download_state = FetchState(True, "model.safetensors", done, total)
                await eventually(
                    lambda: self._shown() > step,  # noqa: B023 - awaited in this iteration
                    what=f"the client seeing download step {step + 1}",
                    detail=lambda: self._updates,
                )
            self.download_state = FetchState(running=False, message="downloaded")
            self._fetched = True
        return await super().embed(texts)


async def test_a_model_download_shows_as_progress_of_the_call(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hexlocal_mcp import tools

    monkeypatch.setattr(tools, "DOWNLOAD_POLL_S", 0.05)  # the steps wait for the polls
    updates: list[tuple[float, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        updates.append((value, message))

    factory = factory_for(settings, embedder=DownloadingEmbedder(updates))
    async with Client(create_server(factory)) as c:
        result = await c.call_tool(
            "search_docs",
            {"package": PACKAGE, "query": "checkout", "version": VERSION},
            progress_handler=on_progress,
        )
    assert not result.is_error, text_of(result)
    downloads = [m for _, m in updates if m and DOWNLOADING in m]
    assert len(downloads) == DownloadingEmbedder.STEPS, updates  # each step once, in order
    assert any("/90 MB" in m for m in downloads), downloads
    values = [v for v, _ in updates]
    assert values == sorted(values)  # MCP progress never goes back


def test_every_phase_has_a_progress_share() -> None:
    from hexlocal_core.model import Phase
    from hexlocal_mcp.tools import _PHASE_START

    assert set(_PHASE_START) == {phase.value for phase in Phase}
