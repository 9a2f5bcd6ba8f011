"""Third-party text that tries to steer the agent reading it: found, named, made visible.

hexlocal hands text other people wrote (package docs, GitHub issue and PR bodies, lessons
recalled from a team's shared database) to an agent that acts on what it reads. This
package looks at one such text and says whether it tries to steer that agent, in three ways:

* instructions addressed to an AI agent (`rules.py`): a chat template's role markers,
  "ignore previous instructions", words to an AI, concealment from the user, credentials
  read or data sent out, directions about tool calls;
* invisible Unicode (`invisible.py`): tag characters, zero-width runs, bidi overrides and
  isolates, runs of variation selectors;
* hidden markup (`markup.py`): an HTML comment, an invisible element or a markdown comment
  whose hidden text gives its reader orders.

Elixir docs give programmers orders on every page ("you should always call X", "ignore
the return value", "do not use this function"); none of those is flagged. What is flagged
is text addressed to a model, written in a chat template's syntax, or hidden from the
person who reviews the page.

    inspect(text) -> Finding | None   what steers, and why (for a notice)
    clean(text) -> str                every hidden run replaced by a visible marker

A flagged text is never dropped or rewritten beyond `clean`: callers return it as quoted
data with a notice naming it, so the user sees what the package or issue said.
"""

from __future__ import annotations

import bisect
import itertools
import re

from attrs import frozen

from hexlocal_core.steering import invisible, markup, rules
from hexlocal_core.untrusted import clip

__all__ = ["HIDDEN_MARKUP", "Finding", "Signal", "clean", "inspect"]

HIDDEN_MARKUP = "hidden_markup"
MAX_EVIDENCE = 100  # characters of matched text a notice quotes
_CONTEXT = 40  # characters after a match that a quote keeps, up to the line's end

_DESCRIPTIONS = {
    rules.ROLE_MARKER: "a chat template's role marker",
    rules.OVERRIDE: "an order to set aside the agent's instructions",
    rules.ADDRESS: "words addressed to an AI agent",
    rules.CONCEALMENT: "an order to keep something from the user",
    rules.EXFILTRATION: "an order to read credentials or send data out",
    rules.TOOL_COERCION: "directions for the agent's commands and tool calls",
    HIDDEN_MARKUP: "directions hidden in markup",
    invisible.TAGS: "invisible Unicode tag characters",
    invisible.ZERO_WIDTH: "hidden zero-width characters",
    invisible.BIDI: "bidi override or isolate characters",
    invisible.SELECTORS: "a run of variation selectors carrying hidden bytes",
}
_ORDER = tuple(_DESCRIPTIONS)
INVISIBLE_RULES = frozenset(
    (invisible.TAGS, invisible.ZERO_WIDTH, invisible.BIDI, invisible.SELECTORS)
)


@frozen
class Signal:
    """One reason a text was flagged."""

    rule: str  # a rule of rules.py, an invisible kind, or HIDDEN_MARKUP
    evidence: str  # what matched, on one line, escaped, at most MAX_EVIDENCE characters
    where: str = ""  # HIDDEN_MARKUP: the markup that hides it ("an HTML comment")

    def describe(self) -> str:
        what = _DESCRIPTIONS[self.rule]
        if self.where:
            what = f"{what} ({self.where})"
        return f'{what}: "{self.evidence}"'


@frozen
class Finding:
    """Why a text reads as written to steer an agent: its signals, most telling first."""

    signals: tuple[Signal, ...]

    @property
    def rules(self) -> tuple[str, ...]:
        return tuple(s.rule for s in self.signals)

    @property
    def invisible(self) -> bool:
        """Whether `clean` changes the text."""
        return any(s.rule in INVISIBLE_RULES for s in self.signals)

    @property
    def reason(self) -> str:
        """One line for a notice: the first three signals with their evidence."""
        shown = "; ".join(s.describe() for s in self.signals[:3])
        more = len(self.signals) - 3
        return f"{shown}; and {more} more" if more > 0 else shown


def inspect(text: str) -> Finding | None:
    """Why `text` reads as written to steer an AI agent, or None when it does not.

    Instructions are looked for in the text as a model reads it (invisible characters
    removed, compatibility forms folded) and in whatever hidden runs spell.
    """
    runs = invisible.runs(text)
    signals: dict[str, Signal] = {}
    for run in runs:
        if run.kind not in signals:
            chars = text[run.start : run.end]
            signals[run.kind] = Signal(run.kind, _quoted(invisible.marker(chars, run)))
    plain = invisible.strip(text)
    hidden_text = "\n".join(run.decoded for run in runs if run.decoded)
    for segment in (plain, hidden_text):
        for name, match in _matches(segment):
            signals.setdefault(name, Signal(name, _quote(segment, match.start(), match.end())))
    hidden = _hidden_directions(plain)
    if hidden is not None:
        signals.setdefault(HIDDEN_MARKUP, hidden)
    if not signals:
        return None
    return Finding(tuple(sorted(signals.values(), key=lambda s: _ORDER.index(s.rule))))


def clean(text: str) -> str:
    """`text` with every run of invisible characters that hides something replaced by a
    visible marker saying what was there; any other text is returned unchanged."""
    return invisible.escape(text, invisible.runs(text))


def _matches(text: str) -> list[tuple[str, re.Match[str]]]:
    """(rule name, its first match) for each rule name that matches `text`."""
    if not text:
        return []
    lowered = text.lower()
    seen: dict[tuple[str, ...], bool] = {}
    found: dict[str, re.Match[str]] = {}
    for rule in rules.RULES:
        if rule.name not in found:
            match = rule.search(text, lowered, seen)
            if match is not None:
                found[rule.name] = match
    return list(found.items())


def _hidden_directions(text: str) -> Signal | None:
    """A signal for hidden markup whose text gives its reader orders, or None.

    The spans' texts are read as one (a page of ten thousand empty comments costs one
    pass, not ten thousand); the signal names the span the first order is in.
    """
    spans = markup.hidden_spans(text)
    if not spans:
        return None
    starts = list(itertools.accumulate((len(s.text) + 1 for s in spans), initial=0))
    joined = "\n".join(s.text for s in spans)
    directive = rules.DIRECTIVE.search(joined)
    found = [m.start() for _, m in _matches(joined)] + ([directive.start()] if directive else [])
    if not found:
        return None
    span = spans[bisect.bisect_right(starts, min(found)) - 1]
    return Signal(HIDDEN_MARKUP, _quoted(span.text), span.how)


def _quote(text: str, start: int, end: int) -> str:
    line_end = text.find("\n", end)
    stop = min(end + _CONTEXT, len(text) if line_end < 0 else max(line_end, end))
    return _quoted(text[start:stop])


def _quoted(text: str) -> str:
    return clip(" ".join(text.split()), MAX_EVIDENCE).replace('"', "'")
