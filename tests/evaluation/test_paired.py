"""The paired comparison of two evaluation runs (hexlocal_core/evaluation/paired.py): a
difference is reported with the interval a paired bootstrap gives it, so a one-query swing
is not read as a change of the system."""

from __future__ import annotations

import pytest

from hexlocal_core.evaluation.metrics import reciprocal_rank
from hexlocal_core.evaluation.paired import paired_difference


def test_identical_runs_differ_by_nothing() -> None:
    ranks = [1, 2, None, 4, 1, 11]
    same = paired_difference(ranks, ranks)
    assert (same.delta, same.low, same.high, same.better, same.worse) == (0, 0, 0, 0, 0)


def test_one_query_from_rank_1_to_2_in_50_is_noise() -> None:
    a = [1] * 25 + [3] * 25
    b = [2] + [1] * 24 + [3] * 25
    moved = paired_difference(a, b)
    assert moved.delta == pytest.approx(-0.01)
    assert moved.low < 0 <= moved.high  # the interval holds no change at all
    assert (moved.better, moved.worse) == (0, 1)


def test_a_run_that_finds_what_the_other_misses_is_a_real_difference() -> None:
    a = [None] * 20 + [1] * 20
    b = [1] * 40
    found = paired_difference(a, b)
    assert found.delta == pytest.approx(0.5)
    assert 0.3 < found.low < 0.5 < found.high < 0.7
    assert (found.better, found.worse) == (20, 0)


def test_ranks_past_ten_are_misses() -> None:
    assert reciprocal_rank(10) == pytest.approx(0.1)
    assert reciprocal_rank(11) == 0.0
    assert reciprocal_rank(None) == 0.0
    assert paired_difference([11, 12], [None, None]).delta == 0


def test_sets_are_resampled_within_themselves() -> None:
    # A small set that changes and a large one that does not: resampling within sets keeps
    # the small set's share, so every resample moves by exactly its change.
    a = [2] * 10 + [1] * 90
    b = [1] * 10 + [1] * 90
    strata = ["small"] * 10 + ["large"] * 90
    pooled = paired_difference(a, b, strata)
    assert pooled.delta == pytest.approx(0.05)
    assert pooled.low == pytest.approx(0.05) and pooled.high == pytest.approx(0.05)
    unstratified = paired_difference(a, b)
    assert unstratified.low < 0.05 < unstratified.high


def test_the_same_seed_gives_the_same_interval() -> None:
    a, b = [1, 2, 3, None, 5, 1, 2], [2, 1, 3, 1, None, 1, 4]
    first, again = paired_difference(a, b, seed=7), paired_difference(a, b, seed=7)
    assert (first.low, first.high) == (again.low, again.high)


@pytest.mark.parametrize(
    ("a", "b", "strata"),
    [([1, 2], [1], None), ([1], [1], ["x", "y"]), ([], [], None)],
    ids=["runs differ", "strata differ", "empty"],
)
def test_runs_that_do_not_pair_are_refused(
    a: list[int], b: list[int], strata: list[str] | None
) -> None:
    with pytest.raises(ValueError):
        paired_difference(a, b, strata)
