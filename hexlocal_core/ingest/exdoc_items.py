"""Turn ExDoc index entries into `DocItem`s, completing them from the pages.

The index gives each item's ref, title, type and (usually) its text. The pages give
what the index lacks: signature, "View Source" link, deprecation notice, and the text
itself where the index has none or only plain text. Where text comes from:

    search_data (markdown)        the entry's `doc`, as published
    search_items, EDoc entries    the HTML region of the item, rendered as markdown
                                  (plain-text `doc`, entities unescaped, as a fallback)
    sidebar only (ExDoc <= 0.19)  the HTML region of the item
    empty `doc`                   the page's .md section (ExDoc >= 0.40), else the HTML

Every region stops where the page's next item begins, so a page (or function) item
never repeats the text of its own heading sub-items.
"""

from __future__ import annotations

import html as html_entities
import logging
from collections.abc import Mapping, Sequence

from hexlocal_core.ingest.exdoc_html import Detail, HtmlPage
from hexlocal_core.ingest.exdoc_md import MarkdownPage
from hexlocal_core.ingest.exdoc_search import SEARCH_DATA, RawItem, Ref, parse_ref
from hexlocal_core.model import DocItem, DocType
from hexlocal_core.untrusted import clip, decode_text

log = logging.getLogger("hexlocal.ingest.exdoc_items")

_DOC_TYPES = {t.value: t for t in DocType}
_EXTRAS = "extras"
# The corpus's largest package has 46k lines of markdown and no .md page above 1 MiB.
MAX_MD_PAGE_BYTES = 4 * 1024 * 1024
MAX_MD_LINES = 250_000


def _doc_type(raw_type: str, ref: Ref, detail: Detail | None) -> DocType:
    if raw_type in _DOC_TYPES:
        found = _DOC_TYPES[raw_type]
        # ExDoc <= 0.19 sidebars cannot tell macros from functions; the page can.
        if detail is not None and found in (DocType.FUNCTION, DocType.CALLBACK):
            refined = _DOC_TYPES.get(detail.kind or "")
            if refined in (DocType.MACRO, DocType.MACROCALLBACK):
                return refined
        return found
    if ref.kind == "t":
        return DocType.TYPE
    if ref.kind == "c":
        return DocType.CALLBACK
    if ref.name is not None:
        return DocType.MACRO if detail is not None and detail.kind == "macro" else DocType.FUNCTION
    log.info("unknown ExDoc item type %r for %s; treated as a module", raw_type, ref.page)
    return DocType.MODULE


class ItemBuilder:
    """Builds the DocItems of one tarball; caches each parsed page."""

    def __init__(
        self,
        files: Mapping[str, bytes],
        raw_items: Sequence[RawItem],
        *,
        package: str,
        version: str,
        generation: str,
        proglang: str,
        base_url: str,
        deprecated_refs: frozenset[str] = frozenset(),
    ) -> None:
        self.files = files
        self.package = package
        self.version = version
        self.generation = generation
        self.proglang = proglang
        self.base_url = base_url
        self.deprecated_refs = deprecated_refs
        self._html: dict[str, HtmlPage | None] = {}
        self._md_lines_left = MAX_MD_LINES
        self._md: dict[str, MarkdownPage | None] = {}
        self._page_types: dict[str, str] = {}
        self._split_ids: dict[str, set[str]] = {}
        for raw in raw_items:
            page, _, anchor = raw.ref.partition("#")
            if anchor:
                self._split_ids.setdefault(page, set()).add(anchor)
            else:
                self._page_types.setdefault(page, raw.type)

    # -- pages -------------------------------------------------------------------------
    def html(self, page: str) -> HtmlPage | None:
        if page not in self._html:
            data = self.files.get(page)
            lang = "erlang" if self.proglang == "erlang" else "elixir"
            self._html[page] = HtmlPage(data, code_lang=lang) if data is not None else None
        return self._html[page]

    def markdown_page(self, page: str) -> MarkdownPage | None:
        if page not in self._md:
            data = self.files.get(page.removesuffix(".html") + ".md")
            self._md[page] = self._parse_md(page, data) if data is not None else None
        return self._md[page]

    def _parse_md(self, page: str, data: bytes) -> MarkdownPage | None:
        """The page's .md, unless it (or the package's .md pages together) is far larger
        than any real one: markdown-it costs up to ~60 us per line, so 200k heading lines
        took 12 s. Past the bound the HTML page serves instead."""
        lines = data.count(b"\n") + 1
        if len(data) > MAX_MD_PAGE_BYTES or lines > self._md_lines_left:
            log.warning("%s: .md page too large (%d lines); HTML used", clip(page), lines)
            return None
        self._md_lines_left -= lines
        return MarkdownPage(decode_text(data))

    # -- items -------------------------------------------------------------------------
    def build(self, raw: RawItem) -> tuple[DocItem, str]:
        """The item, and where its text came from: index, md, html, plain_text or empty."""
        page_type = self._page_types.get(raw.ref.partition("#")[0], raw.type)
        module_page = page_type != _EXTRAS and raw.type != _EXTRAS
        ref = parse_ref(raw.ref, module_page=module_page)
        page = self.html(ref.page)
        detail = page.detail(ref.detail_id) if page is not None and ref.detail_id else None
        markdown, origin = self._markdown(raw, ref, page)
        item = DocItem(
            package=self.package,
            version=self.version,
            ref=raw.ref,
            title=raw.title,
            doc_type=_doc_type(raw.type, ref, detail),
            markdown=markdown,
            module=ref.page.removesuffix(".html") if module_page else None,
            function=ref.name,
            arity=ref.arity,
            signature=detail.signature if detail is not None else None,
            deprecated=self._deprecated(ref, page, detail),
            hexdocs_url=f"{self.base_url}{raw.ref}",
            source_url=self._source_url(page, detail),
        )
        return item, origin

    def _source_url(self, page: HtmlPage | None, detail: Detail | None) -> str | None:
        if detail is not None and detail.source_url:
            return detail.source_url
        return page.page_source_url if page is not None else None

    def _deprecated(self, ref: Ref, page: HtmlPage | None, detail: Detail | None) -> str | None:
        if detail is not None:
            message = detail.deprecated
            flag_ref = f"{ref.page}#{ref.detail_id}"
        elif ref.name is None and page is not None:  # the module page or one of its sections
            message = page.page_deprecated
            flag_ref = ref.page
        else:
            return None
        if message is None and flag_ref in self.deprecated_refs:
            return "deprecated"
        return message

    def _plain_text(self, raw: RawItem) -> bool:
        """Whether the index holds plain text instead of markdown for this entry."""
        if self.generation != SEARCH_DATA:
            return True
        # EDoc docs reach search_data as text flattened from erlang+html; guides stay markdown.
        return self.proglang == "erlang" and raw.type != _EXTRAS

    def _markdown(self, raw: RawItem, ref: Ref, page: HtmlPage | None) -> tuple[str, str]:
        split_ids = self._split_ids.get(ref.page, set())
        if not self._plain_text(raw):
            text = raw.doc or ""
            origin = "index"
        else:
            text = self._html_text(ref, page, split_ids) if page is not None else ""
            origin = "html"
            if not text and raw.doc:
                text = html_entities.unescape(raw.doc).strip()
                origin = "plain_text"
        if not text.strip() and ref.section is None:
            # An empty doc: a heading sub-item is empty because its text sits in deeper
            # sub-items (never refill those: that would duplicate text); anything else
            # is an undocumented or spec-only item, completed from the page.
            text, origin = self._page_text(ref, page, split_ids)
        return text, origin if text.strip() else "empty"

    def _html_text(self, ref: Ref, page: HtmlPage, split_ids: set[str]) -> str:
        anchor = ref.detail_id if ref.section is None and ref.detail_id else ref.anchor
        return page.own_markdown(anchor, split_ids, with_specs=True) or ""

    def _page_text(self, ref: Ref, page: HtmlPage | None, split_ids: set[str]) -> tuple[str, str]:
        md = self.markdown_page(ref.page)
        if md is not None:
            text = self._md_text(ref, page, md)
            if text:
                return text, "md"
        if page is not None:
            text = self._html_text(ref, page, split_ids)
            if text:
                return text, "html"
        return "", "empty"

    def _md_text(self, ref: Ref, page: HtmlPage | None, md: MarkdownPage) -> str:
        if ref.anchor is None:
            return md.intro()
        if page is None or ref.detail_id is None:
            return ""
        index = page.detail_index(ref.detail_id)
        # The .md lists the same detail sections as the HTML, in the same order; if the
        # counts disagree the mapping is unsafe and the HTML is used instead.
        if index is None or md.detail_count != page.detail_count:
            return ""
        return md.detail(index)
