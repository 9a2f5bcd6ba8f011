"""The `Docs` chunk's term (EEP-48 `docs_v1`), decoded into values: a module's docs and its
entries, from a beam or a `.chunk` file, markdown or erlang+html, Elixir's or Erlang's.

`{docs_v1, Anno, Language, Format, ModuleDoc, Metadata, Docs}`; every part is checked for
its shape, and an entry of the wrong shape is counted, never raised.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from attrs import evolve, field, frozen

from hexlocal_core.cancel import checkpoint
from hexlocal_core.errors import IngestError
from hexlocal_core.ingest import erlang_docs, erlang_html, etf
from hexlocal_core.ingest.beam_file import BeamSkipped
from hexlocal_core.ingest.etf import Term
from hexlocal_core.ingest.exdoc_md import without_attribute_lists
from hexlocal_core.model import Atom
from hexlocal_core.untrusted import clip

log = logging.getLogger("hexlocal.ingest.beam")

MARKDOWN = "text/markdown"
ENTRY_KINDS = frozenset({"function", "macro", "callback", "macrocallback", "type"})


@frozen
class DocEntry:
    """One `{{Kind, Name, Arity}, Anno, Signature, Doc, Metadata}` entry."""

    kind: str  # function | macro | callback | macrocallback | type
    name: str
    arity: int
    signatures: tuple[str, ...]
    doc: str | None  # None for :none and :hidden
    hidden: bool
    metadata: Mapping[str, Any] = field(factory=dict)
    line: int | None = None  # where the definition is documented, from its annotation


@frozen
class BeamDocs:
    """The decoded Docs chunk of one module."""

    module: str  # the module atom as written: "Elixir.Enum", "lists"
    language: str  # "elixir", "erlang"
    module_doc: str | None  # None for :none and :hidden
    module_hidden: bool
    metadata: Mapping[str, Any]
    entries: tuple[DocEntry, ...]
    bad_entries: int = 0  # entries whose shape or text was unusable
    source: str | None = None  # the compiled file's path, as the compiler saw it (CInf)
    line: int | None = None  # the module doc's line

    @property
    def display_name(self) -> str:
        return self.module.removeprefix("Elixir.")


class _Shape(Exception):
    """An internal signal: the term does not have the docs_v1 shape."""


def docs_v1(module: str, term: Term) -> BeamDocs:
    try:
        return _parse_docs_v1(module, term)
    except _Shape as exc:
        message = f"{clip(module)}: Docs chunk is not docs_v1: {exc}"
        raise BeamSkipped("bad_docs_shape", message) from exc


def _parse_docs_v1(module: str, term: Term) -> BeamDocs:
    if not (isinstance(term, tuple) and len(term) == 7 and term[0] == Atom("docs_v1")):
        raise _Shape("expected a 7-tuple tagged docs_v1")
    _, anno, language, doc_format, module_doc, metadata, entries = term
    fmt = _text(doc_format, "format")
    lang = _atom(language, "language") if isinstance(language, Atom) else ""
    # erlang+html is what erl_docgen and EDoc write for Erlang modules; nothing else is.
    erlang = lang == "erlang"
    if fmt != MARKDOWN and not (erlang and fmt == erlang_html.FORMAT):
        message = f"{clip(module)}: docs are {clip(fmt, 60)}, not {MARKDOWN}"
        raise BeamSkipped("not_markdown", message)
    reader = _DocReader(module, html=fmt == erlang_html.FORMAT, erlang=erlang)
    if not isinstance(entries, list):
        raise _Shape("the entries are not a list")
    parsed: list[DocEntry] = []
    bad = 0
    for raw in entries:
        checkpoint()
        try:
            parsed.append(_entry(raw, reader))
        except _Shape as exc:
            log.debug("%s: bad docs entry: %s", module, exc)
            bad += 1
    doc, hidden = reader.doc(module_doc)
    return BeamDocs(
        module=module,
        language=_atom(language, "language"),
        module_doc=doc,
        module_hidden=hidden,
        metadata=_metadata(metadata),
        entries=_with_equiv(_merged(parsed)) if erlang else tuple(parsed),
        bad_entries=bad,
        line=_line(anno),
    )


def _entry(term: Term, reader: _DocReader) -> DocEntry:
    if not (isinstance(term, tuple) and len(term) == 5):
        raise _Shape("an entry is not a 5-tuple")
    key, anno, signatures, doc, metadata = term
    if not (isinstance(key, tuple) and len(key) == 3 and isinstance(key[2], int)):
        raise _Shape("an entry key is not {Kind, Name, Arity}")
    kind = _atom(key[0], "kind")
    if kind not in ENTRY_KINDS or not 0 <= key[2] <= 255:
        # str() of a bignum can itself fail (Python's 4300-digit limit): never format it.
        arity = key[2] if -1000 < key[2] < 1000 else "<out of range>"
        raise _Shape(f"unknown entry {clip(kind, 40)}/{arity}")
    if not isinstance(signatures, list):
        raise _Shape("signatures are not a list")
    text, hidden = reader.doc(doc)
    return DocEntry(
        kind=kind,
        name=_atom(key[1], "name"),
        arity=key[2],
        signatures=tuple(_text(s, "signature") for s in signatures),
        doc=text,
        hidden=hidden,
        metadata=_metadata(metadata),
        line=_line(anno),
    )


def _line(anno: Term) -> int | None:
    """An erl_anno's line: `12`, `{12, 3}`, or a keyword list with `location`/`line`."""
    if isinstance(anno, int) and 0 < anno < 10**7:
        return anno
    if isinstance(anno, tuple) and anno and isinstance(anno[0], int):
        return _line(anno[0])
    if isinstance(anno, list):
        for pair in anno[:16]:
            if isinstance(pair, tuple) and len(pair) == 2 and pair[0] in _LINE_KEYS:
                return _line(pair[1])
    return None


_LINE_KEYS = (Atom("location"), Atom("line"))


def compiled_source(cinf: bytes | None) -> str | None:
    """`{source, Path}` of the compile info chunk: where the module was compiled from."""
    if cinf is None:
        return None
    try:
        info = etf.decode(cinf)
    except IngestError:
        return None
    if not isinstance(info, list):
        return None
    for pair in info[:64]:
        if isinstance(pair, tuple) and len(pair) == 2 and pair[0] == Atom("source"):
            return _charlist(pair[1])
    return None


def _charlist(value: Term) -> str | None:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, list) and len(value) < 4096:
        codes = [c for c in value if isinstance(c, int) and 0 <= c < 0x110000]
        return "".join(map(chr, codes)) if len(codes) == len(value) else None
    return None


@frozen
class _DocReader:
    """How one chunk's docs read: markdown or erlang+html, Elixir's rules or Erlang's."""

    module: str
    html: bool
    erlang: bool

    def doc(self, term: Term) -> tuple[str | None, bool]:
        """`%{"en" => text}` -> (text, False); `:none` -> (None, False); `:hidden` ->
        (None, True). Erlang's empty map (erl_docgen's shared docs) is `:none`."""
        if term == Atom("none") or (self.erlang and term == {}):
            return None, False
        if term == Atom("hidden"):
            return None, True
        if not isinstance(term, dict) or not term:
            raise _Shape("a doc is neither a language map, :none nor :hidden")
        # English when present, otherwise the first language in a stable order.
        key = b"en" if b"en" in term else min(term, key=repr)
        if not self.html:
            return without_attribute_lists(_text(term[key], "doc")), False
        try:
            text = erlang_html.to_markdown(term[key], module=self.module)
        except IngestError as exc:
            raise _Shape(str(exc)) from exc
        return (text or None), False  # an empty <p/>: erl_docgen's way to say nothing


def _merged(entries: list[DocEntry]) -> tuple[DocEntry, ...]:
    """One entry per {Kind, Name, Arity}: erl_docgen writes one per documented clause group
    (`erlang:system_info/1` has nine), which shell_docs shows one after the other."""
    groups: dict[tuple[str, str, int], list[DocEntry]] = {}
    for entry in entries:
        groups.setdefault((entry.kind, entry.name, entry.arity), []).append(entry)
    return tuple(group[0] if len(group) == 1 else _merge(group) for group in groups.values())


def _merge(group: list[DocEntry]) -> DocEntry:
    docs = [e.doc for e in group if e.doc is not None]
    return evolve(
        group[0],
        doc="\n\n".join(docs) if docs else None,
        hidden=all(e.hidden for e in group),
        signatures=tuple(s for e in group for s in e.signatures),
    )


def _with_equiv(entries: tuple[DocEntry, ...]) -> tuple[DocEntry, ...]:
    texts = erlang_docs.equiv_docs(entries)
    return tuple(evolve(e, doc=texts[i]) if i in texts else e for i, e in enumerate(entries))


def mark_opaque(docs: BeamDocs, opaque: frozenset[tuple[str, int]]) -> BeamDocs:
    """Type entries ExDoc calls opaque get `opaque: true`, as Elixir writes it."""
    if not opaque:
        return docs
    entries = tuple(
        evolve(e, metadata={**e.metadata, "opaque": True})
        if e.kind == "type" and (e.name, e.arity) in opaque
        else e
        for e in docs.entries
    )
    return evolve(docs, entries=entries)


def _metadata(term: Term) -> dict[str, Any]:
    """Metadata maps have atom keys; values stay ETF terms, binaries decoded as text."""
    if not isinstance(term, dict):
        raise _Shape("metadata is not a map")
    out: dict[str, Any] = {}
    for key, value in term.items():
        if isinstance(key, Atom):
            out[key.name] = _maybe_text(value)
    return out


def _maybe_text(value: Term) -> Any:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return value
    if isinstance(value, Atom) and value.name in ("true", "false"):
        return value.name == "true"
    return value


def _atom(term: Term, what: str) -> str:
    if not isinstance(term, Atom):
        raise _Shape(f"{what} is not an atom")
    return term.name


def _text(term: Term, what: str) -> str:
    if not isinstance(term, bytes):
        raise _Shape(f"{what} is not a binary")
    try:
        return term.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Shape(f"{what} is not valid UTF-8") from exc
