"""What ExDoc shows for an Erlang module that its Docs chunk only implies.

* `equiv`. An entry with no doc of its own may name another in its metadata. OTP >= 27
  writes an expression (`-doc #{equiv => send_after(Time, Dest, Msg, [])}`), and ExDoc
  shows "Equivalent to ..." from it, linked when it is a call of the same module:

      "send_after(T, D, M, [])"   Equivalent to [`send_after(T, D, M, [])`](`send_after/4`).
      "erlang:send_after(...)"    Equivalent to `erlang:send_after(...)`.
      "phash2/2"                  Equivalent to `phash2/2`.

  OTP 23-26's erl_docgen writes `{function, Name, Arity}`: the entry was documented
  together with that one (`get_env/1` and `get_env/2` under one text), which is what
  OTP's `shell_docs` shows for it; saying "Equivalent to" there would be false
  (`phash2/1` is not `phash2/2`).
* Opaque types. ExDoc reads `-opaque` from the abstract code; the Docs chunk does not say.
  An OTP >= 27 beam keeps its abstract code in the `Dbgi` chunk, where each opaque type
  is one small `{attribute, Anno, opaque, {Name, Type, Args}}` form, found and decoded
  alone rather than decoding the whole (megabytes) tree. OTP 23-26 chunks carry the same
  forms in their module metadata (`types`).
"""

from __future__ import annotations

import logging
import re
import struct
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeVar

from hexlocal_core.errors import IngestError
from hexlocal_core.ingest import etf
from hexlocal_core.ingest.erlang_html import inline_code, quote_atom
from hexlocal_core.ingest.etf import Term
from hexlocal_core.model import Atom

log = logging.getLogger("hexlocal.ingest.erlang_docs")

_ATOM_PART = r"(?:[a-z][A-Za-z0-9_@]*|'(?:[^'\\]|\\.)*')"
_CALL_HEAD = re.compile(rf"({_ATOM_PART})\s*\(")
_NAME_ARITY = re.compile(rf"{_ATOM_PART}\s*/\s*\d+")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_@]*")
_CLOSERS = {"(": ")", "[": "]", "{": "}"}
_END_BLOCKS = frozenset({"begin", "case", "if", "receive", "try", "maybe"})
_RESERVED = _END_BLOCKS | {"fun", "end", "of", "when", "after", "catch", "not", "div", "rem"}
_FORM_TERMS = 50_000  # one opaque type's AST; the largest in OTP is a few hundred terms


class Entry(Protocol):
    """What `equiv_docs` reads of a docs entry (the BEAM reader's `DocEntry`)."""

    @property
    def kind(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def arity(self) -> int: ...
    @property
    def doc(self) -> str | None: ...
    @property
    def hidden(self) -> bool: ...
    @property
    def metadata(self) -> Mapping[str, Any]: ...


E = TypeVar("E", bound=Entry)
Key = tuple[str, str, int]


def equiv_docs(entries: Sequence[E]) -> dict[int, str]:
    """The texts for entries with no doc but an `equiv`, by position: what ExDoc shows for
    an expression, and what OTP's shell_docs shows for erl_docgen's shared docs."""
    index = {(e.kind, e.name, e.arity): e for e in entries}
    out: dict[int, str] = {}
    for position, entry in enumerate(entries):
        equiv = entry.metadata.get("equiv")
        if entry.doc is None and not entry.hidden and equiv is not None:
            doc = _equiv_doc(entry, equiv, index)
            if doc:
                out[position] = doc
    return out


def _equiv_doc(entry: E, equiv: object, index: Mapping[Key, E]) -> str | None:
    if isinstance(equiv, str):
        return equivalent_to(equiv, entry.kind)
    owner = _shared_doc_owner(entry, equiv, index)
    if owner is None or owner.doc is None:
        return None
    return documented_with(owner.kind, owner.name, owner.arity, owner.doc)


def _shared_doc_owner(entry: E, equiv: object, index: Mapping[Key, E]) -> E | None:
    """The entry whose text `entry` shares: `equiv` is `{Kind, Name, Arity}`. Like
    shell_docs, one step only: the few chains erl_docgen wrote join unrelated texts."""
    if not (isinstance(equiv, tuple) and len(equiv) == 3 and isinstance(equiv[2], int)):
        return None
    kind, name, arity = equiv
    if not (isinstance(kind, Atom) and isinstance(name, Atom)):
        return None
    # erl_docgen names a callback `Module:StateName` and may file it as a function.
    bare = name.name.removeprefix("Module:")
    owner = index.get((kind.name, name.name, arity)) or index.get((entry.kind, bare, arity))
    if owner is None or owner is entry or owner.hidden:
        return None
    return owner


def equivalent_to(equiv: str, kind: str) -> str:
    """ExDoc's text for an entry (`kind` function, callback or type) whose only doc is
    an `equiv` expression."""
    prefix = {"callback": "c:", "type": "t:"}.get(kind, "")
    shown = " ".join(equiv.split())
    call = local_call(equiv)
    if call is not None:
        name, arity = call
        return f"Equivalent to [{inline_code(shown)}]({inline_code(f'{prefix}{name}/{arity}')})."
    if _NAME_ARITY.fullmatch(equiv.strip()):
        return f"Equivalent to {inline_code(prefix + shown)}."
    return f"Equivalent to {inline_code(shown)}."


def documented_with(kind: str, name: str, arity: int, doc: str) -> str:
    """The text of an entry documented together with `name/arity` (OTP 23-26's `equiv`)."""
    prefix = {"callback": "c:", "type": "t:"}.get(kind, "")
    shown = f"{quote_atom(name)}/{arity}"
    target = inline_code(prefix + shown)
    return f"Documented together with [{inline_code(shown)}]({target}).\n\n{doc}"


def local_call(expr: str) -> tuple[str, int] | None:
    """(name, arity) when `expr` is one call of a local function, `f(A, g(B), fun(_) -> x end)`,
    and nothing else; None for a remote call, an operator or anything unbalanced."""
    text = expr.strip()
    head = _CALL_HEAD.match(text)
    if head is None or head.group(1) in _RESERVED:
        return None
    name = head.group(1)
    if name.startswith("'"):
        name = re.sub(r"\\(.)", r"\1", name[1:-1])
    arity = _call_arity(text, head.end())
    return (name, arity) if arity is not None else None


def _call_arity(text: str, pos: int) -> int | None:
    """The argument count of the call whose `(` ends just before `pos`, if the call ends
    the text; commas only count at the call's own level."""
    stack = [")"]
    commas, seen = 0, False
    while pos < len(text):
        char = text[pos]
        if char.isspace():
            pos += 1
            continue
        if char in "\"'":
            end = _skip_quoted(text, pos)
            if end is None:
                return None
            pos, seen = end, True
        elif char == "$":
            pos, seen = _skip_char_literal(text, pos), True
        elif char == "%":
            return None  # a comment: not an expression ExDoc would link
        elif text.startswith("<<", pos):
            stack.append(">>")
            pos, seen = pos + 2, True
        elif text.startswith(">>", pos) and stack[-1] == ">>":
            stack.pop()
            pos += 2
        elif char in _CLOSERS:
            stack.append(_CLOSERS[char])
            pos, seen = pos + 1, True
        elif char in ")]}":
            if stack[-1] != char:
                return None
            stack.pop()
            pos += 1
            if not stack:
                return (commas + 1 if seen else 0) if not text[pos:].strip() else None
        elif char == ",":
            commas += len(stack) == 1
            pos += 1
        elif char.isalpha() or char == "_":
            word = _WORD.match(text, pos)
            assert word is not None  # the first character matches
            pos, seen = word.end(), True
            if not _track_block(word.group(), text, pos, stack):
                return None
        else:
            pos, seen = pos + 1, True
    return None


def _track_block(word: str, text: str, pos: int, stack: list[str]) -> bool:
    """Blocks closed by `end` hold commas of their own; False for an unmatched `end`."""
    if word in _END_BLOCKS or (word == "fun" and text[pos:].lstrip().startswith("(")):
        stack.append("end")
    elif word == "end":
        if stack[-1] != "end":
            return False
        stack.pop()
    return True


def _skip_quoted(text: str, pos: int) -> int | None:
    quote, pos = text[pos], pos + 1
    while pos < len(text):
        if text[pos] == "\\":
            pos += 2
        elif text[pos] == quote:
            return pos + 1
        else:
            pos += 1
    return None


def _skip_char_literal(text: str, pos: int) -> int:
    """`$a`, `$ `, `$\\n`, `$\\x{41}`: the offset after the literal."""
    if text.startswith("$\\x{", pos):
        close = text.find("}", pos)
        return close + 1 if close != -1 else len(text)
    return pos + (3 if text.startswith("$\\", pos) else 2)


# --- opaque types ------------------------------------------------------------------------


def _atom_bytes(name: bytes) -> bytes:
    """The regex for one atom in any of its four ETF encodings."""
    size = len(name)
    heads = [bytes([119, size]), bytes([115, size])]
    heads += [b"v" + struct.pack(">H", size), b"d" + struct.pack(">H", size)]
    return b"(?:" + b"|".join(re.escape(h) for h in heads) + b")" + re.escape(name)


_ATTRIBUTE = re.compile(b"h\x04" + _atom_bytes(b"attribute"))
_OPAQUE = re.compile(_atom_bytes(b"opaque") + b"h\x03")


def opaque_from_dbgi(dbgi: bytes) -> frozenset[tuple[str, int]]:
    """The (name, arity) of each `-opaque` in a beam's `Dbgi` chunk (abstract code);
    empty when the chunk holds none or is not readable."""
    try:
        body = etf.term_body(dbgi)
    except IngestError as exc:
        log.debug("Dbgi chunk unreadable: %s", exc)
        return frozenset()
    found: set[tuple[str, int]] = set()
    for match in _ATTRIBUTE.finditer(body):
        try:
            _anno, after = etf.decode_at(body, match.end(), max_terms=64)
            kind = _OPAQUE.match(body, after)
            if kind is None:
                continue
            form, _ = etf.decode_at(body, kind.end() - 2, max_terms=_FORM_TERMS)
        except IngestError:
            continue  # a match inside a literal, or a form beyond the budget
        if isinstance(form, tuple) and len(form) == 3:
            _add_type(found, form[0], form[2])
    return frozenset(found)


def opaque_from_types(types: object) -> frozenset[tuple[str, int]]:
    """The opaque types of OTP 23-26 chunk metadata: `types => #{{Name, Arity} => Form}`."""
    if not isinstance(types, Mapping):
        return frozenset()
    found: set[tuple[str, int]] = set()
    for form in types.values():
        if (
            isinstance(form, tuple)
            and len(form) == 4
            and form[0] == Atom("attribute")
            and form[2] == Atom("opaque")
            and isinstance(form[3], tuple)
            and len(form[3]) == 3
        ):
            _add_type(found, form[3][0], form[3][2])
    return frozenset(found)


def _add_type(found: set[tuple[str, int]], name: Term, args: Term) -> None:
    if isinstance(name, Atom) and isinstance(args, list):
        found.add((name.name, len(args)))
