"""What hexlocal reads from an ExDoc HTML page (all generations, 0.19 to 0.40).

Per page: the "View Source" link and deprecation notice of the module or guide, and per
`<section class="detail">` (function, macro, callback, type) its signature, source link,
deprecation notice and specs. It also renders the *own text* of any item as markdown:
the region of the page that belongs to that item and not to one of its heading
sub-items, so a page item and its sections never share text.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from functools import cached_property

from attrs import frozen
from lxml import etree, html

from hexlocal_core.ingest.html_markdown import (
    Part,
    children_parts,
    code_block,
    inline_text,
    is_skipped,
    parts_to_markdown,
)

log = logging.getLogger("hexlocal.ingest.exdoc_html")

_DETAILS = "//section[contains(concat(' ', normalize-space(@class), ' '), ' detail ')][@id]"
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})


@frozen
class Detail:
    """One `<section class="detail">`: a function, macro, callback or type."""

    anchor: str
    kind: str | None  # "function", "macro", "callback", "type" from the detail link label
    signature: str | None
    source_url: str | None
    deprecated: str | None
    specs: tuple[str, ...]


def _is_view_source(a: html.HtmlElement) -> bool:
    if a.get("title") == "View Source" or a.get("aria-label") == "View Source":
        return True
    return "view-source" in (a.get("class") or "")


def _source_link(el: html.HtmlElement) -> str | None:
    for a in el.iter("a"):
        href = a.get("href")
        if href and _is_view_source(a) and not href.endswith(".md"):
            return str(href)
    return None


def _deprecation(el: html.HtmlElement) -> str | None:
    for div in el.iterchildren("div"):
        if "deprecated" in (div.get("class") or "").split():
            text = " ".join(div.text_content().split())
            if text:
                return text
    return None


def _signature(section: html.HtmlElement) -> str | None:
    # The detail header's h1 comes first in every ExDoc generation (docstring headings
    # are h2 and deeper).
    for h in section.iter("h1"):
        text = inline_text(h)
        return text or None
    return None


def _detail_kind(section: html.HtmlElement) -> str | None:
    for link in section.iter("a"):
        if "detail-link" not in (link.get("class") or ""):
            continue
        label = link.get("aria-label") or link.get("title") or ""
        if label.startswith("Link to this "):
            return label.rsplit(" ", 1)[-1]
        return None
    return None


def _specs(section: html.HtmlElement) -> tuple[str, ...]:
    out: list[str] = []
    for div in section.iter("div"):
        if "specs" in (div.get("class") or "").split():
            out.extend(t for pre in div.iter("pre") if (t := pre.text_content().strip()))
    return tuple(out)


class HtmlPage:
    """One parsed ExDoc page. Parse once, then ask for details and item text."""

    def __init__(self, data: bytes, *, code_lang: str = "elixir") -> None:
        self.code_lang = code_lang
        try:
            self._doc = html.document_fromstring(data)
        except (etree.ParserError, ValueError) as exc:
            log.warning("unparseable HTML page skipped: %s", exc)
            self._doc = html.document_fromstring(b"<html><body></body></html>")
        self._details: dict[str, html.HtmlElement] = {}
        for section in self._doc.xpath(_DETAILS):
            self._details.setdefault(section.get("id"), section)
        self._ids: dict[str, html.HtmlElement] | None = None
        self._detail_cache: dict[str, Detail] = {}
        self._order = {anchor: i for i, anchor in enumerate(self._details)}

    # -- page level --------------------------------------------------------------------
    @property
    def detail_count(self) -> int:
        return len(self._details)

    def detail_index(self, anchor: str) -> int | None:
        """Position of a detail section in the page (the order of a 0.40 page's .md)."""
        return self._order.get(anchor)

    @cached_property
    def page_source_url(self) -> str | None:
        """The page's own "View Source" link (the first one outside detail sections)."""
        for container in self._page_heads():
            found = _source_link(container)
            if found:
                return found
        return None

    @cached_property
    def page_deprecated(self) -> str | None:
        """The module's deprecation notice, shown above its moduledoc."""
        for ident in ("top-content", "content"):
            container = self._find_id(ident)
            found = _deprecation(container) if container is not None else None
            if found:
                return found
        return None

    def _page_heads(self) -> list[html.HtmlElement]:
        """Where a page shows its title and source link, newest ExDoc layout first."""
        top = self._find_id("top-content")
        if top is not None:
            return [top]
        content = self._find_id("content")
        if content is None:
            return []
        return [
            el
            for el in content
            if isinstance(el.tag, str) and (el.tag == "h1" or el.find("h1") is not None)
        ]

    def _find_id(self, ident: str) -> html.HtmlElement | None:
        # ElementPath's find() stops at the first match and ExDoc's containers come early,
        # unlike an XPath `//*[@id=...]`, which scans the whole (sometimes 1 MB) page.
        found: html.HtmlElement | None = self._doc.find(f".//*[@id='{ident}']")
        return found

    def detail(self, anchor: str) -> Detail | None:
        if anchor in self._detail_cache:
            return self._detail_cache[anchor]
        section = self._details.get(anchor)
        if section is None:
            return None
        self._detail_cache[anchor] = found = Detail(
            anchor=anchor,
            kind=_detail_kind(section),
            signature=_signature(section),
            source_url=_source_link(section),
            deprecated=_deprecation(section),
            specs=_specs(section),
        )
        return found

    # -- item text ---------------------------------------------------------------------
    def own_markdown(
        self, anchor: str | None, split_ids: Collection[str], *, with_specs: bool = False
    ) -> str | None:
        """Markdown of the region that belongs to `anchor` (None: the page's intro).

        The region stops at the first heading whose id is in `split_ids` (the page's
        other items), which mirrors how ExDoc cut the page into search items. None when
        the page has no such region.
        """
        if anchor is None:
            container = self._intro_container()
            if container is None:
                return None
            return self._render(_until_split(_content_parts(container), split_ids))
        section = self._details.get(anchor)
        if section is not None:
            return self._detail_markdown(section, split_ids, with_specs=with_specs)
        heading = self._by_id(anchor)
        if heading is None or heading.tag not in _HEADINGS:
            return None
        return self._render(_until_split(_following_parts(heading), split_ids))

    def _detail_markdown(
        self, section: html.HtmlElement, split_ids: Collection[str], *, with_specs: bool
    ) -> str:
        blocks: list[str] = []
        if with_specs:
            lang = self.code_lang
            blocks = [code_block(spec, _spec_lang(spec, lang)) for spec in _specs(section)]
        docstring = section.xpath(".//section[contains(@class, 'docstring')]")
        if docstring:
            text = self._render(_until_split(children_parts(docstring[0]), split_ids))
            if text:
                blocks.append(text)
        return "\n\n".join(blocks)

    def _intro_container(self) -> html.HtmlElement | None:
        for ident in ("moduledoc", "top-content", "content"):
            found = self._find_id(ident)
            if found is not None:
                return found
        return None

    def _by_id(self, anchor: str) -> html.HtmlElement | None:
        if self._ids is None:
            self._ids = {}
            for el in self._doc.iter():
                ident = el.get("id") if isinstance(el.tag, str) else None
                if ident is not None:
                    self._ids.setdefault(ident, el)
        return self._ids.get(anchor)

    def _render(self, parts: list[Part]) -> str:
        return parts_to_markdown(parts, code_lang=self.code_lang).strip()


def _spec_lang(spec: str, default: str) -> str:
    return "erlang" if spec.startswith("-") else default


def _content_parts(container: html.HtmlElement) -> list[Part]:
    """A page container's content without the page title and ExDoc chrome."""
    parts = children_parts(container)
    out: list[Part] = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
            continue
        if part.tag == "h1" or "heading-with-actions" in (part.get("class") or ""):
            continue  # the page title: the item title already carries it
        if part.get("id") in ("moduledoc", "summary") or (part.tag == "section" and part.get("id")):
            break  # a module page: moduledoc is its own container; the rest is summary
        if is_skipped(part):
            continue
        out.append(part)
    return out


def _following_parts(heading: html.HtmlElement) -> list[Part]:
    parts: list[Part] = []
    if heading.tail:
        parts.append(heading.tail)
    for sibling in heading.itersiblings():
        if isinstance(sibling.tag, str):
            parts.append(sibling)
        if sibling.tail:
            parts.append(sibling.tail)
    return parts


def _until_split(parts: list[Part], split_ids: Collection[str]) -> list[Part]:
    out: list[Part] = []
    for part in parts:
        if not isinstance(part, str) and part.tag in _HEADINGS and part.get("id") in split_ids:
            break
        out.append(part)
    return out
