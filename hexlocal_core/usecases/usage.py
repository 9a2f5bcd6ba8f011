"""get_token_usage: tokens per model over a period of UTC days."""

from __future__ import annotations

from datetime import UTC, datetime

from hexlocal_core.index.seam import UsageRecords
from hexlocal_core.usage import UsageReport, parse_period, summarize


def get_token_usage(sink: UsageRecords, from_: str | None, until: str | None) -> UsageReport:
    start, end = parse_period(from_, until, datetime.now(UTC).date())
    return summarize(sink.events(start, end), start, end)
