"""Property: whatever JSON or HTML a docs tarball holds, the ExDoc parsers give items or a
hexlocal error, every stored string is valid UTF-8, and no case is slow."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hexlocal_core.errors import HexlocalError
from hexlocal_core.ingest.exdoc_html import HtmlPage
from hexlocal_core.ingest.hexdocs import parse_hexdocs
from hexlocal_core.ingest.navigation import is_navigation_only

FUZZ = settings(
    max_examples=600,
    deadline=2000,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
_REF_PIECES = st.sampled_from(
    ["M.html", "#", "f/", "2", "9" * 30, "-", "t:", "c:", "module-", "%3C", "\ud800", "x"]
)
_REFS = st.lists(_REF_PIECES, max_size=6).map("".join)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    st.text(max_size=30),
    _REFS,
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.sampled_from(
                [
                    "ref",
                    "title",
                    "type",
                    "doc",
                    "id",
                    "anchor",
                    "nodeGroups",
                    "nodes",
                    "headers",
                    "sections",
                    "deprecated",
                    "items",
                    "modules",
                    "extras",
                    "tasks",
                    "producer",
                    "proglang",
                ]
            ),
            inner,
            max_size=5,
        ),
    ),
    max_leaves=25,
)
_ENTRY = st.fixed_dictionaries(
    {"ref": _REFS, "type": st.sampled_from(["function", "module", "extras", "type", "x"])},
    optional={"title": _SCALARS, "doc": st.one_of(st.text(max_size=200), _SCALARS)},
)
_HTML = st.lists(
    st.sampled_from(
        [
            "<div>",
            "</div>",
            "<ul>",
            "<li>",
            "</li>",
            "</ul>",
            '<ol start="x">',
            "<pre>",
            "</pre>",
            "<code>",
            "</code>",
            "<h2 id='f/2'>",
            "</h2>",
            "<a href='#'>",
            "</a>",
            "<section class='detail' id='f/2'>",
            "</section>",
            "<table><tr><td>",
            "&#xd800;",
            "\n",
            "text",
            "[",
            "](",
            ")",
            "- ",
            "<blockquote>",
            "<dl><dt>",
            "<br>",
            "<!-- c -->",
        ]
    ),
    max_size=60,
).map("".join)


def _check(files: dict[str, bytes]) -> None:
    try:
        parsed = parse_hexdocs(files, package="fuzz", version="1.0.0")
    except HexlocalError:
        return
    for item in parsed.items:
        for text in (item.ref, item.title, item.markdown, item.signature or ""):
            text.encode("utf-8")  # what the store needs: no lone surrogates
        assert item.arity is None or 0 <= item.arity <= 255


@FUZZ
@given(st.one_of(_JSON, st.lists(_ENTRY, max_size=6)), st.sampled_from(["data", "items", "side"]))
def test_index_json(value: object, kind: str) -> None:
    if kind == "data":
        value = {"items": value} if isinstance(value, list) else value
        name, prefix = "dist/search_data-F.js", "searchData="
    elif kind == "items":
        name, prefix = "dist/search_items-F.js", "searchNodes="
    else:
        name, prefix = "dist/sidebar_items-F.js", "sidebarNodes="
    _check({name: (prefix + json.dumps(value)).encode()})


@FUZZ
@given(st.binary(max_size=200), st.sampled_from(["searchData=", "searchNodes=", "sidebarNodes="]))
def test_index_bytes(data: bytes, prefix: str) -> None:
    name = {"searchData=": "search_data", "searchNodes=": "search_items"}.get(
        prefix, "sidebar_items"
    )
    _check({f"dist/{name}-F.js": prefix.encode() + data})


@FUZZ
@given(st.lists(_ENTRY, min_size=1, max_size=4), _HTML, st.text(max_size=200))
def test_pages(entries: list[dict[str, object]], html: str, md: str) -> None:
    for entry in entries:
        entry["doc"] = ""  # empty docs are completed from the pages
    index = ("searchNodes=" + json.dumps(entries)).encode()
    files = {"dist/search_items-F.js": index}
    for entry in entries:
        page = str(entry["ref"]).partition("#")[0]
        files[page] = f"<html><body><div id='content'>{html}</div></body></html>".encode()
        files[page.removesuffix(".html") + ".md"] = md.encode("utf-8", "surrogatepass")
    _check(files)


@FUZZ
@given(_HTML)
def test_html_fragments(html: str) -> None:
    page = HtmlPage(f"<html><body><div id='moduledoc'>{html}</div></body></html>".encode())
    page.own_markdown(None, {"f/2"})
    page.own_markdown("f/2", set(), with_specs=True)


@FUZZ
@given(st.text(alphabet="-*[]()!`ab 1.\n#", max_size=300), st.sampled_from([None, "next-steps"]))
def test_navigation(markdown: str, section: str | None) -> None:
    is_navigation_only(markdown, section=section)
