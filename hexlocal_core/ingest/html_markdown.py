"""A small HTML -> markdown rendering for ExDoc pages.

Used where the search index gives no markdown: ExDoc <= 0.19 (no index text at all),
0.20-0.29 and EDoc packages (plain text without structure), and items whose doc is
empty. It is deliberately simple; what matters for search and chunking is kept:
headings stay headings, code blocks become fenced blocks with their language (ExDoc
marks them `makeup elixir`), lists stay lists, and ExDoc's chrome (link icons, "View
Source" buttons, screen-reader labels) is dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TypeAlias

from lxml import html

Part: TypeAlias = "html.HtmlElement | str"  # a child element, or loose text between them

_SKIP_TAGS = frozenset({"script", "style", "button", "nav", "footer", "form", "noscript"})
_SKIP_CLASSES = frozenset(
    {"sr-only", "hover-link", "detail-link", "icon-action", "copy-markdown", "view-source"}
    | {"bottom-actions", "top-search", "specs", "deprecated", "detail-header"}
)
_BLOCK_TAGS = frozenset(
    {"p", "pre", "ul", "ol", "blockquote", "table", "div", "section", "dl", "hr", "article"}
    | {"details", "aside", "figure", "main", "header", "h1", "h2", "h3", "h4", "h5", "h6"}
)
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_CODE_CLASSES_IGNORED = frozenset({"makeup", "nohighlight", "inline", "highlight"})
_SPACES = re.compile(r"[ \t\r\n\f\v]+")
# A blank line before a nested list item. `[ \t]*`, not `\s*`: with `\s*` every "\n\n" of a
# long run of newlines (a <pre> in an <li>) rescanned the whole run, which is quadratic.
_TIGHT_NESTED = re.compile(r"\n\n(?=[ \t]*(?:- |\d+\. ))")
_MAX_LIST_START = 10**9


def _classes(el: html.HtmlElement) -> set[str]:
    return set((el.get("class") or "").split())


def is_skipped(el: html.HtmlElement) -> bool:
    """ExDoc chrome that carries no documentation text."""
    if not isinstance(el.tag, str):  # comments and processing instructions
        return True
    return el.tag in _SKIP_TAGS or bool(_classes(el) & _SKIP_CLASSES)


def _fence(code: str, lang: str) -> str:
    ticks = "```"
    while ticks in code:
        ticks += "`"
    return f"{ticks}{lang}\n{code}\n{ticks}"


def code_block(code: str, lang: str) -> str:
    """A fenced code block; trailing newlines of the code are dropped."""
    return _fence(code.rstrip("\n"), lang)


def _code_lang(pre: html.HtmlElement, default: str) -> str:
    code = pre.find("code")
    classes = (code.get("class") if code is not None else pre.get("class")) or ""
    langs = [c for c in classes.split() if c not in _CODE_CLASSES_IGNORED]
    if langs:
        return langs[-1]
    return default if code is None else ""


def _inline_code(text: str) -> str:
    if "`" not in text:
        return f"`{text}`"
    return f"`` {text} ``"


class _Renderer:
    def __init__(self, code_lang: str) -> None:
        self.code_lang = code_lang

    # -- inline ------------------------------------------------------------------------
    def inline(self, el: html.HtmlElement) -> str:
        if is_skipped(el):
            return ""
        tag = el.tag
        if tag == "br":
            return "\n"
        if tag == "code":
            return _inline_code(el.text_content())
        if tag == "img":
            return el.get("alt") or ""
        inner = self.inline_children(el)
        if tag == "a":
            return self._link(el, inner)
        if tag in ("strong", "b") and inner.strip():
            return f"**{inner.strip()}**"
        if tag in ("em", "i") and inner.strip():
            return f"*{inner.strip()}*"
        return inner

    def _link(self, el: html.HtmlElement, inner: str) -> str:
        href = el.get("href") or ""
        text = inner.strip()
        if not text:
            return ""
        # ExDoc autolinks `Mod.fun/1` in code; the markdown source had only the code.
        if not href or href.startswith("#") or (text.startswith("`") and text.endswith("`")):
            return text
        return f"[{text}]({href})"

    def inline_children(self, el: html.HtmlElement) -> str:
        out = [_SPACES.sub(" ", el.text or "")]
        for child in el:
            out.append(self.inline(child))
            out.append(_SPACES.sub(" ", child.tail or ""))
        return "".join(out)

    # -- blocks ------------------------------------------------------------------------
    def blocks(self, parts: Iterable[Part]) -> list[str]:
        out: list[str] = []
        run: list[str] = []

        def flush() -> None:
            text = "\n".join(line.strip() for line in "".join(run).split("\n")).strip()
            if text:
                out.append(text)
            run.clear()

        for part in parts:
            if isinstance(part, str):
                run.append(_SPACES.sub(" ", part))
            elif is_skipped(part):
                continue
            elif part.tag in _BLOCK_TAGS or self._has_block_child(part):
                flush()
                out.extend(self.block(part))
            else:
                run.append(self.inline(part))
        flush()
        return out

    def _has_block_child(self, el: html.HtmlElement) -> bool:
        return any(isinstance(c.tag, str) and c.tag in _BLOCK_TAGS for c in el)

    def block(self, el: html.HtmlElement) -> list[str]:
        tag = el.tag
        if tag in _HEADINGS:
            text = " ".join(self.inline_children(el).split())
            return [f"{'#' * _HEADINGS[tag]} {text}"] if text else []
        if tag == "pre":
            return [code_block(el.text_content(), _code_lang(el, self.code_lang))]
        if tag in ("ul", "ol"):
            return [self._list(el, ordered=tag == "ol")] if len(el) else []
        if tag == "blockquote" or "admonition" in _classes(el):
            inner = "\n\n".join(self.blocks(children_parts(el)))
            return [_prefix_lines(inner, "> ")] if inner else []
        if tag == "table":
            return self._table(el)
        if tag == "hr":
            return ["---"]
        if tag == "dl":
            return self._definitions(el)
        return self.blocks(children_parts(el))

    def _list(self, el: html.HtmlElement, *, ordered: bool) -> str:
        items: list[str] = []
        number = _list_start(el.get("start")) if ordered else 0
        for li in el:
            if not isinstance(li.tag, str) or li.tag != "li":
                continue
            marker = f"{number}. " if ordered else "- "
            number += 1
            body = "\n\n".join(self.blocks(children_parts(li)))
            # Nested lists read better tight under their item's first line.
            body = _TIGHT_NESTED.sub("\n", body)
            items.append(marker + _indent_rest(body, " " * len(marker)))
        return "\n".join(items)

    def _table(self, el: html.HtmlElement) -> list[str]:
        rows: list[list[str]] = []
        for tr in el.iter("tr"):
            cells = [c for c in tr if isinstance(c.tag, str) and c.tag in ("th", "td")]
            rows.append([self._cell(c) for c in cells])
        rows = [r for r in rows if r]
        if not rows:
            return []
        width = max(len(r) for r in rows)
        lines = ["| " + " | ".join(r + [""] * (width - len(r))) + " |" for r in rows]
        lines.insert(1, "|" + " --- |" * width)
        return ["\n".join(lines)]

    def _cell(self, cell: html.HtmlElement) -> str:
        return " ".join(self.inline_children(cell).split()).replace("|", "\\|")

    def _definitions(self, el: html.HtmlElement) -> list[str]:
        out: list[str] = []
        for child in el:
            if not isinstance(child.tag, str):
                continue
            text = "\n\n".join(self.blocks(children_parts(child)))
            if child.tag == "dt" and text:
                out.append(f"**{text}**")
            elif text:
                out.append(text)
        return out


def _list_start(value: str | None) -> int:
    """An `<ol start>` number; anything but a plain, sane integer starts at 1."""
    value = (value or "").strip()
    if not value.isascii() or not value.isdigit() or len(value) > 9:
        return 1
    return min(int(value), _MAX_LIST_START)


def _prefix_lines(text: str, prefix: str) -> str:
    return "\n".join((prefix + line).rstrip() for line in text.split("\n"))


def _indent_rest(text: str, pad: str) -> str:
    lines = text.split("\n")
    return "\n".join([lines[0]] + [(pad + line) if line else "" for line in lines[1:]])


def children_parts(el: html.HtmlElement) -> list[Part]:
    """The element's content as a sequence of child elements and loose text."""
    parts: list[Part] = []
    if el.text:
        parts.append(el.text)
    for child in el:
        if isinstance(child.tag, str):
            parts.append(child)
        if child.tail:
            parts.append(child.tail)
    return parts


def parts_to_markdown(parts: Sequence[Part], *, code_lang: str = "elixir") -> str:
    """Render a run of block-level parts (elements and loose text) as markdown."""
    return "\n\n".join(_Renderer(code_lang).blocks(parts))


def element_to_markdown(el: html.HtmlElement, *, code_lang: str = "elixir") -> str:
    """Render an element's content (not the element's own tag) as markdown."""
    return parts_to_markdown(children_parts(el), code_lang=code_lang)


def inline_text(el: html.HtmlElement) -> str:
    """Whitespace-normalised visible text of an element, without ExDoc chrome."""
    return " ".join(_Renderer("").inline_children(el).split())
