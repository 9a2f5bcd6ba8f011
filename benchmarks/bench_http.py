"""HTTP overhead benchmark: what serving MCP over streamable HTTP adds to each warm call.

The same warm calls, `search_docs` (one package, the project's locked version) and a cheap
one (`list_indexed_packages`), at three levels:

* facade: `Hexlocal.search_docs` / `list_packages` + `project_packages` in this process
  (`hexlocal_core.service.build`), what the tools delegate to;
* mcp: the same tools through fastmcp's in-memory client (`Client(create_server(...))`):
  argument validation, the tool body, `to_dict` and formatting, no transport;
* http: `hexlocal serve --http` in a subprocess on 127.0.0.1 with a bearer token, driven by
  the `mcp` SDK's streamable HTTP client (`streamable_http_client` + `ClientSession`), one
  session, each call one POST answered as server-sent events.

All three read one SQLite index built first by the facade from the fake hex.pm
(tests/fakes/fake_hex.py, serving the shared corpus) with the real local embedder;
AI_RERANK_MODEL=off, HF_HUB_OFFLINE=1, no background sync. The rounds rotate the order of
the levels so a change of machine load is spread over all three. Prints p50/p95 per call
and level, and the per-call overhead (http - facade, split into the MCP layer and the
HTTP transport), with /proc/loadavg before and after.

    python benchmarks/bench_http.py [--repeat N] [--db PATH] [--json]

The index goes to a temporary folder unless --db names a file (kept and reused).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx2
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from hexlocal_core.config import Settings  # noqa: E402
from hexlocal_core.evaluation.metrics import percentile  # noqa: E402
from hexlocal_core.service import Hexlocal, build  # noqa: E402

# Small packages of the corpus: the first search of each ingests it (untimed).
PACKAGES = {"nimble_pool": "1.1.0", "jason": "1.4.4"}
SEARCHES = (
    ("nimble_pool", "checkout a worker"),
    ("nimble_pool", "lazy pool initialization"),
    ("nimble_pool", "terminate a worker when the pool shuts down"),
    ("jason", "decode keys to atoms"),
    ("jason", "encode a struct"),
    ("jason", "pretty print json"),
)
LEVELS = ("facade", "mcp", "http")
CALLS = ("search_docs", "list_indexed_packages")
READ_TIMEOUT_S = 300.0
START_TIMEOUT_S = 180.0

Call = Callable[[str, dict[str, Any]], Awaitable[int]]  # (tool, arguments) -> answer bytes


def lock_text() -> str:
    """A mix.lock pinning PACKAGES (the checksums are not checked by hexlocal)."""
    rows = [
        f'  "{name}": {{:hex, :{name}, "{version}", "{"0" * 64}", [:mix], [], "hexpm", '
        f'"{"0" * 64}"}},'
        for name, version in PACKAGES.items()
    ]
    return "%{\n" + "\n".join(rows) + "\n}\n"


def bench_env(work: Path, db: Path, hex_base: str, token: str) -> dict[str, str]:
    keep = ("HEXLOCAL_MODEL_CACHE", "XDG_DATA_HOME", "XDG_CACHE_HOME", "HOME", "PATH")
    env = {name: os.environ[name] for name in keep if name in os.environ}
    project = work / "project"
    project.mkdir(parents=True, exist_ok=True)
    (project / "mix.lock").write_text(lock_text())
    env.update(
        PYTHONPATH=str(REPO),
        HF_HUB_OFFLINE="1",
        HEX_API_URL=f"{hex_base}/api",
        HEX_MIRROR=f"{hex_base}/repo",
        PROJECT_ROOT=str(project),
        DATABASE_PATH=str(db),
        AI_RERANK_MODEL="off",
        HEXLOCAL_SYNC_ON_START="false",  # no background indexing while timing
        HEXLOCAL_SYNC_ELIXIR="false",
        INGEST_TIMEOUT_MS="600000",  # the warm-up search waits for its ingestion
        HEXLOCAL_HTTP_TOKEN=token,
        MCP_LOG_LEVEL="warning",
    )
    return env


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def fake_hex(log: Path) -> Iterator[str]:
    """The fake hex.pm on a free loopback port; yields its base URL."""
    with log.open("wb") as errors:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.fakes.fake_hex", "--port", "0"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
    try:
        assert process.stdout is not None
        base = process.stdout.readline().strip()
        if not base.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"fake hex did not start: {log.read_text()[-2000:]}")
        yield base
    finally:
        process.terminate()
        process.wait(10)


# -- the three levels -----------------------------------------------------------------------


def facade_call(service: Hexlocal) -> Call:
    """What the tools delegate to, and nothing more: no serializing (the MCP layer's)."""

    async def call(tool: str, arguments: dict[str, Any]) -> int:
        if tool == "search_docs":
            await service.search_docs(arguments["package"], arguments["query"])
        else:
            service.list_packages()
            await service.project_packages()
        return 0

    return call


@contextlib.asynccontextmanager
async def mcp_level(settings: Settings) -> AsyncIterator[Call]:
    from fastmcp import Client

    from hexlocal_mcp.server import create_server

    async with Client(create_server(settings=settings)) as client:

        async def call(tool: str, arguments: dict[str, Any]) -> int:
            result = await client.call_tool(tool, arguments, timeout=READ_TIMEOUT_S)
            return _answer_bytes(result.structured_content, result.content)

        yield call


@contextlib.asynccontextmanager
async def http_server(env: dict[str, str], log: Path) -> AsyncIterator[str]:
    """`hexlocal serve --http` on a free loopback port; yields its base URL once healthy."""
    port = free_port()
    with log.open("wb") as errors:
        process = subprocess.Popen(
            [sys.executable, "-m", "hexlocal_cli", "serve", "--http", "--port", str(port)],
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        await _wait_healthy(base, process, log)
        yield base
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(process.wait, 30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


async def _wait_healthy(base: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    async with httpx2.AsyncClient() as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"the HTTP server exited: {log.read_text()[-3000:]}")
            with contextlib.suppress(httpx2.TransportError):
                if (await client.get(f"{base}/health")).status_code == 200:
                    return
            await asyncio.sleep(0.2)
    raise RuntimeError(f"the HTTP server was not healthy in {START_TIMEOUT_S:.0f} s")


@contextlib.asynccontextmanager
async def http_level(base: str, token: str, timings: dict[str, float]) -> AsyncIterator[Call]:
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Authorization": f"Bearer {token}"}
    async with create_mcp_http_client(headers=headers) as http:
        started = time.perf_counter()
        async with streamable_http_client(f"{base}/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                timings["initialize_ms"] = (time.perf_counter() - started) * 1000
                # Listed once up front, as agents do (the SDK checks answers against the
                # output schemas it lists; listing inside a timed call would skew it).
                await session.list_tools()

                async def call(tool: str, arguments: dict[str, Any]) -> int:
                    result = await session.call_tool(
                        tool, arguments, read_timeout_seconds=READ_TIMEOUT_S
                    )
                    if result.is_error:
                        raise RuntimeError(f"{tool} failed over HTTP: {result.content}")
                    return _answer_bytes(result.structured_content, result.content)

                yield call


def _answer_bytes(structured: Any, content: Sequence[Any]) -> int:
    text = sum(len(getattr(block, "text", "") or "") for block in content)
    return len(json.dumps(structured, default=str)) + text


# -- timing ------------------------------------------------------------------------------------


def workload() -> list[tuple[str, dict[str, Any]]]:
    """One round: every search, and as many cheap calls, alternating."""
    calls: list[tuple[str, dict[str, Any]]] = []
    for package, query in SEARCHES:
        calls.append(("search_docs", {"package": package, "query": query}))
        calls.append(("list_indexed_packages", {}))
    return calls


async def timed_round(call: Call, samples: dict[str, list[float]], sizes: dict[str, int]) -> None:
    for tool, arguments in workload():
        started = time.perf_counter()
        size = await call(tool, arguments)
        samples[tool].append((time.perf_counter() - started) * 1000)
        sizes[tool] = max(sizes.get(tool, 0), size)


async def ingest(service: Hexlocal, console: Console) -> None:
    for package in PACKAGES:
        started = time.perf_counter()
        result = await service.search_docs(package, "warm up")
        if not result.to_dict().get("results"):
            raise RuntimeError(f"{package} answered nothing: {result.to_dict().get('notices')}")
        console.print(f"{package}: ready in {time.perf_counter() - started:.1f} s", style="dim")


async def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    console = Console(highlight=False, width=120, stderr=args.json)
    token = secrets.token_hex(32)
    db = args.db or work / "http.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    load_before = loadavg()
    with fake_hex(work / "fake_hex.log") as hex_base:
        env = bench_env(work, db, hex_base, token)
        settings = Settings.from_env(env)
        samples: dict[str, dict[str, list[float]]] = {
            level: {tool: [] for tool in CALLS} for level in LEVELS
        }
        sizes: dict[str, dict[str, int]] = {level: {} for level in LEVELS}
        timings: dict[str, float] = {}
        async with build(settings) as service:
            await ingest(service, console)
            async with (
                mcp_level(settings) as in_memory,
                http_server(env, work / "serve.log") as base,
                http_level(base, token, timings) as over_http,
            ):
                levels: dict[str, Call] = {
                    "facade": facade_call(service),
                    "mcp": in_memory,
                    "http": over_http,
                }
                for call in levels.values():  # first calls load models and caches: untimed
                    await timed_round(call, {tool: [] for tool in CALLS}, {})
                for round_no in range(args.repeat):
                    shift = round_no % len(LEVELS)
                    for level in LEVELS[shift:] + LEVELS[:shift]:
                        await timed_round(levels[level], samples[level], sizes[level])
    result = {
        "samples_ms": samples,
        "answer_bytes": sizes,
        "http_initialize_ms": timings.get("initialize_ms"),
        "loadavg_before": load_before,
        "loadavg_after": loadavg(),
        "repeat": args.repeat,
    }
    result["summary"] = summarize(samples)
    if not args.json:
        console.print(latency_table(result))
        console.print(overhead_table(result["summary"]))
        console.print(
            f"HTTP connect + initialize: {result['http_initialize_ms']:.1f} ms (once per "
            f"session); load average before {load_before}, after {result['loadavg_after']}"
        )
    return result


def summarize(samples: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, float]]:
    """Per call: p50/p95 per level, and the overheads between levels at p50."""
    out: dict[str, dict[str, float]] = {}
    for tool in CALLS:
        row: dict[str, float] = {}
        for level in LEVELS:
            values = samples[level][tool]
            row[f"{level}_p50"] = percentile(values, 50)
            row[f"{level}_p95"] = percentile(values, 95)
        row["mcp_layer_p50"] = row["mcp_p50"] - row["facade_p50"]
        row["http_transport_p50"] = row["http_p50"] - row["mcp_p50"]
        row["overhead_p50"] = row["http_p50"] - row["facade_p50"]
        out[tool] = row
    return out


def latency_table(result: dict[str, Any]) -> Table:
    table = Table(title="warm call latency, ms (p50 / p95)", title_justify="left")
    table.add_column("call")
    table.add_column("n", justify="right")
    for level in LEVELS:
        table.add_column(level, justify="right")
    table.add_column("answer bytes", justify="right")
    for tool in CALLS:
        row = result["summary"][tool]
        n = len(result["samples_ms"]["http"][tool])
        cells = [f"{row[f'{lv}_p50']:.1f} / {row[f'{lv}_p95']:.1f}" for lv in LEVELS]
        table.add_row(tool, str(n), *cells, str(result["answer_bytes"]["http"].get(tool, "")))
    return table


def overhead_table(summary: dict[str, dict[str, float]]) -> Table:
    table = Table(title="per-call overhead at p50, ms", title_justify="left")
    table.add_column("call")
    table.add_column("MCP layer (mcp - facade)", justify="right")
    table.add_column("HTTP transport (http - mcp)", justify="right")
    table.add_column("total (http - facade)", justify="right")
    for tool, row in summary.items():
        table.add_row(
            tool,
            f"{row['mcp_layer_p50']:.1f}",
            f"{row['http_transport_p50']:.1f}",
            f"{row['overhead_p50']:.1f}",
        )
    return table


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed rounds per level")
    parser.add_argument("--db", type=Path, default=None, help="keep the index in this file")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    with tempfile.TemporaryDirectory(prefix="hexlocal-bench-http-") as tmp:
        result = asyncio.run(run(args, Path(tmp)))
    if args.json:
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
