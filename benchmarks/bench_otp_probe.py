"""Probes and OTP discovery: forced kills mid-probe, and what finding the OTP costs.

1. A stand-in server runs `elixir --version` and is SIGKILLed after a delay spread over
   the probe's run (alone, as when a client kills its child), N times: once with a bare
   subprocess in the project (how probes ran before) and once through `run_probe`.
   Counted: `erl_crash.dump` files in the project, and probe processes left alive.
2. Wall time of `elixir --version` bare and through `run_probe` (the guard's cost),
   `find_otp` on this machine, and `read_otp_install` + `module_apps` per corpus install.

    python benchmarks/bench_otp_probe.py [--kills N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from hexlocal_core.versions import find_otp, module_apps, read_otp_install  # noqa: E402
from hexlocal_core.versions.probe_run import run_probe  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus" / "otp"

_SERVER = """
import asyncio, sys
from hexlocal_core.versions.probe_run import run_probe
async def bare():
    proc = await asyncio.create_subprocess_exec(
        sys.argv[2], "--version", stdout=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    await proc.communicate()
async def guarded():
    await run_probe([sys.argv[2], "--version"], timeout_s=10)
asyncio.run(bare() if sys.argv[1] == "bare" else guarded())
"""


def _beams_under(*dirs: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"beam" in cmd and any(cwd.startswith(str(d)) for d in dirs):
            found.append(int(entry.name))
    return found


def kill_trials(mode: str, elixir: str, kills: int) -> tuple[int, int]:
    """(dumps, probes left alive 2 s after the kill) over `kills` forced kills."""
    dumps = left = 0
    with tempfile.TemporaryDirectory() as tmp:
        project, private = Path(tmp) / "project", Path(tmp) / "tmp"
        project.mkdir()
        private.mkdir()
        env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(private)}
        for i in range(kills):
            server = subprocess.Popen(
                [sys.executable, "-c", _SERVER, mode, elixir], cwd=project, env=env
            )
            time.sleep(0.15 + 0.25 * i / max(kills - 1, 1))  # python start + BEAM run
            server.kill()
            server.wait()
            time.sleep(2.0)
            left += len(_beams_under(project, private))
            dump = project / "erl_crash.dump"
            if dump.exists():
                dumps += 1
                dump.unlink()
    return dumps, left


def _median_s(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:.2f} ms"


async def timings(elixir: str | None) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    if elixir is not None:
        bare, guarded = [], []
        for _ in range(5):
            started = time.perf_counter()
            subprocess.run([elixir, "--version"], capture_output=True, check=False)
            bare.append(time.perf_counter() - started)
            started = time.perf_counter()
            await run_probe([elixir, "--version"], timeout_s=10)
            guarded.append(time.perf_counter() - started)
        rows += [("elixir --version, bare", _median_s(bare))]
        rows += [("elixir --version, run_probe", _median_s(guarded))]
    samples = []
    for _ in range(20):
        started = time.perf_counter()
        found = await find_otp(REPO, home=Path.home())
        samples.append(time.perf_counter() - started)
    rows.append((f"find_otp here ({found.how or 'none'})", _median_s(samples)))
    with tempfile.TemporaryDirectory() as tmp:
        for archive in sorted(CORPUS.glob("otp-*-install.tar.gz")):
            with tarfile.open(archive) as tar:
                tar.extractall(tmp, filter="data")
            root = Path(tmp) / archive.name.removesuffix("-install.tar.gz")
            read, owners = [], []
            for _ in range(20):
                started = time.perf_counter()
                install = read_otp_install(root)
                read.append(time.perf_counter() - started)
                started = time.perf_counter()
                count = len(module_apps(install).owners)
                owners.append(time.perf_counter() - started)
            rows.append((f"read_otp_install {install.release}", _median_s(read)))
            rows.append((f"module_apps {install.release} ({count} modules)", _median_s(owners)))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=12)
    args = parser.parse_args()
    console = Console()
    elixir = shutil.which("elixir")
    if elixir is not None:
        kills = Table("probe", "forced kills", "erl_crash.dump in project", "probes left")
        for mode in ("bare", "guarded"):
            dumps, left = kill_trials(mode, elixir, args.kills)
            kills.add_row(mode, str(args.kills), str(dumps), str(left))
        console.print(kills)
    else:
        console.print("no elixir on PATH: kill trials skipped")
    table = Table("step", "median", title="finding the OTP")
    for row in asyncio.run(timings(elixir)):
        table.add_row(*row)
    console.print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
