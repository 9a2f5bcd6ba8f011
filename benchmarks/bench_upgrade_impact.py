"""upgrade_impact benchmark: seconds for the acceptance project moving ecto 3.12.5 -> 3.14.2
(cold: both tarballs fetched from a loopback hex.pm and parsed; cached: the same call
again), the call sites found in beams vs the source scan, and the same project never
compiled (the source scan alone), and grown to N copies of its beams (the bounded-time
claim: thousands of beams in seconds).

    python benchmarks/bench_upgrade_impact.py [--beams 0,1000,5000] [--json]

Needs `elixirc` (the project is compiled for real, as the tests do).
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
from hexlocal_core.service import build  # noqa: E402
from tests.fakes.fake_hex import FakeHex, client_for, settings_for  # noqa: E402
from tests.support.helpers import HashingEmbedder  # noqa: E402
from tests.support.upgrade_project import SOURCE, compile_project, copy_project  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus"


@frozen
class Row:
    mode: str  # "compiled" | "never compiled" (the source scan alone)
    beams: int
    cold_s: float
    cached_s: float
    beam_sites: int
    source_sites: int
    affected: int


async def measure(fake: FakeHex, folder: Path, project: Path, copies: int) -> Row:
    ebin = project / "_build/dev/lib/shop/ebin"
    money = (ebin / "Elixir.Shop.Money.beam").read_bytes() if copies else b""
    for i in range(copies):
        (ebin / f"Elixir.Shop.Copy{i}.beam").write_bytes(money)
    settings = settings_for(fake, folder, ai_rerank_model="off", project_root=project)
    service = build(
        settings,
        embedder=HashingEmbedder(),
        reranker=None,
        registry=client_for(settings),
        load_models=False,
    )
    async with service:
        start = time.perf_counter()
        report = await service.upgrade_impact("ecto", "3.14.2")
        cold = time.perf_counter() - start
        start = time.perf_counter()
        await service.upgrade_impact("ecto", "3.14.2")
        cached = time.perf_counter() - start
    beams = len(list(ebin.glob("*.beam")))
    mode = "compiled" if beams else "never compiled"
    return Row(
        mode, beams, cold, cached, report.beam_sites, report.source_sites, len(report.affected)
    )


async def run(sizes: Sequence[int]) -> list[Row]:
    rows = []
    async with FakeHex(corpus=CORPUS) as fake:
        for copies in [-1, *sizes]:
            with tempfile.TemporaryDirectory(prefix="bench-upgrade-") as folder:
                project = copy_project(SOURCE, Path(folder) / "shop")
                if copies >= 0:
                    compile_project(project)
                row = await measure(fake, Path(folder), project, max(copies, 0))
            print(row, file=sys.stderr, flush=True)
            rows.append(row)
    return rows


def table(rows: Sequence[Row]) -> Table:
    out = Table(title="upgrade_impact: ecto 3.12.5 -> 3.14.2 on the acceptance project")
    for column in (
        "project",
        "beams",
        "cold s",
        "cached s",
        "sites: beams",
        "sites: source",
        "affected",
    ):
        out.add_column(column, justify="right")
    for r in rows:
        out.add_row(
            r.mode,
            str(r.beams),
            f"{r.cold_s:.2f}",
            f"{r.cached_s:.3f}",
            str(r.beam_sites),
            str(r.source_sites),
            str(r.affected),
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--beams", default="0,1000,5000", help="extra beam copies per run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.beams.split(",") if s.strip()]
    load = os.getloadavg()[0]
    rows = asyncio.run(run(sizes))
    return finish({"rows": [asdict(r) for r in rows]}, table(rows), load, as_json=args.json)


if __name__ == "__main__":
    raise SystemExit(main())
