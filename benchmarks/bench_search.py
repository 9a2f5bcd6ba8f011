"""Search benchmark: per-stage latency of warm searches, and the retrieval-quality table.

Indexes the packages of the dev query set (../shared/eval/dev.jsonl) straight from the
corpus tarballs (parse + `ingest_items`, the pipeline's own write path) with the real
local embedder, then runs the query set through the facade (`Hexlocal.evaluate`, as
`hexlocal eval` does):

* without rerank (mode rrf) and with rerank (the stand-in cross-encoder: the real MiniLM
  encoder with a seeded random head, built by tests/support/model_fixtures.py), each query
  `--repeat` times, and prints p50/p95 per stage (embed, fts, vec, fuse, feedback,
  learned, rerank, total);
* the evaluation table (recall@5, MRR@10, cand, median ms) for fts, vector, rrf, rerank.

Targets: without rerank p50 <= 30 ms and p95 <= 80 ms; with rerank p50 <= 150 ms.

    python benchmarks/bench_search.py [--db PATH] [--queries FILE] [--repeat N] [--json]

The index is kept in --db (default .hexlocal-cache/bench/search.db) and reused: a second
run only indexes what is missing, and the embedding cache skips text already embedded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.common import same_model_or_exit  # noqa: E402
from hexlocal_cli.eval_cmd import print_report  # noqa: E402
from hexlocal_core.config import Settings  # noqa: E402
from hexlocal_core.evaluation import (  # noqa: E402
    EvalOptions,
    EvalQuery,
    EvalReport,
    QueryStatus,
    ingest_targets,
    load_queries,
)
from hexlocal_core.evaluation.metrics import percentile  # noqa: E402
from hexlocal_core.index.sqlite.store import Store  # noqa: E402
from hexlocal_core.ingest.hexdocs import parse_hexdocs  # noqa: E402
from hexlocal_core.ingest.pipeline import IngestRequest, ingest_items  # noqa: E402
from hexlocal_core.ingest.tarball import read_docs_tarball  # noqa: E402
from hexlocal_core.ports import Embedder, Reranker  # noqa: E402
from hexlocal_core.service import Hexlocal, build  # noqa: E402

SHARED = REPO.parent / "shared"
DEFAULT_QUERIES = SHARED / "eval" / "dev.jsonl"
DEFAULT_DB = REPO / ".hexlocal-cache" / "bench" / "search.db"
STAGES = ("embed", "fts", "vec", "fuse", "feedback", "learned", "rerank", "total")
TARGETS = {"rrf": {"p50": 30.0, "p95": 80.0}, "rerank": {"p50": 150.0}}
MAX_DOCS_BYTES = 200 * 1024 * 1024


def _request(package: str, version: str) -> IngestRequest:
    tarball = SHARED / "corpus" / "hexdocs" / f"{package}-{version}.tar.gz"
    files = read_docs_tarball(tarball.read_bytes(), max_bytes=MAX_DOCS_BYTES)
    parsed = parse_hexdocs(files, package=package, version=version)
    return IngestRequest(package, version, "hexdocs", parsed.items)


async def build_index(
    store: Store, embedder: Embedder, queries: Sequence[EvalQuery], console: Console
) -> None:
    """Index every package@version the queries name, unless it is indexed already."""
    for package, version in ingest_targets(queries):
        if version is None:
            continue
        indexed = store.package(package)
        if indexed is not None and indexed.version == version:
            continue
        started = time.perf_counter()
        request = await asyncio.to_thread(_request, package, version)
        report = await ingest_items(store, embedder, request)
        console.print(
            f"indexed {package} {version}: {report.chunks} chunks "
            f"({report.embedded} embedded) in {time.perf_counter() - started:.1f} s",
            style="dim",
        )


def standin_reranker(cache: Path) -> Reranker | None:
    """The stand-in cross-encoder the tests build: no real checkpoint is reachable here.

    Its scores are meaningless (a seeded random head), so it measures rerank latency and
    the bounded-authority fusion, not rerank quality.
    """
    try:
        from hexlocal_core.adapters.cross_encoder import build_local_reranker
        from tests.support.model_fixtures import model_settings, write_stand_in_reranker
    except ImportError:
        return None
    folder = cache / "stand-in-reranker"
    if not (folder / "model.safetensors").is_file():
        write_stand_in_reranker(folder)
    return build_local_reranker(model_settings(HEXLOCAL_RERANK_MODEL_DIR=str(folder)))


def stage_samples(report: EvalReport, mode: str) -> dict[str, list[float]]:
    """Per stage, every timing the engine reported for that mode (plus the wall total)."""
    samples: dict[str, list[float]] = {stage: [] for stage in STAGES}
    for result in report.by_status(QueryStatus.OK):
        run = result.run(mode)
        if run is None:
            continue
        for stage in STAGES[:-1]:
            if stage in run.stage_ms:
                samples[stage].append(run.stage_ms[stage])
        samples["total"].append(run.ms)
    return samples


def latency_table(samples: dict[str, dict[str, list[float]]]) -> Table:
    table = Table(title="warm search latency, ms (p50 / p95)", title_justify="left")
    table.add_column("mode")
    table.add_column("n", justify="right")
    for stage in STAGES:
        table.add_column(stage, justify="right")
    table.add_column("target")
    for mode, by_stage in samples.items():
        cells = [
            f"{percentile(v, 50):.1f} / {percentile(v, 95):.1f}" if v else "-"
            for v in (by_stage[s] for s in STAGES)
        ]
        table.add_row(mode, str(len(by_stage["total"])), *cells, _verdict(mode, by_stage["total"]))
    return table


def _verdict(mode: str, totals: list[float]) -> str:
    target = TARGETS.get(mode, {})
    if not totals or not target:
        return ""
    checks = [percentile(totals, int(k[1:])) <= limit for k, limit in target.items()]
    wanted = ", ".join(f"{k} <= {v:.0f}" for k, v in target.items())
    return f"{'PASS' if all(checks) else 'FAIL'} ({wanted})"


async def _timed(
    service: Hexlocal, queries: Sequence[EvalQuery], mode: str, repeat: int, source: str
) -> dict[str, list[float]]:
    merged: dict[str, list[float]] = {stage: [] for stage in STAGES}
    for _ in range(repeat):
        report = await service.evaluate(queries, EvalOptions(modes=(mode,)), source=source)
        for stage, values in stage_samples(report, mode).items():
            merged[stage].extend(values)
    return merged


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from hexlocal_core.adapters.local_embedder import build_local_embedder

    console = Console(highlight=False, width=130)
    settings = Settings.from_env()
    queries = load_queries(args.queries)
    args.db.parent.mkdir(parents=True, exist_ok=True)
    store = Store(args.db)
    embedder = build_local_embedder(settings)
    await asyncio.to_thread(embedder.ensure_loaded)
    same_model_or_exit(store, embedder.model_id, args.db)
    await build_index(store, embedder, queries, console)
    reranker = None if args.no_rerank else standin_reranker(args.db.parent)

    store.close()  # indexed: from here on everything goes through the facade
    source = str(args.queries)
    bench = attrs.evolve(settings, database_path=args.db)
    async with build(bench, embedder=embedder, reranker=None, load_models=False) as plain:
        samples = {"rrf": await _timed(plain, queries, "rrf", args.repeat, source)}
    async with build(bench, embedder=embedder, reranker=reranker, load_models=False) as service:
        if reranker is not None:
            samples["rerank"] = await _timed(service, queries, "rerank", args.repeat, source)
        else:
            console.print(
                "no stand-in cross-encoder available: rerank latency not measured", style="yellow"
            )
        report = await service.evaluate(queries, EvalOptions(), source=source)
    if not args.json:
        console.print(latency_table(samples))
        print_report(console, report)
    return {"latency": samples, "eval": report.to_dict()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, default=DEFAULT_DB)
    parser.add_argument("--queries", type=Path, default=DEFAULT_QUERIES)
    parser.add_argument("--repeat", type=int, default=3, help="timed passes over the query set")
    parser.add_argument("--no-rerank", action="store_true")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    if not args.queries.is_file():
        print(f"query set not found: {args.queries}", file=sys.stderr)
        return 2
    result = asyncio.run(run(args))
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
