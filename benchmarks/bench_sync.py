"""Sync benchmark: `hexlocal sync` of the real livebook mix.lock, end to end.

A loopback stand-in for hex.pm serves ../shared/corpus; a temporary Mix project holds
livebook's lock (67 entries). `service.sync(wait=True)` indexes every package the lock
pins at its locked version with the real local embedder: every package's chunks first,
then their vectors one package at a time. "keyword search at" is when a package's chunks
were written (it answers by keyword from then on), "done at" when its vectors were. The corpus holds
only some of those versions: the others answer 404 and fail fast; they are counted, and
their time is part of the total (what a user with a partial mirror would wait).

    python benchmarks/bench_sync.py [--elixir] [--json]

`--elixir` adds Elixir's own apps at the Elixir on PATH (off by default: not in the lock,
and `elixir` alone is larger than the rest together).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from hexlocal_core.config import Settings  # noqa: E402
from hexlocal_core.model import PackageState, Phase, SyncState  # noqa: E402
from hexlocal_core.service import build  # noqa: E402
from tests.fakes.fake_hex import FakeHex  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus"
LOCK = CORPUS / "mixlock" / "livebook-dev_livebook.mix.lock"


async def run(workdir: Path, *, elixir: bool) -> dict[str, Any]:
    project = workdir / "livebook"
    project.mkdir()
    shutil.copy(LOCK, project / "mix.lock")
    (project / "mix.exs").write_text("defmodule Livebook.MixProject do\nend\n")
    finished: dict[str, float] = {}
    searchable: dict[str, float] = {}  # its chunks written: it answers by keyword
    started = time.perf_counter()

    def progress(state: PackageState) -> None:
        at = time.perf_counter() - started
        if state.state is not SyncState.INDEXING:
            finished[state.name] = at
            searchable.setdefault(state.name, at)
        elif state.phase in (Phase.EMBEDDING, Phase.DONE):
            searchable.setdefault(state.name, at)

    async with FakeHex(corpus=CORPUS) as fake:
        settings = Settings.from_env(
            {
                "HEX_API_URL": fake.api_url,
                "HEX_MIRROR": fake.mirror_url,
                "DATABASE_PATH": str(workdir / "index.db"),
                "PROJECT_ROOT": str(project),
                "AI_RERANK_MODEL": "off",
                "HEXLOCAL_SYNC_ELIXIR": "true" if elixir else "false",
            }
        )
        service = build(settings)
        try:
            await service.warm_up()  # the model load is not sync time
            started = time.perf_counter()
            report = await service.sync(wait=True, progress=progress)
            seconds = time.perf_counter() - started
        finally:
            await service.aclose()
    locked = [p for p in report.packages if p.locked]
    # Each package's own time: from the previous package's end to its own.
    order = sorted(finished.items(), key=lambda kv: kv[1])
    own = {name: at - (order[i - 1][1] if i else 0.0) for i, (name, at) in enumerate(order)}
    indexed = [p for p in locked if p.state is SyncState.INDEXED]
    chunks = sum(p.chunks for p in indexed)
    return {
        "lock_entries": len(locked),
        "indexed": len(indexed),
        "failed": report.count(SyncState.FAILED),
        "failed_s": round(
            sum(own.get(p.name, 0.0) for p in locked if p.state is SyncState.FAILED), 2
        ),
        "skipped": report.count(SyncState.SKIPPED),
        "chunks": chunks,
        "seconds": round(seconds, 2),
        "chunks_per_s": round(chunks / seconds, 1) if seconds else 0.0,
        "all_searchable_s": round(
            max((searchable.get(p.name, 0.0) for p in indexed), default=0.0), 2
        ),
        "packages": [
            {
                "package": p.name,
                "version": p.locked_version,
                "chunks": p.chunks,
                "searchable_at_s": round(searchable.get(p.name, 0.0), 2),
                "done_at_s": round(finished.get(p.name, 0.0), 2),
            }
            for p in indexed
        ],
    }


def show(result: dict[str, Any]) -> None:
    console = Console()
    table = Table(title="sync of livebook's mix.lock (packages the corpus holds)")
    for column in ("package", "version", "chunks", "keyword search at s", "done at s"):
        table.add_column(column, justify="left" if column in ("package", "version") else "right")
    for p in result["packages"]:
        table.add_row(
            p["package"],
            p["version"],
            str(p["chunks"]),
            f"{p['searchable_at_s']:.2f}",
            f"{p['done_at_s']:.2f}",
        )
    console.print(table)
    summary = Table(title="totals")
    columns = (
        "locked",
        "indexed",
        "failed",
        "failed s",
        "skipped",
        "chunks",
        "all keyword-searchable s",
        "seconds",
    )
    for column in (*columns, "chunks/s"):
        summary.add_column(column, justify="right")
    summary.add_row(
        *(
            str(result[k])
            for k in (
                "lock_entries",
                "indexed",
                "failed",
                "failed_s",
                "skipped",
                "chunks",
                "all_searchable_s",
                "seconds",
                "chunks_per_s",
            )
        )
    )
    console.print(summary)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elixir", action="store_true", help="Also sync Elixir's own apps.")
    parser.add_argument("--json", action="store_true", help="Print the result as JSON.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hexlocal-bench-sync-") as tmp:
        result = asyncio.run(run(Path(tmp), elixir=args.elixir))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        show(result)


if __name__ == "__main__":
    main()
