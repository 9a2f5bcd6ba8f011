"""Docs from compiled BEAM files: the EEP-48 `Docs` chunk, turned into ExDoc-shaped items.

The container is read by `beam_file` (chunks, atoms, bounded reads); the `Docs` chunk holds
`term_to_binary({docs_v1, Anno, Language, Format, ModuleDoc, Metadata, Docs})`, decoded by
`docs_chunk`; this module turns the decoded docs into items.

Erlang modules' docs come in a second format too: OTP 23-26 and EDoc write
`application/erlang+html` (a tree of HTML-like elements), kept beside the beams in
`doc/chunks/<module>.chunk` files (`items_from_chunk_dir`) or in the beam itself; it is
converted to markdown (`erlang_html`). What ExDoc adds for Erlang modules is added here too
(`erlang_docs`): "Equivalent to ..." for entries whose metadata names an `equiv`, and the
opaque types it reads from the abstract code.

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
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from attrs import evolve, frozen

from hexlocal_core.cancel import checkpoint
from hexlocal_core.errors import IngestError
from hexlocal_core.ingest import erlang_docs, etf
from hexlocal_core.ingest.beam_file import (
    MAX_BEAM_BYTES,
    BeamSkipped,
    chunks_of,
    module_name,
    read_capped,
    real_path,
)
from hexlocal_core.ingest.docs_chunk import (
    BeamDocs,
    DocEntry,
    compiled_source,
    docs_v1,
    mark_opaque,
)
from hexlocal_core.model import DocItem, DocType, SourceKind
from hexlocal_core.untrusted import clip

log = logging.getLogger("hexlocal.ingest.beam")

MAX_CHUNK_BYTES = 16 * 1024 * 1024  # OTP 25's largest .chunk (erlang's) is 0.5 MiB
HEXDOCS = "https://hexdocs.pm"
# What URI.encode/1 leaves alone, which is what ExDoc applies to a name/arity anchor.
_ANCHOR_SAFE = ":/?#[]@!$&'()*+,;=~"


Link = Callable[[str], str]  # an item's ref ("ets.html#new/2") -> the URL it is published at


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
    chunks = chunks_of(data)
    module = module_name(chunks.get("AtU8"), chunks.get("Atom"))
    chunk = chunks.get("Docs")
    if chunk is None:
        raise BeamSkipped("no_docs_chunk", f"{clip(module)} has no Docs chunk")
    try:
        term = etf.decode(chunk)
    except IngestError as exc:
        raise BeamSkipped("bad_etf", f"{clip(module)}: Docs chunk is not valid ETF: {exc}") from exc
    docs = docs_v1(module, term)
    if docs.language == "erlang" and "Dbgi" in chunks:
        docs = mark_opaque(docs, erlang_docs.opaque_from_dbgi(chunks["Dbgi"]))
    return evolve(docs, source=compiled_source(chunks.get("CInf")))


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
    docs = docs_v1(module, term)
    if docs.language == "erlang":
        docs = mark_opaque(docs, erlang_docs.opaque_from_types(docs.metadata.get("types")))
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
    root = real_path(folder)
    for path in sorted(folder.glob(pattern)):
        checkpoint()
        try:
            docs = read(path, read_capped(path, max_file_bytes, root))
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
