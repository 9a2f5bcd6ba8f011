"""MCP startup benchmark: spawn -> `initialize` result over real stdio.

Spawns the server the way an MCP client does (`python -m hexlocal_mcp` by default, or
`--command "hexlocal serve"`), writes the `initialize` request at once, and times:

* initialize   spawn until the initialize result line arrives (target <= 1.5 s);
* initialize cpu  CPU seconds the server used until then (what an idle machine needs);
* ready        spawn until the first tool answers (it awaits the service being built;
               the models keep loading in the background and are not waited for).

Each run uses a fresh temporary DATABASE_PATH and PROJECT_ROOT; nothing touches the
network (HF_HUB_OFFLINE=1, and no tool here downloads).

    python benchmarks/bench_mcp_startup.py [--runs N] [--command CMD] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

TARGET_S = 1.5
PROTOCOL = "2025-06-18"


def _request(id_: int, method: str, params: dict[str, Any]) -> bytes:
    body = {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}
    return (json.dumps(body) + "\n").encode()


def _notification(method: str) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", "method": method}) + "\n").encode()


async def _answer(stdout: asyncio.StreamReader, id_: int) -> dict[str, Any]:
    """The response with `id_`, skipping notifications; any non-JSON line is a failure."""
    while True:
        line = await stdout.readline()
        if not line:
            raise RuntimeError("the server closed stdout before answering")
        message: dict[str, Any] = json.loads(line)
        if message.get("id") == id_:
            if "error" in message:
                raise RuntimeError(f"error answer: {message['error']}")
            return message


async def one_run(command: list[str], env: dict[str, str]) -> dict[str, float]:
    initialize = _request(
        1,
        "initialize",
        {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"},
        },
    )
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(initialize)
        await proc.stdin.drain()
        await _answer(proc.stdout, 1)
        t_init = time.perf_counter() - t0
        cpu_init = _cpu_seconds(proc.pid)
        proc.stdin.write(_notification("notifications/initialized"))
        proc.stdin.write(_request(2, "tools/call", {"name": "ingestion_status", "arguments": {}}))
        await proc.stdin.drain()
        await _answer(proc.stdout, 2)
        t_ready = time.perf_counter() - t0
    finally:
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            proc.kill()
            await proc.wait()
    return {"initialize": t_init, "initialize cpu": cpu_init, "ready": t_ready}


def _cpu_seconds(pid: int) -> float:
    """CPU time the process has used so far (Linux /proc), else NaN.

    On a busy machine wall time mostly measures the neighbours; CPU time is what an idle
    machine would need, near enough (start-up is a single busy thread plus file reads).
    """
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    project = tmp / "project"
    project.mkdir(exist_ok=True)
    env.update(
        HF_HUB_OFFLINE="1",
        PROJECT_ROOT=str(project),
        DATABASE_PATH=str(tmp / "hexlocal.db"),
        PYTHONUNBUFFERED="1",
    )
    return env


async def run(command: list[str], runs: int) -> list[dict[str, float]]:
    results = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            results.append(await one_run(command, _env(Path(tmp))))
    return results


def summary(results: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    out = {}
    for key in ("initialize", "initialize cpu", "ready"):
        values = sorted(r[key] for r in results)
        out[key] = {
            "min": round(min(values), 3),
            "median": round(statistics.median(values), 3),
            "max": round(max(values), 3),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--command", default=f"{sys.executable} -m hexlocal_mcp")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    args = parser.parse_args()
    command = shlex.split(args.command)
    asyncio.run(one_run(command, _env(Path(tempfile.mkdtemp()))))  # warm the OS file cache
    stats = summary(asyncio.run(run(command, args.runs)))
    # Startup is CPU-bound (importing fastmcp is most of it): say how busy the machine was.
    load = f"load {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"
    if args.json:
        print(json.dumps({"command": args.command, "runs": args.runs, "load": load, **stats}))
        return
    title = f"{args.command} ({args.runs} runs, {load})"
    table = Table("spawn ->", "min s", "median s", "max s", "target s", title=title)
    for key, row in stats.items():
        target = f"<= {TARGET_S}" if key == "initialize" else ""
        table.add_row(key, f"{row['min']:.3f}", f"{row['median']:.3f}", f"{row['max']:.3f}", target)
    Console().print(table)


if __name__ == "__main__":
    main()
