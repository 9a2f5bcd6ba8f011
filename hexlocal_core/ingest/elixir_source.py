"""Calls found in a project's Elixir source: what compiled code cannot show.

A macro (`Ecto.Query.from/2`, `import Ecto.Query`) is expanded when the caller compiles,
so its beam calls what the macro expanded into, never the macro. This scan reads the
source text instead, line by line, with just enough of Elixir's lexical rules to be
right about the common forms:

* comments, strings, charlists, heredocs and sigils are blanked (line numbers kept);
* `alias A.B.C`, `alias A.B.C, as: D`, `alias A.B.{C, D}` and `alias __MODULE__.X`
  resolve the first segment of a later `C.fun(...)`;
* `import A.B` makes a bare `fun(...)` (or `fun x in y, ...` without parentheses) a call
  of A.B when A.B has such a function (the caller passes the names it may hold);
* the arity counts top-level commas, trailing keywords as one argument, plus one after
  `|>`.

Aliases and imports apply from their line to the end of the file: lexical scopes are
not tracked, which at worst attributes a call to a module it could also mean. The scan
is bounded: files, bytes per file and bytes in all are capped, and what was left out is
said (`SourceScan.truncated`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Set
from pathlib import Path

from attrs import evolve, field, frozen

from hexlocal_core.cancel import checkpoint
from hexlocal_core.untrusted import NotRegularFile, TooLarge, decode_text, read_regular

MAX_FILES = 20_000
MAX_FILE_BYTES = 1024 * 1024  # generated files past this are not hand-written calls
MAX_TOTAL_BYTES = 128 * 1024 * 1024

_MODULE = r"(?:[A-Z]\w*|__MODULE__)(?:\.[A-Z]\w*)*"
_DEFMODULE = re.compile(rf"^\s*defmodule\s+({_MODULE})\s+do\b")
_ALIAS_MULTI = re.compile(rf"^\s*alias\s+({_MODULE})\.\{{([^}}]*)\}}")
_ALIAS = re.compile(rf"^\s*alias\s+({_MODULE})(?:\s*,\s*as:\s*([A-Z]\w*))?\s*$")
_IMPORT = re.compile(rf"^\s*import\s+({_MODULE})\b")
_USE = re.compile(rf"^\s*(?:use|@behaviour|@behavior)\s+({_MODULE})\b")
_CAPTURE = re.compile(rf"&({_MODULE})\.([a-z_]\w*[?!]?)/(\d+)")
_DEF = re.compile(r"^\s*(?:def|defp|defmacro|defmacrop)\s+([a-z_]\w*[?!]?)")
_REMOTE = re.compile(rf"(?<![\w.:@%])({_MODULE})\.([a-z_]\w*[?!]?)\s*\(")
_BARE = re.compile(r"(?<![\w.:@&])([a-z_]\w*[?!]?)(\s*\(|\s+(?=[\w\"'\[{^%:@-]))")
_PIPE = re.compile(r"\|>\s*$")
_SIGIL = re.compile(r"~[a-zA-Z]([/|\"'(\[{<])")
_CLOSE = {"(": ")", "[": "]", "{": "}", "<": ">"}
_KEYWORD_ARG = re.compile(r"^\s*[a-z_]\w*[?!]?:\s")
_NOT_CALLS = frozenset(
    "def defp defmacro defmacrop defmodule do end fn when and or not in if unless case "
    "cond with for try receive quote unquote import alias require use raise".split()
)


@frozen
class SourceCall:
    module: str  # as the docs name it: "Ecto.Query"
    function: str
    arity: int
    file: str  # relative to the scanned root
    line: int
    caller: str | None  # the enclosing `def` name, arity unknown: "recent"
    in_module: str | None = None  # the enclosing `defmodule`


@frozen
class SourceScan:
    calls: tuple[SourceCall, ...]
    files: int
    truncated: str | None = None  # why the scan stopped before the end, when it did
    # module -> what it `use`s or declares `@behaviour` of: the behaviours it may implement
    behaviours: Mapping[str, tuple[str, ...]] = field(factory=dict)


def source_files(root: Path) -> Iterator[Path]:
    """`lib/**/*.ex` of the project and of each umbrella app (`apps/*/lib`)."""
    libs = [root / "lib", *sorted((root / "apps").glob("*/lib"))]
    for lib in libs:
        if lib.is_dir() and not lib.is_symlink():
            yield from sorted(p for p in lib.rglob("*.ex") if not p.is_symlink())


def scan_project(root: Path, imported_names: Mapping[str, Set[str]]) -> SourceScan:
    """Every remote call in the project's lib/ sources, and every bare call of a function
    `imported_names` lists for a module the file imports."""
    calls: list[SourceCall] = []
    behaviours: dict[str, tuple[str, ...]] = {}
    total = files = 0
    for path in source_files(root):
        checkpoint()
        if files >= MAX_FILES:
            truncated = f"more than {MAX_FILES} source files"
            return SourceScan(tuple(calls), files, truncated, behaviours)
        try:
            data = read_regular(path, MAX_FILE_BYTES)
        except (NotRegularFile, TooLarge, OSError):
            continue
        total += len(data)
        if total > MAX_TOTAL_BYTES:
            truncated = f"more than {MAX_TOTAL_BYTES} bytes of source"
            return SourceScan(tuple(calls), files, truncated, behaviours)
        files += 1
        relative = path.relative_to(root).as_posix()
        calls.extend(scan_source(decode_text(data), relative, imported_names, behaviours))
    return SourceScan(tuple(calls), files, None, behaviours)


def scan_source(
    text: str,
    file: str,
    imported_names: Mapping[str, Set[str]],
    behaviours: dict[str, tuple[str, ...]] | None = None,
) -> list[SourceCall]:
    """The calls of one file (see the module doc); `behaviours` collects each module's
    `use X` and `@behaviour X`."""
    behaviours = {} if behaviours is None else behaviours
    lines = blank_literals(text).split("\n")
    aliases: dict[str, str] = {}
    imports: list[str] = []
    module: str | None = None
    caller: str | None = None
    out: list[SourceCall] = []
    for number, line in enumerate(lines, start=1):
        if found := _DEFMODULE.match(line):
            module = _resolve(found.group(1), aliases, module)
            aliases.setdefault(module.split(".")[-1], module)
            continue
        if module and (found := _USE.match(line)):
            used = _resolve(found.group(1), aliases, module)
            behaviours[module] = (*behaviours.get(module, ()), used)
            continue
        if _declares(line, aliases, imports, module):
            continue
        if found := _DEF.match(line):
            caller = found.group(1)
        rest = lines[number:]
        for match in _REMOTE.finditer(line):
            target = _resolve(match.group(1), aliases, module)
            arity = _arity(line, match.end() - 1, rest, parens=True)
            arity += _piped(line, match.start(), lines, number)
            out.append(SourceCall(target, match.group(2), arity, file, number, caller, module))
        for match in _CAPTURE.finditer(line):
            target = _resolve(match.group(1), aliases, module)
            out.append(
                SourceCall(
                    target, match.group(2), int(match.group(3)), file, number, caller, module
                )
            )
        if imports and not _DEF.match(line):
            found_calls = _bare_calls(
                line, number, rest, lines, imports, imported_names, file, caller
            )
            out.extend(evolve(c, in_module=module) for c in found_calls)
    return out


def _declares(line: str, aliases: dict[str, str], imports: list[str], module: str | None) -> bool:
    if found := _ALIAS_MULTI.match(line):
        base = _resolve(found.group(1), aliases, module)
        for part in found.group(2).split(","):
            name = part.strip()
            if re.fullmatch(r"[A-Z]\w*(?:\.[A-Z]\w*)*", name):
                aliases[name.split(".")[-1]] = f"{base}.{name}"
        return True
    if found := _ALIAS.match(line):
        full = _resolve(found.group(1), aliases, module)
        aliases[found.group(2) or full.split(".")[-1]] = full
        return True
    if found := _IMPORT.match(line):
        imports.append(_resolve(found.group(1), aliases, module))
        return True
    return False


def _bare_calls(
    line: str,
    number: int,
    rest: list[str],
    lines: list[str],
    imports: list[str],
    imported_names: Mapping[str, Set[str]],
    file: str,
    caller: str | None,
) -> Iterator[SourceCall]:
    for match in _BARE.finditer(line):
        name = match.group(1)
        if name in _NOT_CALLS:
            continue
        owner = next((m for m in reversed(imports) if name in imported_names.get(m, ())), None)
        if owner is None:
            continue
        parens = match.group(2).lstrip().startswith("(")
        start = match.end() - 1 if parens else match.end()
        arity = _arity(line, start, rest, parens=parens) + _piped(
            line, match.start(), lines, number
        )
        yield SourceCall(owner, name, arity, file, number, caller)


def _resolve(name: str, aliases: Mapping[str, str], module: str | None) -> str:
    head, _, tail = name.partition(".")
    if head == "__MODULE__":
        base = module or head
    else:
        base = aliases.get(head, head)
    return f"{base}.{tail}" if tail else base


def _piped(line: str, start: int, lines: list[str], number: int) -> int:
    """1 when the call is the right side of `|>` (on this line or ending the last)."""
    before = line[:start].rstrip()
    if before.endswith("|>"):
        return 1
    return int(not before and number >= 2 and bool(_PIPE.search(lines[number - 2])))


def _arity(line: str, start: int, rest: list[str], *, parens: bool) -> int:
    """Arguments from `start` (the open parenthesis, or the first argument), counting
    top-level commas; trailing `key: value` pairs are one keyword-list argument."""
    text = line[start + 1 :] if parens else line[start:]
    depth = 0
    args: list[str] = []
    current: list[str] = []
    for chunk in _continued(text, rest, parens):
        for char in chunk:
            if char in "([{":
                depth += 1
            elif char in ")]}":
                if depth == 0:
                    return _count(args, current)
                depth -= 1
            elif char == "," and depth == 0:
                args.append("".join(current))
                current = []
                continue
            current.append(char)
        if not parens:
            break
    return _count(args, current)


def _continued(text: str, rest: list[str], parens: bool) -> Iterator[str]:
    yield text
    if parens:
        for line in rest[:200]:  # a call spanning 200 lines is not one to count
            yield "\n" + line


def _count(args: list[str], current: list[str]) -> int:
    parts = [a for a in [*args, "".join(current)] if a.strip()]
    if not parts:
        return 0
    first_keyword = next((i for i, a in enumerate(parts) if _KEYWORD_ARG.match(a)), None)
    if first_keyword is None:
        return len(parts)
    return first_keyword + 1


def blank_literals(text: str) -> str:
    """`text` with comments, strings, charlists, heredocs and sigil bodies as spaces, and
    every newline kept, so positions and line numbers still match the file."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == "#":
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(" " * (end - i))
            i = end
        elif text.startswith(('"""', "'''"), i):
            end = text.find(text[i : i + 3], i + 3)
            end = n if end < 0 else end + 3
            out.append(_spaces(text[i:end]))
            i = end
        elif char in "\"'" and not (i and text[i - 1] == "?"):
            end = _closing(text, i + 1, char)
            out.append(char + _spaces(text[i + 1 : end - 1]) + char)
            i = end
        elif char == "~" and (sigil := _SIGIL.match(text, i)):
            opener = sigil.group(1)
            end = _closing(text, sigil.end(), _CLOSE.get(opener, opener))
            out.append(_spaces(text[i:end]))
            i = end
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _closing(text: str, start: int, close: str) -> int:
    """The index after the unescaped `close` from `start` (the text's end if none)."""
    i = start
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == close:
            return i + 1
        i += 1
    return len(text)


def _spaces(text: str) -> str:
    return "".join("\n" if c == "\n" else " " for c in text)
