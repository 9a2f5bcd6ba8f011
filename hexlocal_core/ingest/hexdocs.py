"""HexDocs tarball files -> `DocItem`s, for every ExDoc generation.

Which index lists the items (first found wins):

    dist/search_data-*.js    ExDoc >= 0.30   generation "search_data"
    dist/search_items-*.js   ExDoc 0.20-0.29 generation "search_items"
    dist/sidebar_items-*.js  ExDoc <= 0.19   generation "sidebar" (text from the HTML)

Refs are kept exactly as ExDoc wrote them (they are what hexdocs.pm links to and what
evaluations match). Navigation-only items (API reference, link lists, "Next steps",
title-only pages) are dropped. See `exdoc_items` for where each item's text comes from.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping

from attrs import evolve, field, frozen

from hexlocal_core.cancel import checkpoint
from hexlocal_core.errors import IngestError
from hexlocal_core.ingest.exdoc_items import ItemBuilder
from hexlocal_core.ingest.exdoc_md import without_attribute_lists
from hexlocal_core.ingest.exdoc_search import (
    NAVIGATION_PAGES,
    SIDEBAR,
    RawItem,
    load_search_index,
    load_sidebar,
    parse_ref,
    sidebar_deprecations,
    sidebar_items,
)
from hexlocal_core.ingest.navigation import is_heading_only, is_navigation_only
from hexlocal_core.model import DocItem, Notice
from hexlocal_core.notice_codes import NoticeCode
from hexlocal_core.untrusted import clip

log = logging.getLogger("hexlocal.ingest.hexdocs")


@frozen
class ParsedDocs:
    """The items of one docs tarball and what the parser noticed on the way."""

    package: str
    version: str
    generation: str  # "search_data" | "search_items" | "sidebar"
    items: tuple[DocItem, ...]
    proglang: str = "elixir"
    producer: str | None = None  # e.g. "ex_doc 0.36.1" (search_data only)
    notices: tuple[Notice, ...] = ()
    # items, dropped_navigation, duplicate_refs, and where text came from:
    # from_index / from_md / from_html / from_plain_text / empty
    counts: Mapping[str, int] = field(factory=dict)


def hexdocs_base_url(package: str, version: str, docs_html_url: str | None) -> str:
    """The URL prefix of the version's pages; refs are appended to it."""
    if docs_html_url:
        return f"{docs_html_url.rstrip('/')}/{version}/"
    return f"https://hexdocs.pm/{package}/{version}/"


def _is_navigation(item: DocItem) -> bool:
    if item.page in NAVIGATION_PAGES:
        return True
    if not item.markdown.strip():
        return False
    section = item.ref.partition("#")[2] or None
    return is_heading_only(item.markdown) or is_navigation_only(item.markdown, section=section)


def _notices(package: str, version: str, duplicates: list[str]) -> tuple[Notice, ...]:
    if not duplicates:
        return ()
    shown = ", ".join(clip(ref, 80) for ref in duplicates[:3]) + (
        " ..." if len(duplicates) > 3 else ""
    )
    return (
        Notice(
            code=NoticeCode.DUPLICATE_REFS,
            message=(
                f"The docs of {package} {version} list {len(duplicates)} ref(s) more than "
                f"once ({shown}); ExDoc gave repeated headings the same anchor, so those "
                "items share a ref and their links open the first of them."
            ),
        ),
    )


def parse_hexdocs(
    files: Mapping[str, bytes],
    *,
    package: str,
    version: str,
    docs_html_url: str | None = None,
    base_url: str | None = None,
) -> ParsedDocs:
    """Parse the files of a HexDocs tarball (see `read_docs_tarball`) into items.

    `docs_html_url` is hex.pm's `docs_html_url` for the package (e.g.
    `https://jason.hexdocs.pm/`); without it links use `https://hexdocs.pm/{package}/`.
    `base_url`, for docs published elsewhere than hexdocs (OTP's, on erlang.org), is the
    pages' URL prefix as it is: each item's link is `base_url` + its ref.
    Raises `IngestError` when the tarball has no ExDoc index at all.
    """
    index = load_search_index(files)
    sidebar = load_sidebar(files)
    raw_items: tuple[RawItem, ...]
    if index is not None:
        raw_items, generation = index.items, index.generation
        proglang, producer = index.proglang, index.producer
    elif sidebar is not None:
        raw_items, generation, proglang, producer = sidebar_items(sidebar), SIDEBAR, "elixir", None
    else:
        raise IngestError(
            f"the docs of {package} {version} have no ExDoc index "
            "(dist/search_data-*.js, dist/search_items-*.js or dist/sidebar_items-*.js); "
            "they were not built by ExDoc or the tarball is incomplete"
        )
    builder = ItemBuilder(
        files,
        raw_items,
        package=package,
        version=version,
        generation=generation,
        proglang=proglang,
        base_url=base_url or hexdocs_base_url(package, version, docs_html_url),
        deprecated_refs=frozenset(sidebar_deprecations(sidebar) if sidebar else ()),
    )
    items: list[DocItem] = []
    origins: Counter[str] = Counter()
    dropped = 0
    bad_arity = 0
    for raw in raw_items:
        checkpoint()
        bad_arity += raw.type != "extras" and parse_ref(raw.ref).oversized_arity
        item, origin = builder.build(raw)
        # Whichever file gave the text (the .md page, the search index's markdown, HTML)
        item = evolve(item, markdown=without_attribute_lists(item.markdown))
        if _is_navigation(item):
            dropped += 1
            log.debug("dropped navigation-only item %s", item.ref)
            continue
        items.append(item)
        origins[origin if origin == "empty" else f"from_{origin}"] += 1
    ref_counts = Counter(item.ref for item in items)
    duplicates = sorted(ref for ref, n in ref_counts.items() if n > 1)
    counts = dict(origins)
    counts.update(items=len(items), dropped_navigation=dropped, duplicate_refs=len(duplicates))
    if bad_arity:
        # Kept, as a heading section without function/arity: the ref still links.
        counts["oversized_arity"] = bad_arity
    log.info("parsed %s %s (%s): %d items", package, version, generation, len(items))
    return ParsedDocs(
        package=package,
        version=version,
        generation=generation,
        items=tuple(items),
        proglang=proglang,
        producer=producer,
        notices=_notices(package, version, duplicates),
        counts=counts,
    )
