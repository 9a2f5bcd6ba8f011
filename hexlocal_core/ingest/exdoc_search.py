"""ExDoc's JavaScript indexes, read as data: search_data, search_items and sidebar_items.

    dist/search_data-*.js   ExDoc >= 0.30  `searchData={content_type, items, producer, proglang}`
    dist/search_items-*.js  ExDoc 0.20-0.29 `searchNodes=[{type, ref, title, doc}, ...]`
    dist/sidebar_items-*.js every version  `sidebarNodes={extras, modules, tasks, ...}`

Also the grammar of ExDoc refs (`Jason.html#decode/2`, `Plug.Conn.html#c:init/1`,
`Kernel.html#%3C%3E/2-examples`, `Mod.html#module-options`, `readme.html#installation`).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import unquote

from attrs import frozen

from hexlocal_core.cancel import checkpoint
from hexlocal_core.errors import IngestError
from hexlocal_core.untrusted import clip, decode_text, scrub

log = logging.getLogger("hexlocal.ingest.exdoc_search")

SEARCH_DATA = "search_data"
SEARCH_ITEMS = "search_items"
SIDEBAR = "sidebar"

_INDEX_FILE = re.compile(r"^dist/(search_data|search_items|sidebar_items)-[^/]*\.js$")
# `name/arity`, optionally `t:`/`c:` prefixed and `-slug` suffixed. The name is matched
# lazily so operators containing `/` or `-` parse: `//2`, `..///3`, `--/2-examples`.
# An arity above Erlang's 255 is read as a heading slug: a 5000-digit one made int() raise,
# a 20-digit one overflowed SQLite.
_FUNCTION_ANCHOR = re.compile(
    r"^(?:(?P<kind>[tc]):)?(?P<name>.+?)/(?P<arity>\d+)(?:-(?P<slug>.+))?$", re.DOTALL
)
MAX_ARITY = 255
# Pages that only navigate: never items.
NAVIGATION_PAGES = frozenset({"api-reference.html", "search.html", "404.html"})


@frozen
class RawItem:
    """One entry of an ExDoc index, as ExDoc wrote it."""

    ref: str
    title: str
    type: str
    doc: str | None


@frozen
class SearchIndex:
    generation: str  # SEARCH_DATA or SEARCH_ITEMS
    path: str
    items: tuple[RawItem, ...]
    proglang: str = "elixir"
    producer: str | None = None  # "ex_doc 0.36.1" when the file says so


@frozen
class Ref:
    """An ExDoc ref taken apart.

    `anchor` and `section` stay exactly as written (they are HTML ids, so `%3C%3E/2`
    stays encoded); `name` is decoded for display and search (`<>`).
    """

    page: str
    anchor: str | None
    kind: str | None = None  # "t" (type) or "c" (callback) prefix
    name: str | None = None
    arity: int | None = None
    section: str | None = None  # heading slug of a heading sub-item
    oversized_arity: bool = False  # `name/99999`: read as a heading slug, counted by the caller

    @property
    def detail_id(self) -> str | None:
        """The HTML id of the function/type/callback section this ref is in or under."""
        if self.name is None or self.anchor is None:
            return None
        if self.section is None:
            return self.anchor
        return self.anchor[: -len(self.section) - 1]


def parse_ref(ref: str, *, module_page: bool = True) -> Ref:
    """Split a ref; on guide pages (`module_page=False`) every anchor is a heading slug."""
    page, _, anchor = ref.partition("#")
    if not anchor:
        return Ref(page=page, anchor=None)
    if not module_page or anchor.startswith("module-"):
        return Ref(page=page, anchor=anchor, section=anchor)
    m = _FUNCTION_ANCHOR.match(anchor)
    if m is None:
        return Ref(page=page, anchor=anchor, section=anchor)
    digits = m.group("arity")
    if len(digits) > 3 or int(digits) > MAX_ARITY:
        return Ref(page=page, anchor=anchor, section=anchor, oversized_arity=True)
    return Ref(
        page=page,
        anchor=anchor,
        kind=m.group("kind"),
        name=unquote(m.group("name")),
        arity=int(digits),
        section=m.group("slug"),
    )


def _index_files(files: Mapping[str, bytes]) -> dict[str, str]:
    found: dict[str, str] = {}
    for path in sorted(files):
        m = _INDEX_FILE.match(path)
        if m:
            found.setdefault(m.group(1), path)
    return found


def _js_value(data: bytes, path: str) -> Any:
    """The JSON value assigned in `name=VALUE;` (ExDoc's index files)."""
    text = decode_text(data)
    eq = text.find("=")
    if eq < 0:
        raise IngestError(f"{clip(path)} is not an ExDoc index (no assignment)")
    start = eq + 1
    while start < len(text) and text[start].isspace():
        start += 1
    try:
        value, _ = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as exc:
        raise IngestError(f"{clip(path)} holds malformed JSON ({exc})") from exc
    except RecursionError as exc:  # the C scanner counts its depth; ExDoc nests ~6 deep
        raise IngestError(f"{clip(path)} nests its JSON too deeply to be an ExDoc index") from exc
    return value


def _text(value: Any, default: str = "") -> str:
    """A string field of an index entry, lone surrogates replaced; non-strings -> default."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, bool) or value is None:
        return default
    if isinstance(value, int | float):
        return str(value) if abs(value) < 1e15 else default  # str() of a huge int fails
    return default


def _raw_items(entries: Any, path: str) -> tuple[RawItem, ...]:
    if not isinstance(entries, list):
        raise IngestError(f"{clip(path)} has no item list")
    out: list[RawItem] = []
    skipped = 0
    for entry in entries:
        checkpoint()
        if not isinstance(entry, dict) or not isinstance(entry.get("ref"), str):
            skipped += 1
            continue
        ref = scrub(entry["ref"])
        doc = entry.get("doc")
        out.append(
            RawItem(
                ref=ref,
                title=_text(entry.get("title")) or ref,
                type=_text(entry.get("type")),
                doc=scrub(doc) if isinstance(doc, str) else None,
            )
        )
    if skipped:
        log.warning("%s: skipped %d entries without a ref", clip(path), skipped)
    return tuple(out)


def load_search_index(files: Mapping[str, bytes]) -> SearchIndex | None:
    """The best search index in the tarball (search_data over search_items), if any."""
    found = _index_files(files)
    if "search_data" in found:
        path = found["search_data"]
        value = _js_value(files[path], path)
        if not isinstance(value, dict):
            raise IngestError(f"{clip(path)} is not a searchData object")
        producer = value.get("producer")
        producer_text = None
        if isinstance(producer, dict) and _text(producer.get("name")):
            name, version = _text(producer.get("name")), _text(producer.get("version"))
            producer_text = clip(f"{name} {version}".strip(), 100)
        return SearchIndex(
            generation=SEARCH_DATA,
            path=path,
            items=_raw_items(value.get("items"), path),
            proglang=clip(_text(value.get("proglang")), 40) or "elixir",
            producer=producer_text,
        )
    if "search_items" in found:
        path = found["search_items"]
        return SearchIndex(
            generation=SEARCH_ITEMS, path=path, items=_raw_items(_js_value(files[path], path), path)
        )
    return None


def load_sidebar(files: Mapping[str, bytes]) -> dict[str, Any] | None:
    path = _index_files(files).get("sidebar_items")
    if path is None:
        return None
    value = _js_value(files[path], path)
    return value if isinstance(value, dict) else None


def _dicts(value: Any) -> Iterator[dict[str, Any]]:
    """The dict elements of a JSON list (anything else in a sidebar is ignored)."""
    if isinstance(value, list):
        for element in value:
            checkpoint()
            if isinstance(element, dict):
                yield element


def _entries(sidebar: Mapping[str, Any], *sections: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for section in sections:
        for entry in _dicts(sidebar.get(section)):
            if isinstance(entry.get("id"), str):
                yield section, {**entry, "id": scrub(entry["id"])}


def _nodes(entry: Mapping[str, Any]) -> Iterator[tuple[dict[str, Any], str]]:
    """(node, anchor) of every function/type/callback node of a sidebar module entry."""
    for group in _dicts(entry.get("nodeGroups")):
        for node in _dicts(group.get("nodes")):
            anchor = _text(node.get("anchor"))
            if anchor:
                yield node, anchor


def sidebar_deprecations(sidebar: Mapping[str, Any]) -> set[str]:
    """Refs the sidebar flags as deprecated (ExDoc >= 0.30 writes the flags)."""
    refs: set[str] = set()
    for _, entry in _entries(sidebar, "modules", "exceptions", "tasks"):
        page = f"{entry['id']}.html"
        if entry.get("deprecated") is True:
            refs.add(page)
        for node, anchor in _nodes(entry):
            if node.get("deprecated") is True:
                refs.add(f"{page}#{anchor}")
    return refs


_SECTION_TYPES = {"modules": "module", "exceptions": "exception", "tasks": "task"}


def _header_items(page: str, parent: str, kind: str, headers: Any) -> list[RawItem]:
    """Heading sub-items, titled like ExDoc >= 0.30 titles them: "Section - Parent"."""
    out: list[RawItem] = []
    for header in _dicts(headers):
        anchor = _text(header.get("anchor"))
        if anchor:
            name = _text(header.get("id")) or anchor
            out.append(RawItem(f"{page}#{anchor}", f"{name} - {parent}", kind, None))
    return out


def sidebar_items(sidebar: Mapping[str, Any]) -> tuple[RawItem, ...]:
    """Items for ExDoc <= 0.19, which has no search index: pages, functions, headers.

    Types here are provisional (functions may be macros); the HTML page refines them.
    """
    out: list[RawItem] = []
    for _, entry in _entries(sidebar, "extras"):
        page = f"{entry['id']}.html"
        title = _text(entry.get("title")) or entry["id"]
        out.append(RawItem(ref=page, title=title, type="extras", doc=None))
        out.extend(_header_items(page, title, "extras", entry.get("headers")))
    for section, entry in _entries(sidebar, "modules", "exceptions", "tasks"):
        module = entry["id"]
        page = f"{module}.html"
        page_type = _SECTION_TYPES[section]
        title = _text(entry.get("title")) or module
        out.append(RawItem(ref=page, title=title, type=page_type, doc=None))
        out.extend(_header_items(page, module, page_type, entry.get("sections")))
        for _node, anchor in _nodes(entry):
            ref = parse_ref(f"{page}#{anchor}")
            kind = {"t": "type", "c": "callback"}.get(ref.kind or "", "function")
            label = f"{module}.{ref.name}/{ref.arity}" if ref.name else f"{module} {anchor}"
            out.append(RawItem(ref=f"{page}#{anchor}", title=label, type=kind, doc=None))
    return tuple(out)
