"""Sections of the per-page markdown that ExDoc >= 0.40 ships next to each HTML page.

A module page `Mod.md` is: `# \\`Mod\\``, a `[🔗](source)` line, the moduledoc, then one
`# \\`name\\`` section per function/type/callback in the same order as the HTML page's
detail sections (each: optional deprecation quote, spec block, doc). Guides are
`# Title` then the guide. Headings are found with markdown-it, so `#` lines inside
code blocks are not mistaken for sections.
"""

from __future__ import annotations

import bisect
import html
import re

from markdown_it import MarkdownIt

from hexlocal_core.cancel import checkpoint

_SOURCE_LINK_PREFIX = "[🔗]("
# ExDoc cut search items at h2 and h3; deeper headings stay inside their item.
_SPLIT_TAGS = frozenset({"h2", "h3"})
# ExDoc 0.40 writes specs into the .md through its HTML renderer, so `->` arrives as
# `-&gt;` inside the spec's code block; those blocks (and only those) are unescaped.
_SPEC_START = re.compile(r"^\s*(?:@|-)(?:spec|type|typep|opaque|callback|macrocallback)\b")
# The footer ExDoc >= 0.40 ends every .md page with: navigation, not the package's text.
# Left in, it became the last item's closing lines (72 stored chunks over 10 packages of
# the corpus, some of them nothing but the footer) and a docs change in every diff.
FOOTER = re.compile(
    r"(?:^|\n)-{3,}\s*\n\s*\*Consult \[api-reference\.md\]\(api-reference\.md\) for "
    r"complete listing\*\s*$"
)


def strip_footer(text: str) -> str:
    """The page without ExDoc's closing "Consult api-reference.md" line."""
    return FOOTER.sub("", text)


# Kramdown's attribute lists, which ExDoc renders and a reader of the text only trips over:
# an admonition's class (`> #### Warning {: .warning}`, or `{: .info}` on a line of its
# own) and OTP's anchors (`[](){: #new_2_read_concurrency }`, in nine of ets:new/2's
# eleven chunks, some wrapped over two lines). 675 stored chunks of Elixir's, OTP's and
# Ecto's docs carried them. A class or id starts with a letter, so Elixir's `{:., [], ...}`
# is not one.
_ATTRIBUTE_LIST = re.compile(r"[ \t]*(?:\[\]\(\))?\{:\s*(?:[.#][A-Za-z_][\w-]*\s*)+\}")
_FENCE = re.compile(r"^[ \t]*(?:```|~~~)", re.M)


def without_attribute_lists(text: str) -> str:
    """`text` without kramdown attribute lists, except in fenced code (a doc may show the
    markup itself)."""
    if "{:" not in text:
        return text
    parts: list[str] = []
    start, in_code = 0, False
    for fence in _FENCE.finditer(text):
        piece = text[start : fence.start()]
        parts.append(piece if in_code else _ATTRIBUTE_LIST.sub("", piece))
        in_code, start = not in_code, fence.start()
    rest = text[start:]
    parts.append(rest if in_code else _ATTRIBUTE_LIST.sub("", rest))
    return "".join(parts)


class MarkdownPage:
    """One ExDoc .md page split into its top-level (h1) sections."""

    def __init__(self, text: str) -> None:
        text = strip_footer(text)
        self._lines = text.split("\n")
        self._h1: list[int] = []  # line index of each h1
        self._splits: list[int] = []  # line index of each h2/h3
        self._spec_lines: set[int] = set()
        tokens = MarkdownIt("commonmark").disable("inline").parse(text)
        for tok in tokens:
            checkpoint()
            if tok.type == "fence" and tok.map is not None and _SPEC_START.match(tok.content):
                self._spec_lines.update(range(tok.map[0] + 1, tok.map[1] - 1))
            if tok.type != "heading_open" or tok.map is None:
                continue
            if tok.tag == "h1":
                self._h1.append(tok.map[0])
            elif tok.tag in _SPLIT_TAGS:
                self._splits.append(tok.map[0])

    @property
    def detail_count(self) -> int:
        """How many detail sections follow the page's own section."""
        return max(len(self._h1) - 1, 0)

    def intro(self) -> str:
        """The page's own text: after its title (and source link), before any h2/h3."""
        if not self._h1:
            return self._own_text(0, len(self._lines))
        end = self._h1[1] if len(self._h1) > 1 else len(self._lines)
        start = self._h1[0] + 1
        if start < end and self._lines[start].startswith(_SOURCE_LINK_PREFIX):
            start += 1
        return self._own_text(start, end)

    def detail(self, index: int) -> str:
        """The own text of the `index`-th detail section (spec and doc, no heading)."""
        pos = index + 1
        if pos >= len(self._h1):
            return ""
        end = self._h1[pos + 1] if pos + 1 < len(self._h1) else len(self._lines)
        return self._own_text(self._h1[pos] + 1, end)

    def _own_text(self, start: int, end: int) -> str:
        # The first h2/h3 in [start, end), found by bisection: a page of many sections
        # asked once per item would otherwise rescan every split per item.
        i = bisect.bisect_left(self._splits, start)
        if i < len(self._splits) and self._splits[i] < end:
            end = self._splits[i]
        lines = [
            html.unescape(line) if i in self._spec_lines else line
            for i, line in enumerate(self._lines[start:end], start)
        ]
        return "\n".join(lines).strip()
