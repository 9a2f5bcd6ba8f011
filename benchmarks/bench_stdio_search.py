"""Stdio search benchmark: warm `search_docs` round trips through a real MCP client.

Spawns the server the way an MCP client does (`python -m hexlocal_mcp`, or `--command`;
this checkout on PYTHONPATH) and drives it with the official MCP SDK client (`stdio_client`
+ `ClientSession`), against the loopback fake hex.pm serving the shared corpus, rerank off.
The first `search_docs` of each package indexes it through the server itself (kept in
--db, so a second run starts warm); a few untimed calls then warm the process up, and
`--repeat` calls per package, cycling over that package's queries from the dev set, are
timed at the client: the round trip a user's agent waits for.

Each call is also made in process on the facade (`build(...)` + `search_docs`, as
bench_search.py does), alternating with the stdio one so both see the same machine load;
what the face adds before the transport (`to_dict` + `formatting.search_result`) is timed
too. stdio minus in-process is the transport + formatting cost.

Target: stdio p50 <= 30 ms per call without rerank.

    python benchmarks/bench_stdio_search.py [--db PATH] [--packages a,b] [--repeat N]
        [--warmup N] [--command CMD] [--queries FILE] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
from attrs import frozen
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from hexlocal_core.config import Settings  # noqa: E402
from hexlocal_core.evaluation import load_queries  # noqa: E402
from hexlocal_core.evaluation.metrics import percentile  # noqa: E402
from hexlocal_core.service import Hexlocal, build  # noqa: E402
from hexlocal_mcp import formatting  # noqa: E402
from tests.fakes.fake_hex import FakeHex  # noqa: E402

SHARED = REPO.parent / "shared"
DEFAULT_QUERIES = SHARED / "eval" / "dev.jsonl"
DEFAULT_DB = REPO / ".hexlocal-cache" / "bench" / "stdio_search.db"
DEFAULT_PACKAGES = ("jason", "mint", "finch", "decimal", "nimble_options")
TARGET_P50_MS = 30.0
STAGES = ("embed", "fts", "vec", "fuse")  # the engine's laps (hydrating hits is not one)
INGEST_TIMEOUT_S = 900.0  # a first call indexes with the real embedder: minutes on 2 cores
CALL_TIMEOUT_S = 60.0
# Passed through to the server (and the in-process build): what picks the model and caches.
PASSED_ENV = (
    "HOME",
    "PATH",
    "HEXLOCAL_MODEL_CACHE",
    "HEXLOCAL_EMBED_MODEL_DIR",
    "AI_EMBED_MODEL",
    "EMBED_BATCH_SIZE",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
)


@frozen
class Probe:
    """One search a user makes: package@version and the question."""

    package: str
    version: str | None
    query: str

    def arguments(self) -> dict[str, Any]:
        args: dict[str, Any] = {"package": self.package, "query": self.query}
        if self.version is not None:
            args["version"] = self.version
        return args


def probes_by_package(path: Path, packages: Sequence[str]) -> dict[str, list[Probe]]:
    """Each package's queries from the query set (a package the set lacks is refused)."""
    queries = load_queries(path)
    by_package: dict[str, list[Probe]] = {}
    for name in packages:
        found = [Probe(q.package, q.version, q.query) for q in queries if q.package == name]
        if not found:
            raise SystemExit(f"no query for {name} in {path}")
        by_package[name] = found
    return by_package


def schedule(probes: Sequence[Probe], calls: int) -> list[Probe]:
    """`calls` searches cycling over the package's queries, the same order in both phases."""
    return [probes[i % len(probes)] for i in range(calls)]


def server_env(fake: FakeHex, db: Path, project: Path, log_file: Path) -> dict[str, str]:
    env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
    env.update(
        PYTHONPATH=str(REPO),  # this checkout, not whatever is installed
        HF_HUB_OFFLINE="1",
        HEX_API_URL=fake.api_url,
        HEX_MIRROR=fake.mirror_url,
        PROJECT_ROOT=str(project),  # no mix.lock: versions come from the queries
        DATABASE_PATH=str(db),
        AI_RERANK_MODEL="off",
        HEXLOCAL_SYNC_ON_START="false",
        # The first call waits for the vectors too. Answering from the chunks alone left a
        # package partial, and every later run embedded it in both processes while timing.
        HEXLOCAL_ANSWER_WHILE_EMBEDDING="false",
        INGEST_TIMEOUT_MS=str(int(INGEST_TIMEOUT_S * 1000)),
        MCP_LOG_FILE=str(log_file),
        PYTHONUNBUFFERED="1",
    )
    return env


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def _checked(result: Any, probe: Probe) -> Mapping[str, Any]:
    """The structured answer; an error result or an answer still indexing stops the run."""
    if result.is_error:
        raise RuntimeError(f"search_docs {probe.package} failed: {result.content}")
    data: Mapping[str, Any] | None = result.structured_content
    if data is None or data.get("ingestion"):
        raise RuntimeError(f"search_docs {probe.package} is not warm: {data}")
    return data


@frozen
class Samples:
    """Per package, one entry per timed call (both faces see the same calls)."""

    stdio: dict[str, list[float]]  # client round trip of the search_docs tool call
    facade: dict[str, list[float]]  # Hexlocal.search_docs wall time, in process
    engine: dict[str, list[float]]  # the sum of the engine's own stage timings
    stages: dict[str, list[float]]  # each engine stage (embed, fts, vec, fuse), every package
    face: dict[str, list[float]]  # to_dict + formatting.search_result: the face's share
    reply_bytes: dict[str, list[int]]  # structured content + text, as JSON
    # CPU ms, load-proof where wall time is not: this process during each stdio call (the
    # SDK client) and during each in-process call; the server's over the whole timed loop.
    cpu: dict[str, list[float]] = attrs.field(factory=lambda: {"client": [], "local": []})
    server_cpu_ms: list[float] = attrs.field(factory=list)

    @classmethod
    def empty(cls, packages: Sequence[str]) -> Samples:
        def per() -> dict[str, list[Any]]:
            return {p: [] for p in packages}

        return cls(per(), per(), per(), {s: [] for s in STAGES}, per(), per())


async def _stdio_call(
    session: ClientSession, probe: Probe, timeout_s: float, out: Samples | None = None
) -> float:
    cpu = time.process_time()
    started = time.perf_counter()
    result = await session.call_tool(
        "search_docs", probe.arguments(), read_timeout_seconds=timeout_s
    )
    elapsed = _ms_since(started)
    if out is not None:
        out.cpu["client"].append((time.process_time() - cpu) * 1000)
    _checked(result, probe)
    return elapsed


async def _local_call(service: Hexlocal, probe: Probe, out: Samples) -> None:
    cpu = time.process_time()
    started = time.perf_counter()
    # The tool's own call: default limit and mode (rerank, off here, so rrf).
    result = await service.search_docs(probe.package, probe.query, probe.version)
    out.facade[probe.package].append(_ms_since(started))
    out.cpu["local"].append((time.process_time() - cpu) * 1000)
    timings = result.timings_ms
    out.engine[probe.package].append(sum(timings.get(s, 0.0) for s in STAGES))
    for stage in STAGES:
        if stage in timings:
            out.stages[stage].append(timings[stage])
    started = time.perf_counter()
    data = result.to_dict()
    text = formatting.search_result(data)
    out.face[probe.package].append(_ms_since(started))
    out.reply_bytes[probe.package].append(len(json.dumps(data)) + len(json.dumps(text)))


async def measure(
    command: Sequence[str],
    env: dict[str, str],
    plan: Mapping[str, list[Probe]],
    *,
    warmup: int,
    errlog: Path,
    console: Console,
) -> tuple[dict[str, float], Samples, int]:
    """Index through the server and warm both faces, then time every planned call on each.

    The calls alternate (stdio, in process, in process, stdio, ...): one side is idle
    while the other runs, and on a shared machine both see the same load over time.
    Returns each package's first-call time, the samples and the server's pid.
    """
    params = StdioServerParameters(
        command=command[0], args=list(command[1:]), env=env, cwd=str(REPO)
    )
    first_ms: dict[str, float] = {}
    out = Samples.empty(list(plan))
    with errlog.open("w") as err:
        async with stdio_client(params, errlog=err) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                server_pid = _server_pid()
                for package, calls in plan.items():
                    first_ms[package] = await _stdio_call(session, calls[0], INGEST_TIMEOUT_S)
                    console.print(f"{package}: first call {first_ms[package] / 1000:.1f} s")
                async with build(Settings.from_env(env)) as service:
                    await service.warm_up()
                    for calls in plan.values():
                        for probe in calls[:warmup]:
                            await _stdio_call(session, probe, CALL_TIMEOUT_S)
                            await _local_call(service, probe, Samples.empty(list(plan)))
                    server_cpu = _cpu_ms(server_pid)
                    for calls in plan.values():
                        for i, probe in enumerate(calls):
                            if i % 2 == 0:
                                ms = await _stdio_call(session, probe, CALL_TIMEOUT_S, out)
                                await _local_call(service, probe, out)
                            else:
                                await _local_call(service, probe, out)
                                ms = await _stdio_call(session, probe, CALL_TIMEOUT_S, out)
                            out.stdio[probe.package].append(ms)
                    out.server_cpu_ms.append(_cpu_ms(server_pid) - server_cpu)
    return first_ms, out, server_pid


def _cpu_ms(pid: int) -> float:
    """CPU ms a process has used so far (Linux /proc, 10 ms ticks), else NaN."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def _server_pid() -> int:
    """The spawned server's pid (the newest child of this process), for profiling notes."""
    children = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
    try:
        pids = [int(p) for p in children.read_text().split()]
    except OSError:
        return 0
    return max(pids, default=0)


def stats(values: Sequence[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": round(percentile(values, 50), 2),
        "p95": round(percentile(values, 95), 2),
        "max": round(max(values, default=0.0), 2),
    }


def _pooled(by_package: Mapping[str, Sequence[float]], keys: Sequence[str]) -> list[float]:
    return [v for k in keys for v in by_package[k]]


def summarize(plan: Mapping[str, list[Probe]], local: Samples) -> dict[str, dict[str, Any]]:
    """One row per package, then "all" (every call pooled)."""
    rows: dict[str, dict[str, Any]] = {}
    for name in [*plan, "all"]:
        keys = list(plan) if name == "all" else [name]
        stdio_stats = stats(_pooled(local.stdio, keys))
        local_stats = stats(_pooled(local.facade, keys))
        sizes = [float(b) for k in keys for b in local.reply_bytes[k]]
        rows[name] = {
            "version": plan[name][0].version if name in plan else "",
            "queries": len({p.query for k in keys for p in plan[k]}),
            "stdio": stdio_stats,
            "in_process": local_stats,
            "engine": stats(_pooled(local.engine, keys)),
            "face_format": stats(_pooled(local.face, keys)),
            "reply_kb": round(sum(sizes) / max(1, len(sizes)) / 1024, 1),
            "overhead_p50": round(stdio_stats["p50"] - local_stats["p50"], 2),
        }
    return rows


def cpu_summary(local: Samples) -> dict[str, float]:
    """Mean CPU ms per call of each side; the server's extra over in process is what its
    transport and face cost, whatever the machine's load."""
    calls = max(1, sum(len(v) for v in local.stdio.values()))

    def mean(values: Sequence[float]) -> float:
        return sum(values) / max(1, len(values))

    server = sum(local.server_cpu_ms) / calls
    in_process = mean(local.cpu["local"])
    return {
        "server_per_call": round(server, 2),
        "client_per_call": round(mean(local.cpu["client"]), 2),
        "local_per_call": round(in_process, 2),
        "server_extra_per_call": round(server - in_process, 2),
    }


def _trio(s: Mapping[str, float]) -> str:
    return f"{s['p50']:.1f} / {s['p95']:.1f} / {s['max']:.1f}"


def result_table(rows: Mapping[str, Mapping[str, Any]], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("package", "version", "q", "n"):
        table.add_column(column, justify="left" if column in ("package", "version") else "right")
    table.add_column("stdio p50 / p95 / max", justify="right")
    table.add_column("in-process p50 / p95 / max", justify="right")
    table.add_column("engine p50", justify="right")
    table.add_column("face fmt p50", justify="right")
    table.add_column("reply KB", justify="right")
    table.add_column("stdio - in-proc p50", justify="right")
    table.add_column("target")
    for name, row in rows.items():
        p50 = row["stdio"]["p50"]
        verdict = f"{'PASS' if p50 <= TARGET_P50_MS else 'FAIL'} (p50 <= {TARGET_P50_MS:.0f})"
        table.add_row(
            name,
            row["version"] or "",
            str(row["queries"]),
            str(row["stdio"]["n"]),
            _trio(row["stdio"]),
            _trio(row["in_process"]),
            f"{row['engine']['p50']:.1f}",
            f"{row['face_format']['p50']:.2f}",
            f"{row['reply_kb']:.1f}",
            f"{row['overhead_p50']:+.1f}",
            verdict,
            end_section=name == list(rows)[-2],
        )
    return table


def _load() -> str:
    try:
        return Path("/proc/loadavg").read_text().strip()
    except OSError:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())


async def run(args: argparse.Namespace) -> dict[str, Any]:
    console = Console(highlight=False, width=160, stderr=args.json)
    by_package = probes_by_package(args.queries, args.packages)
    plan = {name: schedule(probes, args.repeat) for name, probes in by_package.items()}
    args.db.parent.mkdir(parents=True, exist_ok=True)
    load_before = _load()
    with tempfile.TemporaryDirectory(prefix="bench-stdio-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "project").mkdir()
        async with FakeHex() as fake:
            env = server_env(fake, args.db, tmp / "project", tmp / "mcp.log")
            try:
                first_ms, local, pid = await measure(
                    shlex.split(args.command),
                    env,
                    plan,
                    warmup=args.warmup,
                    errlog=tmp / "stderr.log",
                    console=console,
                )
            except Exception:
                console.print((tmp / "stderr.log").read_text()[-3000:], style="red")
                raise
    rows = summarize(plan, local)
    load_after = _load()
    if not args.json:
        title = (
            f"warm search_docs over stdio vs in process, ms per call (rerank off, "
            f"{args.repeat} calls per package; loadavg before {load_before}, after {load_after})"
        )
        console.print(result_table(rows, title))
        stages = ", ".join(f"{s} {percentile(v, 50):.1f}" for s, v in local.stages.items() if v)
        console.print(f"in-process engine stages, p50 ms: {stages}")
        cpu = cpu_summary(local)
        console.print(
            f"CPU ms per call (mean): server {cpu['server_per_call']:.1f}, SDK client "
            f"{cpu['client_per_call']:.1f}, in process {cpu['local_per_call']:.1f} "
            f"-> server-side transport + face {cpu['server_extra_per_call']:+.1f}"
        )
    return {
        "command": args.command,
        "embed_model": os.environ.get("AI_EMBED_MODEL", "default"),
        "repeat": args.repeat,
        "warmup": args.warmup,
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "cpus": os.cpu_count(),
        "server_pid": pid,
        "first_call_ms": {k: round(v, 1) for k, v in first_ms.items()},
        "target_p50_ms": TARGET_P50_MS,
        "rows": rows,
        "in_process_stages": {s: stats(v) for s, v in local.stages.items()},
        "cpu_ms": cpu_summary(local),
        "samples_ms": {
            "stdio": {k: [round(v, 3) for v in vs] for k, vs in local.stdio.items()},
            "in_process": {k: [round(v, 3) for v in vs] for k, vs in local.facade.items()},
        },
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, default=DEFAULT_DB)
    parser.add_argument("--queries", type=Path, default=DEFAULT_QUERIES)
    parser.add_argument(
        "--packages",
        type=lambda s: tuple(p for p in s.split(",") if p),
        default=DEFAULT_PACKAGES,
        help="comma-separated packages of the query set",
    )
    parser.add_argument(
        "--command",
        default=f"{sys.executable} -m hexlocal_mcp",
        help="the server command line (e.g. 'hexlocal serve')",
    )
    parser.add_argument("--repeat", type=int, default=50, help="timed calls per package")
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls per package")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    if not args.queries.is_file():
        print(f"query set not found: {args.queries}", file=sys.stderr)
        return 2
    result = asyncio.run(run(args))
    if args.json:
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
