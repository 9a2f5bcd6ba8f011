"""Token usage: the period a report covers and the aggregation over recorded events."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from hexlocal_core.errors import UserInputError
from hexlocal_core.model import UsageEvent
from hexlocal_core.usage import ModelUsage, UsageReport, parse_period, summarize

TODAY = date(2025, 5, 10)
LOCAL_EMBED = "local:sentence-transformers/all-MiniLM-L6-v2"


def at(day: int, hour: int = 12, minute: int = 0) -> datetime:
    return datetime(2025, 5, day, hour, minute, tzinfo=UTC)


@pytest.mark.parametrize(
    ("from_", "until", "expected"),
    [
        (None, None, (TODAY, TODAY)),
        ("", "  ", (TODAY, TODAY)),
        ("2025-05-01", None, (date(2025, 5, 1), TODAY)),
        (" 2025-05-01 ", "2025-05-03", (date(2025, 5, 1), date(2025, 5, 3))),
        (None, "2025-05-03", (date(2025, 5, 3), date(2025, 5, 3))),
        ("2025-05-03", "2025-05-03", (date(2025, 5, 3), date(2025, 5, 3))),
        ("2024-02-29", "2024-03-01", (date(2024, 2, 29), date(2024, 3, 1))),
        ("2025-06-01", "2025-06-30", (date(2025, 6, 1), date(2025, 6, 30))),  # future is fine
    ],
)
def test_parse_period(from_: str | None, until: str | None, expected: tuple[date, date]) -> None:
    assert parse_period(from_, until, TODAY) == expected


@pytest.mark.parametrize(
    ("from_", "until", "message"),
    [
        ("2025-02-30", None, "from='2025-02-30' is not a valid date; expected YYYY-MM-DD"),
        ("2025-5-1", None, "from='2025-5-1' is not a valid date"),
        ("20250501", None, "from='20250501'"),
        ("2025-05-01T00:00", None, "from='2025-05-01T00:00'"),
        ("yesterday", None, "from='yesterday'"),
        (None, "2025-13-01", "until='2025-13-01' is not a valid date"),
        ("2025-05-04", "2025-05-03", "from=2025-05-04 is after until=2025-05-03"),
        ("2025-05-11", None, "from=2025-05-11 is after until=2025-05-10"),
    ],
)
def test_parse_period_rejects(from_: str | None, until: str | None, message: str) -> None:
    with pytest.raises(UserInputError, match=message):
        parse_period(from_, until, TODAY)


EVENTS = (
    UsageEvent(LOCAL_EMBED, "embed", 1200, local=True, at=at(1, 0, 0)),
    UsageEvent(LOCAL_EMBED, "embed", 300, local=True, at=at(3, 23, 59)),
    UsageEvent("mistral-small-latest", "chat", 500, 120, at=at(2)),
    UsageEvent("mistral-small-latest", "chat", 400, 0, success=False, at=at(2, 13)),
    UsageEvent("mistral-large-latest", "chat", 2000, 800, at=at(3)),
    UsageEvent("mistral-embed", "embed", 90, at=at(3)),
    UsageEvent("cross-encoder/ms-marco-MiniLM-L-6-v2", "rerank", 640, local=True, at=at(2)),
    # outside the period on either side
    UsageEvent("mistral-large-latest", "chat", 9999, 9999, at=at(4, 0, 0)),
    UsageEvent(LOCAL_EMBED, "embed", 9999, local=True, at=at(1) - timedelta(days=1)),
)


def test_summarize_totals_and_inclusive_bounds() -> None:
    report = summarize(EVENTS, date(2025, 5, 1), date(2025, 5, 3))
    assert (report.calls, report.failures) == (7, 1)
    assert report.prompt_tokens == 1200 + 300 + 500 + 400 + 2000 + 90 + 640
    assert report.completion_tokens == 120 + 800
    assert report.total_tokens == report.prompt_tokens + report.completion_tokens
    assert report.cloud_tokens == 620 + 400 + 2800 + 90


def test_summarize_by_model() -> None:
    report = summarize(EVENTS, date(2025, 5, 1), date(2025, 5, 3))
    by_model = {m.model: m for m in report.by_model}
    assert [m.model for m in report.by_model] == sorted(by_model)
    assert by_model[LOCAL_EMBED] == ModelUsage(
        model=LOCAL_EMBED,
        local=True,
        kinds=("embed",),
        calls=2,
        prompt_tokens=1500,
        completion_tokens=0,
        failures=0,
    )
    small = by_model["mistral-small-latest"]
    assert (small.local, small.calls, small.failures, small.total_tokens) == (False, 2, 1, 1020)
    assert by_model["cross-encoder/ms-marco-MiniLM-L-6-v2"].local is True
    assert by_model["mistral-embed"].local is False


def test_a_model_used_locally_and_remotely_is_not_local() -> None:
    events = [
        UsageEvent("m", "embed", 10, local=True, at=at(1)),
        UsageEvent("m", "chat", 5, 5, local=False, at=at(1)),
    ]
    (usage,) = summarize(events, date(2025, 5, 1), date(2025, 5, 1)).by_model
    assert (usage.local, usage.kinds, usage.total_tokens) == (False, ("chat", "embed"), 20)


def test_days_are_utc_days() -> None:
    # 23:30 on May 1st in UTC-05:00 is already May 2nd in UTC.
    late = datetime(2025, 5, 1, 23, 30, tzinfo=timezone(timedelta(hours=-5)))
    naive = datetime(2025, 5, 2, 0, 30)  # taken as UTC
    undated = UsageEvent("m", "chat", 3)  # not through a sink yet: counted
    events = [UsageEvent("m", "chat", 1, at=late), UsageEvent("m", "chat", 2, at=naive), undated]
    assert summarize(events, date(2025, 5, 1), date(2025, 5, 1)).prompt_tokens == 3
    assert summarize(events, date(2025, 5, 2), date(2025, 5, 2)).prompt_tokens == 6


def test_to_dict() -> None:
    report = summarize(EVENTS, date(2025, 5, 1), date(2025, 5, 3))
    data = report.to_dict()
    assert (data["from"], data["until"]) == ("2025-05-01", "2025-05-03")
    assert data["totals"] == {
        "calls": 7,
        "prompt_tokens": 5130,
        "completion_tokens": 920,
        "total_tokens": 6050,
        "failures": 1,
        "cloud_tokens": 3910,
    }
    assert data["by_model"]["mistral-large-latest"] == {
        "local": False,
        "kinds": ["chat"],
        "calls": 1,
        "prompt_tokens": 2000,
        "completion_tokens": 800,
        "total_tokens": 2800,
        "failures": 0,
    }


def test_to_markdown() -> None:
    text = summarize(EVENTS, date(2025, 5, 1), date(2025, 5, 3)).to_markdown()
    lines = text.splitlines()
    assert lines[0] == "## Token usage, 2025-05-01 to 2025-05-03 (UTC)"
    assert "| model | kind | local | calls | prompt | completion | total |" in lines
    assert f"| {LOCAL_EMBED} | embed | yes | 2 | 1,500 | 0 | 1,500 |" in lines
    assert "| mistral-large-latest | chat | no | 1 | 2,000 | 800 | 2,800 |" in lines
    assert "| **total** | | | 7 | 5,130 | 920 | 6,050 |" in lines
    assert "Cloud tokens: 3,910 (local models send nothing away)." in lines
    assert "1 call failed (included above)." in lines
    table = [line for line in lines if line.startswith("|")]
    assert len(table) == 2 + 5 + 1  # header, rule, one row per model, totals
    assert all(line.count("|") == 8 for line in table)


def test_markdown_escapes_pipes_in_model_names() -> None:
    events = [UsageEvent("odd|name", "chat", 1, at=at(1))]
    text = summarize(events, date(2025, 5, 1), date(2025, 5, 1)).to_markdown()
    assert "| odd\\|name | chat | no | 1 | 1 | 0 | 1 |" in text.splitlines()


def test_empty_period() -> None:
    report = summarize(EVENTS, date(2025, 4, 1), date(2025, 4, 1))
    assert report == UsageReport(start=date(2025, 4, 1), end=date(2025, 4, 1))
    assert (report.calls, report.total_tokens, report.failures) == (0, 0, 0)
    assert report.to_dict()["by_model"] == {}
    assert report.to_markdown() == (
        "## Token usage, 2025-04-01 (UTC)\n\nNo model calls were recorded in this period.\n"
    )
