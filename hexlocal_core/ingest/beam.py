"""Docs from compiled BEAM files: the EEP-48 `Docs` chunk, turned into ExDoc-shaped items.

A `.beam` file is an IFF container: `FOR1`, a 4-byte size, `BEAM`, then chunks of a 4-byte
id, a 4-byte size and the data, each padded to 4 bytes. The `Docs` chunk holds
`term_to_binary({docs_v1, Anno, Language, Format, ModuleDoc, Metadata, Docs})`.

Erlang modules' docs come in a second format too: OTP 23-26 and EDoc write
`application/erlang+html` (a tree of HTML-like elements), kept beside the beams in
`doc/chunks/<module>.chunk` files (`items_from_chunk_dir`) or in the beam itself; it is
converted to markdown (`erlang_html`). What ExDoc adds for Erlang modules is added here too
(`erlang_docs`): "Equivalent to ..." for entries whose metadata names an `equiv`, and the
opaque types it reads from the abstract code. Elixir modules are read as before.

Items mirror what ExDoc publishes, so a BEAM-built index and a tarball-built one agree:

    module doc      ref "Enum.html"               title "Enum"
    function/macro  ref "Enum.html#map/2"         title "Enum.map/2"
    callback        ref "GenServer.html#c:init/1" title "GenServer.init/1"   (ExDoc's titles)
    type / opaque   ref "Enum.html#t:t/0"         title "Enum.t/0"

The name/arity part of a ref is percent-encoded like ExDoc's (`Kernel.html#%3C%3E/2`).
Elixir modules drop their `Elixir.` prefix; Erlang modules keep their bare name (ExDoc
writes `telemetry.html#attach/4`). A Mix task page is titled by its command
(`mix deps.get`).

What ExDoc leaves out is left out here too, and counted under a reason: modules whose doc is
`:hidden` and protocol implementations (`__impl__/1`), with all their entries, and a
protocol's callbacks (its functions carry the same docs). Entries whose doc is `:hidden` or
`:none` are skipped as well (ExDoc lists the latter with an empty doc; there is no text to
search). Checked against ExDoc's search data for Elixir 1.14's six apps: every item has
ExDoc's ref, title and type, and every ExDoc item missing here has an empty doc.

The module's kind is read from the entries the chunk lists, hidden ones included, in
ExDoc's order: `exception/1`, `message/1` and `__struct__/0` make an exception,
`__protocol__/1` a protocol, a `Mix.Tasks.` name with `run/1` a task, callbacks a behaviour.
"""

from __future__ import annotations

import logging
import struct
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from attrs import evolve, field, frozen

from hexlocal_core.cancel import checkpoint
from hexlocal_core.errors import IngestError
from hexlocal_core.ingest import erlang_docs, erlang_html, etf
from hexlocal_core.ingest.etf import Term
from hexlocal_core.model import Atom, DocItem, DocType, SourceKind
from hexlocal_core.untrusted import NotRegularFile, TooLarge, clip, read_regular

log = logging.getLogger("hexlocal.ingest.beam")

MAX_BEAM_BYTES = 64 * 1024 * 1024  # the largest OTP/Elixir beams are a few MiB
MAX_CHUNK_BYTES = 16 * 1024 * 1024  # OTP 25's largest .chunk (erlang's) is 0.5 MiB
MARKDOWN = "text/markdown"
HEXDOCS = "https://hexdocs.pm"
ENTRY_KINDS = frozenset({"function", "macro", "callback", "macrocallback", "type"})
# What URI.encode/1 leaves alone, which is what ExDoc applies to a name/arity anchor.
_ANCHOR_SAFE = ":/?#[]@!$&'()*+,;=~"


Link = Callable[[str], str]  # an item's ref ("ets.html#new/2") -> the URL it is published at


class BeamSkipped(IngestError):
    """A `.beam` file yields no docs; `reason` is the key it is counted under."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


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


@frozen
class BeamItems:
    items: tuple[DocItem, ...]
    skipped: dict[str, int]  # reason -> count, for files, modules and entries
    modules: int = 0  # modules that produced at least one item


def read_beam_docs(data: bytes) -> BeamDocs:
    """Decode the Docs chunk of one `.beam` file.

    :raises BeamSkipped: (an IngestError) with `reason` not_beam, truncated, no_atoms,
        no_docs_chunk, bad_etf, bad_docs_shape or not_markdown.
    """
    chunks = _chunks(data)
    module = _module_name(chunks.get("AtU8"), chunks.get("Atom"))
    chunk = chunks.get("Docs")
    if chunk is None:
        raise BeamSkipped("no_docs_chunk", f"{clip(module)} has no Docs chunk")
    try:
        term = etf.decode(chunk)
    except IngestError as exc:
        raise BeamSkipped("bad_etf", f"{clip(module)}: Docs chunk is not valid ETF: {exc}") from exc
    docs = _docs_v1(module, term)
    if docs.language == "erlang" and "Dbgi" in chunks:
        docs = _mark_opaque(docs, erlang_docs.opaque_from_dbgi(chunks["Dbgi"]))
    return evolve(docs, source=_compiled_source(chunks.get("CInf")))


def read_chunk_docs(data: bytes, module: str) -> BeamDocs:
    """Decode a `<module>.chunk` file: a bare `term_to_binary` of the docs_v1 term, as
    OTP 23-26 install them in `lib/<app>-<vsn>/doc/chunks/`.

    :raises BeamSkipped: (an IngestError) with `reason` bad_etf, bad_docs_shape or
        not_markdown.
    """
    try:
        term = etf.decode(data)
    except IngestError as exc:
        raise BeamSkipped("bad_etf", f"{clip(module)}: chunk file is not valid ETF: {exc}") from exc
    docs = _docs_v1(module, term)
    if docs.language == "erlang":
        docs = _mark_opaque(docs, erlang_docs.opaque_from_types(docs.metadata.get("types")))
    return docs


# Rewrites one module's items, knowing the module they come from (where it was compiled).
ModuleItemsFn = Callable[[BeamDocs, list[DocItem]], list[DocItem]]


def items_from_beam_dir(
    ebin: Path,
    *,
    package: str,
    version: str,
    max_file_bytes: int = MAX_BEAM_BYTES,
    link: Link | None = None,
    each_module: ModuleItemsFn | None = None,
) -> BeamItems:
    """Items from every `*.beam` in `ebin`; files, modules and entries without usable docs
    are skipped and counted, never raised. `link` maps a ref to its URL (hexdocs.pm's
    `/<package>/<version>/<ref>` when None); `each_module` rewrites a module's items."""

    def read(path: Path, data: bytes) -> BeamDocs:
        return read_beam_docs(data)

    return _items_from_dir(
        ebin, "*.beam", read, package, version, max_file_bytes, link, each_module
    )


def items_from_chunk_dir(
    chunks: Path,
    *,
    package: str,
    version: str,
    max_file_bytes: int = MAX_CHUNK_BYTES,
    link: Link | None = None,
) -> BeamItems:
    """Items from every `<module>.chunk` in `chunks` (`lib/<app>-<vsn>/doc/chunks`), with
    the bounds and counting of `items_from_beam_dir`. A link the install made to the folder
    itself is followed (Debian's `doc` points into /usr/share/doc/erlang-doc); a file may
    link only inside the folder."""

    def read(path: Path, data: bytes) -> BeamDocs:
        module = path.name.removesuffix(".chunk")
        if not module:
            raise BeamSkipped("no_module_name", f"{clip(str(path))} names no module")
        return read_chunk_docs(data, module)

    return _items_from_dir(chunks, "*.chunk", read, package, version, max_file_bytes, link)


def _items_from_dir(
    folder: Path,
    pattern: str,
    read: Callable[[Path, bytes], BeamDocs],
    package: str,
    version: str,
    max_file_bytes: int,
    link: Link | None,
    each_module: ModuleItemsFn | None = None,
) -> BeamItems:
    items: list[DocItem] = []
    skipped: Counter[str] = Counter()
    modules = 0
    root = _resolved(folder)
    for path in sorted(folder.glob(pattern)):
        checkpoint()
        try:
            docs = read(path, _read_capped(path, max_file_bytes, root))
        except BeamSkipped as exc:
            log.debug("skipped %s: %s", path.name, exc)
            skipped[exc.reason] += 1
            continue
        found = module_items(docs, package=package, version=version, skipped=skipped, link=link)
        if each_module is not None:
            found = each_module(docs, found)
        modules += bool(found)
        items.extend(found)
    result = BeamItems(tuple(items), dict(skipped), modules)
    log.info("%s %s: %d items from %d modules", package, version, len(items), modules)
    log.debug("%s %s: skipped %s", package, version, result.skipped)
    return result


def module_items(
    docs: BeamDocs,
    *,
    package: str,
    version: str,
    skipped: Counter[str] | None = None,
    link: Link | None = None,
) -> list[DocItem]:
    """The DocItems of one module; what is left out is added to `skipped`. `link` maps a
    ref to its URL (hexdocs.pm's `/<package>/<version>/<ref>` when None)."""
    skipped = Counter() if skipped is None else skipped
    if docs.bad_entries:
        skipped["bad_entry"] += docs.bad_entries
    if docs.module_hidden or _is_impl(docs):
        skipped["module_hidden" if docs.module_hidden else "module_impl"] += 1
        return []
    page = f"{docs.display_name}.html"
    kind = module_type(docs)
    url = link if link is not None else _hexdocs(package, version)
    out: list[DocItem] = []
    if docs.module_doc is None:
        skipped["module_doc_none"] += 1
    else:
        out.append(_module_item(docs, kind, page, package, version, url))
    for entry in docs.entries:
        reason = _entry_skip_reason(entry, kind)
        if reason:
            skipped[reason] += 1
            continue
        out.append(_entry_item(docs.display_name, page, entry, package, version, url))
    return out


def _hexdocs(package: str, version: str) -> Link:
    return lambda ref: f"{HEXDOCS}/{package}/{version}/{ref}"


_EXCEPTION_FUNCTIONS = frozenset(
    {("function", "exception", 1), ("function", "message", 1), ("function", "__struct__", 0)}
)


def module_type(docs: BeamDocs) -> DocType:
    """ExDoc's kind of module page, from the functions and callbacks the chunk lists."""
    present = {(e.kind, e.name, e.arity) for e in docs.entries}
    if _EXCEPTION_FUNCTIONS <= present:
        return DocType.EXCEPTION
    if ("function", "__protocol__", 1) in present:
        return DocType.PROTOCOL
    # A task before a behaviour: ExDoc calls Mix.Tasks.Format (which has callbacks) a task.
    if docs.display_name.startswith("Mix.Tasks.") and ("function", "run", 1) in present:
        return DocType.TASK
    if any(kind in ("callback", "macrocallback") for kind, _, _ in present):
        return DocType.BEHAVIOUR
    return DocType.MODULE


def _is_impl(docs: BeamDocs) -> bool:
    """A protocol implementation (`defimpl`): ExDoc leaves these modules out."""
    return any(e.kind == "function" and e.name == "__impl__" and e.arity == 1 for e in docs.entries)


def _entry_skip_reason(entry: DocEntry, kind: DocType) -> str | None:
    if entry.hidden:
        return "entry_hidden"
    if entry.doc is None:
        return "entry_doc_none"
    if kind is DocType.PROTOCOL and entry.kind == "callback":
        return "protocol_callback"  # ExDoc shows a protocol's functions, not its callbacks
    return None


def _module_item(
    docs: BeamDocs, kind: DocType, page: str, package: str, version: str, url: Link
) -> DocItem:
    return DocItem(
        package=package,
        version=version,
        ref=page,
        title=_task_title(docs.display_name) if kind is DocType.TASK else docs.display_name,
        doc_type=kind,
        markdown=docs.module_doc or "",
        module=docs.display_name,
        deprecated=_text_meta(docs.metadata, "deprecated"),
        since=_text_meta(docs.metadata, "since"),
        hexdocs_url=url(page),
        source=SourceKind.BEAM,
    )


def _entry_item(
    module: str, page: str, entry: DocEntry, package: str, version: str, url: Link
) -> DocItem:
    anchor = quote(f"{entry.name}/{entry.arity}", safe=_ANCHOR_SAFE)
    prefix = {"callback": "c:", "macrocallback": "c:", "type": "t:"}.get(entry.kind, "")
    ref = f"{page}#{prefix}{anchor}"
    doc_type = DocType(entry.kind)
    if entry.kind == "type" and entry.metadata.get("opaque") is True:
        doc_type = DocType.OPAQUE
    return DocItem(
        package=package,
        version=version,
        ref=ref,
        title=f"{module}.{entry.name}/{entry.arity}",
        doc_type=doc_type,
        markdown=entry.doc or "",
        module=module,
        function=entry.name,
        arity=entry.arity,
        signature=entry.signatures[0] if entry.signatures else None,
        deprecated=_text_meta(entry.metadata, "deprecated"),
        since=_text_meta(entry.metadata, "since"),
        hexdocs_url=url(ref),
        source=SourceKind.BEAM,
    )


def _task_title(module: str) -> str:
    """ExDoc titles a task by its command: Mix.Tasks.Local.PublicKeys -> mix local.public_keys."""
    segments = module.removeprefix("Mix.Tasks.").split(".")
    return "mix " + ".".join(_underscore(segment) for segment in segments)


def _underscore(segment: str) -> str:
    """Macro.underscore/1 for one alias segment, ported rule for rule (ASCII only, as Elixir)."""
    if not segment:
        return ""
    out = [segment[0].lower() if _upper(segment[0]) else segment[0]]
    prev, i = segment[0], 1
    while i < len(segment):
        char = segment[i]
        after = segment[i + 1] if i + 1 < len(segment) else ""
        if _upper(char) and after and not (_upper(after) or after.isdigit() or after in "._"):
            out.append("_" + char.lower() + after)  # "HTTPServer": the S starts a word
            prev, i = after, i + 2
            continue
        if _upper(char) and not _upper(prev) and prev != "_":
            out.append("_" + char.lower())
        else:
            out.append(char.lower() if _upper(char) else char)
        prev, i = char, i + 1
    return "".join(out)


def _upper(char: str) -> bool:
    return "A" <= char <= "Z"


def _text_meta(metadata: Mapping[str, Any], key: str) -> str | None:
    value = metadata.get(key)
    return value if isinstance(value, str) and value else None


# --- the IFF container ----------------------------------------------------------------


def _resolved(folder: Path) -> Path | None:
    try:
        return folder.resolve(strict=True)
    except (OSError, RuntimeError):
        return None


def _read_capped(path: Path, limit: int, root: Path | None = None) -> bytes:
    """The bytes of a regular file inside `root` (the resolved ebin), at most `limit`.

    A FIFO named `x.beam` once blocked ingestion forever: the file is opened non-blocking
    and must be a regular file; a symlink may point only inside `root`.
    """
    if root is not None and path.is_symlink():
        target = _resolved(path)
        if target is None or not target.is_relative_to(root):
            raise BeamSkipped("outside_tree", f"{clip(str(path))} links outside {root}")
    try:
        return read_regular(path, limit)  # never more than the cap, whatever the file claims
    except NotRegularFile as exc:
        raise BeamSkipped("not_regular", str(exc)) from exc
    except TooLarge as exc:
        raise BeamSkipped("too_large", f"{clip(str(path))} is larger than {limit} bytes") from exc
    except OSError as exc:
        raise BeamSkipped("unreadable", f"{clip(str(path))}: {exc}") from exc


def _chunks(data: bytes) -> dict[str, bytes]:
    """Chunk id -> data (the first of each id), every size checked against the file."""
    if len(data) < 12 or data[:4] != b"FOR1" or data[8:12] != b"BEAM":
        raise BeamSkipped("not_beam", "not a BEAM file (no FOR1...BEAM header)")
    (form_size,) = struct.unpack_from(">I", data, 4)
    if form_size + 8 > len(data):
        raise BeamSkipped("truncated", f"BEAM declares {form_size + 8} bytes, file has {len(data)}")
    end = form_size + 8
    pos = 12
    chunks: dict[str, bytes] = {}
    while pos + 8 <= end:
        checkpoint()
        chunk_id = data[pos : pos + 4].decode("latin-1")
        (size,) = struct.unpack_from(">I", data, pos + 4)
        start = pos + 8
        if start + size > end:
            raise BeamSkipped("truncated", f"chunk {chunk_id!r} runs past the end of the file")
        chunks.setdefault(chunk_id, data[start : start + size])
        pos = start + (size + 3) // 4 * 4
    return chunks


def _module_name(utf8_atoms: bytes | None, latin1_atoms: bytes | None) -> str:
    """The module is the first atom of the atom table."""
    table, encoding = (utf8_atoms, "utf-8") if utf8_atoms is not None else (latin1_atoms, "latin-1")
    if table is None or len(table) < 5:
        raise BeamSkipped("no_atoms", "BEAM file has no atom table")
    (count,) = struct.unpack_from(">i", table, 0)
    if count == 0:
        raise BeamSkipped("no_atoms", "BEAM atom table is empty")
    # OTP 28 writes a negative count when atom lengths use the compact encoding.
    length, start = (table[4], 5) if count > 0 else _compact_length(table)
    raw = table[start : start + length]
    if len(raw) != length or length == 0:
        raise BeamSkipped("no_atoms", "BEAM atom table is truncated")
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        raise BeamSkipped("no_atoms", "BEAM module name is not valid text") from exc


def _compact_length(table: bytes) -> tuple[int, int]:
    """A compact-term `u` integer at offset 4: one byte below 16, two bytes below 2048."""
    first = table[4]
    if first & 0x08 == 0:
        return first >> 4, 5
    if first & 0x10 == 0 and len(table) > 5:
        return ((first & 0xE0) << 3) | table[5], 6
    raise BeamSkipped("no_atoms", "BEAM atom table uses an unknown length encoding")


# --- the docs_v1 term -------------------------------------------------------------------


class _Shape(Exception):
    """An internal signal: the term does not have the docs_v1 shape."""


def _docs_v1(module: str, term: Term) -> BeamDocs:
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


def _compiled_source(cinf: bytes | None) -> str | None:
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
            return _text(term[key], "doc"), False
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


def _mark_opaque(docs: BeamDocs, opaque: frozenset[tuple[str, int]]) -> BeamDocs:
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
