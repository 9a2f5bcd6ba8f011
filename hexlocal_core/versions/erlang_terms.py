"""Erlang terms as `file:consult/1` reads them: the `.app` files of OTP and of Mix builds.

OTP's own `.app` files are written by hand (comments, any spacing); Mix writes them with
`~p` (quoted atoms like `'Elixir.Jason'`, binaries and maps in `env`). The subset read
here covers both: atoms (bare and quoted), strings (adjacent ones joined), characters
(`$a`), integers (`16#ff` too), floats, tuples, lists (with a `|` tail), maps and
binaries. Nothing is evaluated; a variable or an operator is an error.

The input is untrusted, so every cost is bounded: a token budget, a nesting limit, and
numbers longer than MAX_NUMBER_CHARS refused before int() sees them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from hexlocal_core.model import Atom

__all__ = ["MAX_DEPTH", "MAX_TOKENS", "MalformedTerm", "parse_erlang_terms"]

MAX_DEPTH = 64  # a real .app nests 4 deep
MAX_TOKENS = 200_000  # kernel.app has ~600 tokens; Elixir's own ~1,000
MAX_NUMBER_CHARS = 40

_TOKEN = re.compile(
    r"""
    (?P<ws>(?:\s+|%[^\n]*)++)
  | (?P<punct><<|>>|=>|:=|\#\{|[{}\[\],|.:/])
  | (?P<float>-?\d+\.\d+(?:[eE][-+]?\d+)?)
  | (?P<radix>-?\d{1,2}\#[0-9A-Za-z]+)
  | (?P<int>-?\d+)
  | (?P<atom>[a-z][A-Za-z0-9_@]*)
  | (?P<qatom>'(?:[^'\\]++|\\.)*+')
  | (?P<string>"(?:[^"\\]++|\\.)*+")
  | (?P<char>\$(?:\\(?:\^.|[0-7]{1,3}|x\{[0-9A-Fa-f]+\}|x[0-9A-Fa-f]{2}|.)|.))
    """,
    re.VERBOSE | re.DOTALL,
)

_ESCAPES = {
    "b": "\b",
    "d": "\x7f",
    "e": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "s": " ",
    "t": "\t",
    "v": "\v",
}
_ESCAPE = re.compile(r"\\(\^.|[0-7]{1,3}|x\{[0-9A-Fa-f]{1,6}\}|x[0-9A-Fa-f]{2}|.)", re.DOTALL)


class MalformedTerm(ValueError):
    """The text is not a sequence of Erlang literal terms; the message says where."""


def _unescape(body: str) -> str:
    def one(m: re.Match[str]) -> str:
        esc = m.group(1)
        if esc.startswith("^"):
            return chr(ord(esc[1]) & 0x1F)
        if esc[0] in "01234567":
            return chr(int(esc, 8))
        if esc.startswith("x{"):
            return chr(min(int(esc[2:-1], 16), 0x10FFFF))
        if esc.startswith("x") and len(esc) == 3:
            return chr(int(esc[1:], 16))
        return _ESCAPES.get(esc, esc)

    return _ESCAPE.sub(one, body) if "\\" in body else body


Token = tuple[str, Any, int]


def _tokens(text: str, max_tokens: int) -> Iterator[Token]:
    pos, n, budget = 0, len(text), max_tokens
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None or m.lastgroup is None:
            raise MalformedTerm(f"unexpected {text[pos]!r} at offset {pos}")
        kind, raw, start, pos = m.lastgroup, m.group(), pos, m.end()
        if kind == "ws":
            continue
        budget -= 1
        if budget < 0:
            raise MalformedTerm(f"more than {max_tokens} tokens, far more than an .app file")
        if kind in ("int", "float", "radix") and len(raw) > MAX_NUMBER_CHARS:
            raise MalformedTerm(f"a number over {MAX_NUMBER_CHARS} characters at offset {start}")
        yield kind, _value(kind, raw), start
    yield "eof", None, n


def _value(kind: str, raw: str) -> Any:
    if kind == "int":
        return int(raw)
    if kind == "float":
        return float(raw)
    if kind == "radix":
        base, digits = raw.lstrip("-").split("#")
        try:
            value = int(digits, int(base))
        except ValueError:
            raise MalformedTerm(f"{raw!r} is not a number") from None
        return -value if raw.startswith("-") else value
    if kind == "atom":
        return Atom(raw)
    if kind == "qatom":
        return Atom(_unescape(raw[1:-1]))
    if kind == "string":
        return _unescape(raw[1:-1])
    if kind == "char":
        return ord(_unescape(raw[1:])[:1] or "\0")
    return raw  # punctuation: the text is the kind


class _Parser:
    def __init__(self, text: str, max_tokens: int) -> None:
        self._next = _tokens(text, max_tokens).__next__
        self.tok: Token = self._next()

    def take(self) -> Token:
        tok = self.tok
        if tok[0] != "eof":
            self.tok = self._next()
        return tok

    def expect(self, punct: str) -> None:
        tok = self.take()
        if tok[0] != "punct" or tok[1] != punct:
            raise MalformedTerm(f"expected {punct!r} at offset {tok[2]}, found {tok[1]!r}")

    def at(self, punct: str) -> bool:
        return self.tok[0] == "punct" and self.tok[1] == punct

    def terms(self) -> list[Any]:
        out: list[Any] = []
        while self.tok[0] != "eof":
            out.append(self.value(0))
            self.expect(".")
        return out

    def value(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise MalformedTerm(f"terms nested more than {MAX_DEPTH} deep")
        kind, value, start = self.take()
        if kind == "string":
            while self.tok[0] == "string":  # "ab" "cd" is one string
                value += self.take()[1]
            return value
        if kind != "punct":
            if kind == "eof":
                raise MalformedTerm("the text ends inside a term")
            return value
        if value == "{":
            return tuple(self.items("}", depth))
        if value == "[":
            return self.items("]", depth)
        if value == "#{":
            return self.map(depth)
        if value == "<<":
            return self.binary(depth)
        raise MalformedTerm(f"unexpected {value!r} at offset {start}")

    def items(self, close: str, depth: int) -> list[Any]:
        out: list[Any] = []
        while not self.at(close):
            out.append(self.value(depth + 1))
            if close == "]" and self.at("|"):  # an improper tail is kept as the last item
                self.take()
                out.append(self.value(depth + 1))
                break
            if not self.at(","):
                break
            self.take()
        self.expect(close)
        return out

    def map(self, depth: int) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        while not self.at("}"):
            key = self.value(depth + 1)
            if self.at(":="):
                self.take()
            else:
                self.expect("=>")
            try:
                out[key] = self.value(depth + 1)
            except TypeError:  # a list or map as a key: no Python dict holds it
                raise MalformedTerm("a list or map as a map key is not supported") from None
            if not self.at(","):
                break
            self.take()
        self.expect("}")
        return out

    def binary(self, depth: int) -> bytes:
        out = bytearray()
        while not self.at(">>"):
            segment = self.value(depth + 1)
            while self.at(":") or self.at("/"):  # sizes and types (`/utf8`) are skipped
                self.take()
                self.take()
            if isinstance(segment, str):
                out += segment.encode("utf-8")
            elif isinstance(segment, int):
                out.append(segment & 0xFF)
            else:
                raise MalformedTerm("a binary segment that is neither text nor a number")
            if not self.at(","):
                break
            self.take()
        self.expect(">>")
        return bytes(out)


def parse_erlang_terms(text: str, *, max_tokens: int = MAX_TOKENS) -> list[Any]:
    """The terms of a consult file (each ended by `.`). Atoms are `Atom`, strings `str`,
    binaries `bytes`, tuples `tuple`, lists `list`, maps `dict`. Raises MalformedTerm."""
    return _Parser(text, max_tokens).terms()
