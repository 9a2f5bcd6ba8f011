"""Embedding speed: raw onnxruntime against hexlocal's embedder (fp32 and int8), and
first-time ingestion, all as a ratio against the raw fp32 throughput.

Rows, on the chunks of plug 1.19.2 (parse + chunk of the shared corpus tarball):

* raw fp32        the fp32 graph in a bare onnxruntime session: pre-tokenised, sorted by
                  length, 2 intra-op threads with spinning, batches of the size
                  (32, 16, 8 or 4) fastest on this machine, shown in the row's name;
                  tokens/s of real (unpadded) tokens;
* hexlocal fp32   `LocalEmbedder.embed_sync` on the same texts (tokenising included);
* hexlocal int8   the same with `AI_EMBED_MODEL=sentence-transformers/all-MiniLM-L6-v2@int8`;
* ingest PKG      first-time ingestion into a fresh database: read the tarball, parse,
                  chunk, embed, write (`ingest_items`, the pipeline's own path), per model;
                  tokens/s counts the tokens of every chunk embedded. The model is loaded
                  before the clock starts. Target: plug at >= 1.6x raw fp32.

Rows are measured in `--repeat` interleaved rounds (raw, hexlocal fp32, int8, ingestion of
the first package per model), and each ratio is against the raw pass of the same round, so
a slow minute of a shared machine moves both sides of it; the other packages (elixir takes
minutes) are ingested in the last round only.

    python benchmarks/bench_embed_speed.py [--repeat N] [--packages plug@1.19.2,...] [--json]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import numpy as np
from attrs import asdict, evolve, frozen
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.common import finish  # noqa: E402
from hexlocal_core.adapters.local_embedder import (  # noqa: E402
    LocalEmbedder,
    build_local_embedder,
)
from hexlocal_core.adapters.model_sources import DEFAULT_EMBED_REPO, INT8_SUFFIX  # noqa: E402
from hexlocal_core.adapters.onnx_runtime import load_tokenizer, pad  # noqa: E402
from hexlocal_core.chunk import chunk_items  # noqa: E402
from hexlocal_core.config import Settings  # noqa: E402
from hexlocal_core.index.sqlite.store import Store  # noqa: E402
from hexlocal_core.ingest.hexdocs import parse_hexdocs  # noqa: E402
from hexlocal_core.ingest.pipeline import IngestRequest, ingest_items  # noqa: E402
from hexlocal_core.ingest.tarball import read_docs_tarball  # noqa: E402

SHARED = Path(os.environ.get("HEXLOCAL_SHARED", REPO.parent / "shared"))
HEXDOCS = SHARED / "corpus" / "hexdocs"
DEFAULT_PACKAGES = "plug@1.19.2,elixir@1.18.4"
TEXTS_FROM = ("plug", "1.19.2")
RAW_BATCHES = (32, 16, 8, 4)  # the raw pass uses the fastest of these here
TARGET = 1.6  # ingestion of plug, as a multiple of raw fp32 tokens/s
MODELS = {"fp32": DEFAULT_EMBED_REPO, "int8": DEFAULT_EMBED_REPO + INT8_SUFFIX}


@frozen
class Row:
    name: str
    seconds: float  # median over the rounds it ran in
    tokens: int
    ratio: float  # tokens/s against raw fp32's of the same round (median over rounds)
    rounds: int

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


def _request(package: str, version: str, max_bytes: int) -> IngestRequest:
    tarball = HEXDOCS / f"{package}-{version}.tar.gz"
    files = read_docs_tarball(tarball.read_bytes(), max_bytes=max_bytes)
    parsed = parse_hexdocs(files, package=package, version=version)
    return IngestRequest(package, version, "hexdocs", parsed.items)


def _chunk_texts(request: IngestRequest) -> list[str]:
    """The texts ingestion embeds: the chunker's output, as the pipeline chunks."""
    return [c.embedding_text() for c in chunk_items(request.items).chunks]


def _timed(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def raw_fp32(embedder: LocalEmbedder, texts: Sequence[str]) -> tuple[Callable[[], None], int, int]:
    """The graph in a bare session: no tokenising, no pooling, batches sorted by length,
    of the size (of RAW_BATCHES) fastest on this machine, so hexlocal is measured against
    raw onnxruntime at its best, not at a setting that suited another CPU.

    Returns one pass, the real (unpadded) tokens it embeds and the batch size chosen."""
    import onnxruntime as ort

    files = embedder.files
    assert files is not None  # loaded by the caller
    tokenizer = load_tokenizer(files.tokenizer_path, files.max_length or 256)
    rows = [e.ids for e in tokenizer.encode_batch(list(texts))]
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]), reverse=True)

    def feeds_of(batch: int) -> list[dict[str, np.ndarray]]:
        feeds = []
        for start in range(0, len(order), batch):
            ids, mask = pad([rows[i] for i in order[start : start + batch]])
            feeds.append(
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            )
        return feeds

    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(
        str(files.onnx_path), options, providers=["CPUExecutionProvider"]
    )

    def pass_over(feeds: list[dict[str, np.ndarray]]) -> None:
        for feed in feeds:
            session.run(["last_hidden_state"], feed)

    by_batch = {batch: feeds_of(batch) for batch in RAW_BATCHES}
    pass_over(by_batch[RAW_BATCHES[0]])  # warm: the first runs of a session are slower

    def seconds(batch: int) -> float:  # the better of two passes
        return min(_timed(partial(pass_over, by_batch[batch])) for _ in range(2))

    best = min(RAW_BATCHES, key=seconds)
    return partial(pass_over, by_batch[best]), sum(len(r) for r in rows), best


async def ingest(embedder: LocalEmbedder, package: str, version: str, settings: Settings) -> float:
    """Seconds of first-time ingestion into a fresh database, reading the tarball included."""
    with tempfile.TemporaryDirectory(prefix="bench-embed-speed-") as folder:
        store = Store(Path(folder) / "index.db")
        try:
            started = time.perf_counter()
            request = _request(package, version, settings.max_docs_bytes)
            await ingest_items(store, embedder, request, slice_size=settings.embed_batch_size)
            return time.perf_counter() - started
        finally:
            store.close()


def embedder_for(model: str) -> LocalEmbedder:
    embedder = build_local_embedder(Settings.from_env({**os.environ, "AI_EMBED_MODEL": model}))
    embedder.ensure_loaded()
    return embedder


class Rounds:
    """Seconds per row and round; each row's ratio is taken against the raw pass of its own
    round, so a slow minute of a shared machine moves both sides of the ratio."""

    def __init__(self) -> None:
        self.seconds: dict[str, list[float]] = {}
        self.tokens: dict[str, int] = {}
        self.raw: list[float] = []  # raw tokens/s per round

    def add(self, name: str, seconds: float, tokens: int) -> None:
        self.seconds.setdefault(name, []).append(seconds)
        self.tokens[name] = tokens
        if name == RAW:
            self.raw.append(tokens / seconds)
        print(f"{name}: {seconds:.2f} s, {tokens / seconds:,.0f} tokens/s", file=sys.stderr)

    def rows(self) -> list[Row]:
        out = []
        for name, times in self.seconds.items():
            tokens = self.tokens[name]
            # A row measured in fewer rounds than raw (the big packages) uses the last ones.
            raws = self.raw[-len(times) :] if name != RAW else self.raw
            ratios = [tokens / t / r for t, r in zip(times, raws, strict=True)]
            out.append(
                Row(name, statistics.median(times), tokens, statistics.median(ratios), len(times))
            )
        return out


RAW = "raw onnxruntime fp32"


async def run(args: argparse.Namespace) -> list[Row]:
    settings = Settings.from_env()
    package, version = TEXTS_FROM
    texts = _chunk_texts(_request(package, version, settings.max_docs_bytes))
    embedders = {label: embedder_for(model) for label, model in MODELS.items()}
    raw, raw_tokens, raw_batch = raw_fp32(embedders["fp32"], texts)
    print(f"raw onnxruntime fp32: batches of {raw_batch} (the fastest here)", file=sys.stderr)
    tokens = {k: sum(len(ids) for ids in e.tokenize(texts)) for k, e in embedders.items()}
    specs = [tuple(s.strip().partition("@")[::2]) for s in args.packages.split(",") if s.strip()]
    ingest_tokens = {
        (name, ver): sum(
            len(ids)
            for ids in embedders["fp32"].tokenize(
                _chunk_texts(_request(name, ver, settings.max_docs_bytes))
            )
        )
        for name, ver in specs
    }
    raw()  # warm: the first runs of a session are slower
    for embedder in embedders.values():
        embedder.embed_sync(texts)
    rounds = Rounds()
    for index in range(args.repeat):
        rounds.add(RAW, _timed(raw), raw_tokens)
        for label, embedder in embedders.items():
            seconds = _timed(partial(embedder.embed_sync, texts))
            rounds.add(f"hexlocal {label}", seconds, tokens[label])
        # The first package every round; the others (elixir: minutes each) in the last.
        for name, ver in specs if index == args.repeat - 1 else specs[:1]:
            for label, embedder in embedders.items():
                seconds = await ingest(embedder, name, ver, settings)
                rounds.add(f"ingest {name} {ver} ({label})", seconds, ingest_tokens[(name, ver)])
    named = f"{RAW} (batches of {raw_batch})"
    return [evolve(r, name=named) if r.name == RAW else r for r in rounds.rows()]


def table(rows: Sequence[Row]) -> Table:
    out = Table(
        title=f"embedding speed (tokens/s; x = against raw fp32 in the same round, target plug"
        f" ingest >= {TARGET}x)",
        title_justify="left",
    )
    for column in ("measurement", "rounds", "seconds", "tokens", "tokens/s", "x raw fp32"):
        out.add_column(column, justify="left" if column == "measurement" else "right")
    for row in rows:
        mark = ""
        if row.name.startswith("ingest plug"):
            mark = " PASS" if row.ratio >= TARGET else " FAIL"
        out.add_row(
            row.name,
            str(row.rounds),
            f"{row.seconds:.2f}",
            str(row.tokens),
            f"{row.tokens_per_s:,.0f}",
            f"{row.ratio:.2f}{mark}",
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    import asyncio

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--packages", default=DEFAULT_PACKAGES, help="name@version,...")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    rows = asyncio.run(run(args))
    data = {"rows": [{**asdict(r), "tokens_per_s": r.tokens_per_s} for r in rows]}
    return finish(data, table(rows), load, as_json=args.json)


if __name__ == "__main__":
    raise SystemExit(main())
