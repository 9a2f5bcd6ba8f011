"""Package folds for cross-validating anything fitted on the eval sets."""

from __future__ import annotations

import pytest

from hexlocal_core.evaluation.folds import package_folds


def test_no_package_straddles_two_folds_and_big_ones_spread() -> None:
    queries = ["ecto"] * 9 + ["elixir"] * 8 + ["plug"] * 5 + ["jason"] * 2 + ["mime"]
    folds = package_folds(queries, 2)
    assert set(folds) == {"ecto", "elixir", "plug", "jason", "mime"}
    # The two biggest packages land in different folds, whatever order the queries came in.
    assert folds["ecto"] != folds["elixir"]
    assert package_folds(reversed(queries), 2) == folds


def test_one_fold_is_refused() -> None:
    with pytest.raises(ValueError, match="two folds"):
        package_folds(["ecto"], 1)
