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
    functions: tuple[str, ...]  # `Mod.fun/2` the message or its stack frames name

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


def parse_error(query: str) -> ErrorQuery:
    """The parts of an error paste worth searching for (call it on ERROR-shaped queries)."""
    exceptions = tuple(dict.fromkeys(m.group("mod") for m in _EXCEPTION.finditer(query)))
    functions = _raising_functions(query)
    text = _EXCEPTION.sub(" ", query)
    for pattern in _NOISE:
        text = pattern.sub(" ", text)
    message = _SPACES.sub(" ", " ".join(line.strip() for line in text.splitlines() if line.strip()))
    return ErrorQuery(exceptions, message.strip(), functions)


def _raising_functions(query: str) -> tuple[str, ...]:
    """Functions named anywhere in the paste, in order, deduplicated: the message's, then
    every stack frame's (a frame's app and path are stripped, its function stays)."""
    body = _STACK_FRAME.sub(" ", query)
    named = [m.group(0) for m in _MFA.finditer(body)]
    named.extend(m.group(0).lstrip(":") for m in _ERLANG_MFA.finditer(body))
    return tuple(dict.fromkeys(named))
