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
from collections.abc import Iterator

from attrs import field, frozen
from markdown_it import MarkdownIt
from markdown_it.token import Token

from hexlocal_core.model import Chunk, DocItem

# Bump whenever the same markdown would be cut differently: stored chunks are rebuilt.
CHUNKER_VERSION = 1

DEFAULT_MAX_CHARS = 900
DEFAULT_MIN_CHARS = 250
DEFAULT_MAX_CODE_CHARS = 750

_CODE_TOKENS = frozenset({"fence", "code_block"})
_LIST_TOKENS = frozenset({"bullet_list_open", "ordered_list_open"})
_IEX_PROMPT = re.compile(r"\biex(?:\([^)\n]*\))?>")
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
        self.code_lines = [(t.map[0], t.map[1]) for t in code if t.map is not None]
        self.example_lines = [
            (t.map[0], t.map[1]) for t in code if t.map is not None and not _SPEC.match(t.content)
        ]

    def offset(self, line: int) -> int:
        return self.starts[min(line, len(self.starts) - 1)]

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset) - 1

    def has_code(self, start: int, end: int, *, examples_only: bool = False) -> bool:
        first, last = self.line_of(start), self.line_of(max(start, end - 1))
        ranges = self.example_lines if examples_only else self.code_lines
        return any(a <= last and b > first for a, b in ranges)


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
class SectionChunker:
    """Structure-first chunker; see the module docstring for the rules and defaults."""

    max_chars: int = field(default=DEFAULT_MAX_CHARS)
    min_chars: int = field(default=DEFAULT_MIN_CHARS)
    # Code costs more word pieces per character than prose; None means max_chars.
    max_code_chars: int | None = field(default=DEFAULT_MAX_CODE_CHARS)
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

    # The other limits never exceed max_chars, so setting max_chars alone is always valid.
    @property
    def code_limit(self) -> int:
        return min(self.max_code_chars or self.max_chars, self.max_chars)

    @property
    def merge_below(self) -> int:
        return min(self.min_chars, self.max_chars)

    def chunk(self, item: DocItem) -> list[Chunk]:
        text = item.markdown
        if not text.strip():
            return []
        layout = _Layout(text, self._parser)
        pieces = list(self._pieces(layout))
        return [
            Chunk(
                item=item,
                ordinal=n,
                content=text[start:end],
                has_example=layout.has_code(start, end, examples_only=True)
                or bool(_IEX_PROMPT.search(text, start, end)),
            )
            for n, (start, end) in enumerate(self._pack(pieces))
        ]

    # -- structure ---------------------------------------------------------------------
    def _pieces(self, layout: _Layout) -> Iterator[_Piece]:
        blocks = _top_blocks(layout.tokens)
        if not blocks:
            yield from self._floor(layout, 0, len(layout.text))
            return
        for n, (index, tok) in enumerate(blocks):
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
        for piece in pieces:
            size = current[-1].end - current[0].start if current else 0
            code = piece.code or any(p.code for p in current)
            fits = size + piece.size <= (self.code_limit if code else self.max_chars)
            if current and not (fits and (not piece.heading or size < self.merge_below)):
                # Keep a trailing heading with the content it introduces.
                last = current[-1]
                carry = len(current) > 1 and last.heading and fits_alone(last, piece)
                if carry:
                    current.pop()
                chunks.append(current)
                current = [last] if carry else []
            current.append(piece)
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
