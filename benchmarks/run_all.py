"""Run every `benchmarks/bench_*.py` in turn, each in its own process (`make bench`).

A separate process per benchmark keeps their models, caches and timings from leaking
into one another. Each one's output streams through as it runs and is written to
docs/benchmarks.md (`benchmarks/report.py`) with the machine, the date and the commit: the
sections of the benchmarks that ran are rewritten, the others kept. The exit code is 1 when
any benchmark failed, and a summary of durations and exit codes comes last.

    python benchmarks/run_all.py [--only NAME ...] [--list] [--doc PATH | --no-doc]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from benchmarks import report  # noqa: E402

DOC = REPO / "docs" / "benchmarks.md"


def discover(only: Sequence[str] = (), here: Path = HERE) -> list[Path]:
    """The benchmark scripts, by name; `only` keeps those whose name contains any entry."""
    scripts = sorted(here.glob("bench_*.py"))
    if only:
        scripts = [s for s in scripts if any(part in s.stem for part in only)]
    return scripts


def run(script: Path, machine: report.Machine, commit: str) -> report.Run:
    """Runs one benchmark, its stdout streamed through and kept, its stderr passed on."""
    print(f"\n=== {script.name} ===", flush=True)
    load = os.getloadavg()[0]
    started, clock = report.now(), time.perf_counter()
    env = report.environment_for_tables(os.environ)
    lines: list[str] = []
    with subprocess.Popen(
        [sys.executable, str(script)], cwd=REPO, stdout=subprocess.PIPE, text=True, env=env
    ) as child:
        assert child.stdout is not None
        for line in child.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            lines.append(line)
    return report.Run(
        name=script.name,
        summary=report.summary_of(script),
        output="".join(lines),
        exit_code=child.returncode,
        seconds=time.perf_counter() - clock,
        started=started,
        commit=commit,
        machine=machine,
        load_before=load,
    )


def main(argv: Sequence[str] | None = None, *, here: Path = HERE) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--only", nargs="+", default=[], help="run benchmarks matching these")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    parser.add_argument("--doc", type=Path, default=DOC, help="where the tables are written")
    parser.add_argument("--no-doc", action="store_true", help="print only; write no document")
    args = parser.parse_args(argv)
    scripts = discover(args.only, here)
    if args.list or not scripts:
        print("\n".join(s.name for s in scripts) or "no benchmark matched")
        return 0 if scripts or args.list else 2
    machine, commit = report.this_machine(), report.commit(REPO)
    runs = [run(script, machine, commit) for script in scripts]
    print("\n=== summary ===")
    for r in runs:
        status = "ok" if r.exit_code == 0 else f"FAILED (exit {r.exit_code})"
        print(f"{r.name:<28} {r.seconds:7.1f} s  {status}")
    if not args.no_doc:
        report.write(args.doc, runs, [s.name for s in discover(here=here)])
        print(f"wrote {args.doc}")
    return 0 if all(r.exit_code == 0 for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
