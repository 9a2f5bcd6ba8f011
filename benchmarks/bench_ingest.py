"""Ingestion benchmark: every tarball of the shared corpus through the real path.

A loopback stand-in for hex.pm serves ../shared/corpus; `service.ingest` downloads,
parses, chunks, embeds (the real local model) and writes each package version, in the
manifest's order. The index keeps one version per package, so a package's later versions
replace its earlier ones and show what the embedding cache saves (the `reused` column).

    python benchmarks/bench_ingest.py [--only NAME ...] [--db PATH] [--json]

Prints seconds, chunks, embedded/reused and chunks/s per package version.
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
from hexlocal_core.service import build  # noqa: E402
from tests.fakes.fake_hex import FakeHex  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus"


def targets(only: list[str]) -> list[tuple[str, str]]:
    manifest = json.loads((CORPUS / "hexdocs" / "MANIFEST.json").read_text())
    found = [(e["package"], e["version"]) for e in manifest["hexdocs"]]
    return [t for t in found if not only or t[0] in only]


async def run(only: list[str], db: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    async with FakeHex(corpus=CORPUS) as fake:
        settings = Settings.from_env(
            {
                "HEX_API_URL": fake.api_url,
                "HEX_MIRROR": fake.mirror_url,
                "DATABASE_PATH": str(db),
                "PROJECT_ROOT": str(db.parent),
                "AI_RERANK_MODEL": "off",
                "INGEST_TIMEOUT_MS": "3600000",
            }
        )
        service = build(settings)
        try:
            for name, version in targets(only):
                started = time.perf_counter()
                report, _ = await service.ingest(name, version)
                seconds = time.perf_counter() - started
                assert report is not None
                rows.append(
                    {
                        "package": name,
                        "version": version,
                        "items": report.items,
                        "chunks": report.chunks,
                        "embedded": report.embedded,
                        "reused": report.reused,
                        "seconds": round(seconds, 2),
                        "chunks_per_s": round(report.chunks / seconds, 1) if seconds else 0.0,
                        "embedded_per_s": round(report.embedded / seconds, 1) if seconds else 0.0,
                    }
                )
        finally:
            await service.aclose()
    return rows


def show(rows: list[dict[str, Any]]) -> None:
    table = Table(title="ingestion of the shared corpus (real embedder, 2 cores)")
    for col in ("package", "version", "items", "chunks", "embedded", "reused", "seconds"):
        table.add_column(col, justify="left" if col in ("package", "version") else "right")
    table.add_column("chunks/s", justify="right")
    table.add_column("embedded/s", justify="right")
    for r in rows:
        table.add_row(
            r["package"],
            r["version"],
            *(
                str(r[k])
                for k in (
                    "items",
                    "chunks",
                    "embedded",
                    "reused",
                    "seconds",
                    "chunks_per_s",
                    "embedded_per_s",
                )
            ),
        )
    chunks = sum(r["chunks"] for r in rows)
    embedded = sum(r["embedded"] for r in rows)
    seconds = sum(r["seconds"] for r in rows)
    Console(width=140).print(table)
    print(
        f"{len(rows)} package versions: {chunks} chunks ({embedded} embedded, "
        f"{chunks - embedded} reused) in {seconds:.0f} s; "
        f"{embedded / seconds:.1f} embedded chunks/s overall"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=[])
    parser.add_argument("--db", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    db = args.db or Path(tempfile.mkdtemp(prefix="hexlocal-bench-")) / "ingest.db"
    rows = asyncio.run(run(args.only, db))
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        show(rows)


if __name__ == "__main__":
    main()
