"""What shape a query has, and what an error-message paste should be searched for.

Agents send three shapes of query, and they fail differently:

* `identifier`: a pasted symbol (`Plug.Conn.put_resp_header/3`, `c:handle_begin/2`,
  `:queue_target`, `mix ecto.gen.migration`, `--log-migrations-sql`): the words are the
  docs' own words, so the keyword arm is the strong one.
* `error`: a pasted error message (`** (Mod.Error) message`, a log line, a stack trace).
  Most of its characters are noise to a search: PIDs, refs, paths, line numbers,
  timestamps, the user's own struct dumps. The exception module names *what* went wrong,
  but the item that explains the cause is usually the function that raised
  (`no function clause matching in Plug.Conn.put_resp_header/3`) or the option the
  message names; searching the raw paste lets the exception module's page win.
* `prose`: a question in the user's own words (concept, how-do-I).

A function is named with its arity (`Mod.fun/2`, `:ets.lookup/2`, `ets:lookup/2`).
`parse_error(calls=True)` also reads a call with its arguments, the way Elixir prints the
frame that raised and agents paste what they ran (`:erlang.whereis("x")`,
`ets:lookup(foo, 1)`, a stack entry `{ets,lookup,[foo,1],[]}`): the call is counted
(`count_arguments`) and named as ExDoc titles the item, `erlang.whereis/1`. Search leaves it
off (`SearchTuning.error_calls`). On the spent sets (rrf, int8, recall@5 / MRR@10) it gave
OTP errors (`eval/otp.jsonl`, 16) .750 / .445 -> .812 / .447, Hex errors (`confirm_errors`,
71) .845 / .704 -> .845 / .707, held-out errors (77) unchanged; judged once on the held-out
`eval/otp_second.jsonl` by a rule written first, its errors went .947 / .623 -> .947 / .614
(one paste down, none up), so it was not kept (docs/lab/otp-retrieval.md). Also not kept:
the functions ahead of the message in the keyword words (terms are cut at 40; held-out errors
.704 -> .674) and the first call's item put first (OTP recall .812 -> .688).

Everything here is pure (text in, values out) and table-tested.
"""

from __future__ import annotations

import re
from enum import StrEnum

from attrs import frozen

from hexlocal_core.search.exact import parse_identifier


class Shape(StrEnum):
    IDENTIFIER = "identifier"
    ERROR = "error"
    PROSE = "prose"


@frozen
class ErrorQuery:
    """An error paste taken apart: what to search for instead of the raw text."""

    exceptions: tuple[str, ...]  # `DBConnection.ConnectionError`, in order of appearance
    message: str  # the cleaned message text: noise removed, exception modules kept out
    functions: tuple[str, ...]  # `Mod.fun/2`, `ets.new/2` the message, calls, frames name

    @property
    def text(self) -> str:
        """What the arms read: the exception, then the message and the functions."""
        return " ".join([*self.exceptions, self.message, *self.functions]).strip()


# `** (Mod.Error) message`: how Elixir prints an uncaught exception (also inside log lines).
_EXCEPTION = re.compile(r"\*\*\s*\((?P<mod>(?:[A-Z]\w*\.)*[A-Z]\w*)\)")
_ERROR_HINTS = re.compile(
    r"\*\*\s*\(|#PID<|#Reference<|\[(?:error|warning|warn)\]|^\s*(?:error|warning):"
    r"|\b\w+\.exs?:\d+|\(stdlib [\d.]+\)|\(elixir [\d.]+\)|\bstacktrace\b",
    re.IGNORECASE | re.MULTILINE,
)
# Noise: values that differ on every run and never appear in docs the way they are printed.
_NOISE = (
    re.compile(r"#(?:PID|Reference|Port|Function)<[^>]*>"),  # #PID<0.123.0>
    re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?"),
    re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:\.\d+)?\b"),  # 09:41:54.123
    re.compile(r"\[(?:debug|info|notice|warning|warn|error|critical|alert|emergency)\]", re.I),
    re.compile(r"\((?:[a-z_]\w*) [\d.]+(?:-[\w.]+)?\)"),  # (plug 1.19.2) in stack frames
    # paths; only from a path's first character, or a long slashed word is quadratic
    re.compile(r"(?<![\w.\-~/])(?:[\w.\-~]*/)+[\w.\-]+\.(?:exs?|erl|hrl|eex|heex|leex|c|h):?\d*:?"),
    re.compile(r"\b[\w\-]+\.(?:exs?|erl):\d+:?"),  # foo.ex:12:
    re.compile(r"\b0x[0-9a-fA-F]+\b|\b[0-9a-f]{12,}\b"),  # hex ids, hashes
    re.compile(r"(?<![\w./])-?\d+(?:\.\d+)?(?=ms\b|s\b|\b)"),  # numbers (units stay words)
)
# `Mod.fun/2` anywhere in the text, and `fun/2` after "in" / "function" in a message.
_MFA = re.compile(r"(?<![\w.])(?:[A-Z]\w*\.)+[a-z_]\w*[?!]?/\d+")
# Erlang calls, as Erlang (`ets:lookup/2`) or Elixir (`:ets.lookup/2`) prints them.
_ERLANG_MFA = re.compile(
    r"(?<![\w.]):?[a-z]\w*:[a-z_]\w*/\d+|(?<![\w.]):[a-z]\w*\.[a-z_]\w*[?!]?/\d+"
)
_STACK_FRAME = re.compile(r"^\s*(?:\([a-z_]\w* [\d.]+[^)]*\)\s+)?\S+\.(?:exs?|erl):\d+:", re.M)
_SPACES = re.compile(r"[ \t]+")


def shape_of(query: str) -> Shape:
    """identifier | error | prose (see the module docstring)."""
    text = query.strip()
    if _ERROR_HINTS.search(text):
        return Shape.ERROR
    if _looks_like_identifier(text):
        return Shape.IDENTIFIER
    return Shape.PROSE


_OPTION = re.compile(r"^:?[a-z_][\w]*[?!]?:?$")  # :queue_target, stale_error_field
_FLAG = re.compile(r"^--?[a-z][\w-]*(?:[ =]\S+)?$")  # --log-migrations-sql
_MIX_TASK = re.compile(r"^mix\s+[a-z_][\w.]*(?:\s+--?[\w-]+)*$")  # mix ecto.gen.migration


def _looks_like_identifier(text: str) -> bool:
    if parse_identifier(text) is not None:
        return True
    if _MIX_TASK.match(text) or _FLAG.match(text):
        return True
    if " " in text:
        return False
    # A lone word is an identifier only if it is shaped like one (snake_case, :atom,
    # erlang:call/1, a dotted name); `authentication` is a one-word question.
    return bool(
        (_OPTION.match(text) and ("_" in text or text.startswith(":")))
        or _ERLANG_MFA.fullmatch(text)
        or re.fullmatch(r"[\w.:/?!]+", text)
        and re.search(r"[._:/]", text)
    )


# "How should I use X": the question a package's usage rules (written for coding agents)
# answer better than any one function's doc.
_USAGE = re.compile(
    r"\bhow (?:should|do|can|would|to) (?:i |we |you )?(?:best |properly |correctly )?use\b"
    r"|\busage[- ]rules?\b|\bbest[- ]practices?\b|\bidiomatic(?:ally)?\b"
    r"|\brecommended (?:way|usage|approach|patterns?)\b|\bconventions?\b"
    r"|\bcommon (?:mistakes|pitfalls)\b|\bpitfalls\b|\bdos and don.?ts\b"
    r"|\b(?:should|must) (?:i|we) (?:avoid|not)\b|\bright way to use\b",
    re.IGNORECASE,
)


def asks_how_to_use(query: str) -> bool:
    """Whether a prose query asks how a package is meant to be used (its usage rules)."""
    return shape_of(query) is Shape.PROSE and _USAGE.search(query) is not None


def parse_error(query: str, *, calls: bool = False) -> ErrorQuery:
    """The parts of an error paste worth searching for (call it on ERROR-shaped queries).

    `calls` also reads the calls the paste prints with their arguments
    (`:erlang.whereis("x")` -> `erlang.whereis/1`) and its stack entries, in ExDoc's
    spelling; off in search (`SearchTuning.error_calls`): judged on a held-out OTP set, it
    moved error MRR@10 .623 -> .614 (docs/lab/otp-retrieval.md).
    """
    exceptions = tuple(dict.fromkeys(m.group("mod") for m in _EXCEPTION.finditer(query)))
    functions = _raising_functions(query) if calls else _named_functions(query)
    text = _EXCEPTION.sub(" ", query)
    for pattern in _NOISE:
        text = pattern.sub(" ", text)
    message = _SPACES.sub(" ", " ".join(line.strip() for line in text.splitlines() if line.strip()))
    return ErrorQuery(exceptions, message.strip(), functions)


def _named_functions(query: str) -> tuple[str, ...]:
    """Functions the paste names with an arity, in order, deduplicated: the message's, then
    every stack frame's (a frame's app and path are stripped, its function stays)."""
    body = _STACK_FRAME.sub(" ", query)
    named = [m.group(0) for m in _MFA.finditer(body)]
    named.extend(m.group(0).lstrip(":") for m in _ERLANG_MFA.finditer(body))
    return tuple(dict.fromkeys(named))


def _raising_functions(query: str) -> tuple[str, ...]:
    """Functions named anywhere in the paste, in the order they appear (so the message's
    come before the stack frames'), deduplicated. A frame's app and path are stripped, its
    function stays; a call (`:ets.lookup(:cache, key)`) counts as `ets.lookup/2`."""
    body = _STACK_FRAME.sub(" ", query)
    found = [(m.start(), m.group(0)) for m in _MFA.finditer(body)]
    found.extend((m.start(), _exdoc_spelling(m.group(0))) for m in _ERLANG_MFA.finditer(body))
    found.extend(_calls(body))
    found.extend(_stack_entries(body))
    found.sort(key=lambda hit: hit[0])  # stable: one position never holds two names
    return tuple(dict.fromkeys(name for _, name in found))


def _exdoc_spelling(mfa: str) -> str:
    """`:ets.lookup/2` and `ets:lookup/2` -> `ets.lookup/2`, the title ExDoc gives it."""
    return mfa.lstrip(":").replace(":", ".", 1)


# A call: a qualified name with `(` right after it, as Elixir prints the frame that raised
# (`:erlang.whereis("x")`, `String.to_existing_atom("nope")`) and as Erlang does
# (`ets:lookup(foo, 1)`). `Mod.fun` without the parenthesis is prose or a map key.
_CALL = re.compile(
    r"(?<![\w.:@])(?::(?P<erlang>[a-z]\w*)\.|(?P<erlang_syntax>[a-z]\w*):"
    r"|(?P<elixir>(?:[A-Z]\w*\.)*[A-Z]\w*)\.)(?P<fun>[a-z_]\w*[?!]?)\("
)
# An entry of a printed stack trace, `{Mod, Fun, Args | Arity, Location}`, in Erlang's
# spelling (`{ets,lookup,[foo,1],[]}`) or Elixir's (`{:ets, :lookup, 2, [file: ...]}`).
# The location list after it is required: a bare 3-tuple is too often plain data.
_STACK_ENTRY = re.compile(
    r"\{\s*:?(?P<mod>[a-z]\w*|[A-Z]\w*(?:\.[A-Z]\w*)*)\s*,\s*:?(?P<fun>[a-z_]\w*[?!]?)\s*,\s*"
    r"(?:(?P<arity>\d{1,3})(?=\s*,\s*\[)|(?=\[))"
)
_LOCATION_FOLLOWS = re.compile(r"\s*,\s*\[")


def _calls(body: str) -> list[tuple[int, str]]:
    """Every call in `body` whose arguments can be counted, as (position, `mod.fun/N`).

    The search resumes where the argument scan stopped, so no character is scanned twice
    and a paste of nested or unclosed calls stays linear; a call's own arguments are not
    searched for more calls (the outer call is the one the paste is about)."""
    found: list[tuple[int, str]] = []
    position = 0
    while (match := _CALL.search(body, position)) is not None:
        count, position = count_arguments(body, match.end() - 1)
        if count is None:
            continue
        if _piped_into(body, match.start()):
            count += 1  # `x |> IO.inspect()` is IO.inspect/1
        module = match.group("erlang") or match.group("erlang_syntax") or match.group("elixir")
        found.append((match.start(), f"{module}.{match.group('fun')}/{count}"))
    return found


def _piped_into(body: str, start: int) -> bool:
    """Whether the call at `start` follows `|>` (its first argument is the piped value)."""
    return body[max(0, start - 80) : start].rstrip().endswith("|>")


def _stack_entries(body: str) -> list[tuple[int, str]]:
    """Every `{Mod, Fun, Args | Arity, Location}` entry, as (position, `mod.fun/N`)."""
    found: list[tuple[int, str]] = []
    position = 0
    while (match := _STACK_ENTRY.search(body, position)) is not None:
        position = match.end()
        arity: int | None = int(match.group("arity")) if match.group("arity") else None
        if arity is None:
            arity, position = count_arguments(body, match.end())
            if arity is None or not _LOCATION_FOLLOWS.match(body, position):
                continue
        found.append((match.start(), f"{match.group('mod')}.{match.group('fun')}/{arity}"))
    return found


MAX_CALL_CHARS = 2_000  # a pasted call's arguments; longer is a dump, not a call

_CLOSER = {"(": ")", "[": "]", "{": "}", "<": ">", "/": "/", "|": "|", '"': '"', "'": "'"}
_SIGIL = re.compile(r"~[a-zA-Z]+(?P<open>[(\[{<\/|\"'])")
_WORD = re.compile(r"\w+[?!]?")
_KEYWORD_KEY = re.compile(r"\s*[a-z_]\w*[?!]?:\s")  # `timeout: 5_000`: a keyword list starts
_TEXT = "text"  # a level of the scan inside a string, charlist, quoted atom or sigil
_CODE = "code"


def count_arguments(text: str, opener: int) -> tuple[int | None, int]:
    """How many top-level arguments the bracket at `opener` encloses, and where the scan
    stopped: `(a, {b, c}, "d,e")` -> 3. None when the brackets do not balance within
    `MAX_CALL_CHARS`: a wrong count would name a function that does not exist.

    Nesting counts `() [] {} <<>>` (so `%{}`, `#{}`, `%S{}` too) and `fn`/`do` ... `end`;
    strings, charlists, quoted atoms and sigils are skipped with their escapes and
    `#{...}` interpolations; `?(` and `$(` are characters. Elixir's trailing keyword list
    (`name: x, timeout: 5`) is one argument."""
    end = min(len(text), opener + 1 + MAX_CALL_CHARS)
    stack: list[tuple[str, str]] = [(_CODE, _CLOSER[text[opener]])]
    commas, content, keywords = 0, False, False
    i = opener + 1
    argument_starts = True
    while i < end:
        kind, closer = stack[-1]
        char = text[i]
        if kind == _TEXT:
            i = _past_text_char(text, i, closer, stack)
            continue
        if argument_starts and len(stack) == 1:
            argument_starts = False
            keywords = keywords or _KEYWORD_KEY.match(text, i, end) is not None
        if char.isspace():
            i += 1
            continue
        if len(stack) == 1 and char not in ",)]}":
            content = True
        if char in "\"'":
            stack.append((_TEXT, char))
            i += 1
        elif char == "~" and (sigil := _SIGIL.match(text, i, end)) is not None:
            stack.append((_TEXT, _CLOSER[sigil.group("open")]))
            i = sigil.end()
        elif char in "?$" and not _after_word(text, i):
            i += 3 if text.startswith("\\", i + 1) else 2  # ?a  ?\n  $(
        elif char in "([{":
            stack.append((_CODE, _CLOSER[char]))
            i += 1
        elif text.startswith("<<<", i) or text.startswith(">>>", i):
            i += 3  # Bitwise shifts, not binaries
        elif text.startswith("<<", i):
            stack.append((_CODE, ">>"))
            i += 2
        elif text.startswith(">>", i) and closer == ">>":
            stack.pop()
            i += 2
        elif char in ")]}":
            if char != closer:
                return None, i  # `(]`: not code we can count
            stack.pop()
            i += 1
            if not stack:
                return (commas + 1 if content else 0), i
        elif char == ",":
            if len(stack) == 1 and not keywords:
                commas += 1
            argument_starts = len(stack) == 1
            i += 1
        elif (word := _WORD.match(text, i)) is not None:
            i = word.end()
            if _after_word(text, word.start()) or text.startswith(":", i):
                continue  # `Mod.end`, `:fn`, `do:`: names, not the keywords
            if word.group() in ("fn", "do"):
                stack.append((_CODE, "end"))
            elif word.group() == "end":
                if closer != "end":
                    return None, i
                stack.pop()
        else:
            i += 1
    return None, i


def _past_text_char(text: str, i: int, closer: str, stack: list[tuple[str, str]]) -> int:
    """One step inside a string: an escape is two characters, `#{` opens code (the
    interpolation ends at its `}`), the closing delimiter ends the string."""
    if text[i] == "\\":
        return i + 2
    if text.startswith("#{", i):
        stack.append((_CODE, "}"))
        return i + 2
    if text[i] == closer:
        stack.pop()
    return i + 1


def _after_word(text: str, i: int) -> bool:
    """Whether text[i] continues a name (`valid?`, `Mod.end`, `:fn`) rather than starting one."""
    return i > 0 and (text[i - 1].isalnum() or text[i - 1] in "_.:@?!")
