"""Retrieval benchmark: the query sets, by kind, in one index.

Indexes every package@version that the chosen sets name (the dev set
../shared/eval/dev.jsonl and the research sets in eval/, each with its status in
eval/README.md) into ONE database (so BM25 statistics and vector neighbours see the other
packages, as a real project index does), with the real local embedder, then prints
recall@5 / MRR@10 per set, mode and kind, and the warm in-process latency of mode rrf.

    python benchmarks/bench_retrieval.py [--db PATH] [--modes fts,vector,rrf] [--json OUT]

An index holds one version of a package, so sets that pin two versions of one package
(the error confirmation set reads jason 1.4.5 and decimal 3.1.1, the dev set 1.4.4 and
2.3.0) are refused together: run them with separate `--db` files.

The database is reused: a second run indexes only what is missing, or what today's parser
and chunker make differently from what is stored (vectors of unchanged texts come from the
embedding cache).
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

from attrs import evolve
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.common import same_model_or_exit  # noqa: E402
from hexlocal_core.chunk import chunk_items  # noqa: E402
from hexlocal_core.config import Settings  # noqa: E402
from hexlocal_core.evaluation import (  # noqa: E402
    EvalOptions,
    EvalQuery,
    EvalReport,
    ingest_targets,
    load_queries,
    run_eval,
)
from hexlocal_core.evaluation.metrics import percentile  # noqa: E402
from hexlocal_core.index.sqlite.store import Store  # noqa: E402
from hexlocal_core.ingest.hexdocs import parse_hexdocs  # noqa: E402
from hexlocal_core.ingest.pipeline import IngestRequest, ingest_items  # noqa: E402
from hexlocal_core.ingest.tarball import read_docs_tarball  # noqa: E402
from hexlocal_core.ports import Embedder  # noqa: E402
from hexlocal_core.search.engine import SearchEngine  # noqa: E402
from hexlocal_core.search.tuning import SearchTuning  # noqa: E402

SHARED = REPO.parent / "shared"
SETS = {
    "dev": SHARED / "eval" / "dev.jsonl",
    "examples": REPO / "eval" / "queries.jsonl",
    "agent": REPO / "eval" / "heldout_agent.jsonl",
    "confirm": REPO / "eval" / "confirm_tasks.jsonl",
    "errors": REPO / "eval" / "confirm_errors.jsonl",
    "heldout_errors": REPO / "eval" / "heldout_errors.jsonl",
    "heldout_tasks": REPO / "eval" / "heldout_tasks.jsonl",
    "heldout_mixed": REPO / "eval" / "heldout_mixed.jsonl",
    "heldout_third": REPO / "eval" / "heldout_third.jsonl",
    "heldout_fourth": REPO / "eval" / "heldout_fourth.jsonl",
    "heldout_fifth": REPO / "eval" / "heldout_fifth.jsonl",
    "heldout_sixth": REPO / "eval" / "heldout_sixth.jsonl",
    "heldout_seventh": REPO / "eval" / "heldout_seventh.jsonl",
    "heldout_eighth": REPO / "eval" / "heldout_eighth.jsonl",
}
DEFAULT_SETS = ("dev", "examples", "agent", "confirm")  # one version of each package
DEFAULT_DB = REPO / ".hexlocal-cache" / "bench" / "retrieval.db"
MAX_DOCS_BYTES = 200 * 1024 * 1024


def _request(package: str, version: str) -> IngestRequest:
    tarball = SHARED / "corpus" / "hexdocs" / f"{package}-{version}.tar.gz"
    files = read_docs_tarball(tarball.read_bytes(), max_bytes=MAX_DOCS_BYTES)
    parsed = parse_hexdocs(files, package=package, version=version)
    return IngestRequest(package, version, "hexdocs", parsed.items)


def _current(store: Store, request: IngestRequest) -> bool:
    """Whether the stored package holds exactly the chunks today's parser and chunker make
    of its tarball (a database built by older code would measure that code's chunks)."""
    indexed = store.package(request.package)
    if indexed is None or indexed.version != request.version or not indexed.complete:
        return False
    made = [(c.item.ref, c.ordinal, c.content_hash) for c in chunk_items(request.items).chunks]
    return sorted(made) == sorted(store.stored_hashes(request.package))


def version_clashes(queries: Sequence[EvalQuery]) -> dict[str, set[str]]:
    """Packages the queries pin at more than one version (one index holds one of each)."""
    pinned: dict[str, set[str]] = {}
    for q in queries:
        if q.version is not None:
            pinned.setdefault(q.package, set()).add(q.version)
    return {name: versions for name, versions in pinned.items() if len(versions) > 1}


async def build_index(store: Store, embedder: Embedder, queries: Sequence[EvalQuery]) -> None:
    for package, version in ingest_targets(queries):
        if version is None:
            continue
        started = time.perf_counter()
        request = await asyncio.to_thread(_request, package, version)
        if await asyncio.to_thread(_current, store, request):
            continue
        report = await ingest_items(store, embedder, request)
        print(
            f"indexed {package} {version}: {report.chunks} chunks ({report.embedded} embedded)"
            f" in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
            flush=True,
        )


def score_table(reports: dict[str, EvalReport], modes: Sequence[str]) -> Table:
    table = Table(title="recall@5 / MRR@10 (n)", title_justify="left")
    table.add_column("set")
    table.add_column("mode")
    kinds = ("concept", "task", "error", "symbol", "all")
    for kind in kinds:
        table.add_column(kind, justify="right")
    for name, report in reports.items():
        for mode in modes:
            cells = []
            for kind in kinds:
                s = report.score(mode, kind)
                cells.append(f"{s.recall_at_5:.3f} / {s.mrr_at_10:.3f} ({s.queries})" if s else "-")
            table.add_row(name, mode, *cells)
    return table


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from hexlocal_core.adapters.local_embedder import build_local_embedder

    console = Console(highlight=False, width=160)
    sets = {name: load_queries(path) for name, path in SETS.items() if name in args.sets}
    clashes = version_clashes([q for qs in sets.values() for q in qs])
    if clashes:
        pins = "; ".join(f"{n} {', '.join(sorted(v))}" for n, v in sorted(clashes.items()))
        raise SystemExit(f"these sets pin two versions of a package ({pins}): use one --db each")
    args.db.parent.mkdir(parents=True, exist_ok=True)
    store = Store(args.db)
    embedder = build_local_embedder(Settings.from_env())
    await asyncio.to_thread(embedder.ensure_loaded)
    same_model_or_exit(store, embedder.model_id, args.db)
    await build_index(store, embedder, [q for qs in sets.values() for q in qs])
    if args.ingest_only:
        store.close()
        return {}
    tuning = evolve(SearchTuning(), **dict(args.tune))
    anchors = None
    if args.anchors:
        from benchmarks.anchor_index import build as build_anchors

        items = {
            package: _request(package, version).items
            for package, version in ingest_targets([q for qs in sets.values() for q in qs])
            if version is not None
        }
        anchors = await build_anchors(items, args.db, embedder, args.db.with_suffix(".anchors.npz"))
        print(f"anchor arm: {anchors.targets} items described by anchors", file=sys.stderr)
    engine = SearchEngine(store, embedder, None, tuning=tuning, anchors=anchors)
    reports = {
        name: await run_eval(
            engine, store, queries, options=EvalOptions(modes=args.modes), source=name
        )
        for name, queries in sets.items()
    }
    latency = [
        run.ms
        for report in reports.values()
        for result in report.results
        if (run := result.run("rrf")) is not None
    ]
    console.print(score_table(reports, args.modes))
    if latency:
        console.print(
            f"rrf warm in-process latency: p50 {percentile(latency, 50):.1f} ms,"
            f" p95 {percentile(latency, 95):.1f} ms (n={len(latency)})"
        )
    store.close()
    return {name: report.to_dict() for name, report in reports.items()}


def _names(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _tune(value: str) -> tuple[str, Any]:
    name, _, raw = value.partition("=")
    parsed = json.loads(raw)
    return name, _tuples(parsed)


def _tuples(value: Any) -> Any:
    # SearchTuning fields are tuples (frozen, hashable); JSON gives lists.
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--db", type=Path, default=DEFAULT_DB)
    parser.add_argument("--modes", type=_names, default=("fts", "vector", "rrf"))
    parser.add_argument("--sets", type=_names, default=DEFAULT_SETS)
    parser.add_argument("--json", type=Path, help="write every query's outcome here")
    parser.add_argument("--ingest-only", action="store_true")
    parser.add_argument(
        "--anchors",
        action="store_true",
        help="fuse an anchor-text arm mined from the indexed tarballs (benchmarks/anchor_index.py)",
    )
    parser.add_argument(
        "--tune",
        type=_tune,
        action="append",
        default=[],
        help="a SearchTuning field as NAME=JSON, e.g. --tune fts_weight=2 (repeatable)",
    )
    args = parser.parse_args(argv)
    result = asyncio.run(run(args))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
