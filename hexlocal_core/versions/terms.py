"""Elixir literal terms, as written in mix.lock: a tokenizer and a recursive-descent parser.

The subset Mix (and people editing by hand) use: maps (`%{"k" => v}` and `%{"k": v}`),
tuples, lists, keyword lists, atoms (`:a`, `:"quoted-atom"`), strings with escapes,
charlists, integers, floats, `true`/`false`/`nil`, trailing commas and `#` comments.
Nothing is evaluated: interpolation is refused.

The input is untrusted, so every cost is bounded: the tokenizer streams (memory follows
the result, not the token count), strings are scanned a run at a time, nesting stops at
MAX_DEPTH (the Python stack is never at risk), and a numeric literal longer than
MAX_NUMBER_CHARS stays text (`BigNumber`) instead of reaching int(), which refuses more
than 4300 digits with a ValueError and is quadratic below that.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from attrs import frozen

from hexlocal_core.errors import HexlocalError
from hexlocal_core.model import Atom
from hexlocal_core.untrusted import shown

__all__ = [
    "MAX_DEPTH",
    "MAX_TOKENS",
    "BigNumber",
    "LockTooLarge",
    "MalformedLock",
    "parse_elixir_term",
]

MAX_DEPTH = 64  # real locks nest 5 deep; the limit only keeps a hostile file off the stack
MAX_NUMBER_CHARS = 40  # longer than any 128-bit integer; mix.lock holds no numbers at all
# Real locks hold one token per 6-7 bytes (livebook: 3565 in 23 KB), so a 2 MiB lock has
# about 320k; a file of `1,1,1,...` has one per byte and would cost 4.7 s at 2 MiB.
MAX_TOKENS = 400_000


class MalformedLock(HexlocalError):
    """A mix.lock could not be parsed; the message names the file, line and column.

    The resolver turns it into a Notice and falls through to the next source.
    """


class LockTooLarge(MalformedLock):
    """A lock larger than any real one (bytes or tokens); ignored, at most partly read."""


@frozen
class BigNumber:
    """A numeric literal too long to convert, kept as its text (see the module docstring).

    Wherever a lock entry needs a string or an atom, a BigNumber is a malformed value, so
    only the entry holding it is affected.
    """

    text: str

    def __str__(self) -> str:
        return self.text


# --------------------------------------------------------------------------- tokenizer

_TOKEN = re.compile(
    r"""
    (?P<ws>(?:[ \t\r\n]+|\#[^\n]*)++)  # possessive (*+, ++): no backtracking state kept
  | (?P<punct>%\{|=>|[{}\[\],])
  | (?P<int>\d{1,40}(?![\d_.xA-Za-z]))  # the common number: no conversion beyond int()
  | (?P<string>"(?!"")(?:[^"\\\#]++|\#(?!\{))*+")  # fast path: no escape, no #{
  | (?P<charlist>'(?!'')(?:[^'\\\#]++|\#(?!\{))*+')
  | (?P<quoted>(?=["']))  # escapes, interpolation, heredocs: scanned by hand
  | (?P<atom>:[A-Za-z_][A-Za-z0-9_@]*[?!]?(?:\.[A-Z][A-Za-z0-9_]*)*+)
  | (?P<fastqatom>:"(?!"")(?:[^"\\\#]++|\#(?!\{))*+")
  | (?P<qatom>:(?=["']))
  | (?P<key>[A-Za-z_][A-Za-z0-9_@]*[?!]?:(?=\s|$))
  | (?P<number>-?(?:0x[0-9A-Fa-f_]+|\d[\d_]*(?:\.\d[\d_]*(?:[eE][-+]?\d+)?)?))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*[?!]?)
    """,
    re.VERBOSE,
)

_SIMPLE_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "d": "\x7f",
    "e": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "s": " ",
    "t": "\t",
    "v": "\v",
    "0": "\0",
}
_HEX_ESCAPE = re.compile(
    r"x\{([0-9A-Fa-f]{1,6})\}|x([0-9A-Fa-f]{1,2})|u\{([0-9A-Fa-f]{1,6})\}|u([0-9A-Fa-f]{4})"
)
_PLAIN_RUN = {
    '"': re.compile(r'(?:[^"\\#]++|#(?!\{))++'),
    "'": re.compile(r"(?:[^'\\#]++|#(?!\{))++"),
}

# A token is (kind, value, position). Punctuation uses its own text as the kind.
Token = tuple[str, Any, int]
_EOF = "eof"


class _Lexer:
    def __init__(self, text: str, source: str, max_tokens: int = MAX_TOKENS) -> None:
        self.text = text
        self.source = source
        self.max_tokens = max_tokens
        self.pos = 0

    def error(self, message: str, pos: int) -> MalformedLock:
        line = self.text.count("\n", 0, pos) + 1
        col = pos - (self.text.rfind("\n", 0, pos) + 1) + 1
        return MalformedLock(f"{self.source}:{line}:{col}: {message}")

    def tokens(self) -> Iterator[Token]:
        text, n, match = self.text, len(self.text), _TOKEN.match
        budget = self.max_tokens
        while self.pos < n:
            start = self.pos
            m = match(text, start)
            if m is None or m.lastgroup is None:
                raise self.error(f"unexpected character {text[start]!r}", start)
            kind, end = m.lastgroup, m.end()
            if kind == "ws":
                self.pos = end
                continue
            budget -= 1
            if budget < 0:
                raise LockTooLarge(
                    f"{self.source}: more than {self.max_tokens} tokens, far more than any "
                    "mix.lock holds (real ones: one per 7 bytes); ignoring it"
                )
            if kind == "punct":
                self.pos = end
                yield (m.group(), None, start)
            elif kind == "int":
                self.pos = end
                yield ("number", int(m.group()), start)
            elif kind == "fastqatom":
                self.pos = end
                yield ("atom", text[start + 2 : end - 1], start)
            elif kind in ("string", "charlist"):
                self.pos = end
                yield self._string_or_key(kind, text[start + 1 : end - 1], start)
            elif kind in ("quoted", "qatom"):
                yield self._quoted(start, is_atom=kind == "qatom")
            else:
                self.pos = end
                yield self._simple(kind, m.group(), start)
        yield (_EOF, None, n)

    def _simple(self, kind: str, raw: str, start: int) -> Token:
        if kind == "atom":
            return ("atom", raw[1:], start)
        if kind == "key":
            return ("key", raw[:-1], start)
        if kind == "number":
            return ("number", self._number(raw, start), start)
        return (kind, raw, start)

    def _number(self, raw: str, start: int) -> int | float | BigNumber:
        if len(raw) > MAX_NUMBER_CHARS:
            return BigNumber(raw)
        digits = raw.replace("_", "")
        try:
            if digits.lstrip("-").startswith("0x"):
                return int(digits, 16)
            return float(digits) if "." in digits else int(digits)
        except ValueError:  # `0x_` has no digit left once the separators go
            raise self.error(f"malformed number {shown(raw)}", start) from None

    def _string_or_key(self, kind: str, value: str, start: int) -> Token:
        # `"name": value` is a keyword key; the colon must touch the closing quote.
        if self.text.startswith(":", self.pos):
            if self._space_or_end(self.pos + 1):
                self.pos += 1
                return ("key", value, start)
        return (kind, value, start)

    def _quoted(self, start: int, *, is_atom: bool) -> Token:
        self.pos = start + 1 if is_atom else start
        quote = self.text[self.pos]
        value = self._scan_quoted(quote)
        if is_atom:
            return ("atom", value, start)
        return self._string_or_key("string" if quote == '"' else "charlist", value, start)

    def _space_or_end(self, pos: int) -> bool:
        return pos >= len(self.text) or self.text[pos].isspace()

    def _scan_quoted(self, quote: str) -> str:
        text, start = self.text, self.pos
        if text.startswith(quote * 3, start):
            raise self.error("heredocs are not supported in a lock file", start)
        plain = _PLAIN_RUN[quote].match
        out: list[str] = []
        i, n = start + 1, len(text)
        while i < n:
            run = plain(text, i)
            if run is not None:  # a run without quote, escape or '#', copied at once
                out.append(run.group())
                i = run.end()
                continue
            ch = text[i]
            if ch == quote:
                self.pos = i + 1
                return "".join(out)
            if ch == "#" and text.startswith("#{", i):
                raise self.error("string interpolation is not a literal", i)
            if ch == "\\":
                decoded, i = self._escape(i + 1)
                out.append(decoded)
                continue
            out.append(ch)
            i += 1
        raise self.error("unterminated string", start)

    def _escape(self, i: int) -> tuple[str, int]:
        """Decodes the escape whose letter is at `i`; returns the text and the next index."""
        text = self.text
        if i >= len(text):
            raise self.error("unterminated escape", i - 1)
        ch = text[i]
        if ch == "\n":  # a backslash before a newline continues the line
            return "", i + 1
        if ch in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[ch], i + 1
        if ch in "xu":
            m = _HEX_ESCAPE.match(text, i)
            if m is None:
                raise self.error(f"malformed \\{ch} escape", i - 1)
            digits = next(g for g in m.groups() if g is not None)
            codepoint = int(digits, 16)
            if codepoint > 0x10FFFF:
                raise self.error("escape beyond the last Unicode code point", i - 1)
            if 0xD800 <= codepoint <= 0xDFFF:
                # Elixir refuses these too; a lone surrogate breaks every UTF-8 writer later.
                raise self.error("escape of a UTF-16 surrogate, which is not a character", i - 1)
            return chr(codepoint), m.end()
        return ch, i + 1  # Elixir keeps the character itself: \" \\ \# \'


# --------------------------------------------------------------------------- parser

_LITERAL_IDENTS: dict[str, Any] = {"true": True, "false": False, "nil": None}
_SCALARS = frozenset({"string", "charlist", "number"})


class _Parser:
    def __init__(self, text: str, source: str, max_tokens: int) -> None:
        self.lexer = _Lexer(text, source, max_tokens)
        self._next: Callable[[], Token] = self.lexer.tokens().__next__
        self.tok: Token = self._next()

    def take(self) -> Token:
        tok = self.tok
        if tok[0] != _EOF:
            self.tok = self._next()
        return tok

    def expect(self, kind: str) -> None:
        tok = self.take()
        if tok[0] != kind:
            raise self.error(f"expected {kind!r}, found {_describe(tok)}", tok)

    def error(self, message: str, tok: Token) -> MalformedLock:
        return self.lexer.error(message, tok[2])

    def document(self) -> Any:
        value = self.value(0)
        if self.tok[0] != _EOF:
            raise self.error(
                f"unexpected {_describe(self.tok)} after the end of the term", self.tok
            )
        return value

    def value(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise self.error("terms nested too deeply", self.tok)
        tok = self.take()
        kind = tok[0]
        if kind in ("string", "charlist", "number"):
            return tok[1]
        if kind == "atom":
            return _atom(tok[1])
        if kind == "%{":
            return self.map(depth)
        if kind == "{":
            return tuple(self.sequence("}", depth))
        if kind == "[":
            return self.sequence("]", depth)
        if kind == "ident" and tok[1] in _LITERAL_IDENTS:
            return _LITERAL_IDENTS[tok[1]]
        raise self.error(f"unexpected {_describe(tok)}", tok)

    def sequence(self, close: str, depth: int) -> list[Any]:
        """Items of a list or tuple; trailing `key: value` pairs become a keyword list."""
        items: list[Any] = []
        keywords: list[tuple[Atom, Any]] = []
        advance = self._next  # never at eof here: the current token is an item or a comma
        while self.tok[0] != close:
            kind = self.tok[0]
            if kind == "key":
                key = self.take()[1]
                keywords.append((Atom(key), self.value(depth + 1)))
            elif keywords:
                raise self.error("keyword pairs must come last", self.tok)
            elif kind in _SCALARS:  # the hot path of a long list: no call per item
                items.append(self.tok[1])
                self.tok = advance()
            else:
                items.append(self.value(depth + 1))
            if self.tok[0] == ",":
                self.tok = advance()
            elif not self._comma_or(close):
                break
        self.expect(close)
        if keywords and close == "]":
            items.extend(keywords)
        elif keywords:  # in a tuple, trailing pairs form one keyword-list element
            items.append(keywords)
        return items

    def map(self, depth: int) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        while self.tok[0] != "}":
            tok = self.tok
            if tok[0] == "key":
                # `"name": v` and `name: v` both make an atom key, as in Elixir.
                key: Any = Atom(self.take()[1])
            else:
                key = self.value(depth + 1)
                self.expect("=>")
            if not _hashable(key):
                raise self.error("a list or map cannot be a key here", tok)
            out[key] = self.value(depth + 1)
            if not self._comma_or("}"):
                break
        self.expect("}")
        return out

    def _comma_or(self, close: str) -> bool:
        """Consumes a comma if there is one; False when the closer must come next."""
        kind = self.tok[0]
        if kind == ",":
            self.take()
            return True
        if kind == close:
            return False
        raise self.error(f"expected ',' or {close!r}, found {_describe(self.tok)}", self.tok)


def _hashable(key: Any) -> bool:
    # A tuple holding a list is no more a usable Python key than the list itself.
    try:
        hash(key)
    except TypeError:
        return False
    return True


def _atom(name: str) -> Any:
    # `:true` is the same term as `true`.
    return _LITERAL_IDENTS[name] if name in _LITERAL_IDENTS else Atom(name)


def _describe(tok: Token) -> str:
    kind, value = tok[0], tok[1]
    if kind == _EOF:
        return "the end of the file"
    if kind == "key":
        return f"keyword {shown(value)}:"
    if value is None:
        return f"punct {kind!r}"
    return f"{kind} {shown(value)}"


def parse_elixir_term(text: str, *, source: str = "<string>", max_tokens: int = MAX_TOKENS) -> Any:
    """Parses one Elixir literal term. Raises MalformedLock with a line and column.

    Raises LockTooLarge past `max_tokens` tokens: the parse costs about 2 µs a token.
    """
    return _Parser(text, source, max_tokens).document()
