"""SectionChunker: cut an item's markdown into embedder-sized chunks, structure first.

Cuts are made, in order of preference, before a heading, between top-level blocks
(paragraphs, lists, code blocks, tables, quotes), and between the items of a long list.
Only a single block still over budget (typically a long code block) is cut
by the floor splitter: on line boundaries, and inside an over-long line at whitespace.
Small neighbours are then merged up to the budget; there is no overlap.

Every chunk is a slice of `item.markdown` taken by source position (markdown-it's
`token.map` line ranges over lines split on "\\n"), so an item's chunks concatenate back
to its markdown exactly. An item whose markdown is empty or blank yields no chunks: a
chunk must be a slice of the published text, and a title-only chunk would not be. (The
parser fills empty docs from the pages, so such items have nothing to say anyway.)

Defaults, measured with all-MiniLM-L6-v2's tokenizer over the whole corpus (14k items,
`benchmarks/bench_parse.py --tokens`): ExDoc markdown runs ~3.6 chars per word piece for
prose (backticked identifiers are expensive) and ~3.1 for code. The window is 256 word
pieces, and the embedder prepends the item title. `max_chars=900` for prose and
`max_code_chars=750` for chunks holding code keep 96% of chunks inside the window
(p95: 246 pieces; 900/900 overflowed 6.3%, 1000/800 5.4%) while staying large enough
for an answer plus its example. `min_chars=250` merges stubs (a lone heading, a
one-line example) into their neighbours.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Iterator

from attrs import field, frozen
from markdown_it import MarkdownIt
from markdown_it.token import Token

from hexlocal_core.cancel import checkpoint
from hexlocal_core.model import Chunk, DocItem, Notice
from hexlocal_core.notice_codes import NoticeCode
from hexlocal_core.untrusted import clip

# Bump whenever the same markdown would be cut differently: stored chunks are rebuilt.
CHUNKER_VERSION = 1

DEFAULT_MAX_CHARS = 900
DEFAULT_MIN_CHARS = 250
DEFAULT_MAX_CODE_CHARS = 750
# Bounds for hostile docs (a docs tarball is remote input). The corpus's largest item is
# 14.5 KB and 22 chunks, its largest package (elixir 1.18) 4973 chunks; 10k nested list
# levels made one 100 MB item and 116k chunks. Past a bound the item (or package) is cut
# short and a notice says so; the chunks kept are still slices of the published text.
MAX_ITEM_CHARS = 1_000_000
# markdown-it costs up to ~60 us per line (200k heading lines: 12 s), so lines are bounded
# too. The corpus's largest item has 411 lines, its largest package 46k lines, 1.8 MB.
MAX_ITEM_LINES = 20_000
MAX_CHUNKS_PER_ITEM = 1_200
MAX_CHUNKS_PER_PACKAGE = 50_000
MAX_PACKAGE_LINES = 150_000
MAX_PACKAGE_CHARS = 20_000_000

_CODE_TOKENS = frozenset({"fence", "code_block"})
_LIST_TOKENS = frozenset({"bullet_list_open", "ordered_list_open"})
# The bounded repeat keeps a long line of "iex(iex(iex(" linear (unbounded it was quadratic).
_IEX_PROMPT = re.compile(r"\biex(?:\([^)\n]{0,64}\))?>")
# A typespec block (the parser puts specs above undocumented items) is code, not an example.
_SPEC = re.compile(r"^\s*(?:@|-)(?:spec|type|typep|opaque|callback|macrocallback)\b")


@frozen
class _Piece:
    """A contiguous [start, end) character range of the text."""

    start: int
    end: int
    heading: bool = False  # starts with a heading: a preferred place to cut
    code: bool = False  # holds (part of) a code block: a smaller budget applies

    @property
    def size(self) -> int:
        return self.end - self.start


class _Layout:
    """The text's lines and parsed blocks, with offsets for slicing."""

    def __init__(self, text: str, parser: MarkdownIt) -> None:
        self.text = text
        lines = text.split("\n")
        self.starts = [0]
        for line in lines:
            self.starts.append(self.starts[-1] + len(line) + 1)
        self.starts[-1] = len(text)  # the last line has no "\n" after it
        # markdown-it also breaks lines at a lone "\r"; hide those so its line numbers
        # stay the line numbers of split("\n").
        self.tokens = parser.parse(text.replace("\r", " "))
        code = [t for t in self.tokens if t.type in _CODE_TOKENS and t.map is not None]
        self._code = _LineRanges([t.map for t in code if t.map is not None])
        self._examples = _LineRanges(
            [t.map for t in code if t.map is not None and not _SPEC.match(t.content)]
        )

    def offset(self, line: int) -> int:
        return self.starts[min(line, len(self.starts) - 1)]

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset) - 1

    def has_code(self, start: int, end: int, *, examples_only: bool = False) -> bool:
        first, last = self.line_of(start), self.line_of(max(start, end - 1))
        return (self._examples if examples_only else self._code).overlaps(first, last)


class _LineRanges:
    """Line ranges [a, b) answering "does any range touch lines first..last?" in O(log n).

    Scanning every code range per block made 200k fence lines cost over four minutes.
    """

    def __init__(self, ranges: list[list[int]]) -> None:
        pairs = sorted((a, b) for a, b in ranges)
        self._starts = [a for a, _ in pairs]
        self._max_end: list[int] = []  # the largest end among the ranges up to i
        top = -1
        for _, b in pairs:
            top = max(top, b)
            self._max_end.append(top)

    def overlaps(self, first: int, last: int) -> bool:
        i = bisect.bisect_right(self._starts, last) - 1  # the ranges starting by `last`
        return i >= 0 and self._max_end[i] > first


def _top_blocks(tokens: list[Token]) -> list[tuple[int, Token]]:
    """(index, token) of every top-level block opener or leaf, in source order."""
    return [
        (i, tok)
        for i, tok in enumerate(tokens)
        if tok.level == 0 and tok.nesting >= 0 and tok.map is not None
    ]


def _list_item_lines(tokens: list[Token], open_index: int) -> list[int]:
    """Start lines of the items of the list opened at `open_index`."""
    starts: list[int] = []
    depth = 0
    for tok in tokens[open_index:]:
        depth += tok.nesting
        if tok.type == "list_item_open" and tok.level == 1 and tok.map is not None:
            starts.append(tok.map[0])
        if depth == 0:
            break
    return starts


@frozen
class ItemChunks:
    """One item's chunks; `truncated` when a bound cut the item short."""

    chunks: list[Chunk]
    truncated: bool


@frozen
class ChunkedItems:
    """The chunks of a package's items, and which items the bounds cut short or left out."""

    chunks: list[Chunk]
    truncated_refs: tuple[str, ...] = ()
    items_left_out: int = 0

    def notices(self, package: str, version: str) -> tuple[Notice, ...]:
        """One `docs_truncated` notice when anything was cut, else none."""
        if not self.truncated_refs and not self.items_left_out:
            return ()
        parts = []
        if self.truncated_refs:
            shown = ", ".join(clip(ref, 80) for ref in self.truncated_refs[:3])
            more = " ..." if len(self.truncated_refs) > 3 else ""
            parts.append(f"{len(self.truncated_refs)} item(s) were cut short ({shown}{more})")
        if self.items_left_out:
            parts.append(f"{self.items_left_out} item(s) were left out")
        return (
            Notice(
                code=NoticeCode.DOCS_TRUNCATED,
                message=(
                    f"The docs of {package} {version} are far larger than any real package's: "
                    f"{' and '.join(parts)} to keep ingestion bounded "
                    f"({MAX_ITEM_CHARS} characters, {MAX_ITEM_LINES} lines or "
                    f"{MAX_CHUNKS_PER_ITEM} chunks per item; {MAX_PACKAGE_LINES} lines, "
                    f"{MAX_PACKAGE_CHARS} characters or {MAX_CHUNKS_PER_PACKAGE} chunks per "
                    "package)."
                ),
            ),
        )


def _bounded_end(text: str, max_chars: int, max_lines: int) -> int:
    """Where to cut `text` to keep at most `max_chars` characters and `max_lines` lines
    (after a newline when there is one), or `len(text)` when it is within both."""
    end = len(text)
    if end > max_chars:
        end = text.rfind("\n", 0, max_chars) + 1 or max_chars
    if text.count("\n", 0, end) >= max_lines:
        pos = -1
        for _ in range(max_lines):
            pos = text.find("\n", pos + 1)
        end = pos + 1
    return end


def chunk_items(
    items: Iterable[DocItem],
    chunker: SectionChunker | None = None,
    *,
    max_chunks: int = MAX_CHUNKS_PER_PACKAGE,
    max_lines: int = MAX_PACKAGE_LINES,
    max_chars: int = MAX_PACKAGE_CHARS,
) -> ChunkedItems:
    """Chunk every item within the package's bounds (chunks, and lines and characters
    parsed); items past a bound are left out and counted."""
    chunker = chunker or SectionChunker()
    out: list[Chunk] = []
    truncated: list[str] = []
    left_out = 0
    for item in items:
        checkpoint()
        room = max_chunks - len(out)
        size = min(len(item.markdown), chunker.max_item_chars)
        lines = min(item.markdown.count("\n", 0, size) + 1, chunker.max_item_lines)
        if room <= 0 or lines > max_lines or size > max_chars:
            left_out += 1
            continue
        max_lines -= lines
        max_chars -= size
        found = chunker.chunk_bounded(item)
        chunks = found.chunks
        if len(chunks) > room:
            chunks = chunks[:room]
            truncated.append(item.ref)
        elif found.truncated:
            truncated.append(item.ref)
        out.extend(chunks)
    return ChunkedItems(out, tuple(truncated), left_out)


@frozen
class SectionChunker:
    """Structure-first chunker; see the module docstring for the rules and defaults."""

    max_chars: int = field(default=DEFAULT_MAX_CHARS)
    min_chars: int = field(default=DEFAULT_MIN_CHARS)
    # Code costs more word pieces per character than prose; None means max_chars.
    max_code_chars: int | None = field(default=DEFAULT_MAX_CODE_CHARS)
    max_item_chars: int = field(default=MAX_ITEM_CHARS)
    max_item_lines: int = field(default=MAX_ITEM_LINES)
    max_chunks: int = field(default=MAX_CHUNKS_PER_ITEM)
    # Only block structure matters here; skipping inline parsing makes parsing ~1.6x faster.
    _parser: MarkdownIt = field(
        factory=lambda: MarkdownIt("commonmark").enable("table").disable("inline"),
        init=False,
        repr=False,
        eq=False,
    )

    def __attrs_post_init__(self) -> None:
        if self.max_chars < 1:
            raise ValueError(f"max_chars must be at least 1, not {self.max_chars}")
        if self.min_chars < 0:
            raise ValueError(f"min_chars must not be negative, not {self.min_chars}")
        if self.max_code_chars is not None and self.max_code_chars < 1:
            raise ValueError(f"max_code_chars must be at least 1, not {self.max_code_chars}")
        if min(self.max_item_chars, self.max_item_lines, self.max_chunks) < 1:
            raise ValueError("max_item_chars, max_item_lines and max_chunks must be at least 1")

    # The other limits never exceed max_chars, so setting max_chars alone is always valid.
    @property
    def code_limit(self) -> int:
        return min(self.max_code_chars or self.max_chars, self.max_chars)

    @property
    def merge_below(self) -> int:
        return min(self.min_chars, self.max_chars)

    def chunk(self, item: DocItem) -> list[Chunk]:
        return self.chunk_bounded(item).chunks

    def chunk_bounded(self, item: DocItem) -> ItemChunks:
        """The item's chunks, and whether the bounds (`max_item_chars`, `max_chunks`)
        cut the item short; when cut, the chunks cover a prefix of its markdown."""
        text = item.markdown
        if not text.strip():
            return ItemChunks([], truncated=False)
        end = _bounded_end(text, self.max_item_chars, self.max_item_lines)
        truncated = end < len(text)
        layout = _Layout(text[:end], self._parser)
        spans = self._pack(list(self._pieces(layout)))
        if len(spans) > self.max_chunks:
            spans, truncated = spans[: self.max_chunks], True
        chunks = []
        for n, (start, stop) in enumerate(spans):
            checkpoint()
            example = layout.has_code(start, stop, examples_only=True)
            chunks.append(
                Chunk(
                    item=item,
                    ordinal=n,
                    content=text[start:stop],
                    has_example=example or bool(_IEX_PROMPT.search(text, start, stop)),
                )
            )
        return ItemChunks(chunks, truncated=truncated)

    # -- structure ---------------------------------------------------------------------
    def _pieces(self, layout: _Layout) -> Iterator[_Piece]:
        blocks = _top_blocks(layout.tokens)
        if not blocks:
            yield from self._floor(layout, 0, len(layout.text))
            return
        for n, (index, tok) in enumerate(blocks):
            checkpoint()
            assert tok.map is not None
            start = 0 if n == 0 else layout.offset(tok.map[0])
            nxt = blocks[n + 1][1].map if n + 1 < len(blocks) else None
            end = layout.offset(nxt[0]) if nxt is not None else len(layout.text)
            heading = tok.type == "heading_open"
            code = layout.has_code(start, end)
            if end - start <= (self.code_limit if code else self.max_chars):
                yield _Piece(start, end, heading, code)
            elif tok.type in _LIST_TOKENS:
                yield from self._split_list(layout, index, start, end)
            else:
                yield from self._floor(layout, start, end, heading=heading)

    def _split_list(self, layout: _Layout, index: int, start: int, end: int) -> Iterator[_Piece]:
        cuts = [layout.offset(line) for line in _list_item_lines(layout.tokens, index)[1:]]
        bounds = [start, *[c for c in cuts if start < c < end], end]
        for a, b in zip(bounds, bounds[1:], strict=False):
            code = layout.has_code(a, b)
            if b - a <= (self.code_limit if code else self.max_chars):
                yield _Piece(a, b, code=code)
            else:
                yield from self._floor(layout, a, b)

    # -- floor -------------------------------------------------------------------------
    def _floor(
        self, layout: _Layout, start: int, end: int, *, heading: bool = False
    ) -> Iterator[_Piece]:
        """Cut [start, end) into pieces within budget at line ends, else at whitespace."""
        code = layout.has_code(start, end)
        budget = self.code_limit if code else self.max_chars
        pos = start
        first = True
        while pos < end:
            checkpoint()
            limit = min(pos + budget, end)
            cut = limit if limit == end else self._cut_point(layout.text, pos, limit)
            yield _Piece(pos, cut, heading and first, code)
            first = False
            pos = cut

    @staticmethod
    def _cut_point(text: str, start: int, limit: int) -> int:
        newline = text.rfind("\n", start, limit)
        if newline >= start:
            return newline + 1
        space = max(text.rfind(" ", start + 1, limit), text.rfind("\t", start + 1, limit))
        return space + 1 if space > start else limit  # no whitespace: a hard cut

    # -- merge -------------------------------------------------------------------------
    def _pack(self, pieces: list[_Piece]) -> list[tuple[int, int]]:
        def fits_alone(a: _Piece, b: _Piece) -> bool:
            limit = self.code_limit if a.code or b.code else self.max_chars
            return a.size + b.size <= limit

        chunks: list[list[_Piece]] = []
        current: list[_Piece] = []
        current_code = False  # whether any piece of `current` holds code (kept, not rescanned)
        for piece in pieces:
            checkpoint()
            size = current[-1].end - current[0].start if current else 0
            code = piece.code or current_code
            fits = size + piece.size <= (self.code_limit if code else self.max_chars)
            if current and not (fits and (not piece.heading or size < self.merge_below)):
                # Keep a trailing heading with the content it introduces.
                last = current[-1]
                carry = len(current) > 1 and last.heading and fits_alone(last, piece)
                if carry:
                    current.pop()
                chunks.append(current)
                current = [last] if carry else []
                current_code = carry and last.code
            current.append(piece)
            current_code = current_code or piece.code
        if current:
            chunks.append(current)
        if len(chunks) > 1:
            tail, before = chunks[-1], chunks[-2]
            merged = before + tail
            code = any(p.code for p in merged)
            size = tail[-1].end - before[0].start
            small = tail[-1].end - tail[0].start < self.merge_below
            if small and size <= (self.code_limit if code else self.max_chars):
                chunks[-2:] = [merged]
        return [(c[0].start, c[-1].end) for c in chunks]
