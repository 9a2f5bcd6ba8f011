"""Elixir's own docs for the OTP functions it wraps.

An Elixir developer asks about `:erlang.monitor/2` in Elixir's words ("find out when some
other process goes away"), and Elixir's `Process.monitor/1` is documented in those words
("Once the monitored process dies, a message is delivered to the monitoring process"),
where OTP's reference is terse ("Sends a monitor request of type Type to the entity
identified by Item"). Many of Elixir's functions are thin wrappers: `Process.monitor/1`
calls `:erlang.monitor/2` and nothing else, `Application.get_env/3`
`:application.get_env/3`, `System.monotonic_time/0` `:erlang.monotonic_time/0`. Their docs
are a second description of the OTP function, written for the people who ask, and an agent
writing Elixir wants the wrapper's name as well.

So each OTP function that Elixir wraps gains a section, after its own text, holding the
wrapper's doc: `## In Elixir: `Process.monitor/1``. Measured in docs/lab/otp-retrieval.md.

The wrappers are read from the installed Elixir's beams, never guessed from names: a
public, documented, not deprecated function whose code makes exactly one remote call into
an Erlang module (guards, raising, and the other BIFs a wrapper uses besides are not
counted), calls no other Elixir module, and shares a word with what it calls
(`Process.flag/2` and `:erlang.process_flag/2`; `Module.defines?/3`, which reads
`:ets.lookup/2` to do something else, does not). Every read is bounded like the other BEAM
readers, and an unreadable beam is skipped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from attrs import evolve, frozen

from hexlocal_core.cancel import checkpoint
from hexlocal_core.ingest.beam import HEXDOCS, read_beam_docs
from hexlocal_core.ingest.beam_calls import ModuleCalls, read_beam_calls
from hexlocal_core.ingest.beam_file import MAX_BEAM_BYTES, BeamSkipped, read_capped, real_path
from hexlocal_core.ingest.beam_sources import BuildApp
from hexlocal_core.ingest.docs_chunk import BeamDocs
from hexlocal_core.model import DocItem, DocType

# Elixir's apps whose functions wrap OTP's: the standard library and Logger.
WRAPPER_APPS = ("elixir", "logger")
MAX_DOC_CHARS = 700  # of a wrapper's doc: its summary and the paragraph or two after it
MAX_WRAPPERS = 2  # per OTP function (`:erlang.monitor/2`: Port.monitor/1, Process.monitor/1)
MAX_BEAMS = 2_000  # per ebin; Elixir 1.18's own apps hold under 400

# Calls a wrapper makes besides the one it wraps: raising, guards, arithmetic, its own pid.
_INCIDENTAL = frozenset(
    """error raise throw exit nif_error get_stacktrace is_atom is_binary is_bitstring
    is_boolean is_float is_function is_integer is_list is_map is_map_key is_number is_pid
    is_port is_record is_reference is_tuple element setelement byte_size bit_size length
    hd tl map_size map_get tuple_size self node not and or andalso orelse band bor bxor
    bnot bsl bsr div rem abs min max + - * / == /= =:= =/= < > =< >= ++ --""".split()
)
_CALLER = re.compile(r"^(?P<name>[^/]+)/(?P<arity>\d{1,3})$")
_WORD_BREAK = re.compile(r"[_?!]+")

Mfa = tuple[str, str, int]


@frozen
class ElixirWrapper:
    """A documented Elixir function that wraps one OTP function."""

    title: str  # "Process.monitor/1"
    doc: str  # its doc, as markdown
    url: str  # its page on hexdocs, at the installed version

    def section(self) -> str:
        return f"## In Elixir: [`{self.title}`]({self.url})\n\n{clip_doc(self.doc)}"


# OTP function, as ExDoc titles it ("erlang.monitor/2") -> the Elixir functions wrapping it.
Wrappers = Mapping[str, tuple[ElixirWrapper, ...]]


def wrapped_calls(calls: ModuleCalls, documented: Mapping[tuple[str, int], str]) -> dict[str, str]:
    """`{"erlang.monitor/2": "monitor/1"}`: the OTP function each documented function of the
    module wraps, for the functions that wrap exactly one (see the module doc)."""
    callees: dict[str, set[Mfa]] = {}
    for call in calls.calls:
        if call.caller is not None and not call.fun_ref:
            callees.setdefault(call.caller, set()).add((call.module, call.function, call.arity))
    wrapped: dict[str, str] = {}
    for caller, made in sorted(callees.items()):
        m = _CALLER.match(caller)
        if m is None or (m["name"], int(m["arity"])) not in documented:
            continue
        counted = [c for c in made if not _incidental(c)]
        if len(counted) != 1:
            continue
        ((module, function, arity),) = counted
        if _is_erlang(module) and _words(function) & _words(m["name"]):
            wrapped.setdefault(f"{module}.{function}/{arity}", caller)
    return wrapped


def _is_erlang(module: str) -> bool:
    return module[:1].islower()


def _incidental(call: Mfa) -> bool:
    """A BIF of the list above, or building an exception to raise (`raise
    ArgumentError, "..."` calls `ArgumentError.exception/1`)."""
    module, function, arity = call
    return (module == "erlang" and function in _INCIDENTAL) or (function, arity) == ("exception", 1)


def _words(name: str) -> set[str]:
    return {w for w in _WORD_BREAK.split(name) if w}


def wrappers_in(apps: Sequence[BuildApp]) -> Wrappers:
    """The OTP functions the modules of Elixir's `apps` wrap (see the module doc);
    unreadable beams are skipped, and nothing raises for a missing folder."""
    found: dict[str, list[ElixirWrapper]] = {}
    for app in apps:
        root = real_path(app.ebin)
        if root is None or not root.is_dir():
            continue
        docs_url = f"{HEXDOCS}/{app.app}/{app.version}"
        for path in sorted(root.glob("Elixir.*.beam"))[:MAX_BEAMS]:
            checkpoint()
            for key, wrapper in _module_wrappers(path, root, docs_url):
                found.setdefault(key, []).append(wrapper)
    return {
        key: tuple(sorted(wrappers, key=lambda w: w.title)[:MAX_WRAPPERS])
        for key, wrappers in found.items()
    }


def _module_wrappers(path: Path, root: Path, docs_url: str) -> list[tuple[str, ElixirWrapper]]:
    try:
        data = read_capped(path, MAX_BEAM_BYTES, root)
        docs = read_beam_docs(data)
        calls = read_beam_calls(data)
    except (BeamSkipped, OSError):
        return []
    documented = _documented(docs)
    module = docs.module.removeprefix("Elixir.")
    return [
        (
            key,
            ElixirWrapper(
                f"{module}.{caller}",
                documented[_name_arity(caller)],
                f"{docs_url}/{module}.html#{caller}",
            ),
        )
        for key, caller in wrapped_calls(calls, documented).items()
    ]


def _documented(docs: BeamDocs) -> dict[tuple[str, int], str]:
    if docs.module_hidden:
        return {}
    return {
        (e.name, e.arity): e.doc
        for e in docs.entries
        if e.kind == "function" and e.doc and not e.hidden and "deprecated" not in e.metadata
    }


def _name_arity(caller: str) -> tuple[str, int]:
    name, _, arity = caller.rpartition("/")
    return name, int(arity)


def clip_doc(doc: str) -> str:
    """The doc up to MAX_DOC_CHARS, cut at a word."""
    text = doc.strip()
    if len(text) <= MAX_DOC_CHARS:
        return text
    return text[:MAX_DOC_CHARS].rsplit(" ", 1)[0] + " ..."


def with_wrappers(items: Sequence[DocItem], wrappers: Wrappers) -> tuple[DocItem, ...]:
    """The OTP items, each function that Elixir wraps followed by its wrappers' sections
    (its own text unchanged and first)."""
    if not wrappers:
        return tuple(items)
    out: list[DocItem] = []
    for item in items:
        key = f"{item.module}.{item.function}/{item.arity}"
        found = wrappers.get(key, ()) if item.doc_type is DocType.FUNCTION else ()
        if not found:
            out.append(item)
            continue
        sections = "\n\n".join(w.section() for w in found)
        out.append(evolve(item, markdown=f"{item.markdown.rstrip()}\n\n{sections}"))
    return tuple(out)
