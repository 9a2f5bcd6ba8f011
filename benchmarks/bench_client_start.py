"""How long an MCP client waits for hexlocal to start, per form of the command it is given.

Builds the wheel (or takes --wheel), installs it into a fresh venv, and fills a fresh uv
cache the way `hexlocal mcp-config --uvx-from <wheel>` does. Then times spawn -> the MCP
`initialize` answer, the runs of every form interleaved (a busy moment hits them alike):

  installed       the venv's `hexlocal-mcp` (what mcp-config writes for a pip install)
  uvx --offline   `uvx --offline --from <wheel> hexlocal-mcp` (what mcp-config writes for
                  uvx), with every proxy closed: no network at all
  uvx (index)     `uvx --from <wheel> hexlocal-mcp`, the form that asks the package index
                  on every start (here the wheelhouse served on loopback, or the real
                  index with --from-index: slower still)
  uvx (offline)   the same with the network closed: it does not start

    python benchmarks/bench_client_start.py [--runs N] [--from-index] [--wheel FILE] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

import fresh_venv  # noqa: E402  (scripts/ is not a package)
import uvx_check  # noqa: E402

TARGET_RATIO = 1.5  # the uvx form a user is given: at most this times the installed start


def server_env(work: Path) -> dict[str, str]:
    env = {k: os.environ[k] for k in fresh_venv.PASSED_ENV if k in os.environ}
    (work / "project").mkdir(exist_ok=True)
    env.update(
        HOME=str(work / "home"),
        HF_HUB_OFFLINE="1",
        HEXLOCAL_SYNC_ON_START="false",
        PROJECT_ROOT=str(work / "project"),
        DATABASE_PATH=str(work / "index.db"),
    )
    return env


def measure(runs: int, from_index: bool, wheel: Path | None) -> dict[str, list[float] | str]:
    work = Path(tempfile.mkdtemp(prefix="hexlocal-start-"))
    try:
        if wheel is None:
            print("building the wheel ...", file=sys.stderr)
            wheel, _ = fresh_venv.build_dists(work)
        venv = fresh_venv.make_venv(work / "venv")
        print("installing it into a fresh venv ...", file=sys.stderr)
        fresh_venv.install(venv, wheel, from_index=from_index)
        house = None if from_index else fresh_venv.wheelhouse(wheel)
        base = getattr(sys, "_base_executable", "") or sys.executable
        uv_bin = uvx_check.uv_tools(fresh_venv.cache_root(), base)
        env = server_env(work)
        with ExitStack() as stack:
            index = stack.enter_context(uvx_check.simple_index(house)) if house else None
            shell = uvx_check.uv_env(env, uv_bin, work / "uv-cache", base, index)
            print("mcp-config --uvx-from (fills uv's cache) ...", file=sys.stderr)
            hexlocal = fresh_venv.venv_bin(venv, "hexlocal")
            offline_form = uvx_check.generated_command(hexlocal, wheel, shell, work)
            online_form = [part for part in offline_form if part != "--offline"]
            closed = uvx_check.offline(shell)
            forms = {
                "installed": ([str(fresh_venv.venv_bin(venv, "hexlocal-mcp"))], closed),
                "uvx --offline": (offline_form, closed),
                "uvx (index)": (online_form, shell),
            }
            times: dict[str, list[float] | str] = {name: [] for name in forms}
            for command, shell_env in forms.values():  # each once, unmeasured
                uvx_check.initialize_s(command, shell_env, work)
            for _ in range(runs):
                for name, (command, shell_env) in forms.items():
                    seconds = uvx_check.initialize_s(command, shell_env, work)
                    timed = times[name]
                    assert isinstance(timed, list)
                    timed.append(seconds)
        try:
            uvx_check.initialize_s(online_form, closed, work, timeout=60)
            times["uvx (offline)"] = "started"
        except uvx_check.UvxError as exc:
            times["uvx (offline)"] = "does not start: " + str(exc).splitlines()[-1][:60]
        return times
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--from-index", action="store_true", help="dependencies from the index")
    parser.add_argument("--wheel", type=Path, help="this wheel instead of a fresh build")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    args = parser.parse_args()
    times = measure(args.runs, args.from_index, args.wheel)
    if args.json:
        print(json.dumps(times, indent=2))
        return 0
    installed = times["installed"]
    assert isinstance(installed, list)
    base = statistics.median(installed)
    load = f"load {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"
    table = Table(
        "form",
        "median s",
        "min s",
        "max s",
        "x installed",
        title=f"spawn -> initialize answer ({args.runs} interleaved runs, {load})",
    )
    for name, values in times.items():
        if isinstance(values, str):
            table.add_row(name, values, "", "", "")
            continue
        median = statistics.median(values)
        ratio = f"{median / base:.2f}" + (
            f" (target <= {TARGET_RATIO})" if "offline" in name else ""
        )
        table.add_row(name, f"{median:.2f}", f"{min(values):.2f}", f"{max(values):.2f}", ratio)
    Console(width=140).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
