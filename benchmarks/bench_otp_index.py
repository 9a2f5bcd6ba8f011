"""Indexing Erlang/OTP from a local install: erts, kernel and stdlib of OTP 27.3.4.1 (the
shared corpus's install, docs in the beams), through the service with the real int8
embedder, and the first keyword answer's latency while that runs.

Per application: seconds until its chunks are written (a search answers by keyword from
then on) and until its vectors are in; then, with stdlib indexing in the background, how
long `get_docs(":ets.new/2")` and a prose search of erts take.

    python benchmarks/bench_otp_index.py [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.common import finish  # noqa: E402
from hexlocal_core.config import Settings  # noqa: E402
from hexlocal_core.service import build  # noqa: E402

INSTALL = REPO.parent / "shared/corpus/otp/otp-27.3.4.1-install.tar.gz"
CLOSED = "http://127.0.0.1:9"
APPS = ("erts", "kernel", "stdlib")


def settings(tmp: Path, root: Path) -> Settings:
    (tmp / "project").mkdir()
    return Settings.from_env(
        {
            "PROJECT_ROOT": str(tmp / "project"),
            "DATABASE_PATH": str(tmp / "otp.db"),
            "HEXLOCAL_OTP_ROOT": str(root),
            "HEX_API_URL": CLOSED,
            "HEX_MIRROR": CLOSED,
            "OTP_DOCS_MIRROR": CLOSED,
            "AI_RERANK_MODEL": "off",
            "HEXLOCAL_ANSWER_WHILE_EMBEDDING": "true",
            "HEXLOCAL_SYNC_ON_START": "false",
        }
    )


async def measure(tmp: Path) -> dict[str, Any]:
    with tarfile.open(INSTALL) as tar:
        tar.extractall(tmp / "otp", filter="data")
    root = tmp / "otp" / "otp-27.3.4.1"
    service = build(settings(tmp, root))
    rows: list[dict[str, Any]] = []
    try:
        await service.warm_up()
        for app in APPS[:2]:
            start = time.perf_counter()
            report, _ = await service.ingest(app)
            rows.append(
                {
                    "app": app,
                    "chunks": report.chunks if report else 0,
                    "seconds": round(time.perf_counter() - start, 2),
                }
            )
        # stdlib in the background; the first keyword answers meanwhile
        start = time.perf_counter()
        job = asyncio.create_task(service.ingest("stdlib"))
        first = await service.get_docs(None, ":ets.new/2")
        first_ms = (time.perf_counter() - start) * 1000
        t = time.perf_counter()
        prose = await service.search_docs("erts", "monotonic time for measuring durations")
        prose_ms = (time.perf_counter() - t) * 1000
        report, _ = await job
        rows.append(
            {
                "app": "stdlib",
                "chunks": report.chunks if report else 0,
                "seconds": round(time.perf_counter() - start, 2),
            }
        )
        return {
            "apps": rows,
            "first_answer_ms": round(first_ms, 1),
            "first_answer_hits": len(first.hits),
            "erts_search_while_indexing_ms": round(prose_ms, 1),
            "erts_search_hits": len(prose.hits),
        }
    finally:
        await service.aclose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not INSTALL.is_file():
        print(f"no OTP install at {INSTALL}", file=sys.stderr)
        return 2
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        data = asyncio.run(measure(Path(tmp)))
    table = Table(title="Indexing OTP 27.3.4.1 from a local install (int8 embedder)")
    for column in ("application", "chunks", "seconds to index (written + embedded)"):
        table.add_column(column)
    for row in data["apps"]:
        table.add_row(row["app"], str(row["chunks"]), f"{row['seconds']:.2f}")
    total = sum(r["seconds"] for r in data["apps"])
    chunks = sum(r["chunks"] for r in data["apps"])
    table.add_row("all three", str(chunks), f"{total:.2f}")
    table.add_row(
        "get_docs(:ets.new/2) as stdlib starts indexing", "", f"{data['first_answer_ms']:.0f} ms"
    )
    table.add_row(
        "a search of erts meanwhile", "", f"{data['erts_search_while_indexing_ms']:.0f} ms"
    )
    return finish(data, table, load, as_json=args.json)


if __name__ == "__main__":
    raise SystemExit(main())
