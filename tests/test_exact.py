"""The identifiers a `not_found` notice suggests (`search/exact.closest_titles`), over
titles as ExDoc writes them (Elixir's own, from the corpus)."""

from __future__ import annotations

import pytest

from hexlocal_core.search.exact import closest_titles

ELIXIR = [
    "Enum.map/2",
    "Enum.reduce/2",
    "Enum.reduce/3",
    "Enumerable.reduce/3",
    "IO.ANSI.red/0",
    "String.trim/1",
    "String.trim/2",
    "Date.t/0",
    "GenServer.call/3",
    "Stream.map/2",
]


@pytest.mark.parametrize(
    ("function", "arity", "first"),
    [
        ("redce", 3, ["Enum.reduce/3", "Enumerable.reduce/3", "Enum.reduce/2"]),  # arity first
        ("redce", 2, ["Enum.reduce/2", "Enum.reduce/3", "Enumerable.reduce/3"]),
        ("trimm", 1, ["String.trim/1", "String.trim/2"]),  # not `t/0`: `t` is no `trimm`
        ("cal", 3, ["GenServer.call/3"]),
        ("mapp", None, ["Enum.map/2", "Stream.map/2"]),
    ],
)
def test_names_spelt_like_it_come_first(function: str, arity: int | None, first: list[str]) -> None:
    assert closest_titles(function, ELIXIR, 5, arity)[: len(first)] == first


def test_nothing_close_suggests_nothing() -> None:
    assert closest_titles("frobnicate", ELIXIR, 5) == []
    assert closest_titles("x", ["Kernel.SpecialForms.__aliases__/0", "Jason"], 5) == []
