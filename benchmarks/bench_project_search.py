"""Project-wide search benchmark: warm latency of search_docs without a package.

Indexes up to `--packages` (default 40) docs tarballs of the corpus (../shared/corpus/hexdocs)
straight through the pipeline's write path (parse + `ingest_items`), writes a synthetic
mix.lock naming them, and times warm searches through the facade:

* project-wide (`Hexlocal.search_project_deps`, every package of the lock plus Elixir's
  apps), against a one-package search (`Hexlocal.search_docs`) of the same query, in each
  `--modes` mode (default rrf and fts);
* per stage, the same project-wide search at the core (`cross_package.search_many` on the
  engine): the engine's stages summed over the packages (embed, fts, vec, fuse), the
  query's cosine distances to the packages' hits (`distances`) and the cross-package
  fusion (`merge`).

The corpus holds 28 distinct packages in 46 tarballs. Past 28, older versions are indexed
under alias names (`jason_1_2_2`): real docs of a real size, but near-copies of a newer
version's, so they count for latency, not for relevance. The query texts are the dev and
example eval sets' (their relevance is not scored here: `hexlocal eval --all-packages`).

The query is embedded once for all packages (`cross_package.embed_once`); before that it
was embedded once per package (rrf p50 at 40 packages 920 ms, 649 ms of it embedding).
`--embedder hashing` swaps the real local model for the tests' HashingEmbedder (noise
vectors, instant ingestion): its figures leave out the cost of embedding the query.

    python benchmarks/bench_project_search.py [--db PATH] [--packages N] [--modes rrf,fts]
        [--queries N] [--repeat N] [--embedder local|hashing] [--json]

The index is kept in --db (default .hexlocal-cache/bench/project_search-EMBEDDER.db) and
reused: a second run indexes only what is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
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
from hexlocal_core.config import Settings  # noqa: E402
from hexlocal_core.evaluation import load_queries  # noqa: E402
from hexlocal_core.evaluation.metrics import percentile  # noqa: E402
from hexlocal_core.index.sqlite.store import Store  # noqa: E402
from hexlocal_core.ingest.hexdocs import parse_hexdocs  # noqa: E402
from hexlocal_core.ingest.pipeline import IngestRequest, ingest_items  # noqa: E402
from hexlocal_core.ingest.tarball import read_docs_tarball  # noqa: E402
from hexlocal_core.ports import Embedder  # noqa: E402
from hexlocal_core.search.cross_package import search_many  # noqa: E402
from hexlocal_core.search.engine import SearchEngine  # noqa: E402
from hexlocal_core.service import Hexlocal, build  # noqa: E402
from hexlocal_core.versions import ELIXIR_APPS  # noqa: E402

SHARED = REPO.parent / "shared"
CORPUS = SHARED / "corpus" / "hexdocs"
QUERY_SETS = (SHARED / "eval" / "dev.jsonl", REPO / "eval" / "queries.jsonl")
DEFAULT_DB = REPO / ".hexlocal-cache" / "bench" / "project_search-{embedder}.db"
STAGES = ("embed", "fts", "vec", "fuse", "distances", "merge", "total")
LIMIT = 5  # search_docs' default
MAX_DOCS_BYTES = 200 * 1024 * 1024


@attrs.frozen
class Target:
    name: str  # the name it is indexed and locked under
    package: str  # the corpus package
    version: str

    @property
    def alias(self) -> bool:
        return self.name != self.package


def _version_key(version: str) -> tuple[int, tuple[int, ...], str]:
    core, _, pre = version.partition("-")
    parts = tuple(int(p) for p in core.split(".") if p.isdigit())
    return (0 if pre else 1, parts, pre)  # stable releases first, then newest


def corpus_targets(limit: int) -> list[Target]:
    """The newest stable version of every corpus package, then the other versions under
    alias names, up to `limit`."""
    by_package: dict[str, list[str]] = {}
    for path in sorted(CORPUS.glob("*.tar.gz")):
        package, _, version = path.name.removesuffix(".tar.gz").partition("-")
        by_package.setdefault(package, []).append(version)
    newest, others = [], []
    for package, versions in sorted(by_package.items()):
        ordered = sorted(versions, key=_version_key, reverse=True)
        newest.append(Target(package, package, ordered[0]))
        for version in ordered[1:]:
            alias = f"{package}_{re.sub(r'[^a-z0-9]+', '_', version.lower())}"
            others.append(Target(alias, package, version))
    return (newest + others)[:limit]


def _request(target: Target) -> IngestRequest:
    tarball = CORPUS / f"{target.package}-{target.version}.tar.gz"
    files = read_docs_tarball(tarball.read_bytes(), max_bytes=MAX_DOCS_BYTES)
    parsed = parse_hexdocs(files, package=target.name, version=target.version)
    return IngestRequest(target.name, target.version, "hexdocs", parsed.items)


async def build_index(
    store: Store, embedder: Embedder, targets: Sequence[Target], console: Console
) -> None:
    for target in targets:
        indexed = store.package(target.name)
        if indexed is not None and indexed.version == target.version:
            continue
        started = time.perf_counter()
        request = await asyncio.to_thread(_request, target)
        report = await ingest_items(store, embedder, request)
        console.print(
            f"indexed {target.name} {target.version}: {report.chunks} chunks "
            f"({report.embedded} embedded) in {time.perf_counter() - started:.1f} s",
            style="dim",
        )


def lock_text(targets: Sequence[Target]) -> str:
    """A mix.lock naming every target but Elixir's apps (searched as the project's
    language when indexed, as in a real project)."""
    lines = [
        f'  "{t.name}": {{:hex, :{t.name}, "{t.version}", "0", [:mix], [], "hexpm", "0"}},'
        for t in targets
        if t.name not in ELIXIR_APPS
    ]
    return "%{\n" + "\n".join(lines) + "\n}\n"


def query_texts(n: int, own: dict[str, str]) -> list[tuple[str, str, str]]:
    """(package, version indexed, query) from the eval sets, for indexed packages. The
    version is explicit: an Elixir app outside the lock would otherwise resolve to
    another version and be indexed again, inside the timed search."""
    out: list[tuple[str, str, str]] = []
    for path in QUERY_SETS:
        if path.is_file():
            out.extend(
                (q.package, own[q.package], q.query) for q in load_queries(path) if q.package in own
            )
    return out[:n]


def _cell(values: Sequence[float]) -> str:
    if not values:
        return "-"
    return f"{percentile(values, 50):.1f} / {percentile(values, 95):.1f}"


async def time_facade(
    service: Hexlocal, queries: Sequence[tuple[str, str, str]], mode: str, repeat: int
) -> dict[str, list[float]]:
    """Wall ms of each search as a caller sees it: project-wide, and one package."""
    out: dict[str, list[float]] = {"project": [], "one package": []}
    first_package, first_version, first_query = queries[0]
    await service.search_project_deps(first_query, limit=LIMIT, mode=mode)  # warm
    await service.search_docs(first_package, first_query, first_version, limit=LIMIT, mode=mode)
    for _ in range(repeat):
        for package, version, query in queries:
            t = time.perf_counter()
            result = await service.search_project_deps(query, limit=LIMIT, mode=mode)
            out["project"].append((time.perf_counter() - t) * 1000)
            out.setdefault("searched", []).append(result.timings_ms.get("packages", 0.0))
            for notice in result.notices:  # e.g. packages_not_indexed: a scope cut short
                out.setdefault(f"notice {notice.code}", []).append(1.0)
            t = time.perf_counter()
            await service.search_docs(package, query, version, limit=LIMIT, mode=mode)
            out["one package"].append((time.perf_counter() - t) * 1000)
    return out


async def time_stages(
    engine: SearchEngine,
    packages: Sequence[str],
    queries: Sequence[tuple[str, str, str]],
    mode: str,
    repeat: int,
) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {stage: [] for stage in STAGES}
    for _ in range(repeat):
        for _package, _version, query in queries:
            outcome = await search_many(engine, packages, query, limit=LIMIT, mode=mode)
            for stage in STAGES:
                if stage in outcome.timings_ms:
                    out[stage].append(outcome.timings_ms[stage])
    return out


def latency_table(rows: dict[str, dict[str, list[float]]], packages: int) -> Table:
    table = Table(
        title=f"warm search latency, ms (p50 / p95), {packages} packages", title_justify="left"
    )
    for name in ("mode", "n", "project-wide", "one package", "ratio p50"):
        table.add_column(name, justify="left" if name == "mode" else "right")
    for mode, t in rows.items():
        ratio = percentile(t["project"], 50) / max(percentile(t["one package"], 50), 1e-9)
        table.add_row(
            mode,
            str(len(t["project"])),
            _cell(t["project"]),
            _cell(t["one package"]),
            f"{ratio:.1f}x",
        )
    return table


def stage_table(rows: dict[str, dict[str, list[float]]]) -> Table:
    table = Table(
        title="project-wide search per stage, ms (p50 / p95; engine stages summed over packages)",
        title_justify="left",
    )
    table.add_column("mode")
    for stage in STAGES:
        table.add_column(stage, justify="right")
    for mode, by_stage in rows.items():
        table.add_row(mode, *(_cell(by_stage[s]) for s in STAGES))
    return table


def _embedder(kind: str, settings: Settings) -> Embedder:
    if kind == "hashing":
        from tests.support.helpers import HashingEmbedder

        return HashingEmbedder(dims=384)
    from hexlocal_core.adapters.local_embedder import build_local_embedder

    return build_local_embedder(settings)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    console = Console(highlight=False, width=130, stderr=args.json)
    settings = Settings.from_env()
    targets = corpus_targets(args.packages)
    args.db.parent.mkdir(parents=True, exist_ok=True)
    embedder = _embedder(args.embedder, settings)
    if hasattr(embedder, "ensure_loaded"):
        await asyncio.to_thread(embedder.ensure_loaded)
    store = Store(args.db)
    same_model_or_exit(store, embedder.model_id, args.db)
    await build_index(store, embedder, targets, console)
    engine = SearchEngine(store, embedder, None)
    names = [t.name for t in targets]
    queries = query_texts(args.queries, {t.name: t.version for t in targets})
    stages = {m: await time_stages(engine, names, queries, m, args.repeat) for m in args.modes}
    store.close()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "mix.exs").write_text("defmodule Bench.MixProject do\nend\n")
        (root / "mix.lock").write_text(lock_text(targets))
        bench = attrs.evolve(
            settings,
            database_path=args.db,
            project_root=root,
            ai_rerank_model="off",
            sync_elixir=False,
            sync_on_start=False,
        )
        async with build(bench, embedder=embedder, reranker=None, load_models=False) as service:
            facade = {m: await time_facade(service, queries, m, args.repeat) for m in args.modes}
    searched = sorted({int(v) for t in facade.values() for v in t.get("searched", [])})
    notices = sorted({k for t in facade.values() for k in t if k.startswith("notice ")})
    aliases = sum(t.alias for t in targets)
    distinct = len({t.package for t in targets})
    label = f"{len(targets)} ({distinct} distinct packages, {aliases} older versions as aliases)"
    if not args.json:
        console.print(f"index    {label}; embedder {embedder.model_id}")
        console.print(f"queries  {len(queries)} x {args.repeat}; packages searched: {searched}")
        if notices:
            console.print(f"notices  {', '.join(notices)}", style="yellow")
        console.print(latency_table(facade, len(targets)))
        console.print(stage_table(stages))
    return {
        "packages": [attrs.asdict(t) for t in targets],
        "embedder": embedder.model_id,
        "queries": len(queries),
        "repeat": args.repeat,
        "searched": searched,
        "facade": facade,
        "stages": stages,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, default=None, help=f"default {DEFAULT_DB}")
    parser.add_argument("--packages", type=int, default=40, help="how many indexes to search")
    parser.add_argument("--modes", type=lambda s: s.split(","), default=["rrf", "fts"])
    parser.add_argument("--queries", type=int, default=40, help="query texts per pass")
    parser.add_argument("--repeat", type=int, default=2, help="timed passes over the queries")
    parser.add_argument("--embedder", choices=("local", "hashing"), default="local")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    # One index per embedder: an index answers only the model it was built with.
    args.db = args.db or Path(str(DEFAULT_DB).format(embedder=args.embedder))
    result = asyncio.run(run(args))
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
