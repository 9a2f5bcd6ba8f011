"""Storage engines side by side: ingestion and warm search on PostgreSQL against SQLite.

One run, both engines, the same packages, vectors and queries:

* ingestion: each package through the pipeline (`ingest_items`: chunk, write the chunks,
  embed and write the vectors slice by slice) into a fresh index of each engine, the chunk
  write timed apart by the pipeline's progress phases; then `replace_package` alone with the
  same precomputed vectors into another fresh index (round 0 writes an empty index, each
  of `--rewrites` rounds replaces it). Embedding is the same work on both engines: the
  write alone is the engines' comparison;
* warm search: the dev queries of the indexed packages through `Hexlocal.search_docs`
  (version from a mix.lock, no rerank): one untimed pass, then `--repeat` passes, the
  engines taking turns; p50 / p95 of the wall time and of the engine's stages, and how
  far the two engines' top 5 agree.

    python benchmarks/bench_store.py [--packages NAME[@VERSION] ...] [--repeat N]
        [--rewrites N] [--hashing] [--pg-url URL] [--queries FILE] [--json]

PostgreSQL is a `pgserver` in a temporary folder at its durable defaults (fsync and
synchronous_commit on), or the server `--pg-url` names (the run creates and drops its own
databases there); SQLite runs with hexlocal's pragmas (WAL, synchronous=NORMAL).
`--hashing` replaces all-MiniLM-L6-v2 with tests.support.helpers.HashingEmbedder (384 dims), to
take the model out of both columns. Ratio: PostgreSQL's time over SQLite's (>1: slower).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from attrs import frozen
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from hexlocal_core.chunk import CHUNKER_VERSION, chunk_items  # noqa: E402
from hexlocal_core.config import Settings  # noqa: E402
from hexlocal_core.evaluation import EvalQuery, load_queries  # noqa: E402
from hexlocal_core.evaluation.metrics import percentile  # noqa: E402
from hexlocal_core.index.rows import PackageWrite  # noqa: E402
from hexlocal_core.index.seam import DocsStore  # noqa: E402
from hexlocal_core.index.sqlite.store import Store  # noqa: E402
from hexlocal_core.ingest.hexdocs import parse_hexdocs  # noqa: E402
from hexlocal_core.ingest.pipeline import IngestRequest, embed_with_cache, ingest_items  # noqa: E402
from hexlocal_core.ingest.tarball import read_docs_tarball  # noqa: E402
from hexlocal_core.model import IngestProgress, Phase, VersionSource  # noqa: E402
from hexlocal_core.model_guard import provider_of  # noqa: E402
from hexlocal_core.ports import Embedder  # noqa: E402
from hexlocal_core.service import Hexlocal, build, open_store  # noqa: E402
from hexlocal_core.versions.semver import try_parse_version  # noqa: E402

SHARED = REPO.parent / "shared"
HEXDOCS = SHARED / "corpus" / "hexdocs"
DEFAULT_QUERIES = SHARED / "eval" / "dev.jsonl"
DEFAULT_PACKAGES = ("jason", "nimble_pool", "plug", "ecto")
ENGINES = ("sqlite", "pg")
STAGES = ("fts", "embed", "vec", "fuse")  # the engine's own timings (SearchResult)
LABELS = {
    "wall": "search_docs wall",
    "wall-embed": "  wall minus query embed",
    "fts": "  fts arm",
    "embed": "  query embed",
    "vec": "  vector arm",
    "fuse": "  fuse (locate)",
    "other": "  outside the stages",  # prepare, vector checks, hydrate: on the loop
}
MAX_DOCS_BYTES = 200 * 1024 * 1024
FAKE_HASH = "0" * 64  # mix.lock checksums: hexlocal reads the version, not the hash


@frozen
class Target:
    name: str
    version: str
    request: IngestRequest


@frozen
class Engines:
    """Settings for a fresh index of either engine (a new file, or a new database)."""

    root: Path
    admin_url: str
    base: dict[str, str]

    def fresh(self, engine: str, label: str) -> Settings:
        env = {k: v for k, v in self.base.items() if k != "DATABASE_URL"}
        env["DATABASE_PATH"] = str(self.root / f"{label}.db")
        if engine == "pg":
            env["DATABASE_URL"] = create_database(self.admin_url, f"hexlocal_bench_{label}")
        return Settings.from_env(env)


# -- inputs -----------------------------------------------------------------------------


def choose_version(name: str, queries: Sequence[EvalQuery]) -> str:
    """The dev queries' version of the package, else the newest stable corpus tarball."""
    for q in queries:
        if q.package == name and q.version:
            return q.version
    prefix = f"{name}-"
    found = [
        v
        for p in HEXDOCS.glob(f"{name}-*.tar.gz")
        if (v := try_parse_version(p.name[len(prefix) : -len(".tar.gz")])) is not None
    ]
    stable = [v for v in found if v.is_stable] or found
    if not stable:
        raise SystemExit(f"no corpus tarball for {name} under {HEXDOCS}")
    return str(max(stable))


def load_target(spec: str, queries: Sequence[EvalQuery]) -> Target:
    name, _, version = spec.partition("@")
    version = version or choose_version(name, queries)
    tarball = HEXDOCS / f"{name}-{version}.tar.gz"
    files = read_docs_tarball(tarball.read_bytes(), max_bytes=MAX_DOCS_BYTES)
    parsed = parse_hexdocs(files, package=name, version=version)
    return Target(name, version, IngestRequest(name, version, "hexdocs", parsed.items))


def write_lock(root: Path, targets: Sequence[Target]) -> None:
    """A mix.lock pinning the benchmark's versions: search_docs resolves from it, as in a
    project, with no registry call in the timed path."""
    lines = [
        f'  "{t.name}": {{:hex, :{t.name}, "{t.version}", "{FAKE_HASH}", [:mix], [],'
        f' "hexpm", "{FAKE_HASH}"}},'
        for t in targets
    ]
    (root / "mix.lock").write_text("%{\n" + "\n".join(lines) + "\n}\n")


# -- PostgreSQL -------------------------------------------------------------------------


def with_database(url: str, name: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path="/" + name))


def _admin(url: str, statement: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement)
        return list(cur.fetchall()) if cur.description else []


def create_database(admin_url: str, name: str) -> str:
    _admin(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    _admin(admin_url, f'CREATE DATABASE "{name}"')
    return with_database(admin_url, name)


def drop_databases(admin_url: str) -> None:
    rows = _admin(
        admin_url, "SELECT datname FROM pg_database WHERE datname LIKE 'hexlocal_bench_%'"
    )
    for (name,) in rows:
        _admin(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def pg_settings(url: str) -> dict[str, str]:
    names = ("server_version", "fsync", "synchronous_commit", "shared_buffers", "wal_level")
    return {n: str(_admin(url, f"SHOW {n}")[0][0]) for n in names}


@contextlib.contextmanager
def pg_server(url: str | None, root: Path) -> Iterator[str]:
    """An admin URL: the one given, or a throwaway pgserver left at its defaults."""
    if url:
        try:
            yield url
        finally:
            drop_databases(url)
        return
    from pgserver.postgres_server import get_server

    server = get_server(root / "pgdata", cleanup_mode="stop")
    try:
        yield str(server.get_uri())
    finally:
        server.cleanup()


def index_bytes(settings: Settings) -> int:
    if settings.database_url:
        rows = _admin(settings.database_url, "SELECT pg_database_size(current_database())")
        return int(rows[0][0])
    path = Path(settings.database_path)
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


# -- ingestion --------------------------------------------------------------------------


class PhaseClock:
    """When each pipeline phase began (progress is pushed synchronously, on the loop)."""

    def __init__(self) -> None:
        self.at: dict[Phase, float] = {}

    def __call__(self, progress: IngestProgress) -> None:
        self.at.setdefault(progress.phase, time.perf_counter())

    def span(self, start: Phase, end: Phase) -> float:
        return self.at[end] - self.at[start]


async def pipeline_ingest(
    store: DocsStore, embedder: Embedder, target: Target, slice_size: int
) -> dict[str, float]:
    clock = PhaseClock()
    started = time.perf_counter()
    report = await ingest_items(
        store, embedder, target.request, slice_size=slice_size, progress=clock
    )
    return {
        "chunks": report.chunks,
        "total_s": time.perf_counter() - started,
        # The chunks are written first (one transaction), then the vectors slice by slice
        # as they are embedded: "write" is the chunks' transaction, "embed" the rest.
        "embed_s": clock.span(Phase.EMBEDDING, Phase.DONE),
        "write_s": clock.span(Phase.WRITING, Phase.EMBEDDING),
    }


async def package_write(
    store: DocsStore, embedder: Embedder, target: Target, slice_size: int
) -> PackageWrite:
    """The write `ingest_items` makes, vectors from `store`'s embedding cache (no model)."""
    items = target.request.items
    chunks = chunk_items(items).chunks
    vectors, embedded = await embed_with_cache(store, embedder, chunks, slice_size=slice_size)
    assert embedded == 0, "the vectors should all come from the cache"
    return PackageWrite(
        name=target.name,
        version=target.version,
        source="hexdocs",
        chunker_version=CHUNKER_VERSION,
        item_count=len(items),
        chunks=chunks,
        vectors=vectors,
        embed_model=embedder.model_id,
        embed_provider=provider_of(embedder),
        meta={},
    )


def write_rounds(
    stores: dict[str, DocsStore], writes: Sequence[PackageWrite], rounds: int
) -> dict[str, list[dict[str, float]]]:
    """Per engine, per round, seconds of each package's `replace_package`; round 0 writes
    an empty index. The engines alternate which goes first, so drifting load hits both."""
    out: dict[str, list[dict[str, float]]] = {e: [] for e in stores}
    for r in range(rounds):
        order = list(stores) if r % 2 == 0 else list(reversed(stores))
        for engine in order:
            seconds: dict[str, float] = {}
            for write in writes:
                t = time.perf_counter()
                stores[engine].replace_package(write)
                seconds[write.name] = time.perf_counter() - t
            out[engine].append(seconds)
    return out


# -- search -----------------------------------------------------------------------------


async def search_pass(
    service: Hexlocal, queries: Sequence[EvalQuery], samples: dict[str, list[float]] | None
) -> dict[str, list[str]]:
    """One pass over the queries; returns each query's top refs."""
    tops: dict[str, list[str]] = {}
    for q in queries:
        t = time.perf_counter()
        result = await service.search_docs(q.package, q.query)
        wall = (time.perf_counter() - t) * 1000
        if result.version_source != VersionSource.MIX_LOCK.value or result.version != q.version:
            raise SystemExit(f"{q.id}: resolved {result.version} from {result.version_source}")
        tops[q.id] = [h.ref for h in result.hits]
        if samples is None:
            continue
        samples["wall"].append(wall)
        stages = {k: v for k, v in result.timings_ms.items() if k in STAGES}
        samples["wall-embed"].append(wall - stages.get("embed", 0.0))
        samples["other"].append(wall - sum(stages.values()))
        for stage, ms in stages.items():
            samples[stage].append(ms)
    return tops


def agreement(a: dict[str, list[str]], b: dict[str, list[str]]) -> dict[str, Any]:
    """How far two engines' top refs agree, and the queries where they differ."""
    shared = [len(set(a[q]) & set(b[q])) / max(1, len(a[q]), len(b[q])) for q in a]
    differ = {q: {"sqlite": a[q], "pg": b[q]} for q in a if a[q] != b[q]}
    return {
        "overlap_at_5": statistics.fmean(shared) if shared else 0.0,
        "identical": len(a) - len(differ),
        "differ": differ,
    }


# -- the run ----------------------------------------------------------------------------


def make_embedder(hashing: bool) -> Embedder:
    if hashing:
        from tests.support.helpers import HashingEmbedder

        return HashingEmbedder(dims=384)
    from hexlocal_core.adapters.local_embedder import build_local_embedder

    embedder = build_local_embedder(Settings.from_env())
    embedder.ensure_loaded()
    return embedder


def loadavg() -> str:
    with contextlib.suppress(OSError):
        return Path("/proc/loadavg").read_text().strip()
    return "?"


async def run(args: argparse.Namespace, engines: Engines, console: Console) -> dict[str, Any]:
    queries_all = load_queries(args.queries)
    targets = [load_target(spec, queries_all) for spec in args.packages]
    pinned = {(t.name, t.version) for t in targets}
    queries = [q for q in queries_all if (q.package, q.version) in pinned]
    write_lock(engines.root, targets)
    embedder = make_embedder(args.hashing)
    slice_size = Settings.from_env().embed_batch_size

    def say(message: str) -> None:
        if not args.json:
            console.print(message, style="dim")

    out: dict[str, Any] = {"loadavg_start": loadavg(), "embedder": embedder.model_id}
    out["packages"] = {t.name: t.version for t in targets}

    # 1. The pipeline, into a fresh index of each engine; the engines alternate first.
    settings = {e: engines.fresh(e, "pipeline") for e in ENGINES}
    stores = {e: open_store(s) for e, s in settings.items()}
    out["engine"] = {e: s.engine for e, s in stores.items()}
    pipeline: dict[str, dict[str, dict[str, float]]] = {e: {} for e in ENGINES}
    for i, target in enumerate(targets):
        for engine in ENGINES if i % 2 == 0 else ENGINES[::-1]:
            row = await pipeline_ingest(stores[engine], embedder, target, slice_size)
            pipeline[engine][target.name] = row
            say(
                f"{engine}: {target.name} {target.version}: {row['chunks']:.0f} chunks, "
                f"{row['total_s']:.1f} s (write {row['write_s']:.2f} s)"
            )
    writes = [await package_write(stores["sqlite"], embedder, t, slice_size) for t in targets]
    for store in stores.values():
        store.close()
    out["index_bytes"] = {e: index_bytes(s) for e, s in settings.items()}
    out["pipeline"] = pipeline

    # 2. replace_package alone, precomputed vectors, another fresh index of each engine.
    alone = {e: open_store(engines.fresh(e, "writes")) for e in ENGINES}
    try:
        rounds = await asyncio.to_thread(write_rounds, alone, writes, 1 + args.rewrites)
    finally:
        for store in alone.values():
            store.close()
    out["writes"] = rounds
    say("writes done; searching")

    # 3. Warm search through the facade over the pipeline's indexes.
    samples: dict[str, dict[str, list[float]]] = {e: {k: [] for k in LABELS} for e in ENGINES}
    tops: dict[str, dict[str, list[str]]] = {}
    async with contextlib.AsyncExitStack() as stack:
        services = {
            e: await stack.enter_async_context(build(s, embedder=embedder, load_models=False))
            for e, s in settings.items()
        }
        for engine, service in services.items():
            tops[engine] = await search_pass(service, queries, None)  # warm-up, untimed
        for r in range(args.repeat):
            for engine in ENGINES if r % 2 == 0 else ENGINES[::-1]:
                await search_pass(services[engine], queries, samples[engine])
    out["search"] = {"queries": len(queries), "repeat": args.repeat, "samples": samples}
    out["agreement"] = agreement(tops["sqlite"], tops["pg"])
    out["loadavg_end"] = loadavg()
    return out


# -- output -----------------------------------------------------------------------------


def ingest_rows(out: dict[str, Any]) -> list[tuple[str, dict[str, float], int]]:
    """(label, seconds per engine, chunks) rows of the ingestion half."""
    chunks = int(sum(r["chunks"] for r in out["pipeline"]["sqlite"].values()))

    def summed(engine: str, key: str) -> float:
        return float(sum(r[key] for r in out["pipeline"][engine].values()))

    def round_total(engine: str, r: int) -> float:
        return float(sum(out["writes"][engine][r].values()))

    rows = [
        ("pipeline total", {e: summed(e, "total_s") for e in ENGINES}, chunks),
        ("  of which embed", {e: summed(e, "embed_s") for e in ENGINES}, chunks),
        ("  of which write", {e: summed(e, "write_s") for e in ENGINES}, chunks),
        ("write alone, empty index", {e: round_total(e, 0) for e in ENGINES}, chunks),
    ]
    replaced = len(out["writes"]["sqlite"]) - 1
    if replaced:
        medians = {
            e: statistics.median(round_total(e, r) for r in range(1, replaced + 1)) for e in ENGINES
        }
        rows.append((f"write alone, replace (median of {replaced})", medians, chunks))
    return rows


def _ratio(sqlite: float, pg: float) -> str:
    return f"{pg / sqlite:.2f}" if sqlite > 0 else "-"


def show(console: Console, out: dict[str, Any]) -> None:
    table = Table(
        title=f"PostgreSQL vs SQLite, one run ({out['embedder']}; packages "
        + ", ".join(f"{n} {v}" for n, v in out["packages"].items())
        + ")",
        title_justify="left",
    )
    table.add_column("measure")
    for col in ("SQLite", "PostgreSQL", "PG/SQLite"):
        table.add_column(col, justify="right")
    for label, seconds, chunks in ingest_rows(out):
        cells = [f"{seconds[e]:.2f} s  {chunks / seconds[e]:,.0f} ch/s" for e in ENGINES]
        table.add_row(label, *cells, _ratio(seconds["sqlite"], seconds["pg"]))
    sizes = out["index_bytes"]
    table.add_row(
        "index size",
        *(f"{sizes[e] / 2**20:.1f} MB" for e in ENGINES),
        _ratio(sizes["sqlite"], sizes["pg"]),
        end_section=True,
    )
    search = out["search"]
    for key in LABELS:
        for pct in (50, 95):
            values = {e: percentile(search["samples"][e][key], pct) for e in ENGINES}
            label = f"{LABELS[key]} p{pct}"
            cells = [f"{values[e]:.1f} ms" for e in ENGINES]
            table.add_row(label, *cells, _ratio(values["sqlite"], values["pg"]))
    agree = out["agreement"]
    n = search["queries"]
    table.add_row(
        "top-5 agreement",
        f"overlap {agree['overlap_at_5']:.2f}",
        f"identical {agree['identical']}/{n}",
        "",
    )
    console.print(table)
    console.print(
        f"{n} queries x {search['repeat']} timed passes per engine (after one warm-up pass)."
        f" SQLite: {out['engine']['sqlite']}, {out['sqlite_pragmas']}."
        f" PostgreSQL: {out['engine']['pg']}, {_pairs(out['pg_settings'])}."
        f" loadavg start {out['loadavg_start']}, end {out['loadavg_end']}."
    )


def _pairs(values: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items() if k != "server_version")


def sqlite_pragmas(path: Path) -> str:
    store = Store(path)
    try:
        found = {
            p: store.conn.execute(f"PRAGMA {p}").fetchone() for p in ("journal_mode", "synchronous")
        }
    finally:
        store.close()
    return ", ".join(f"{p}={v[0] if v else '?'}" for p, v in found.items())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--packages", nargs="+", default=list(DEFAULT_PACKAGES), metavar="NAME[@VERSION]"
    )
    parser.add_argument("--queries", type=Path, default=DEFAULT_QUERIES)
    parser.add_argument("--repeat", type=int, default=5, help="timed passes over the queries")
    parser.add_argument("--rewrites", type=int, default=3, help="replace rounds of the writes")
    parser.add_argument("--hashing", action="store_true", help="HashingEmbedder, not the model")
    parser.add_argument("--pg-url", default=None, help="an existing server (admin URL)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    console = Console(highlight=False, width=140, stderr=args.json)
    root = Path(tempfile.mkdtemp(prefix="hexlocal-bench-store-"))
    base = {**os.environ, "PROJECT_ROOT": str(root), "AI_RERANK_MODEL": "off"}
    try:
        with pg_server(args.pg_url, root) as admin:
            engines = Engines(root, admin, base)
            out = asyncio.run(run(args, engines, console))
            out["pg_settings"] = pg_settings(admin)
        out["sqlite_pragmas"] = sqlite_pragmas(root / "pipeline.db")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps(out, indent=2, default=str))
    else:
        show(console, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
