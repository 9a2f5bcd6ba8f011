"""Team mode as a team meets it: two `hexlocal serve --http` processes on one PostgreSQL
(a real PostgreSQL 16 with pgvector, from pgserver), driven by the official MCP SDK client
over streamable HTTP, with the real default build (local embedder; reranker off) and the
fake hex.pm serving a real tarball.

1,000 mixed calls (search, remember, recall, list) go to both servers while the first
search makes one of them ingest: every call answers without error, the package is
downloaded and stored once, every remembered text is curated exactly once (no request
lost, no memory twice), and each server records its own usage.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_hex import FakeHex
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

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

psycopg = pytest.importorskip("psycopg")
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

CALLS = 1_000
CLIENTS_PER_SERVER = 4
QUERIES = ("checkout a worker", "pool size", "NimblePool.checkout!/4", "lazy initialization")


@contextlib.contextmanager
def _server(env: dict[str, str], log: Path) -> Iterator[Running]:
    port = free_port()
    with log.open("wb") as errors:
        process = subprocess.Popen(
            [sys.executable, "-m", "hexlocal_cli", "serve", "--http", "--port", str(port)],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )
    try:
        yield Running(process, port, log)
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextlib.asynccontextmanager
async def _session(base: str) -> AsyncIterator[ClientSession]:
    async with mcp_http_client(TOKEN) as http:
        async with streamable_http_client(f"{base}/mcp", http_client=http) as (r, w):
            async with ClientSession(r, w) as session:
                await session.initialize()
                await session.list_tools()
                yield session


def _call(n: int, client: int) -> tuple[str, dict[str, Any]]:
    """The n-th call of a client: mostly searches, as an agent's traffic is."""
    kind = n % 10
    if kind < 5:
        return "search_docs", {"package": PACKAGE, "query": QUERIES[n % len(QUERIES)]}
    if kind < 7:
        text = f"client {client} lesson {n}: {PACKAGE} {QUERIES[n % 4]} needs care #{client}-{n}"
        return "remember", {"texts": [text], "package": PACKAGE}
    if kind < 9:
        return "recall", {"query": QUERIES[n % len(QUERIES)]}
    return "list_indexed_packages", {}


async def _client(base: str, client: int, calls: int, out: list[Any]) -> None:
    async with _session(base) as session:
        for n in range(calls):
            name, args = _call(n, client)
            result = await session.call_tool(name, args, read_timeout_seconds=300)
            out.append((name, args, result))


def _rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return list(conn.execute(sql).fetchall())


async def _drained(url: str, expected: int, timeout: float = 240.0) -> None:
    def counts() -> tuple[int, int]:
        total = _rows(url, "SELECT count(*) FROM remember_queue")[0][0]
        pending = _rows(url, "SELECT count(*) FROM remember_queue WHERE status = 'pending'")[0][0]
        return int(total), int(pending)

    await eventually(
        lambda: counts() == (expected, 0),
        what=f"all {expected} remembered texts queued and curated",
        timeout=timeout,
        every=0.5,
        detail=counts,
    )


async def test_two_servers_one_database(fake_hex: FakeHex, tmp_path: Path, pg_url: str) -> None:
    servers = []
    with contextlib.ExitStack() as stack:
        for name in ("a", "b"):
            (tmp_path / name).mkdir()
            env = server_env(fake_hex, tmp_path / name)
            env.update(
                DATABASE_URL=pg_url,
                HEXLOCAL_SYNC_ON_START="false",
                HEXLOCAL_HTTP_TOKEN=TOKEN,
                HEXLOCAL_SERVER_ID=f"server-{name}",
            )
            servers.append(stack.enter_context(_server(env, tmp_path / f"{name}.log")))
        for running in servers:
            await wait_healthy(running, timeout=120)

        results: list[Any] = []
        per_client = CALLS // (2 * CLIENTS_PER_SERVER)
        await asyncio.gather(
            *(
                _client(running.base, index * CLIENTS_PER_SERVER + c, per_client, results)
                for index, running in enumerate(servers)
                for c in range(CLIENTS_PER_SERVER)
            )
        )
        logs = "\n".join(s.stderr() for s in servers)
        assert len(results) == CALLS
        errors = [(name, args, r.content) for name, args, r in results if r.is_error]
        assert errors == [], (errors[:3], logs)
        # Every search answered from the one version the lock pins, with hits.
        searches = [r.structured_content for name, _, r in results if name == "search_docs"]
        waiting = [s for s in searches if not s["results"]]
        assert all(s["version"] == VERSION for s in searches)
        assert len(waiting) < len(searches) // 2, waiting[:2]

        remembered = sum(1 for name, _, _ in results if name == "remember")
        await _drained(pg_url, remembered)

    # The package: downloaded once, one copy of its chunks.
    assert len(fake_hex.requests_to(f"/repo/docs/{PACKAGE}-{VERSION}.tar.gz")) == 1
    (stored,) = _rows(pg_url, "SELECT chunk_count FROM packages")
    (chunks,) = _rows(pg_url, "SELECT count(*), count(DISTINCT (ref, ordinal)) FROM chunks")
    assert chunks[0] == chunks[1] == stored[0] > 0

    # Every request decided exactly once; no text stored twice.
    statuses = Counter(s for (s,) in _rows(pg_url, "SELECT status FROM remember_queue"))
    assert statuses == {"done": remembered}, statuses
    decided = Counter(
        rid
        for (rid,) in _rows(
            pg_url, "SELECT request_id FROM curation_log WHERE action <> 'deprecate'"
        )
    )
    assert len(decided) == remembered and set(decided.values()) == {1}, decided.most_common(3)
    texts = [t for (t,) in _rows(pg_url, "SELECT text FROM memories WHERE NOT deprecated")]
    assert texts and len(texts) == len(set(texts))

    # Usage is recorded per server.
    servers_seen = {s for (s,) in _rows(pg_url, "SELECT DISTINCT server FROM usage_events")}
    assert servers_seen == {"server-a", "server-b"}, servers_seen
