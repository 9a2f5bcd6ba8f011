"""The identifiers a `not_found` notice suggests (`search/exact.closest_titles`), over
titles as ExDoc writes them (Elixir's own, from the corpus)."""

from __future__ import annotations

import pytest

from hexlocal_core.search.exact import closest_titles, parse_identifier

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


@pytest.mark.parametrize(
    ("text", "module", "function", "arity", "kind"),
    [
        (":ets.new/2", "ets", "new", 2, None),  # Elixir's spelling
        ("ets:new/2", "ets", "new", 2, None),  # Erlang's
        ("ets.new/2", "ets", "new", 2, None),  # ExDoc's title
        (":ets", "ets", None, None, None),
        ("ets:new", "ets", "new", None, None),
        ("c:gen_server:handle_call/3", "gen_server", "handle_call", 3, "callback"),
        ("gen_server.handle_call/3", "gen_server", "handle_call", 3, None),
        ("t:ets:tid/0", "ets", "tid", 0, "type"),
        ("erlang:send_after/3", "erlang", "send_after", 3, None),
        ("'Elixir.Enum':map/2", "Enum", "map", 2, None),  # an Elixir module as Erlang writes it
    ],
)
def test_erlang_identifiers_in_every_spelling(
    text: str, module: str, function: str | None, arity: int | None, kind: str | None
) -> None:
    ident = parse_identifier(text)
    assert ident is not None
    assert (ident.module, ident.function, ident.arity, ident.kind) == (
        module,
        function,
        arity,
        kind,
    )
    assert ident.erlang is (module[0].islower())


@pytest.mark.parametrize(
    "text",
    ["ets", "mix.exs", "file.read", ":ets:new/2", ":ets/1", "t::ets", "ets new/2", "a.b.c/1"],
)
def test_words_and_file_names_are_not_erlang_identifiers(text: str) -> None:
    assert parse_identifier(text) is None


def test_an_identifier_reads_as_exdoc_titles_it() -> None:
    assert [str(parse_identifier(t)) for t in (":ets.new/2", "Enum.map/2", ":lists")] == [
        "ets.new/2",
        "Enum.map/2",
        "lists",
    ]
