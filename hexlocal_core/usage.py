"""Token accounting, the pure part: the period asked for and the report over recorded events.

Storing events is the store's job; this module only reads a period and aggregates what it
is given. Days are UTC days, both ends inclusive: `from=until=2025-05-01` is that one day.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, date, datetime
from typing import Any

from attrs import frozen

from hexlocal_core.bounds import short_repr
from hexlocal_core.errors import UserInputError
from hexlocal_core.model import UsageEvent

_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
LAST_DAY = date.max  # exclusive: a period must have a following day to end at


def parse_period(from_: str | None, until: str | None, today: date) -> tuple[date, date]:
    """The inclusive (start, end) of a usage report.

    Without `until` the period ends today. Without `from` it starts on the end day, so no
    arguments means today and a lone `until` means that one day.
    Raises UserInputError for a date not written YYYY-MM-DD or a start after the end.
    """
    end = _parse_day("until", until) or today
    start = _parse_day("from", from_) or end
    if start > end:
        raise UserInputError(
            f"from={start.isoformat()} is after until={end.isoformat()}; "
            "give a start on or before the end (dates are YYYY-MM-DD, both included)."
        )
    return start, end


@frozen
class ModelUsage:
    """What one model cost in the period."""

    model: str
    local: bool  # True when every call ran on this machine (no cloud tokens spent)
    kinds: tuple[str, ...]  # embed | chat | rerank, sorted
    calls: int
    prompt_tokens: int
    completion_tokens: int
    failures: int

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "local": self.local,
            "kinds": list(self.kinds),
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "failures": self.failures,
        }


@frozen
class UsageReport:
    """Token usage between `start` and `end` (inclusive UTC days), overall and per model."""

    start: date
    end: date
    by_model: tuple[ModelUsage, ...] = ()  # sorted by model name

    @property
    def calls(self) -> int:
        return sum(m.calls for m in self.by_model)

    @property
    def prompt_tokens(self) -> int:
        return sum(m.prompt_tokens for m in self.by_model)

    @property
    def completion_tokens(self) -> int:
        return sum(m.completion_tokens for m in self.by_model)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def failures(self) -> int:
        return sum(m.failures for m in self.by_model)

    @property
    def cloud_tokens(self) -> int:
        """Tokens sent to remote models: the ones that cost money."""
        return sum(m.total_tokens for m in self.by_model if not m.local)

    def to_dict(self) -> dict[str, Any]:
        return {
            "from": self.start.isoformat(),
            "until": self.end.isoformat(),
            "totals": {
                "calls": self.calls,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "total_tokens": self.total_tokens,
                "failures": self.failures,
                "cloud_tokens": self.cloud_tokens,
            },
            "by_model": {m.model: m.to_dict() for m in self.by_model},
        }

    def to_markdown(self) -> str:
        title = f"## Token usage, {_period_words(self.start, self.end)} (UTC)"
        if not self.by_model:
            return f"{title}\n\nNo model calls were recorded in this period.\n"
        lines = [title, "", *_table(self), ""]
        lines.append(f"Cloud tokens: {self.cloud_tokens:,} (local models send nothing away).")
        if self.failures:
            calls = "call" if self.failures == 1 else "calls"
            lines.append(f"{self.failures:,} {calls} failed (included above).")
        return "\n".join(lines) + "\n"


def summarize(events: Iterable[UsageEvent], start: date, end: date) -> UsageReport:
    """Aggregate the events that fall in [start, end] (UTC days), per model.

    An event without `at` has not been through a sink yet; it is counted, as the caller
    chose to pass it.
    """
    groups: dict[str, list[UsageEvent]] = {}
    for event in events:
        if event.at is None or start <= _utc_day(event.at) <= end:
            groups.setdefault(event.model, []).append(event)
    by_model = tuple(_model_usage(model, groups[model]) for model in sorted(groups))
    return UsageReport(start=start, end=end, by_model=by_model)


def _model_usage(model: str, events: list[UsageEvent]) -> ModelUsage:
    return ModelUsage(
        model=model,
        local=all(e.local for e in events),
        kinds=tuple(sorted({e.kind for e in events})),
        calls=len(events),
        prompt_tokens=sum(e.prompt_tokens for e in events),
        completion_tokens=sum(e.completion_tokens for e in events),
        failures=sum(1 for e in events if not e.success),
    )


def _utc_day(at: datetime) -> date:
    # A naive datetime is taken as UTC, which is how the sink records them.
    return (at.astimezone(UTC) if at.tzinfo else at).date()


def _parse_day(name: str, value: str | None) -> date | None:
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        # fromisoformat alone also takes '20250501' and '2025-W18-4'; ask for one spelling.
        if not _ISO_DATE.match(text):
            raise ValueError(text)
        day = date.fromisoformat(text)
    except ValueError:
        raise UserInputError(
            f"{name}={short_repr(value, 40)} is not a valid date; expected YYYY-MM-DD, "
            "e.g. 2025-05-01."
        ) from None
    if day >= LAST_DAY:
        # The report reads up to the start of the next day, and date.max has none.
        raise UserInputError(
            f"{name}={text} is too far in the future; give a day before {LAST_DAY.isoformat()}."
        )
    return day


def _period_words(start: date, end: date) -> str:
    if start == end:
        return start.isoformat()
    return f"{start.isoformat()} to {end.isoformat()}"


def _table(report: UsageReport) -> list[str]:
    rows = [
        "| model | kind | local | calls | prompt | completion | total |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for m in report.by_model:
        rows.append(
            f"| {_cell(m.model)} | {', '.join(m.kinds)} | {'yes' if m.local else 'no'} "
            f"| {m.calls:,} | {m.prompt_tokens:,} | {m.completion_tokens:,} "
            f"| {m.total_tokens:,} |"
        )
    rows.append(
        f"| **total** | | | {report.calls:,} | {report.prompt_tokens:,} "
        f"| {report.completion_tokens:,} | {report.total_tokens:,} |"
    )
    return rows


def _cell(text: str) -> str:
    # A '|' in a model name would split the row.
    return text.replace("|", "\\|")
