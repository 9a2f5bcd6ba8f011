"""Local model benchmark: embedding throughput, query latency, rerank latency.

* chunks/s    embedding a sample of the real corpus's chunk mix: the `doc` of every item in
              the shared hexdocs tarballs' `dist/search_data-*.js`, cut to 1000 characters,
              embedded in calls of EMBED_BATCH_SIZE texts as ingestion does (target >= 80);
* query ms    one query embedded alone, p50/p95 over 50 queries (target <= 15 ms);
* rerank ms   10 (query, passage) pairs, p50/p95 (target well under 150 ms): passages of
              ~1000 characters (the worst case: all reach the 256-token window) and
              passages drawn from the whole chunk mix; with the stand-in cross-encoder
              checkpoint the tests use (same architecture and size as
              ms-marco-MiniLM-L6-v2) or a real one from `--rerank-dir`.

Wall times on a shared machine are noisy, so each row also shows the CPU milliseconds one
operation (a chunk, a query, a rerank call) cost, and the load average before and after.
Nothing touches the network.

    python benchmarks/bench_embed.py [--chunks N] [--threads T] [--int8] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from hexlocal_core.adapters.cross_encoder import (  # noqa: E402
    LocalCrossEncoder,
    RerankerOptions,
    build_local_reranker,
)
from hexlocal_core.adapters.local_embedder import (  # noqa: E402
    EmbedderOptions,
    build_local_embedder,
)
from hexlocal_core.config import Settings, default_threads  # noqa: E402

SHARED = Path(os.environ.get("HEXLOCAL_SHARED", REPO.parent / "shared"))
HEXDOCS = SHARED / "corpus" / "hexdocs"
CACHE = REPO / ".hexlocal-cache" / "models"
SEARCH_DATA = re.compile(r"(^|/)dist/search_data-[^/]*\.js$")
QUERIES = (
    "how do I make a synchronous call to a GenServer",
    "start a supervised task",
    "Enum.map/2",
    "Ecto.Changeset.cast/4",
    "decode JSON into a map with atom keys",
    "what is the difference between Task.async and Task.start_link",
    "configure Logger backends in runtime.exs",
    "Plug.Conn.put_resp_header",
    "how to stream a large file",
    "retry an HTTP request with Req",
    "ETS lookup",
    "pattern match on a map in a function head",
    "Supervisor restart strategies",
    "mix release configuration",
    "ExUnit async tests",
    "define a behaviour with callbacks",
    "protocols vs behaviours",
    "Finch connection pool size",
    "Mint HTTP/2 request",
    "Jason.encode! with pretty printing",
)


def corpus_chunks() -> list[str]:
    docs: list[str] = []
    for archive in sorted(HEXDOCS.glob("*.tar.gz")):
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                if SEARCH_DATA.search(member.name):
                    docs.extend(_docs(tar, member))
    return docs


def _docs(tar: tarfile.TarFile, member: tarfile.TarInfo) -> Iterator[str]:
    handle = tar.extractfile(member)
    if handle is None:
        return
    raw = handle.read().decode("utf-8")
    data = json.loads(raw[raw.index("=") + 1 :])
    items = data["items"] if isinstance(data, dict) else data
    for item in items:
        doc = (item.get("doc") or "").strip()
        if doc:
            yield doc[:1000]


def timed(fn: Callable[[], Any], runs: int) -> tuple[list[float], float]:
    """Wall milliseconds per run, and CPU seconds for all runs."""
    walls: list[float] = []
    cpu = time.process_time()
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        walls.append((time.perf_counter() - start) * 1000)
    return walls, time.process_time() - cpu


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def bench_embedder(args: argparse.Namespace, chunks: list[str]) -> list[dict[str, Any]]:
    # AI_EMBED_MODEL picks the embedder measured (unset: the default, int8).
    model = {k: v for k, v in os.environ.items() if k == "AI_EMBED_MODEL"}
    settings = Settings.from_env({"HEXLOCAL_MODEL_CACHE": str(CACHE), **model})
    options = EmbedderOptions(threads=args.threads, batch_size=args.batch_size)
    embedder = build_local_embedder(settings, options=options)
    embedder.ensure_loaded()
    rows = []
    step = settings.embed_batch_size

    def embed_all() -> None:
        for i in range(0, len(chunks), step):
            embedder.embed_sync(chunks[i : i + step])

    tokens = sum(len(ids) for ids in embedder.tokenize(chunks))
    (wall,), cpu = timed(embed_all, 1)
    rows.append(
        {
            "what": f"embed {len(chunks)} corpus chunks ({tokens / len(chunks):.0f} tokens avg)"
            f" with {embedder.model_id}",
            "value": len(chunks) / (wall / 1000),
            "unit": "chunks/s",
            "target": ">= 80",
            "cpu_ms": cpu * 1000 / len(chunks),
        }
    )
    queries = [QUERIES[i % len(QUERIES)] + ("" if i < len(QUERIES) else f" {i}") for i in range(50)]
    it = iter(queries * 2)
    walls, cpu = timed(lambda: embedder.embed_sync([next(it)]), len(queries))
    rows.append(_latency("embed one query", walls, cpu, "<= 15"))
    return rows


def _latency(what: str, walls: list[float], cpu: float, target: str) -> dict[str, Any]:
    """A latency row; `cpu` is the CPU seconds of all the runs in `walls`."""
    return {
        "what": what,
        "value": pct(walls, 50),
        "p95": pct(walls, 95),
        "unit": "ms p50",
        "target": target,
        "cpu_ms": cpu * 1000 / len(walls),
    }


def bench_reranker(
    args: argparse.Namespace, chunks: list[str], rerank_dir: Path
) -> list[dict[str, Any]]:
    settings = Settings.from_env(
        {"HEXLOCAL_MODEL_CACHE": str(CACHE), "HEXLOCAL_RERANK_MODEL_DIR": str(rerank_dir)}
    )
    pools = {"~1000-char": [c for c in chunks if len(c) >= 900], "corpus-mix": chunks}
    variants = [("~1000-char", 256, False), ("~1000-char", 512, False), ("corpus-mix", 256, False)]
    if args.int8:
        variants += [("~1000-char", 256, True), ("corpus-mix", 256, True)]
    rows = []
    for pool, max_length, int8 in variants:
        reranker = _reranker(settings, args.threads, max_length, int8)
        label = "int8" if reranker.quantized else "fp32"
        walls, cpu = timed(_scorer(reranker, pools[pool]), args.rerank_runs)
        what = f"rerank 10 {pool} chunks, max_length {max_length}, {label}"
        rows.append(_latency(what, walls, cpu, "< 150"))
    return rows


def _reranker(settings: Settings, threads: int, max_length: int, int8: bool) -> LocalCrossEncoder:
    # min_agreement -1 times int8 whatever its agreement: the stand-in's random head says
    # nothing about the real model's ranking quality.
    options = RerankerOptions(
        max_length=max_length, threads=threads, quantize=int8, min_agreement=-1.0
    )
    reranker = build_local_reranker(settings, options=options)
    assert isinstance(reranker, LocalCrossEncoder)
    reranker.ensure_loaded()
    return reranker


def _scorer(reranker: LocalCrossEncoder, passages: list[str]) -> Callable[[], None]:
    rng = np.random.default_rng(7)  # every variant scores the same sequence of candidates

    def score() -> None:
        picked = [passages[i] for i in rng.choice(len(passages), 10, replace=False)]
        reranker.score_sync(QUERIES[int(rng.integers(len(QUERIES)))], picked)

    return score


def stand_in_dir(tmp: Path) -> Path:
    from tests.support.model_fixtures import write_stand_in_reranker

    return write_stand_in_reranker(tmp / "stand-in")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=1000, help="corpus chunks to embed")
    parser.add_argument(
        "--threads", type=int, default=default_threads(), help="default: what a user gets"
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rerank-runs", type=int, default=30)
    parser.add_argument("--rerank-dir", type=Path, help="a real cross-encoder folder")
    parser.add_argument("--int8", action="store_true", help="also time an int8 reranker")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    everything = corpus_chunks()
    rng = np.random.default_rng(2026)
    picked = rng.choice(len(everything), min(args.chunks, len(everything)), replace=False)
    chunks = [everything[i] for i in sorted(picked)]
    load_before = os.getloadavg()
    rows = bench_embedder(args, chunks)
    with tempfile.TemporaryDirectory() as tmp:
        rows += bench_reranker(args, chunks, args.rerank_dir or stand_in_dir(Path(tmp)))
    load_after = os.getloadavg()
    if args.json:
        print(json.dumps({"rows": rows, "load": [load_before, load_after]}, indent=2))
        return
    table = Table(title=f"local models ({args.threads} threads, {os.cpu_count()} CPUs)")
    for column in ("measure", "value", "p95", "target", "CPU ms/op"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    for row in rows:
        p95 = f"{row['p95']:.1f}" if "p95" in row else ""
        value = f"{row['value']:.1f} {row['unit']}"
        table.add_row(row["what"], value, p95, row["target"], f"{row['cpu_ms']:.1f}")
    console = Console()
    console.print(table)
    console.print(f"load average (1 min) before {load_before[0]:.2f}, after {load_after[0]:.2f}")


if __name__ == "__main__":
    main()
