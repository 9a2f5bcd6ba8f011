"""The decision every docs call passes through (`usecases/prepare_plan.py`), as tables."""

from __future__ import annotations

from typing import Any

import pytest
from attrs import evolve

from hexlocal_core.usecases.prepare_plan import (
    AnswerFromChunks,
    Decision,
    Facts,
    LastJob,
    Ready,
    ReportJob,
    Work,
    cancel_running,
    decide,
    switch_to,
)

BASE = Facts(
    wanted="1.4.4",
    pinned=True,
    refresh=False,
    searchable=True,
    indexed=None,
    indexed_complete=False,
    running=None,
    running_embeds=True,
)
FAILED = LastJob("1.4.4", "the embeddings API answered 503", recent=True)


def facts(**changes: Any) -> Facts:
    return evolve(BASE, **changes)


@pytest.mark.parametrize(
    ("case", "given", "expected"),
    [
        ("nothing indexed: start, wait", {}, Work(start=True, answer_now=False, owe_notice=False)),
        ("complete at the version", {"indexed": "1.4.4", "indexed_complete": True}, Ready()),
        (
            "complete but a refresh",
            {"indexed": "1.4.4", "indexed_complete": True, "refresh": True},
            Work(start=True, answer_now=False, owe_notice=False),
        ),
        (
            "partial: a job finishes it, the chunks answer now",
            {"indexed": "1.4.4"},
            Work(start=True, answer_now=True, owe_notice=True),
        ),
        (
            "partial, the call needs the vectors",
            {"indexed": "1.4.4", "searchable": False},
            Work(start=True, answer_now=False, owe_notice=False),
        ),
        (
            "being embedded here: join it, answer from chunks",
            {"indexed": "1.4.4", "running": "1.4.4"},
            Work(start=False, answer_now=True, owe_notice=True),
        ),
        (
            "a chunks-only job runs",
            {"running": "1.4.4", "running_embeds": False},
            ReportJob(),
        ),
        (
            "failed moments ago: the chunks answer, no new download",
            {"indexed": "1.4.4", "last": FAILED},
            AnswerFromChunks(FAILED.stopped),
        ),
        (
            "failed long ago: try again",
            {"indexed": "1.4.4", "last": LastJob("1.4.4", "503", recent=False)},
            Work(start=True, answer_now=True, owe_notice=True),
        ),
        (
            "failed for another version",
            {"indexed": "1.4.4", "last": LastJob("1.4.5", "503", recent=True)},
            Work(start=True, answer_now=True, owe_notice=True),
        ),
        (
            "another version indexed: start the wanted one and wait",
            {"indexed": "1.4.5", "indexed_complete": True},
            Work(start=True, answer_now=False, owe_notice=False),
        ),
    ],
)
def test_decide(case: str, given: dict[str, object], expected: Decision) -> None:
    assert decide(facts(**given)) == expected, case


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"pinned": False, "indexed": "1.4.5"}, "1.4.5"),  # unpinned: answer from the index
        ({"pinned": False, "running": "1.4.5", "indexed": "1.4.3"}, "1.4.5"),
        ({"pinned": True, "indexed": "1.4.5"}, None),  # the project pins 1.4.4
        ({"pinned": False, "indexed": "1.4.5", "refresh": True}, None),
        ({"pinned": False, "indexed": "1.4.4"}, None),
        ({"pinned": False}, None),
    ],
)
def test_an_unpinned_call_answers_from_what_is_indexed(
    given: dict[str, object], expected: str | None
) -> None:
    assert switch_to(facts(**given)) == expected


def test_a_job_for_another_version_gives_way() -> None:
    assert cancel_running(facts(running="1.4.5"))
    assert not cancel_running(facts(running="1.4.4"))
    assert not cancel_running(facts())
