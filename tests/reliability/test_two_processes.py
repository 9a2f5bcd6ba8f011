"""Two MCP server processes on ONE database file, driven hard at the same time.

Each is `python -m hexlocal_mcp` of this checkout (the repository first on PYTHONPATH,
whatever else is installed) over real stdio, with the default build (the local
embedder; reranker off), driven by the official `mcp` SDK client. Each client makes
CALLS mixed calls (search_docs on a pre-indexed package, remember, recall,
list_indexed_packages) while the first server also ingests another package. Then:
zero error results, no "database is locked" reaching a caller, every remembered request
curated exactly once (queue rows, curation_log rows and memories counted in the file),
the ingest complete, and the file consistent.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import attrs
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult, TextContent

from hexlocal_core.index.sqlite.db import connect
from tests.fakes.fake_hex import FakeHex
from tests.support.harness import consistency
from tests.support.paths import REPO_ROOT
from tests.support.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

CALLS = 500  # per client
INDEXED = ("jason", "1.4.4")  # pre-indexed by `hexlocal ingest` before the servers start
INGESTED = ("nimble_options", "1.1.1")  # ingested by server A during the traffic
# One cycle of the mix: 4 searches, 2 remembers, 2 recalls, 2 listings in every 10 calls.
MIX: tuple[str, ...] = (
    *("search", "remember", "recall", "list", "search"),
    *("recall", "search", "list", "remember", "search"),
)
QUERIES = ("decode a JSON string", "Jason.encode!/2", "pretty print", "escape html", "keys atoms")
CALL_TIMEOUT_S = 120.0
SETTLE_TIMEOUT_S = 180.0
TROUBLE = ("database is locked", "database is busy", "Traceback", "internal error")


@attrs.define
class Drive:
    """What one client saw."""

    name: str
    calls: int = 0
    errors: list[str] = attrs.field(factory=list)
    request_ids: list[str] = attrs.field(factory=list)
    kinds: Counter[str] = attrs.field(factory=Counter)
    seconds: float = 0.0


def server_env(fake: FakeHex, tmp_path: Path, name: str) -> dict[str, str]:
    keep = ("HEXLOCAL_MODEL_CACHE", "XDG_DATA_HOME", "XDG_CACHE_HOME", "HOME", "PATH")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(
        PYTHONPATH=str(REPO_ROOT),  # the checkout under test
        HF_HUB_OFFLINE="1",
        HEX_API_URL=fake.api_url,
        HEX_MIRROR=fake.mirror_url,
        PROJECT_ROOT=str(tmp_path / "project"),
        DATABASE_PATH=str(tmp_path / "shared.db"),
        AI_RERANK_MODEL="off",
        INGEST_TIMEOUT_MS="1000",  # answer with progress; the job continues meanwhile
        MCP_LOG_FILE=str(tmp_path / f"{name}.log"),
    )
    return env


def text_of(result: CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


async def call(session: ClientSession, drive: Drive, tool: str, **args: Any) -> CallToolResult:
    result = await session.call_tool(tool, args, read_timeout_seconds=CALL_TIMEOUT_S)
    drive.calls += 1
    drive.kinds[tool] += 1
    text = text_of(result)
    if result.is_error or any(t in text for t in TROUBLE):
        drive.errors.append(f"{tool}({args}): {text[:300]}")
    return result


async def run_client(fake: FakeHex, tmp_path: Path, name: str, *, ingest: bool) -> Drive:
    drive = Drive(name)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "hexlocal_mcp"],
        env=server_env(fake, tmp_path, name),
        cwd=str(REPO_ROOT),
    )
    started = time.perf_counter()
    with (tmp_path / f"{name}.stderr").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                if ingest:
                    package, version = INGESTED
                    await call(session, drive, "search_docs", package=package, query="schema",
                               version=version)  # fmt: skip
                for i in range(CALLS - int(ingest)):
                    await one_call(session, drive, i)
                if ingest:
                    await wait_ingested(session, drive)
    drive.seconds = time.perf_counter() - started
    return drive


async def one_call(session: ClientSession, drive: Drive, i: int) -> None:
    kind = MIX[i % len(MIX)]
    package, version = INDEXED
    if kind == "search":
        query = QUERIES[i % len(QUERIES)]
        await call(session, drive, "search_docs", package=package, query=query, version=version)
    elif kind == "remember":
        text = f"Lesson {drive.name}-{i}: Jason option {i} matters when decoding payload {i * 7}"
        result = await call(session, drive, "remember", texts=[text], package=package)
        if result.structured_content:
            drive.request_ids += [r["request_id"] for r in result.structured_content["requests"]]
    elif kind == "recall":
        await call(session, drive, "recall", query=f"Jason option {i % 50}")
    else:
        await call(session, drive, "list_indexed_packages")


async def wait_ingested(session: ClientSession, drive: Drive) -> None:
    """Polls (bounded) until the background ingest of INGESTED has finished."""
    package, _ = INGESTED

    async def ended() -> dict[str, Any] | None:
        result = await call(session, drive, "ingestion_status", package=package)
        jobs = (result.structured_content or {}).get("jobs", [])
        ok = jobs and jobs[0].get("state") in ("done", "indexed", "failed")
        return jobs[0] if ok else None

    job = await eventually(
        ended, what=f"the ingest of {package} ending", timeout=SETTLE_TIMEOUT_S, every=0.5
    )
    if job["state"] == "failed":
        drive.errors.append(f"ingest failed: {job}")


async def settle(fake: FakeHex, tmp_path: Path, ids: list[str]) -> list[dict[str, Any]]:
    """A third, short-lived server reports every request once curation has settled."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "hexlocal_mcp"],
        env=server_env(fake, tmp_path, "settle"),
        cwd=str(REPO_ROOT),
    )
    with (tmp_path / "settle.stderr").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()

                async def settled() -> list[dict[str, Any]] | None:
                    result = await session.call_tool("remember_status", {"request_ids": ids})
                    rows: list[dict[str, Any]] = (result.structured_content or {}).get(
                        "requests", []
                    )
                    return rows if rows and all(r["status"] != "pending" for r in rows) else None

                return await eventually(
                    settled, what="curation settling", timeout=SETTLE_TIMEOUT_S, every=0.5
                )


async def preindex(fake: FakeHex, tmp_path: Path) -> None:
    """`hexlocal ingest jason@1.4.4`: the same default build the servers use."""
    package, version = INDEXED
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "hexlocal_cli",
        "ingest",
        f"{package}@{version}",
        env=server_env(fake, tmp_path, "setup"),
        cwd=str(REPO_ROOT),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), SETTLE_TIMEOUT_S)
    assert proc.returncode == 0, (out + err).decode()[-2000:]


async def test_two_servers_share_one_database(fake_hex: FakeHex, tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    await preindex(fake_hex, tmp_path)
    a, b = await asyncio.gather(
        run_client(fake_hex, tmp_path, "a", ingest=True),
        run_client(fake_hex, tmp_path, "b", ingest=False),
    )
    assert a.errors == [] and b.errors == [], (a.errors[:5], b.errors[:5])
    assert a.calls >= CALLS and b.calls >= CALLS
    ids = a.request_ids + b.request_ids
    assert len(ids) == len(set(ids)) == 2 * CALLS // len(MIX) * MIX.count("remember")
    statuses = await settle(fake_hex, tmp_path, ids)
    assert Counter(r["status"] for r in statuses) == {"done": len(ids)}, statuses[:5]

    db = tmp_path / "shared.db"
    assert consistency(db) == []
    conn = connect(db, readonly=True)
    try:
        queued = conn.execute("SELECT status, count(*) FROM remember_queue GROUP BY 1").fetchall()
        logged = conn.execute(
            "SELECT count(*), count(DISTINCT request_id) FROM curation_log"
        ).fetchall()[0]
        memories = conn.execute("SELECT count(*) FROM memories").fetchall()[0][0]
        packages = {
            str(r[0]): str(r[1]) for r in conn.execute("SELECT name, version FROM packages")
        }
    finally:
        conn.close()
    assert {str(r[0]): r[1] for r in queued} == {"done": len(ids)}
    assert tuple(logged) == (len(ids), len(ids)), "a request was curated twice, or never"
    assert memories == len(ids)  # every text is distinct: each one became a memory
    assert packages == dict([INDEXED, INGESTED])
    for name in ("a", "b", "settle"):
        log_text = (tmp_path / f"{name}.log").read_text()
        assert "database is locked" not in log_text, name
