"""parse_hexdocs over the real corpus: every ExDoc generation, refs, text, links, pages."""

from __future__ import annotations

import json
import re
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from lxml import html

from hexlocal_core.errors import IngestError
from hexlocal_core.ingest.exdoc_search import load_search_index, parse_ref
from hexlocal_core.ingest.hexdocs import ParsedDocs, parse_hexdocs
from hexlocal_core.ingest.html_markdown import element_to_markdown
from hexlocal_core.ingest.navigation import is_heading_only, is_navigation_only
from hexlocal_core.ingest.tarball import read_docs_tarball
from hexlocal_core.model import DocItem, DocType
from tests.support.paths import HEXDOCS, SHARED

MAX_BYTES = 200 * 1024 * 1024
TARBALLS = sorted(p.name.removesuffix(".tar.gz") for p in HEXDOCS.glob("*.tar.gz"))
GENERATIONS = {
    "search_data (searchData={json object})": "search_data",
    "search_items (searchNodes=[json array])": "search_items",
    "none (sidebar_items only)": "sidebar",
}


def _split(name: str) -> tuple[str, str]:
    package, version = name.split("-", 1)
    return package, version


@cache
def _files(name: str) -> dict[str, bytes]:
    return read_docs_tarball((HEXDOCS / f"{name}.tar.gz").read_bytes(), max_bytes=MAX_BYTES)


@cache
def _parsed(name: str) -> ParsedDocs:
    package, version = _split(name)
    return parse_hexdocs(_files(name), package=package, version=version)


def parsed(corpus: Path, name: str) -> ParsedDocs:
    return _parsed(name)


def by_ref(docs: ParsedDocs) -> dict[str, DocItem]:
    return {item.ref: item for item in docs.items}


@cache
def _manifest() -> dict[str, dict[str, Any]]:
    data = json.loads((HEXDOCS / "MANIFEST.json").read_text())
    return {f"{e['package']}-{e['version']}": e for e in data["hexdocs"]}


# -- every tarball ---------------------------------------------------------------------


@pytest.mark.parametrize("name", TARBALLS)
def test_every_tarball_parses(corpus: Path, name: str) -> None:
    docs = parsed(corpus, name)
    package, version = _split(name)
    assert docs.generation == GENERATIONS[_manifest()[name]["search_format"]]
    assert docs.items, name
    assert docs.counts["items"] == len(docs.items)
    assert all(i.package == package and i.version == version for i in docs.items)
    base = f"https://hexdocs.pm/{package}/{version}/"
    assert all(i.hexdocs_url == base + i.ref for i in docs.items)
    assert not any(i.page in ("api-reference.html", "search.html", "404.html") for i in docs.items)
    with_text = [i for i in docs.items if i.markdown.strip()]
    assert len(with_text) >= 0.8 * len(docs.items)


@pytest.mark.parametrize("name", [n for n in TARBALLS if n != "mime-1.3.1"])
def test_refs_are_kept_exactly_as_exdoc_wrote_them(corpus: Path, name: str) -> None:
    index = load_search_index(_files(name))
    assert index is not None
    docs = parsed(corpus, name)
    raw = Counter(item.ref for item in index.items)
    kept = Counter(item.ref for item in docs.items)
    assert not kept - raw  # nothing invented
    assert sum((raw - kept).values()) == docs.counts["dropped_navigation"]


# -- generations -----------------------------------------------------------------------

GENERATION_SAMPLES = [
    ("jason-1.4.4", "search_data", "Jason.html#decode/2"),  # ExDoc 0.36
    ("jason-1.4.5", "search_data", "Jason.html#decode/2"),  # ExDoc 0.40, with .md pages
    ("jason-1.2.2", "search_items", "Jason.html#decode/2"),  # ExDoc 0.29
    ("mime-1.3.1", "sidebar", "MIME.html#extensions/1"),  # ExDoc 0.19
    ("telemetry-1.2.1", "search_data", "telemetry.html#attach/4"),  # EDoc
]


@pytest.mark.parametrize(("name", "generation", "ref"), GENERATION_SAMPLES)
def test_each_generation_gives_documented_functions_text(
    corpus: Path, name: str, generation: str, ref: str
) -> None:
    docs = parsed(corpus, name)
    assert docs.generation == generation
    functions = [i for i in docs.items if i.doc_type is DocType.FUNCTION and "-" not in i.ref]
    assert functions
    assert by_ref(docs)[ref].markdown.strip()
    documented = [f for f in functions if f.markdown.strip()]
    assert len(documented) >= 0.75 * len(functions)
    assert all(f.function and f.arity is not None and f.module for f in functions)


def test_jason_decode_has_signature_and_links(corpus: Path) -> None:
    item = by_ref(parsed(corpus, "jason-1.4.4"))["Jason.html#decode/2"]
    assert item.title == "Jason.decode/2"
    assert item.doc_type is DocType.FUNCTION
    assert (item.module, item.function, item.arity) == ("Jason", "decode", 2)
    assert item.signature == "decode(input, opts \\\\ [])"
    assert item.markdown == "Parses a JSON value from `input` iodata."
    assert item.hexdocs_url == "https://hexdocs.pm/jason/1.4.4/Jason.html#decode/2"
    assert item.source_url == "https://github.com/michalmuskala/jason/blob/v1.4.4/lib/jason.ex#L68"


def test_docs_html_url_from_hex_pm_builds_the_links(corpus: Path) -> None:
    docs = parse_hexdocs(
        _files("jason-1.4.4"),
        package="jason",
        version="1.4.4",
        docs_html_url="https://jason.hexdocs.pm/",
    )
    item = by_ref(docs)["Jason.html#decode/2"]
    assert item.hexdocs_url == "https://jason.hexdocs.pm/1.4.4/Jason.html#decode/2"


def test_heading_sub_items_keep_context(corpus: Path) -> None:
    items = by_ref(parsed(corpus, "jason-1.4.4"))
    sub = items["Jason.html#decode/2-decoding-keys-to-atoms"]
    assert sub.title == "Decoding keys to atoms - Jason.decode/2"
    assert sub.doc_type is DocType.FUNCTION
    assert (sub.function, sub.arity) == ("decode", 2)
    assert sub.signature == items["Jason.html#decode/2"].signature
    assert "DoS" in sub.markdown
    callback = by_ref(parsed(corpus, "plug-1.19.2"))["Plug.html#c:init/1"]
    assert (callback.doc_type, callback.function, callback.arity) == (DocType.CALLBACK, "init", 1)


def test_empty_docs_are_filled_from_the_page(corpus: Path) -> None:
    # ExDoc 0.36: the type's doc is "" in search_data; its spec comes from the HTML.
    html_filled = by_ref(parsed(corpus, "jason-1.4.4"))["Jason.html#t:keys/0"]
    assert html_filled.markdown.startswith("```elixir\n@type keys() ::")
    assert "String.t() -> term()" in html_filled.markdown
    # ExDoc 0.40: from the page's .md, with the spec's escaped arrows repaired.
    md_filled = by_ref(parsed(corpus, "jason-1.4.5"))["Jason.html#t:keys/0"]
    assert md_filled.markdown == (
        "```elixir\n"
        "@type keys() :: :atoms | :atoms! | :strings | :copy | (String.t() -> term())\n"
        "```"
    )
    assert parsed(corpus, "jason-1.4.5").counts["from_md"] > 0


@pytest.mark.parametrize("name", TARBALLS)
def test_no_item_keeps_the_md_pages_footer(corpus: Path, name: str) -> None:
    # ExDoc >= 0.40 ends each .md page with a pointer to api-reference.md; the last item
    # read from a page used to carry it (72 chunks over 10 corpus packages), some items
    # nothing else, so search matched navigation text and `diff` saw changed docs.
    docs = parsed(corpus, name)
    assert not [i.ref for i in docs.items if "for complete listing*" in i.markdown]
    if docs.counts.get("from_md"):
        assert all(i.markdown.strip() != "---" for i in docs.items)


@pytest.mark.parametrize("name", TARBALLS)
def test_no_item_keeps_kramdown_attribute_lists(corpus: Path, name: str) -> None:
    # ExDoc >= 0.40's .md pages keep an admonition's `{: .warning}` (Ecto has 142 chunks
    # of them): ExDoc renders it as a class, a reader of the text only trips over it
    docs = parsed(corpus, name)
    left = re.compile(r"\{:\s*[.#][A-Za-z_]")  # outside fenced code, which may show the markup
    assert not [
        i.ref for i in docs.items if left.search(re.sub(r"```.*?```", "", i.markdown, flags=re.S))
    ]


def test_sidebar_only_package_takes_docs_from_html(corpus: Path) -> None:
    docs = parsed(corpus, "mime-1.3.1")
    assert docs.counts.get("from_html") == len(docs.items)
    items = by_ref(docs)
    module = items["MIME.html"]
    assert module.doc_type is DocType.MODULE
    assert module.markdown.startswith("Maps MIME types to its file extensions")
    assert "```elixir\nconfig :mime, :types, %{" in module.markdown
    ext = items["MIME.html#extensions/1"]
    assert ext.title == "MIME.extensions/1"
    assert ext.signature == "extensions(type)"
    assert ext.source_url == "https://github.com/elixir-lang/mime/blob/v1.3.1/lib/mime.ex#L2"
    assert "## Examples" in ext.markdown
    assert '```elixir\niex> MIME.extensions("text/html")' in ext.markdown


def test_search_items_plain_text_is_replaced_by_structured_html(corpus: Path) -> None:
    item = by_ref(parsed(corpus, "jason-1.2.2"))["Jason.html#decode!/2"]
    # search_items holds "iex&gt; Jason . decode! ( &quot;{}&quot; )"; the page has real code.
    assert '```elixir\niex> Jason.decode!("{}")' in item.markdown
    assert "&quot;" not in item.markdown and "&gt;" not in item.markdown


def test_erlang_edoc_package(corpus: Path) -> None:
    docs = parsed(corpus, "telemetry-1.2.1")
    assert docs.proglang == "erlang"
    items = by_ref(docs)
    attach = items["telemetry.html#attach/4"]
    assert attach.signature == "attach(HandlerId, EventName, Function, Config)"
    assert attach.markdown.startswith("```erlang\n-spec attach(HandlerId")
    assert "`&Mod.fun/4`" in attach.markdown  # entities unescaped
    assert items["telemetry.html#t:handler_id/0"].markdown == (
        "```erlang\n-type handler_id() :: term().\n```"
    )
    assert items["readme.html#installation"].markdown.startswith("Telemetry is available on")


def test_elixir_app_tarball(corpus: Path) -> None:
    items = by_ref(parsed(corpus, "eex-1.18.4"))
    fun = items["EEx.html#function_from_file/5"]
    assert fun.module == "EEx" and fun.doc_type is DocType.MACRO
    assert fun.signature and fun.signature.startswith("function_from_file(")
    assert fun.source_url and "lib/eex/lib/eex.ex#L" in fun.source_url
    assert items["EEx.html#module-options"].markdown.strip()


def test_deprecations(corpus: Path) -> None:
    push = by_ref(parsed(corpus, "plug-1.19.2"))["Plug.Conn.html#push/3"]
    assert push.deprecated == (
        "This function is deprecated. Most browsers and clients have removed push support."
    )
    hash_dict = by_ref(parsed(corpus, "elixir-1.18.4"))["HashDict.html"]
    assert hash_dict.deprecated and hash_dict.deprecated.startswith("This module is deprecated")
    assert by_ref(parsed(corpus, "plug-1.19.2"))["Plug.Conn.html#put_status/2"].deprecated is None


def test_duplicate_refs_are_kept_and_reported(corpus: Path) -> None:
    docs = parsed(corpus, "jason-1.4.4")
    refs = Counter(i.ref for i in docs.items)
    assert refs["changelog.html#enhancements"] > 1
    assert [n.code for n in docs.notices] == ["duplicate_refs"]


def test_navigation_only_items_are_dropped(corpus: Path) -> None:
    refs = set(by_ref(parsed(corpus, "anubis_mcp-2.0.0")))
    assert "building-a-server.html#next-steps" not in refs
    assert "building-a-server.html#resources" in refs
    # changelog entries are lists too, but each starts with its own words
    assert "changelog.html#continuous-integration-3" in refs
    assert "api-reference.html" not in by_ref(parsed(corpus, "mime-1.3.1"))


def test_no_index_at_all_is_an_ingest_error() -> None:
    with pytest.raises(IngestError, match="no ExDoc index"):
        parse_hexdocs({"index.html": b"<html></html>"}, package="x", version="1.0.0")


def test_malformed_index_is_an_ingest_error() -> None:
    files = {"dist/search_data-1.js": b'searchData={"items": [{"ref": '}
    with pytest.raises(IngestError, match="malformed JSON"):
        parse_hexdocs(files, package="x", version="1.0.0")


def test_index_without_pages_still_gives_items() -> None:
    data = {
        "items": [
            {"type": "module", "ref": "M.html", "title": "M", "doc": "About M."},
            {"type": "function", "ref": "M.html#f/1", "title": "M.f/1", "doc": None},
            {"type": "strange", "ref": "M.html#c:cb/2", "title": "M.cb/2", "doc": "A cb."},
        ]
    }
    files = {"dist/search_data-1.js": b"searchData=" + json.dumps(data).encode()}
    items = by_ref(parse_hexdocs(files, package="x", version="1.0.0"))
    assert items["M.html"].markdown == "About M."
    assert items["M.html#f/1"].markdown == ""
    assert items["M.html#f/1"].signature is None and items["M.html#f/1"].source_url is None
    assert items["M.html#c:cb/2"].doc_type is DocType.CALLBACK  # unknown type: from the ref


# -- no duplicated text ----------------------------------------------------------------


def _parent_refs(item: DocItem) -> list[str]:
    ref = parse_ref(item.ref, module_page=item.module is not None)
    parents = [ref.page]
    if ref.section is not None and ref.detail_id is not None:
        parents.append(f"{ref.page}#{ref.detail_id}")
    return [p for p in parents if p != item.ref]


@pytest.mark.parametrize(
    "name",
    ["jason-1.4.4", "jason-1.4.5", "jason-1.2.2", "mime-1.3.1", "telemetry-1.2.1", "plug-1.19.2"],
)
def test_pages_and_their_sections_share_no_text(corpus: Path, name: str) -> None:
    docs = parsed(corpus, name)
    first: dict[str, DocItem] = {}
    for item in docs.items:
        first.setdefault(item.ref, item)
    for item in docs.items:
        text = item.markdown.strip()
        if "#" not in item.ref or len(text) < 40:
            continue
        for parent in _parent_refs(item):
            if parent in first:
                assert text not in first[parent].markdown, (item.ref, parent)


# -- the evaluation set ----------------------------------------------------------------


def _eval_queries() -> list[dict[str, Any]]:
    path = SHARED / "eval" / "dev.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("query", _eval_queries(), ids=lambda q: str(q["id"]))
def test_eval_refs_exist_with_text(corpus: Path, query: dict[str, Any]) -> None:
    docs = parsed(corpus, f"{query['package']}-{query['version']}")
    items = by_ref(docs)
    expect = query["expect"]
    if "page" in expect:
        assert any(i.page == expect["page"] and i.markdown.strip() for i in docs.items)
        return
    for ref in expect.get("any_ref") or [expect["ref"]]:
        assert ref in items, ref
        assert items[ref].markdown.strip(), ref


# -- refs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ref", "kind", "name", "arity", "section", "detail_id"),
    [
        ("Jason.html", None, None, None, None, None),
        ("Jason.html#decode/2", None, "decode", 2, None, "decode/2"),
        ("Jason.html#decode/2-options", None, "decode", 2, "options", "decode/2"),
        ("Plug.Conn.html#c:init/1", "c", "init", 1, None, "c:init/1"),
        ("Jason.html#t:t/0", "t", "t", 0, None, "t:t/0"),
        ("Mod.html#module-options", None, None, None, "module-options", None),
        ("Kernel.html#%3C%3E/2-examples", None, "<>", 2, "examples", "%3C%3E/2"),
        ("Kernel.html#//2", None, "/", 2, None, "//2"),
        ("Kernel.html#..///3", None, "..//", 3, None, "..///3"),
        ("Kernel.html#--/2-examples", None, "--", 2, "examples", "--/2"),
        ("Crypto.html#sha256/1", None, "sha256", 1, None, "sha256/1"),
    ],
)
def test_parse_ref(
    ref: str,
    kind: str | None,
    name: str | None,
    arity: int | None,
    section: str | None,
    detail_id: str | None,
) -> None:
    parts = parse_ref(ref)
    assert (parts.kind, parts.name, parts.arity, parts.section) == (kind, name, arity, section)
    assert parts.detail_id == detail_id


def test_guide_anchors_are_sections() -> None:
    parts = parse_ref("readme.html#v1-2/3-notes", module_page=False)
    assert (parts.name, parts.section) == (None, "v1-2/3-notes")


# -- HTML -> markdown and navigation rules ---------------------------------------------

HTML_CASES = [
    (
        "heading without ExDoc chrome, inline code, links",
        '<h2 id="x" class="section-heading"><a href="#x" class="hover-link"><i class="ri-link-m">'
        '</i><p class="sr-only">x</p></a><span class="text">Options</span></h2>'
        '<p>Use <code class="inline">:a</code>, <a href="https://e.com">site</a> or '
        '<a href="M.html#f/1"><code class="inline">M.f/1</code></a>.</p>',
        "## Options\n\nUse `:a`, [site](https://e.com) or `M.f/1`.",
    ),
    (
        "highlighted code keeps its language and prompt",
        '<pre><code class="makeup elixir"><span class="gp unselectable">iex&gt; </span>'
        "<span>1 + 1</span>\n2</code></pre>",
        "```elixir\niex> 1 + 1\n2\n```",
    ),
    (
        "other languages and fences inside code",
        '<pre><code class="makeup erlang">ok.</code></pre><pre><code>has ``` fence</code></pre>',
        "```erlang\nok.\n```\n\n````\nhas ``` fence\n````",
    ),
    (
        "nested and ordered lists",
        "<ul><li><p>one</p><ul><li>nested</li></ul></li><li>two <strong>bold</strong></li></ul>"
        '<ol start="3"><li>three</li></ol>',
        "- one\n  - nested\n- two **bold**\n\n3. three",
    ),
    (
        "tables",
        "<table><tr><th>a</th><th>b|c</th></tr><tr><td>1</td><td>2</td></tr></table>",
        "| a | b\\|c |\n| --- | --- |\n| 1 | 2 |",
    ),
    (
        "admonitions become quotes",
        '<section class="admonition warning"><h4 class="admonition-title">Careful</h4>'
        "<p>Body.</p></section>",
        "> #### Careful\n>\n> Body.",
    ),
    (
        "loose text between blocks (EDoc)",
        "<p><code>telemetry</code> emits.</p>For more see <a href='#a/1'><code>a/1</code></a>.",
        "`telemetry` emits.\n\nFor more see `a/1`.",
    ),
]


@pytest.mark.parametrize(("case", "source", "expected"), HTML_CASES, ids=[c[0] for c in HTML_CASES])
def test_html_to_markdown(case: str, source: str, expected: str) -> None:
    assert element_to_markdown(html.fragment_fromstring(f"<div>{source}</div>")) == expected


@pytest.mark.parametrize(
    ("markdown", "section", "dropped"),
    [
        ("- [Transports](transports.md)\n- [Recipes](recipes.md)", None, True),
        ("* The [Safe Ecto Migrations guide](safe_migrations.md)", None, True),
        ("- [Talk](https://youtu.be/x) (video)", None, True),
        ("- [Transports](transports.md) shows how to serve this over STDIO or HTTP.", None, False),
        ("- [Transports](transports.md) shows how to serve this over STDIO.", "next-steps", True),
        ("- fix flaky test ([939fd76](https://github.com/o/r/commit/939fd76))", None, False),
        ("See [the guide](guide.md) for details.", "next-steps", False),
        ("- plain item without a link", None, False),
    ],
)
def test_navigation_only(markdown: str, section: str | None, dropped: bool) -> None:
    assert is_navigation_only(markdown, section=section) is dropped


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [("# Changelog", True), ("# A\n\n## B", True), ("##+Q 65536", False), ("# A\n\ntext", False)],
)
def test_heading_only(markdown: str, expected: bool) -> None:
    assert is_heading_only(markdown) is expected
