"""Compare two retrieval runs query by query: MRR@10 of each, B - A and its 95% interval.

The inputs are `benchmarks/bench_retrieval.py --json` files (or several, one per index:
the error sets run in their own), of the same query sets run two ways (another model,
another setting). Queries are paired by set and id; a query scored in only one run is
left out and counted. Per set, and pooled over every set (resampled within sets):

    python scripts/compare_runs.py --a fp32.json [fp32-errors.json] --b int8.json [...]
        [--mode rrf] [--mode-b rerank] [--seed 0]

Read the interval, not the difference: a set-level change inside it is one or two
queries moving a rank (hexlocal_core/evaluation/paired.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from hexlocal_core.evaluation.paired import PairedDifference, paired_difference  # noqa: E402

Ranks = dict[tuple[str, str], int | None]  # (set, query id) -> first relevant rank


def ranks_of(paths: Sequence[Path], mode: str) -> Ranks:
    out: Ranks = {}
    for path in paths:
        for set_name, report in json.loads(path.read_text()).items():
            for query in report["queries"]:
                run = query.get("runs", {}).get(mode)
                if query.get("status") == "ok" and run is not None:
                    out[(set_name, query["id"])] = run["rank"]
    return out


def compare(a: Ranks, b: Ranks, seed: int) -> list[tuple[str, PairedDifference]]:
    both = [key for key in a if key in b]
    rows = []
    for name in dict.fromkeys(set_name for set_name, _ in both):
        keys = [k for k in both if k[0] == name]
        rows.append(
            (name, paired_difference([a[k] for k in keys], [b[k] for k in keys], seed=seed))
        )
    strata = [set_name for set_name, _ in both]
    pooled = paired_difference([a[k] for k in both], [b[k] for k in both], strata, seed=seed)
    return [*rows, ("all (pooled)", pooled)]


def table(rows: Sequence[tuple[str, PairedDifference]], mode: str) -> Table:
    out = Table(title=f"MRR@10, {mode}: B - A with its 95% paired-bootstrap interval")
    for column in ("set", "n", "A", "B", "B - A", "95% interval", "B better", "B worse"):
        out.add_column(column, justify="left" if column == "set" else "right")
    for name, d in rows:
        out.add_row(
            name,
            str(d.queries),
            f"{d.a:.3f}",
            f"{d.b:.3f}",
            f"{d.delta:+.3f}",
            f"[{d.low:+.3f}, {d.high:+.3f}]",
            str(d.better),
            str(d.worse),
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--a", type=Path, nargs="+", required=True)
    parser.add_argument("--b", type=Path, nargs="+", required=True)
    parser.add_argument("--mode", default="rrf")
    parser.add_argument("--mode-b", help="B's mode when it differs (a reranked run: rerank)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    a, b = ranks_of(args.a, args.mode), ranks_of(args.b, args.mode_b or args.mode)
    unpaired = len(a.keys() ^ b.keys())
    if not a.keys() & b.keys():
        parser.error("the two runs share no scored query")
    console = Console(highlight=False, width=140)
    console.print(table(compare(a, b, args.seed), args.mode))
    if unpaired:
        console.print(f"{unpaired} queries scored in only one run were left out")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
