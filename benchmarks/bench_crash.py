"""Crash-safety benchmark: SIGKILL an ingesting process at random points, many times.

Each trial copies a database holding ecto 3.12.5 and jason, starts a worker ingesting
ecto 3.14.2 (real parser, HashingEmbedder, a standalone fake hex.pm), kills it after a
random delay within the measured ingest duration, checks the file (integrity_check, no
half-written package, no orphan rows), then lets a fresh service resume the interrupted
job and checks that it completed. Prints one row per phase the kills landed in.

    python benchmarks/bench_crash.py [--trials N] [--seed S] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.support import crash_trials  # noqa: E402
from tests.support.harness import StandaloneHex  # noqa: E402

PHASES = (*crash_trials.PHASES, "done")


async def run(trials: int, seed: int) -> tuple[crash_trials.Base, list[crash_trials.Trial]]:
    with tempfile.TemporaryDirectory() as tmp, StandaloneHex() as hex_pm:
        work = Path(tmp)
        base = await crash_trials.prepare(work, hex_pm.env)
        results = [
            await crash_trials.run_trial(base, work, i, delay)
            for i, delay in enumerate(crash_trials.delays(trials, base.ingest_s, seed))
        ]
    return base, results


def table(base: crash_trials.Base, results: list[crash_trials.Trial]) -> Table:
    by_phase: dict[str, list[crash_trials.Trial]] = defaultdict(list)
    for t in results:
        by_phase[t.phase].append(t)
    out = Table(
        "killed during",
        "trials",
        "old kept",
        "new whole",
        "damaged",
        "resumed",
        "completed next run",
        "median trial s",
        title=(
            f"SIGKILL during ingest of {crash_trials.PACKAGE} {crash_trials.NEW} "
            f"({base.chunks[crash_trials.NEW]} chunks, ingest {base.ingest_s:.2f} s)"
        ),
    )
    order = [p for p in PHASES if p in by_phase] + sorted(set(by_phase) - set(PHASES))
    for phase in [*order, "all"]:
        group = results if phase == "all" else by_phase[phase]
        out.add_row(
            phase,
            str(len(group)),
            str(sum(t.after_kill == crash_trials.OLD for t in group)),
            str(sum(t.after_kill == crash_trials.NEW for t in group)),
            str(sum(bool(t.problems) for t in group)),
            str(sum(t.resumed for t in group)),
            str(sum(t.ok for t in group)),
            f"{statistics.median(t.seconds for t in group):.2f}",
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    args = parser.parse_args()
    base, results = asyncio.run(run(args.trials, args.seed))
    if args.json:
        rows = [
            {
                "index": t.index,
                "delay_s": t.delay_s,
                "phase": t.phase,
                "after_kill": t.after_kill,
                "problems": list(t.problems),
                "resumed": t.resumed,
                "final_version": t.final_version,
                "final_problems": list(t.final_problems),
                "ok": t.ok,
            }
            for t in results
        ]
        print(json.dumps({"ingest_s": base.ingest_s, "trials": rows}, indent=2))
    else:
        Console(width=max(Console().width, 110)).print(table(base, results))
    if not all(t.ok for t in results):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
