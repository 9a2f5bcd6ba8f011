"""Invisible Unicode in third-party text: found, decoded where it spells text, escaped.

Four kinds of characters hide text from the person who reads a page while a model still
reads every one of them:

* tag characters U+E0000-E007F: each mirrors an ASCII character, so a run of them is a
  sentence nobody sees ("ASCII smuggling"). Their one visible use, an emoji flag's
  subdivision (U+1F3F4, lowercase tags, U+E007F: the flag of Scotland), is left alone;
* zero-width characters (U+200B-200F, U+2060-2064, U+FEFF, U+180E, U+034F, soft hyphen,
  Hangul fillers): one of them joins an emoji sequence (👩‍🚒) or a Persian word; two
  or more in a row carry bits, and one inside an ASCII word breaks a keyword apart;
* bidi embeddings, overrides and isolates (U+202A-202E, U+2066-2069): they change the
  order text is shown in, not the order it is read in ("Trojan Source");
* variation selectors (U+FE00-FE0F, U+E0100-E01EF): one picks the form of an emoji or an
  ideograph (❤️); a run of them carries bytes, one byte per selector.

`runs` finds the runs that hide something; `escape` replaces each with a visible marker
that says what was there (and what a tag or selector run spells); `strip` removes every
invisible character, so the instruction rules read what the model reads.
"""

from __future__ import annotations

import re
import unicodedata

from attrs import frozen

from hexlocal_core.untrusted import clip

TAGS = "tag_characters"
ZERO_WIDTH = "zero_width"
BIDI = "bidi_control"
SELECTORS = "variation_selectors"

MAX_DECODED = 200  # characters of a hidden text a marker shows
_SHORT_RUN = 3  # runs up to this length are shown code point by code point

_ZERO_WIDTH_CHARS = (
    "\u00ad\u034f\u115f\u1160\u180e\u200b-\u200f\u2060-\u2064\u3164\ufeff\uffa0\ufff9-\ufffb"
)
_BIDI_CHARS = "\u202a-\u202e\u2066-\u2069"
_SELECTOR_CHARS = "\ufe00-\ufe0f\U000e0100-\U000e01ef"
_TAG_CHARS = "\U000e0000-\U000e007f"
_ANY = re.compile(f"[{_ZERO_WIDTH_CHARS}{_BIDI_CHARS}{_SELECTOR_CHARS}{_TAG_CHARS}]+")
_STRETCH = re.compile(
    f"(?P<{TAGS}>[{_TAG_CHARS}]+)|(?P<{ZERO_WIDTH}>[{_ZERO_WIDTH_CHARS}]+)"
    f"|(?P<{BIDI}>[{_BIDI_CHARS}]+)|(?P<{SELECTORS}>[{_SELECTOR_CHARS}]+)"
)
# Marks a text may carry alone without hiding anything: a soft hyphen, LRM and RLM.
_MARKS = frozenset("\u00ad\u200e\u200f")
_FLAG_TAGS = re.compile("[\U000e0030-\U000e0039\U000e0061-\U000e007a]{2,7}\U000e007f")
_BLACK_FLAG = "\U0001f3f4"


@frozen
class Run:
    """Consecutive invisible characters of one kind that hide something."""

    start: int
    end: int
    kind: str  # TAGS | ZERO_WIDTH | BIDI | SELECTORS
    decoded: str = ""  # the text a tag or selector run spells, when it spells any


def runs(text: str) -> list[Run]:
    """Every run in `text` that hides something, in order (none for ASCII text)."""
    if text.isascii():
        return []
    found: list[Run] = []
    for whole in _ANY.finditer(text):
        at, chars = whole.start(), whole.group()
        parts = [(_kind(chars), len(chars))] if len(chars) == 1 else _parts(chars)
        for kind, size in parts:
            run = _judged(text, at, at + size, kind)
            if run is not None:
                found.append(run)
            at += size
    return found


def escape(text: str, found: list[Run]) -> str:
    """`text` with each run of `found` replaced by a visible marker; nothing else changes."""
    if not found:
        return text
    out: list[str] = []
    at = 0
    for run in found:
        out.append(text[at : run.start])
        out.append(marker(text[run.start : run.end], run))
        at = run.end
    out.append(text[at:])
    return "".join(out)


_LABELS = {
    TAGS: "tag characters",
    ZERO_WIDTH: "zero-width characters",
    BIDI: "bidi controls",
    SELECTORS: "variation selectors",
}


def marker(chars: str, run: Run) -> str:
    """What a reader sees in place of a hidden run: its code points when it is short,
    else its size and kind, and the text it spells when it spells any."""
    if run.decoded:
        shown = clip(run.decoded, MAX_DECODED).replace('"', "'")
        return f'[hidden: {len(chars)} {_LABELS[run.kind]} spelling "{shown}"]'
    if len(chars) <= _SHORT_RUN:
        return "[" + " ".join(f"U+{ord(c):04X}" for c in chars) + "]"
    return f"[hidden: {len(chars)} {_LABELS[run.kind]}]"


def strip(text: str) -> str:
    """`text` as a model reads it, for matching: no invisible characters, compatibility
    forms folded (fullwidth `ｉｇｎｏｒｅ` reads as `ignore`)."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFKC", _ANY.sub("", text))


def _parts(chars: str) -> list[tuple[str, int]]:
    """(kind, length) of each stretch of one kind in a run of invisible characters."""
    return [(str(m.lastgroup), m.end() - m.start()) for m in _STRETCH.finditer(chars)]


def _kind(char: str) -> str:
    code = ord(char)
    if 0xE0000 <= code <= 0xE007F:
        return TAGS
    if 0x202A <= code <= 0x202E or 0x2066 <= code <= 0x2069:
        return BIDI
    if 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF:
        return SELECTORS
    return ZERO_WIDTH


def _judged(text: str, start: int, end: int, kind: str) -> Run | None:
    chars = text[start:end]
    if kind == TAGS:
        if start > 0 and text[start - 1] == _BLACK_FLAG and _FLAG_TAGS.fullmatch(chars):
            return None
        return Run(start, end, kind, _tag_text(chars))
    if kind == BIDI:
        return Run(start, end, kind)
    if kind == SELECTORS:
        return Run(start, end, kind, _selector_text(chars)) if len(chars) > 1 else None
    if _hides(text, start, end):
        return Run(start, end, kind)
    return None


def _hides(text: str, start: int, end: int) -> bool:
    """A zero-width run hides something: two or more (four for bare marks), or one inside
    an ASCII word (`ad\u200bmin`), or a byte-order mark anywhere but the start."""
    chars = text[start:end]
    if all(c in _MARKS for c in chars):
        return len(chars) > _SHORT_RUN
    if len(chars) > 1:
        return True
    before = text[start - 1] if start > 0 else ""
    after = text[end] if end < len(text) else ""
    inside_word = before.isascii() and before.isalpha() and after.isascii() and after.isalpha()
    return inside_word or (chars == "\ufeff" and start > 0)


_TAG_TEXT = {code: chr(code - 0xE0000) for code in range(0xE0020, 0xE007F)} | {
    code: None for code in (*range(0xE0000, 0xE0020), 0xE007F)
}


def _tag_text(chars: str) -> str:
    return chars.translate(_TAG_TEXT)


def _selector_text(chars: str) -> str:
    """The bytes a run of variation selectors carries (VS1-16 are 0-15, VS17-256 are
    16-255), as text when they decode to printable UTF-8."""
    data = bytes(ord(c) - 0xFE00 if ord(c) <= 0xFE0F else ord(c) - 0xE0100 + 16 for c in chars)
    try:
        decoded = data.decode("utf-8")
    except UnicodeDecodeError:
        return ""
    return decoded if decoded.isprintable() else ""
