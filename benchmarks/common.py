"""What the benchmarks share: how a run ends (one JSON document, or a table with the load).

Benchmarks are scripts (`python benchmarks/bench_x.py`); they put the checkout on
sys.path, so this module is imported as `benchmarks.common`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from hexlocal_core.evaluation import EvalQuery, load_queries
from hexlocal_core.evaluation.relevance import relevant_ids
from hexlocal_core.index.seam import DocsStore

REPO = Path(__file__).resolve().parent.parent


def finish(data: dict[str, Any], table: Table, load_before: float, *, as_json: bool) -> int:
    """Prints `data` (with the load average before the run) as JSON, or the table and the
    load averages; the exit code of a run that got this far."""
    if as_json:
        print(json.dumps({"load_before": load_before, **data}, indent=2, default=str))
        return 0
    console = Console(highlight=False, width=140)
    console.print(table)
    after = os.getloadavg()[0]
    console.print(f"load average before {load_before:.1f}, after {after:.1f}", style="dim")
    return 0


def same_model_or_exit(store: DocsStore, model_id: str, db: Path) -> None:
    """Stop when a reused index was embedded by another model than the one measured: its
    vector arm would refuse it and every figure would be the keyword arm's alone (the
    default changed from fp32 to int8, so an older benchmark database is one)."""
    config = store.embedding_config()
    if config is not None and config.model != model_id:
        raise SystemExit(
            f"{db} was embedded by {config.model}, the embedder measured is {model_id}: "
            f"use another --db, or set AI_EMBED_MODEL={config.model.removeprefix('local:')}"
        )


def answerable(
    store: DocsStore, sets: Mapping[str, Path], names: Sequence[str]
) -> Iterator[tuple[str, EvalQuery, frozenset[int]]]:
    """(set name, query, its relevant chunk ids) for each query of the named sets whose
    package is indexed at the query's version and holds an answer."""
    reads = store.session().chunks
    for name in names:
        for q in load_queries(sets[name]):
            indexed = store.package(q.package)
            relevant = relevant_ids(reads, q.package, q.expect)
            if indexed is None or (q.version and indexed.version != q.version) or not relevant:
                continue
            yield name, q, relevant


def write_provenance(
    artifact: Path, *, script: str, argv: Sequence[str], sets: Sequence[str], **facts: Any
) -> Path:
    """`<artifact stem>.provenance.json` beside a fitted artifact: how it was made (the
    script and its arguments, the query sets, the checkout's commit, the date) plus
    `facts` (the model, the query count). Read by nothing at run time; it is the record a
    later refit or review starts from."""
    import datetime
    import subprocess

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], capture_output=True, text=True, cwd=REPO)
        return done.stdout.strip() if done.returncode == 0 else ""

    commit = git("rev-parse", "HEAD") or "unknown"
    if git("status", "--porcelain"):
        commit += " (with uncommitted changes)"
    record = {
        "artifact": artifact.name,
        "script": script,
        "command": " ".join(["python", script, *argv]),
        "query_sets": list(sets),
        **facts,
        "commit": commit,
        "date": datetime.datetime.now(datetime.UTC).date().isoformat(),
    }
    path = artifact.with_name(f"{artifact.stem}.provenance.json")
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return path
