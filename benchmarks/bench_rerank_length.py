"""How long the cross-encoder's inputs are, and what reading them whole costs.

The engine hands the reranker (query, passage) pairs: the user's query, and each candidate
chunk as `search/rerank_input.passage` builds it (title line, then the chunk's first
RERANK_PASSAGE_CHARS characters). This measures those pairs over every chunk of the shared
corpus (SectionChunker's defaults) against every query of the eval sets (the shared dev
set and eval/), in the cross-encoder's word pieces: percentiles, and the share a
cut at 128 / 256 / 512 would truncate. The tokenizer is the model package's (BERT's
uncased WordPiece vocabulary, which ms-marco-MiniLM-L6-v2 shares) or `--tokenizer`.

Then the cost: 10 pairs per call (one search's pool), drawn from the same pairs, p50/p95
wall and CPU ms per call at each cut, with the tests' stand-in cross-encoder (the same
architecture and size as the default) or a real one from `--rerank-dir`.

    python benchmarks/bench_rerank_length.py [--runs N] [--threads T] [--rerank-dir DIR]
                                             [--tokenizer FILE] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.common import finish  # noqa: E402
from hexlocal_core.adapters.cross_encoder import (  # noqa: E402
    LocalCrossEncoder,
    RerankerOptions,
    build_local_reranker,
)
from hexlocal_core.chunk import SectionChunker  # noqa: E402
from hexlocal_core.config import Settings  # noqa: E402
from hexlocal_core.index.rows import ChunkRow  # noqa: E402
from hexlocal_core.ingest.hexdocs import parse_hexdocs  # noqa: E402
from hexlocal_core.ingest.tarball import read_docs_tarball  # noqa: E402
from hexlocal_core.search.rerank_input import passage  # noqa: E402

SHARED = Path(os.environ.get("HEXLOCAL_SHARED", REPO.parent / "shared"))
CACHE = REPO / ".hexlocal-cache" / "models"
CUTS = (128, 256, 512)


def corpus_passages(hexdocs: Path) -> list[str]:
    chunker = SectionChunker()
    out: list[str] = []
    for path in sorted(hexdocs.glob("*.tar.gz")):
        package, version = path.name.removesuffix(".tar.gz").split("-", 1)
        files = read_docs_tarball(path.read_bytes(), max_bytes=512 << 20, package=package)
        docs = parse_hexdocs(files, package=package, version=version)
        for item in docs.items:
            for chunk in chunker.chunk(item):
                # What the engine reads of a stored row: its title, signature and content.
                row = SimpleNamespace(
                    title=item.title, signature=item.signature, content=chunk.content
                )
                out.append(passage(cast(ChunkRow, row)))
    return out


def eval_queries() -> list[str]:
    files = [SHARED / "eval" / "dev.jsonl", *sorted((REPO / "eval").glob("*.jsonl"))]
    return [
        json.loads(line)["query"]
        for path in files
        if path.is_file()
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]


def word_pieces(texts: Sequence[str], tokenizer_file: Path) -> np.ndarray:
    """Each text's word pieces, without [CLS]/[SEP]."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return np.array([len(e.ids) - 2 for e in tokenizer.encode_batch(list(texts))])


def pair_lengths(queries: np.ndarray, passages: np.ndarray) -> np.ndarray:
    """[CLS] query [SEP] passage [SEP], for every query with every passage."""
    return (queries[:, None] + passages[None, :] + 3).ravel()


def time_cut(
    reranker: LocalCrossEncoder, pairs: list[tuple[str, list[str]]]
) -> tuple[list[float], float]:
    walls: list[float] = []
    cpu = time.process_time()
    for query, pool in pairs:
        started = time.perf_counter()
        reranker.score_sync(query, pool)
        walls.append((time.perf_counter() - started) * 1000)
    return walls, (time.process_time() - cpu) * 1000 / len(pairs)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=40, help="10-pair calls per cut")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rerank-dir", type=Path, help="a real cross-encoder folder")
    parser.add_argument("--tokenizer", type=Path, help="tokenizer.json (default: the model's)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]

    with tempfile.TemporaryDirectory() as tmp:
        folder = args.rerank_dir or _stand_in(Path(tmp))
        tokenizer = args.tokenizer or folder / "tokenizer.json"
        passages = corpus_passages(SHARED / "corpus" / "hexdocs")
        queries = eval_queries()
        lengths = pair_lengths(word_pieces(queries, tokenizer), word_pieces(passages, tokenizer))
        rng = np.random.default_rng(7)  # every cut scores the same calls
        calls = [
            (
                queries[int(rng.integers(len(queries)))],
                [passages[i] for i in rng.choice(len(passages), 10)],
            )
            for _ in range(args.runs)
        ]
        timings = {cut: _timed(folder, cut, args.threads, calls) for cut in CUTS}

    data: dict[str, Any] = {
        "chunks": len(passages),
        "queries": len(queries),
        "pair_word_pieces": {f"p{q}": float(np.percentile(lengths, q)) for q in (50, 90, 99, 100)},
        "cut": {str(c): float((lengths > c).mean()) for c in CUTS},
        "rerank_ms": timings,
    }
    table = Table(title=f"{len(passages)} chunks x {len(queries)} queries, 10 pairs per call")
    for column in ("cut (word pieces)", "pairs truncated", "p50 ms", "p95 ms", "cpu ms/call"):
        table.add_column(column, justify="right")
    for cut in CUTS:
        t = timings[cut]
        table.add_row(
            str(cut), f"{data['cut'][str(cut)]:.2%}", f"{t['p50']:.0f}", f"{t['p95']:.0f}",
            f"{t['cpu']:.0f}",
        )  # fmt: skip
    pieces = data["pair_word_pieces"]
    table.caption = "pair word pieces: " + ", ".join(f"{k} {v:.0f}" for k, v in pieces.items())
    return finish(data, table, load_before, as_json=args.json)


def _timed(
    folder: Path, cut: int, threads: int, calls: list[tuple[str, list[str]]]
) -> dict[str, float]:
    settings = Settings.from_env(
        {"HEXLOCAL_MODEL_CACHE": str(CACHE), "HEXLOCAL_RERANK_MODEL_DIR": str(folder)}
    )
    reranker = build_local_reranker(
        settings, options=RerankerOptions(max_length=cut, threads=threads)
    )
    assert isinstance(reranker, LocalCrossEncoder)
    reranker.ensure_loaded()
    time_cut(reranker, calls[:5])  # warm
    walls, cpu = time_cut(reranker, calls)
    return {
        "p50": float(np.percentile(walls, 50)),
        "p95": float(np.percentile(walls, 95)),
        "cpu": cpu,
    }


def _stand_in(tmp: Path) -> Path:
    from tests.support.model_fixtures import write_stand_in_reranker

    return write_stand_in_reranker(tmp / "stand-in")


if __name__ == "__main__":
    raise SystemExit(main())
