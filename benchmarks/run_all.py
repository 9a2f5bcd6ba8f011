"""Run every `benchmarks/bench_*.py` in turn, each in its own process (`make bench`).

A separate process per benchmark keeps their models, caches and timings from leaking
into one another. Each one's output streams through as it runs; the exit code is 1 when
any benchmark failed, and a summary of durations and exit codes comes last.

    python benchmarks/run_all.py [--only NAME ...] [--list]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent


def discover(only: Sequence[str] = ()) -> list[Path]:
    """The benchmark scripts, by name; `only` keeps those whose name contains any entry."""
    scripts = sorted(HERE.glob("bench_*.py"))
    if only:
        scripts = [s for s in scripts if any(part in s.stem for part in only)]
    return scripts


def run(script: Path) -> tuple[int, float]:
    print(f"\n=== {script.name} ===", flush=True)
    started = time.perf_counter()
    code = subprocess.call([sys.executable, str(script)], cwd=HERE.parent)
    return code, time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", default=[], help="run benchmarks matching these")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = parser.parse_args(argv)
    scripts = discover(args.only)
    if args.list or not scripts:
        print("\n".join(s.name for s in scripts) or "no benchmark matched")
        return 0 if scripts or args.list else 2
    results = [(script, *run(script)) for script in scripts]
    print("\n=== summary ===")
    for script, code, seconds in results:
        status = "ok" if code == 0 else f"FAILED (exit {code})"
        print(f"{script.name:<28} {seconds:7.1f} s  {status}")
    return 0 if all(code == 0 for _, code, _ in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
