"""Markup that hides its text from a reader: HTML comments, hidden elements, markdown comments.

hexdocs.pm and GitHub render none of it; a model reading the source reads all of it. An
element is hidden by the `hidden` attribute or by a style that leaves nothing to see
(`display:none`, `visibility:hidden`, `opacity:0`, `font-size:0` or 1px, a transparent
colour, a height of 0 with overflow hidden, an offset of -999px or more). `<details>` is not
hidden: its summary shows and a click opens it. A markdown link definition whose target is
`#` or `<>` (`[//]: # (text)`) is the markdown way to write a comment.

Scanning is linear: the opening tags are found by one bounded pattern and each span's text
is cut at MAX_HIDDEN characters.
"""

from __future__ import annotations

import re

from attrs import frozen

MAX_HIDDEN = 4_000  # characters of one hidden span that are read

COMMENT = "an HTML comment"
STYLED = "an element styled to be invisible"
ATTRIBUTE = "an element with the hidden attribute"
MARKDOWN = "a markdown comment"


@frozen
class Hidden:
    start: int
    end: int
    how: str  # COMMENT | STYLED | ATTRIBUTE | MARKDOWN
    text: str  # what it hides, tags removed


_OPEN_TAG = re.compile(r"<([A-Za-z][\w-]{0,30})(\s[^<>]{1,600})>")
_HIDDEN_ATTR = re.compile(r"(?:^|\s)hidden(?=\s|=|/|$)", re.IGNORECASE)
_STYLE_ATTR = re.compile(r"""\bstyle\s*=\s*(?:"([^"]*)"|'([^']*)')""", re.IGNORECASE)
_TAG = re.compile(r"<[^<>]{0,600}>")
_MD_COMMENT = re.compile(
    r"(?m)^[ \t]{0,3}\[[^\]\n]{0,40}\]:[ \t]*(?:#|<>)[ \t]*"
    r"""(?:\(([^\n]*)\)|"([^\n]*)"|'([^\n]*)')[ \t]*$"""
)
_ZERO = re.compile(r"^-?(?:0+\.?0*|\.0+)(?:px|pt|em|rem|%|vh|vw)?$")
_TINY = re.compile(r"^(?:0*\.\d+|1)(?:px|pt)$")
_FAR = re.compile(r"^-\d{3,}(?:\.\d+)?(?:px|pt|em|rem)$")


def hidden_spans(text: str) -> list[Hidden]:
    """Every span of `text` a renderer would not show, in order."""
    spans = _comments(text)
    if "<" in text:
        spans.extend(_elements(text))
    if "]:" in text:
        spans.extend(_markdown_comments(text))
    spans.sort(key=lambda h: h.start)
    return spans


def _comments(text: str) -> list[Hidden]:
    spans: list[Hidden] = []
    at = text.find("<!--")
    while at >= 0:
        close = text.find("-->", at + 4)
        end = len(text) if close < 0 else close + 3  # unclosed: a renderer hides the rest
        body = text[at + 4 : close if close >= 0 else len(text)]
        spans.append(Hidden(at, end, COMMENT, body[:MAX_HIDDEN]))
        at = text.find("<!--", end)
    return spans


def _elements(text: str) -> list[Hidden]:
    spans: list[Hidden] = []
    lowered = text.lower()
    for tag in _OPEN_TAG.finditer(text):
        how = _hiding(tag.group(2))
        if how is None:
            continue
        name = tag.group(1).lower()
        close = lowered.find(f"</{name}", tag.end(), tag.end() + MAX_HIDDEN * 2)
        end = close if close >= 0 else min(len(text), tag.end() + MAX_HIDDEN)
        inner = _TAG.sub(" ", text[tag.end() : end])
        spans.append(Hidden(tag.start(), end, how, inner[:MAX_HIDDEN]))
    return spans


def _hiding(attributes: str) -> str | None:
    """How the attributes hide their element, or None when they do not."""
    if _HIDDEN_ATTR.search(attributes):
        return ATTRIBUTE
    style = _STYLE_ATTR.search(attributes)
    if style is None:
        return None
    declarations = {}
    for part in (style.group(1) or style.group(2) or "").split(";"):
        key, _, value = part.partition(":")
        declarations[key.strip().lower()] = value.replace("!important", "").strip().lower()
    return STYLED if _invisible(declarations) else None


def _invisible(style: dict[str, str]) -> bool:
    if style.get("display") == "none" or style.get("visibility") in ("hidden", "collapse"):
        return True
    if _ZERO.match(style.get("opacity", "1")) or style.get("color") == "transparent":
        return True
    size = style.get("font-size", "")
    if size and (_ZERO.match(size) or _TINY.match(size)):
        return True
    if _ZERO.match(style.get("height", "1")) and style.get("overflow") == "hidden":
        return True
    return any(_FAR.match(style.get(key, "")) for key in ("left", "top", "text-indent"))


def _markdown_comments(text: str) -> list[Hidden]:
    return [
        Hidden(m.start(), m.end(), MARKDOWN, (m.group(1) or m.group(2) or m.group(3) or ""))
        for m in _MD_COMMENT.finditer(text)
    ]
