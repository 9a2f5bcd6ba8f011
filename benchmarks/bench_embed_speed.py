"""Embedding speed: raw onnxruntime against hexlocal's embedder (fp32 and int8), and
first-time ingestion, all as a ratio against the raw fp32 throughput.

Rows, on the chunks of plug 1.19.2 (parse + chunk of the shared corpus tarball):

* raw fp32        the fp32 graph in a bare onnxruntime session: pre-tokenised, sorted by
                  length, batches of 32, 2 intra-op threads with spinning (the best
                  settings measured on this 2-core machine); tokens/s of real (unpadded)
                  tokens;
* hexlocal fp32   `LocalEmbedder.embed_sync` on the same texts (tokenising included);
* hexlocal int8   the same with `AI_EMBED_MODEL=sentence-transformers/all-MiniLM-L6-v2@int8`;
* ingest PKG      first-time ingestion into a fresh database: read the tarball, parse,
                  chunk, embed, write (`index_items`, the pipeline's own path), per model;
                  tokens/s counts the tokens of every chunk embedded. The model is loaded
                  before the clock starts. Target: plug at >= 1.6x raw fp32.

Throughput rows take the median of `--repeat` passes; ingestion runs once per package and
model. The machine is shared: run it twice and compare medians.

    python benchmarks/bench_embed_speed.py [--repeat N] [--packages plug@1.19.2,...] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from attrs import asdict, frozen
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from hexlocal_core.adapters.local_embedder import (  # noqa: E402
    LocalEmbedder,
    build_local_embedder,
)
from hexlocal_core.adapters.model_sources import DEFAULT_EMBED_REPO, INT8_SUFFIX  # noqa: E402
from hexlocal_core.adapters.onnx_runtime import load_tokenizer, pad  # noqa: E402
from hexlocal_core.config import Settings  # noqa: E402
from hexlocal_core.index.store import Store  # noqa: E402
from hexlocal_core.ingest.hexdocs import parse_hexdocs  # noqa: E402
from hexlocal_core.ingest.pipeline import IndexRequest, chunk_items, index_items  # noqa: E402
from hexlocal_core.ingest.tarball import read_docs_tarball  # noqa: E402

SHARED = Path(os.environ.get("HEXLOCAL_SHARED", REPO.parent / "shared"))
HEXDOCS = SHARED / "corpus" / "hexdocs"
DEFAULT_PACKAGES = "plug@1.19.2,elixir@1.18.4"
TEXTS_FROM = ("plug", "1.19.2")
RAW_BATCH = 32
TARGET = 1.6  # ingestion of plug, as a multiple of raw fp32 tokens/s
MODELS = {"fp32": DEFAULT_EMBED_REPO, "int8": DEFAULT_EMBED_REPO + INT8_SUFFIX}


@frozen
class Row:
    name: str
    seconds: float
    tokens: int

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


def _request(package: str, version: str, max_bytes: int) -> IndexRequest:
    tarball = HEXDOCS / f"{package}-{version}.tar.gz"
    files = read_docs_tarball(tarball.read_bytes(), max_bytes=max_bytes)
    parsed = parse_hexdocs(files, package=package, version=version)
    return IndexRequest(package, version, "hexdocs", parsed.items)


def _chunk_texts(request: IndexRequest) -> list[str]:
    """The texts ingestion embeds: the chunker's output, as the pipeline chunks."""
    chunked: Any = chunk_items(request.items)
    chunks = getattr(chunked, "chunks", chunked)  # ChunkedItems, or a plain list before it
    return [c.embedding_text() for c in chunks]


def _median_seconds(run: Callable[[], None], repeat: int) -> float:
    run()  # warm: the first runs of a session are slower
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def raw_fp32(embedder: LocalEmbedder, texts: Sequence[str], repeat: int) -> Row:
    """The graph in a bare session: no tokenising, no pooling, batches sorted by length."""
    import onnxruntime as ort

    files = embedder.files
    assert files is not None  # loaded by the caller
    tokenizer = load_tokenizer(files.tokenizer_path, files.max_length or 256)
    rows = [e.ids for e in tokenizer.encode_batch(list(texts))]
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]), reverse=True)
    feeds = []
    for start in range(0, len(order), RAW_BATCH):
        ids, mask = pad([rows[i] for i in order[start : start + RAW_BATCH]])
        feeds.append(
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(
        str(files.onnx_path), options, providers=["CPUExecutionProvider"]
    )

    def run() -> None:
        for feed in feeds:
            session.run(["last_hidden_state"], feed)

    seconds = _median_seconds(run, repeat)
    return Row("raw onnxruntime fp32", seconds, sum(len(r) for r in rows))


def hexlocal_embed(label: str, embedder: LocalEmbedder, texts: Sequence[str], repeat: int) -> Row:
    tokens = sum(len(ids) for ids in embedder.tokenize(texts))
    seconds = _median_seconds(lambda: embedder.embed_sync(texts), repeat)
    return Row(f"hexlocal {label}", seconds, tokens)


async def ingest(
    label: str, embedder: LocalEmbedder, package: str, version: str, settings: Settings
) -> Row:
    """First-time ingestion into a fresh database; the clock includes reading the tarball."""
    with tempfile.TemporaryDirectory(prefix="bench-embed-speed-") as folder:
        store = Store(Path(folder) / "index.db")
        try:
            started = time.perf_counter()
            request = _request(package, version, settings.max_docs_bytes)
            await index_items(store, embedder, request, slice_size=settings.embed_batch_size)
            seconds = time.perf_counter() - started
        finally:
            store.close()
    texts = _chunk_texts(request)
    tokens = sum(len(ids) for ids in embedder.tokenize(texts))
    return Row(f"ingest {package} {version} ({label})", seconds, tokens)


def embedder_for(model: str) -> LocalEmbedder:
    embedder = build_local_embedder(Settings.from_env({**os.environ, "AI_EMBED_MODEL": model}))
    embedder.ensure_loaded()
    return embedder


async def run(args: argparse.Namespace) -> list[Row]:
    settings = Settings.from_env()
    package, version = TEXTS_FROM
    request = _request(package, version, settings.max_docs_bytes)
    texts = _chunk_texts(request)
    embedders = {label: embedder_for(model) for label, model in MODELS.items()}
    rows = [_shown(raw_fp32(embedders["fp32"], texts, args.repeat))]
    rows += [_shown(hexlocal_embed(k, e, texts, args.repeat)) for k, e in embedders.items()]
    for spec in args.packages.split(","):
        name, _, ver = spec.strip().partition("@")
        for label, embedder in embedders.items():
            rows.append(_shown(await ingest(label, embedder, name, ver, settings)))
    return rows


def _shown(row: Row) -> Row:
    # Each row on stderr as it is measured: a run cut short still says something.
    print(f"{row.name}: {row.seconds:.2f} s, {row.tokens_per_s:,.0f} tokens/s", file=sys.stderr)
    return row


def table(rows: Sequence[Row]) -> Table:
    raw = rows[0].tokens_per_s
    out = Table(
        title=f"embedding speed (tokens/s; x = against raw fp32, target plug ingest >= {TARGET}x)",
        title_justify="left",
    )
    for column in ("measurement", "seconds", "tokens", "tokens/s", "x raw fp32"):
        out.add_column(column, justify="left" if column == "measurement" else "right")
    for row in rows:
        ratio = row.tokens_per_s / raw if raw else 0.0
        mark = ""
        if row.name.startswith("ingest plug"):
            mark = " PASS" if ratio >= TARGET else " FAIL"
        out.add_row(
            row.name,
            f"{row.seconds:.2f}",
            str(row.tokens),
            f"{row.tokens_per_s:,.0f}",
            f"{ratio:.2f}{mark}",
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    import asyncio

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed passes per throughput row")
    parser.add_argument("--packages", default=DEFAULT_PACKAGES, help="name@version,...")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    rows = asyncio.run(run(args))
    if args.json:
        result: dict[str, Any] = {
            "load_before": load,
            "rows": [{**asdict(r), "tokens_per_s": r.tokens_per_s} for r in rows],
        }
        print(json.dumps(result, indent=2))
        return 0
    console = Console(highlight=False, width=120)
    console.print(table(rows))
    console.print(f"load average before {load:.1f}, after {os.getloadavg()[0]:.1f}", style="dim")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
