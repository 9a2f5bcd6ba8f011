"""The search mode is a typed value: parsed once at the edge, never rewritten silently.
A search says which mode it was asked for, which one ran and why they differ."""

from __future__ import annotations

import pytest

from hexlocal_core.bounds import check_mode
from hexlocal_core.errors import UserInputError
from hexlocal_core.model import ResolvedMode, SearchMode


@pytest.mark.parametrize(
    ("requested", "rerank_enabled", "used", "why"),
    [
        (SearchMode.RERANK, True, SearchMode.RERANK, None),
        (SearchMode.RERANK, False, SearchMode.RRF, "AI_RERANK_MODEL=off"),
        (SearchMode.RRF, False, SearchMode.RRF, None),
        (SearchMode.FTS, False, SearchMode.FTS, None),
        (SearchMode.VECTOR, True, SearchMode.VECTOR, None),
    ],
)
def test_only_rerank_switched_off_runs_as_another_mode_and_says_why(
    requested: SearchMode, rerank_enabled: bool, used: SearchMode, why: str | None
) -> None:
    ran = ResolvedMode.of(requested, rerank_enabled=rerank_enabled)
    assert (ran.requested, ran.used) == (requested, used)
    if why is None:
        assert ran.reason is None
    else:
        assert ran.reason is not None and why in ran.reason
    assert ran.to_dict() == {"requested": requested.value, "used": used.value, "reason": ran.reason}


@pytest.mark.parametrize("text", ["fts", "vector", "rrf", "rerank"])
def test_a_mode_is_read_from_its_name(text: str) -> None:
    assert check_mode(text) is SearchMode(text)
    assert check_mode(SearchMode(text)) is SearchMode(text)


@pytest.mark.parametrize("bad", ["RRF", "bm25", "", None, 3])
def test_an_unknown_mode_is_refused_naming_the_modes(bad: object) -> None:
    with pytest.raises(UserInputError, match="expected one of fts, vector, rrf, rerank"):
        check_mode(bad)


def test_only_the_fused_modes_fuse() -> None:
    assert [m.value for m in SearchMode if m.fuses] == ["rrf", "rerank"]
