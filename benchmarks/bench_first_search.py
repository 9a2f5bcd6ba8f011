"""The first search of a package new to the index: seconds until the answer, and until the
package is complete, answering while the vectors are made against waiting for them.

A loopback stand-in for hex.pm serves ../shared/corpus; each row is one fresh index, the
real local embedder (loaded before the clock starts), `search_docs` through the facade
with `INGEST_TIMEOUT_MS` long enough for the whole ingestion, so the waiting row shows
what a user waited before this change:

* `answer` - the call's own time (download, parse, chunk, write; and embed when waiting);
* `complete` - until the package's last vector is written (the background job's end);
* `hits` / `notice` - what the first answer held.

    python benchmarks/bench_first_search.py [--packages plug@1.19.2,elixir@1.18.4] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from attrs import asdict, frozen
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.common import finish  # noqa: E402
from hexlocal_core.adapters.local_embedder import build_local_embedder  # noqa: E402
from hexlocal_core.config import Settings  # noqa: E402
from hexlocal_core.service import build  # noqa: E402
from tests.fakes.fake_hex import FakeHex  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus"
DEFAULT_PACKAGES = "plug@1.19.2,elixir@1.18.4"
QUERY = {"plug": "read the request body in chunks", "elixir": "sort a list by a key"}


@frozen
class Row:
    package: str
    version: str
    mode: str  # "answer while embedding" | "wait for the vectors"
    answer_s: float
    complete_s: float
    chunks: int
    hits: int
    notice: str


async def first_search(
    fake: FakeHex, folder: Path, package: str, version: str, *, early: bool
) -> Row:
    settings = Settings.from_env(
        {
            "HEX_API_URL": fake.api_url,
            "HEX_MIRROR": fake.mirror_url,
            "DATABASE_PATH": str(folder / "index.db"),
            "PROJECT_ROOT": str(folder),
            "AI_RERANK_MODEL": "off",
            "INGEST_TIMEOUT_MS": "3600000",
            "HEXLOCAL_ANSWER_WHILE_EMBEDDING": "true" if early else "false",
            "HEXLOCAL_SYNC_ON_START": "false",
        }
    )
    embedder = build_local_embedder(settings)
    await asyncio.to_thread(embedder.ensure_loaded)
    service = build(settings, embedder=embedder, reranker=None)
    try:
        started = time.perf_counter()
        query = QUERY.get(package, "how do I configure it")
        result = await service.search_docs(package, query, version=version)
        answer_s = time.perf_counter() - started
        await service.ingest(package, version)  # joins the job, if it runs on
        complete_s = time.perf_counter() - started
        (indexed,) = [p for p in service.list_packages() if p.name == package]
    finally:
        await service.aclose()
    codes = [n.code for n in result.notices]
    return Row(
        package,
        version,
        "answer while embedding" if early else "wait for the vectors",
        round(answer_s, 2),
        round(complete_s, 2),
        indexed.chunk_count,
        len(result.hits),
        ",".join(codes) or "-",
    )


async def run(packages: Sequence[tuple[str, str]]) -> list[Row]:
    rows = []
    async with FakeHex(corpus=CORPUS) as fake:
        for package, version in packages:
            for early in (True, False):
                with tempfile.TemporaryDirectory(prefix="bench-first-search-") as folder:
                    row = await first_search(fake, Path(folder), package, version, early=early)
                print(f"{row}", file=sys.stderr, flush=True)
                rows.append(row)
    return rows


def table(rows: Sequence[Row]) -> Table:
    out = Table(title="first search of a package new to the index (real embedder)")
    for column in ("package", "mode", "answer s", "complete s", "chunks", "hits", "notice"):
        out.add_column(column, justify="right" if column.endswith("s") else "left")
    for r in rows:
        out.add_row(
            f"{r.package} {r.version}",
            r.mode,
            f"{r.answer_s:.2f}",
            f"{r.complete_s:.2f}",
            str(r.chunks),
            str(r.hits),
            r.notice,
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--packages", default=DEFAULT_PACKAGES, help="name@version,...")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    specs = [s.strip().partition("@") for s in args.packages.split(",") if s.strip()]
    load = os.getloadavg()[0]
    rows = asyncio.run(run([(name, version) for name, _, version in specs]))
    return finish({"rows": [asdict(r) for r in rows]}, table(rows), load, as_json=args.json)


if __name__ == "__main__":
    raise SystemExit(main())
