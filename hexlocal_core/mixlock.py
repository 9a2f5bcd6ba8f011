"""mix.lock: find it, read it, turn it into `LockEntry` values.

A mix.lock is an Elixir map literal written by Mix. It is parsed here by a small tokenizer
and recursive-descent parser for the literal subset Mix (and people editing by hand) use:
maps (`%{"k" => v}` and `%{"k": v}`), tuples, lists, keyword lists, atoms (`:a`,
`:"quoted-atom"`), strings with escapes, charlists, integers, floats, `true`/`false`/`nil`,
trailing commas and `#` comments. Nothing is evaluated: interpolation is refused.

The file is read again on every lookup on purpose: `mix deps.update` may change it while a
server runs, and a stale pin would answer with the docs of the wrong version.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from attrs import field, frozen

from hexlocal_core.errors import HexlocalError
from hexlocal_core.model import Atom

__all__ = [
    "Atom",
    "LockEntry",
    "MalformedLock",
    "find_lock",
    "parse_elixir_term",
    "parse_lock",
    "project_dirs",
    "read_lock",
]

MAX_LOCK_BYTES = 8 * 1024 * 1024  # real locks are tens of KB; anything this big is not one
MAX_DEPTH = 64  # nesting limit, so a hostile file cannot exhaust the Python stack
MAX_WALK_UP = 4  # umbrella children sit two levels below the root; allow some slack
VCS_MARKERS = (".git", ".hg", ".svn", ".jj")


class MalformedLock(HexlocalError):
    """A mix.lock could not be parsed; the message names the file, line and column.

    The resolver turns it into a Notice and falls through to the next source.
    """


@frozen
class LockEntry:
    """One dependency pinned by mix.lock.

    `name` is the lock key (the OTP application name). For Hex deps `package` is the name
    on Hex, which can differ (`"eini": {:hex, :eini_beam, ...}`).
    """

    name: str
    kind: str  # "hex" | "git" | "path", or another SCM's name as written
    version: str | None = None  # Hex deps only
    package: str | None = None  # the Hex package name (Hex deps only)
    repo: str | None = None  # Hex repository ("hexpm", "hexpm:org") or the git URL
    ref: str | None = None  # the locked git revision
    path: str | None = None  # path deps
    options: Mapping[str, Any] = field(factory=dict)  # git options, Hex checksums, managers
    deps: tuple[str, ...] = ()


# --------------------------------------------------------------------------- tokenizer

_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\r\n]+|\#[^\n]*)
  | (?P<punct>%\{|=>|[{}\[\],])
  | (?P<qkey>(?=["'])) # quoted keys and strings are scanned by hand (escapes)
  | (?P<atom>:(?:[A-Za-z_][A-Za-z0-9_@]*[?!]?(?:\.[A-Z][A-Za-z0-9_]*)*))
  | (?P<qatom>:(?=["']))
  | (?P<key>[A-Za-z_][A-Za-z0-9_@]*[?!]?:(?=[\s]|$))
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


@frozen
class _Token:
    kind: str  # punct | atom | key | string | charlist | number | ident | eof
    value: Any
    pos: int


class _Lexer:
    def __init__(self, text: str, source: str) -> None:
        self.text = text
        self.source = source
        self.pos = 0

    def error(self, message: str, pos: int) -> MalformedLock:
        line = self.text.count("\n", 0, pos) + 1
        col = pos - (self.text.rfind("\n", 0, pos) + 1) + 1
        return MalformedLock(f"{self.source}:{line}:{col}: {message}")

    def tokens(self) -> Iterator[_Token]:
        text, n = self.text, len(self.text)
        while self.pos < n:
            m = _TOKEN.match(text, self.pos)
            if m is None or m.lastgroup is None:
                raise self.error(f"unexpected character {text[self.pos]!r}", self.pos)
            start, kind = self.pos, m.lastgroup
            if kind == "ws":
                self.pos = m.end()
            elif kind in ("qkey", "qatom"):
                yield self._quoted(start, is_atom=kind == "qatom")
            else:
                self.pos = m.end()
                yield self._simple(kind, m.group(), start)
        yield _Token("eof", None, n)

    def _simple(self, kind: str, raw: str, start: int) -> _Token:
        if kind == "atom":
            return _Token("atom", raw[1:], start)
        if kind == "key":
            return _Token("key", raw[:-1], start)
        if kind == "number":
            return _Token("number", _number(raw), start)
        return _Token(kind, raw, start)

    def _quoted(self, start: int, *, is_atom: bool) -> _Token:
        self.pos = start + 1 if is_atom else start
        quote = self.text[self.pos]
        value = self._scan_quoted(quote)
        if is_atom:
            return _Token("atom", value, start)
        # `"name": value` is a keyword key; the colon must touch the closing quote.
        if self.text.startswith(":", self.pos) and self._space_or_end(self.pos + 1):
            self.pos += 1
            return _Token("key", value, start)
        return _Token("string" if quote == '"' else "charlist", value, start)

    def _space_or_end(self, pos: int) -> bool:
        return pos >= len(self.text) or self.text[pos].isspace()

    def _scan_quoted(self, quote: str) -> str:
        text, start = self.text, self.pos
        if text.startswith(quote * 3, start):
            raise self.error("heredocs are not supported in a lock file", start)
        out: list[str] = []
        i = start + 1
        while i < len(text):
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
            return chr(codepoint), m.end()
        return ch, i + 1  # Elixir keeps the character itself: \" \\ \# \'


def _number(raw: str) -> int | float:
    digits = raw.replace("_", "")
    if digits.lstrip("-").startswith("0x"):
        return int(digits, 16)
    if "." in digits:
        return float(digits)
    return int(digits)


# --------------------------------------------------------------------------- parser


class _Parser:
    def __init__(self, text: str, source: str) -> None:
        self.lexer = _Lexer(text, source)
        self.tokens = list(self.lexer.tokens())
        self.i = 0

    def peek(self) -> _Token:
        return self.tokens[self.i]

    def take(self) -> _Token:
        tok = self.tokens[self.i]
        if tok.kind != "eof":
            self.i += 1
        return tok

    def expect(self, value: str) -> None:
        tok = self.take()
        if tok.kind != "punct" or tok.value != value:
            raise self.error(f"expected {value!r}, found {_describe(tok)}", tok)

    def error(self, message: str, tok: _Token) -> MalformedLock:
        return self.lexer.error(message, tok.pos)

    def document(self) -> Any:
        value = self.value(0)
        tok = self.peek()
        if tok.kind != "eof":
            raise self.error(f"unexpected {_describe(tok)} after the end of the term", tok)
        return value

    def value(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise self.error("terms nested too deeply", self.peek())
        tok = self.take()
        if tok.kind == "punct":
            if tok.value == "%{":
                return self.map(depth)
            if tok.value == "{":
                return tuple(self.sequence("}", depth))
            if tok.value == "[":
                return self.sequence("]", depth)
        if tok.kind in ("string", "charlist", "number"):
            return tok.value
        if tok.kind == "atom":
            return _atom(tok.value)
        if tok.kind == "ident" and tok.value in _LITERAL_IDENTS:
            return _LITERAL_IDENTS[tok.value]
        raise self.error(f"unexpected {_describe(tok)}", tok)

    def sequence(self, close: str, depth: int) -> list[Any]:
        """Items of a list or tuple; trailing `key: value` pairs become a keyword list."""
        items: list[Any] = []
        keywords: list[tuple[Atom, Any]] = []
        while not self._at(close):
            if self.peek().kind == "key":
                key = self.take().value
                keywords.append((Atom(key), self.value(depth + 1)))
            elif keywords:
                raise self.error("keyword pairs must come last", self.peek())
            else:
                items.append(self.value(depth + 1))
            if not self._comma_or(close):
                break
        self.expect(close)
        if keywords and close == "]":
            items.extend(keywords)
        elif keywords:  # in a tuple, trailing pairs form one keyword-list element
            items.append(keywords)
        return items

    def map(self, depth: int) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        while not self._at("}"):
            tok = self.peek()
            if tok.kind == "key":
                # `"name": v` and `name: v` both make an atom key, as in Elixir.
                key: Any = Atom(self.take().value)
            else:
                key = self.value(depth + 1)
                self.expect("=>")
            if isinstance(key, list | dict):
                raise self.error("a list or map cannot be a key here", tok)
            out[key] = self.value(depth + 1)
            if not self._comma_or("}"):
                break
        self.expect("}")
        return out

    def _at(self, close: str) -> bool:
        tok = self.peek()
        return tok.kind == "punct" and tok.value == close

    def _comma_or(self, close: str) -> bool:
        """Consumes a comma if there is one; False when the closer must come next."""
        tok = self.peek()
        if tok.kind == "punct" and tok.value == ",":
            self.take()
            return True
        if self._at(close):
            return False
        raise self.error(f"expected ',' or {close!r}, found {_describe(tok)}", tok)


_LITERAL_IDENTS: dict[str, Any] = {"true": True, "false": False, "nil": None}


def _atom(name: str) -> Any:
    # `:true` is the same term as `true`.
    return _LITERAL_IDENTS[name] if name in _LITERAL_IDENTS else Atom(name)


def _describe(tok: _Token) -> str:
    if tok.kind == "eof":
        return "the end of the file"
    if tok.kind == "key":
        return f"keyword {tok.value!r}:"
    return f"{tok.kind} {tok.value!r}"


def parse_elixir_term(text: str, *, source: str = "<string>") -> Any:
    """Parses one Elixir literal term. Raises MalformedLock with a line and column."""
    return _Parser(text, source).document()


# --------------------------------------------------------------------------- entries


def parse_lock(text: str, *, source: str = "mix.lock") -> dict[str, LockEntry]:
    """Parses mix.lock text into entries keyed by application name."""
    term = parse_elixir_term(text, source=source)
    if not isinstance(term, dict):
        raise MalformedLock(f"{source}: expected a map %{{...}} at the top level")
    entries: dict[str, LockEntry] = {}
    for key, value in term.items():
        name = key.name if isinstance(key, Atom) else key
        if not isinstance(name, str):
            raise MalformedLock(f"{source}: a key is not a name: {key!r}")
        entries[name] = _entry(name, value, source)
    return entries


def _entry(name: str, value: Any, source: str) -> LockEntry:
    if not (isinstance(value, tuple) and value and isinstance(value[0], Atom)):
        raise MalformedLock(f"{source}: entry {name!r} is not a {{:scm, ...}} tuple")
    scm = value[0].name
    try:
        if scm == "hex":
            return _hex_entry(name, value)
        if scm == "git":
            return _git_entry(name, value)
        if scm == "path":
            return _path_entry(name, value)
    except (IndexError, TypeError, ValueError) as exc:
        raise MalformedLock(
            f"{source}: entry {name!r} is a malformed :{scm} tuple ({exc})"
        ) from exc
    # An SCM we do not know (a Mix plugin): keep what it says, resolution treats it like git.
    return LockEntry(name=name, kind=scm, options={"raw": _plain(value[1:])})


def _hex_entry(name: str, t: tuple[Any, ...]) -> LockEntry:
    # Mix wrote 3 to 8 elements over the years:
    # {:hex, pkg, vsn, inner_checksum, managers, deps, repo, outer_checksum}
    package, version = _need(t[1], Atom, "package").name, _need(t[2], str, "version")
    options: dict[str, Any] = {}
    if len(t) > 3:
        options["checksum"] = _need(t[3], str, "checksum")
    if len(t) > 4:
        options["managers"] = [
            _need(m, Atom, "manager").name for m in _need(t[4], list, "managers")
        ]
    deps = tuple(_dep_name(d) for d in _need(t[5], list, "deps")) if len(t) > 5 else ()
    repo = _need(t[6], str, "repo") if len(t) > 6 else "hexpm"
    if len(t) > 7:
        options["outer_checksum"] = _need(t[7], str, "outer checksum")
    return LockEntry(
        name=name,
        kind="hex",
        version=version,
        package=package,
        repo=repo,
        options=options,
        deps=deps,
    )


def _git_entry(name: str, t: tuple[Any, ...]) -> LockEntry:
    # {:git, url, revision, options}
    url, ref = _need(t[1], str, "url"), _need(t[2], str, "revision")
    options = _keywords(t[3]) if len(t) > 3 else {}
    return LockEntry(name=name, kind="git", repo=url, ref=ref, options=options)


def _path_entry(name: str, t: tuple[Any, ...]) -> LockEntry:
    options = _keywords(t[2]) if len(t) > 2 else {}
    return LockEntry(name=name, kind="path", path=_need(t[1], str, "path"), options=options)


def _need(value: Any, kind: type, what: str) -> Any:
    if not isinstance(value, kind):
        raise TypeError(f"{what} should be a {kind.__name__}, found {value!r}")
    return value


def _dep_name(dep: Any) -> str:
    if isinstance(dep, tuple) and dep and isinstance(dep[0], Atom):
        return dep[0].name
    raise ValueError(f"a dependency should be {{:name, requirement, opts}}, found {dep!r}")


def _keywords(value: Any) -> dict[str, Any]:
    pairs = _need(value, list, "options")
    out: dict[str, Any] = {}
    for pair in pairs:
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], Atom)):
            raise ValueError(f"options should be a keyword list, found {pair!r}")
        out[pair[0].name] = _plain(pair[1])
    return out


def _plain(value: Any) -> Any:
    """Atoms become ':name' text so options stay simple JSON-friendly values."""
    if isinstance(value, Atom):
        return str(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(_plain(k)): _plain(v) for k, v in value.items()}
    return value


# --------------------------------------------------------------------------- location


def project_dirs(project_root: Path) -> Iterator[Path]:
    """`project_root`, then its parents, stopping after a VCS root or MAX_WALK_UP levels.

    A VCS root bounds the walk so an unrelated mix.lock above the checkout (say in $HOME)
    is never taken for the project's.
    """
    here = project_root.resolve()
    for level, directory in enumerate((here, *here.parents)):
        yield directory
        if level >= MAX_WALK_UP or any((directory / m).exists() for m in VCS_MARKERS):
            return


def find_lock(project_root: Path) -> Path | None:
    """The mix.lock governing `project_root`: its own, else an umbrella root's above it.

    An umbrella child (`apps/x`) has mix.exs but no mix.lock; Mix points it at the root's
    (`lockfile: "../../mix.lock"`). `apps/` itself has no mix.exs, so the walk cannot stop
    at the first directory without one; instead an ancestor's lock only counts when that
    ancestor is itself a Mix project (has mix.exs).
    """
    for level, directory in enumerate(project_dirs(project_root)):
        lock = directory / "mix.lock"
        if lock.is_file() and (level == 0 or (directory / "mix.exs").is_file()):
            return lock
    return None


def read_lock(path: Path) -> dict[str, LockEntry]:
    """Reads and parses a lock file, fresh from disk. Raises MalformedLock."""
    try:
        size = path.stat().st_size
        if size > MAX_LOCK_BYTES:
            raise MalformedLock(f"{path}: {size} bytes is too large for a mix.lock")
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedLock(f"{path}: not UTF-8 text ({exc.reason})") from exc
    except OSError as exc:
        raise MalformedLock(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    return parse_lock(text, source=str(path))
