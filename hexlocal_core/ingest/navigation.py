"""Recognise text that only navigates: link lists, "Next steps", bare titles.

Such items would win searches for the words in their link titles while holding none
of the answer, so the parser drops them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from hexlocal_core.cancel import checkpoint

_LIST_ITEM = re.compile(r"^(?:[-*+]|\d+[.)])\s+(?P<body>.*)$")
_CODE = re.compile(r"`[^`]*`")
_WORD = re.compile(r"\w+")
_HEADING = re.compile(r"^#{1,6}(?:\s|$)")
# Headings whose link lists point elsewhere even when each link has a short description.
NAVIGATION_SLUGS = frozenset(
    {"next-steps", "see-also", "further-reading", "whats-next", "where-to-go-next", "learn-more"}
)
_MAX_EXTRA_WORDS = 3  # "[Guide](guide.md) (video)" is still just a title
# Words that may precede the link of a title-only item ("The [Safe Ecto Migrations guide]").
_LEADING_WORDS = frozenset({"the", "a", "an", "see"})


def _links(text: str) -> Iterator[tuple[int, int]]:
    """Spans of `[text](target)` / `![alt](target)` links, leftmost first, in linear time.

    What the regex `!?\\[(?:[^\\]]|\\](?!\\())*\\]\\([^)]*\\)` matches, found with `str.find`:
    that regex rescanned the rest of the line from every `[`, so a line of 50k `[` took
    204 s. A link runs from the first `[` to the first `](` after it, then to the next `)`.
    """
    pos = 0
    while True:
        opening = text.find("[", pos)
        if opening < 0:
            return
        middle = text.find("](", opening + 1)
        if middle < 0:
            return
        closing = text.find(")", middle + 2)
        if closing < 0:
            return
        start = opening - 1 if opening > 0 and text[opening - 1] == "!" else opening
        yield start, closing + 1
        pos = closing + 1


def _without_links(text: str) -> str:
    parts: list[str] = []
    pos = 0
    for start, end in _links(text):
        parts.append(text[pos:start])
        pos = end
    parts.append(text[pos:])
    return "".join(parts)


def _list_bodies(markdown: str) -> list[str] | None:
    """The bodies of the list items, or None if anything but a list (or heading) is there."""
    bodies: list[str] = []
    for raw in markdown.split("\n"):
        line = raw.strip()
        if not line or _HEADING.match(line):
            continue
        m = _LIST_ITEM.match(line)
        if m is None:
            return None
        bodies.append(m.group("body"))
    return bodies


def _slug(section: str) -> str:
    """`module-next-steps-1` -> `next-steps`: ExDoc's prefix and de-duplication suffix off."""
    return re.sub(r"-\d+$", "", section.removeprefix("module-"))


def is_heading_only(markdown: str) -> bool:
    """True for text made only of headings (e.g. a changelog page's `# Changelog`)."""
    lines = [line.strip() for line in markdown.split("\n") if line.strip()]
    return bool(lines) and all(_HEADING.match(line) for line in lines)


def is_navigation_only(markdown: str, *, section: str | None = None) -> bool:
    """True when the text is a list of links and nothing else.

    Every item must start with its link (an article may precede it) and add at most a
    few words; under a heading known to navigate (`section` slug such as "next-steps")
    the words after the link are not limited. Changelog entries ("fix flaky test
    ([939fd76](...))") start with their own words, so they are content.
    """
    bodies = _list_bodies(markdown)
    if not bodies:
        return False
    navigating = section is not None and _slug(section) in NAVIGATION_SLUGS
    for body in bodies:
        checkpoint()
        link = next(_links(body), None)
        if link is None:
            return False
        lead = _WORD.findall(_CODE.sub("x", body[: link[0]]))
        if any(word.lower() not in _LEADING_WORDS for word in lead):
            return False
        if navigating:
            continue
        rest = _CODE.sub("", _without_links(body[link[0] :]))
        if len(_WORD.findall(rest)) > _MAX_EXTRA_WORDS:
            return False
    return True
