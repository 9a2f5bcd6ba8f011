"""The Erlang term reader for `.app` files: what OTP's and Mix's files hold, and bounds."""

from __future__ import annotations

import time
from typing import Any

import pytest

from hexlocal_core.model import Atom
from hexlocal_core.versions.erlang_terms import MAX_DEPTH, MalformedTerm, parse_erlang_terms


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("kernel.", [Atom("kernel")]),
        ("'Elixir.Jason'.", [Atom("Elixir.Jason")]),
        ("'it''s'.".replace("''", "\\'"), [Atom("it's")]),
        ('"ERTS  CXC 138 10".', ["ERTS  CXC 138 10"]),
        ('"a\\n\\"b\\"" "c".', ['a\n"b"c']),  # escapes; adjacent strings join
        ("{a, 1, -2, 3.5, 16#ff, $a, $\\n}.", [(Atom("a"), 1, -2, 3.5, 255, 97, 10)]),
        ("[a, b | c].", [[Atom("a"), Atom("b"), Atom("c")]]),
        ("#{a => 1, b := [x]}.", [{Atom("a"): 1, Atom("b"): [Atom("x")]}]),
        ('<<"abc">>.', [b"abc"]),
        ('<<"é"/utf8, 1, 2:8>>.', ["é".encode() + b"\x01\x02"]),
        ("% a comment\n%% another\n{}. [].", [(), []]),
        ("{x@host, 'a b'}.", [(Atom("x@host"), Atom("a b"))]),
        ("", []),
    ],
)
def test_terms(text: str, terms: list[Any]) -> None:
    assert parse_erlang_terms(text) == terms


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{application, App, []}.", "unexpected 'A'"),  # a variable
        ("{a, b}", "expected '.'"),
        ("{a, b.", "expected '}'"),
        ('"unterminated.', "unexpected '\"'"),
        ("1 + 2.", "unexpected '\\+'"),
        ("fun() -> ok end.", "expected '.'"),
        ("#{[a] => 1}.", "map key"),
        ("1" * 60 + ".", "over 40 characters"),
        ("36#zz.", None),  # a valid radix
        ("99#zz.", "not a number"),
        ("<<{a}>>.", "binary segment"),
    ],
)
def test_malformed_terms_say_where(text: str, why: str | None) -> None:
    if why is None:
        assert parse_erlang_terms(text) == [36 * 35 + 35]
        return
    with pytest.raises(MalformedTerm, match=why):
        parse_erlang_terms(text)


def test_nesting_is_bounded() -> None:
    ok = "[" * MAX_DEPTH + "]" * MAX_DEPTH + "."
    assert parse_erlang_terms(ok)
    with pytest.raises(MalformedTerm, match="nested"):
        parse_erlang_terms("[" * 100_000 + "]" * 100_000 + ".")


def test_a_token_bomb_is_refused_quickly() -> None:
    bomb = "[" + "a," * 1_000_000 + "a]."
    started = time.monotonic()
    with pytest.raises(MalformedTerm, match="tokens"):
        parse_erlang_terms(bomb)
    assert time.monotonic() - started < 5


def test_long_strings_are_read_in_linear_time() -> None:
    text = '"' + "x\\n" * 200_000 + '".'
    started = time.monotonic()
    assert parse_erlang_terms(text) == ["x\n" * 200_000]
    assert time.monotonic() - started < 5
