"""OTP docs -> DocItems: OTP 25's `.chunk` files, OTP 27/29 beams, erlang.org links, and
the refs, titles and types checked against ExDoc's own output for OTP 27."""

from __future__ import annotations

import os
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from lxml import html

from hexlocal_core.ingest.beam import (
    BeamItems,
    items_from_beam_dir,
    items_from_chunk_dir,
    read_beam_docs,
    read_chunk_docs,
)
from hexlocal_core.ingest.erlang_docs import equivalent_to, local_call, opaque_from_dbgi
from hexlocal_core.ingest.otp_links import otp_link
from hexlocal_core.model import Atom, DocItem, DocType
from tests.support.beams import replace_chunk
from tests.support.etf import encode
from tests.support.otp_corpus import (
    APPS25,
    APPS27,
    APPS29,
    HTML27,
    OTP25,
    OTP27,
    OTP29,
    extract,
    html_dir,
    install,
    search_items,
)


@pytest.fixture(scope="module")
def otp25(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install(tmp_path_factory, OTP25)


@pytest.fixture(scope="module")
def otp27(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install(tmp_path_factory, OTP27)


@pytest.fixture(scope="module")
def otp29(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install(tmp_path_factory, OTP29)


@pytest.fixture(scope="module")
def html27(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return extract(tmp_path_factory, HTML27, lambda name: name.endswith((".html", ".js")))


def chunk_items(root: Path, app: str, major: int = 25) -> BeamItems:
    folder = APPS25[app]
    chunks = root / "lib" / folder / "doc" / "chunks"
    version = folder.split("-", 1)[1]
    return items_from_chunk_dir(chunks, package=app, version=version, link=otp_link(app, major))


def beam_items(root: Path, app: str, apps: dict[str, str], major: int) -> BeamItems:
    folder = apps[app]
    ebin = root / "lib" / folder / "ebin"
    version = folder.split("-", 1)[1]
    return items_from_beam_dir(ebin, package=app, version=version, link=otp_link(app, major))


def by_ref(found: BeamItems) -> dict[str, DocItem]:
    return {item.ref: item for item in found.items}


# --- OTP 25: .chunk files in erlang+html ------------------------------------------------------


@pytest.fixture(scope="module")
def stdlib25(otp25: Path) -> dict[str, DocItem]:
    return by_ref(chunk_items(otp25, "stdlib"))


def test_chunk_items_have_exdoc_refs_and_erlang_org_links(stdlib25: dict[str, DocItem]) -> None:
    new = stdlib25["ets.html#new/2"]
    assert (new.title, new.doc_type, new.module, new.function, new.arity) == (
        "ets.new/2",
        DocType.FUNCTION,
        "ets",
        "new",
        2,
    )
    assert new.version == "4.2" and new.package == "stdlib"
    assert new.markdown.startswith("Creates a new table and returns a table identifier")
    assert "- **`set`** - The table is a `set` table: one key, one object" in new.markdown
    assert new.hexdocs_url == "https://www.erlang.org/docs/25/man/ets.html#new-2"
    call = stdlib25["gen_server.html#c:handle_call/3"]
    assert (call.title, call.doc_type) == ("gen_server.handle_call/3", DocType.CALLBACK)
    assert call.hexdocs_url.endswith("/25/man/gen_server.html#Module:handle_call-3")
    module = stdlib25["gen_server.html"]
    assert (module.title, module.doc_type) == ("gen_server", DocType.BEHAVIOUR)
    assert module.hexdocs_url == "https://www.erlang.org/docs/25/man/gen_server.html"


def test_opaque_types_come_from_the_chunk_metadata(stdlib25: dict[str, DocItem]) -> None:
    tid = stdlib25["ets.html#t:tid/0"]
    assert tid.doc_type is DocType.OPAQUE
    assert tid.hexdocs_url.endswith("/25/man/ets.html#type-tid")
    assert stdlib25["ets.html#t:match_spec/0"].doc_type is DocType.TYPE


@pytest.mark.slow
def test_shared_docs_are_read_as_shell_docs_shows_them(otp25: Path) -> None:
    """erl_docgen documented get_env/1 and get_env/2 under one text; /2 has `#{}` and an
    `equiv` naming /1."""
    kernel = by_ref(chunk_items(otp25, "kernel"))
    shared = kernel["application.html#get_env/2"].markdown
    owner = kernel["application.html#get_env/1"].markdown
    assert shared == f"Documented together with [`get_env/1`](`get_env/1`).\n\n{owner}"
    assert "Returns the value of configuration parameter `Par`" in owner


@pytest.mark.slow
def test_every_otp25_app_reads_and_counts_what_it_leaves_out(otp25: Path) -> None:
    for app in APPS25:
        found = chunk_items(otp25, app)
        assert found.modules > 0 and found.items, app
        assert set(found.skipped) <= {"entry_hidden", "entry_doc_none", "module_hidden"}, app
        refs = [item.ref for item in found.items]
        assert len(refs) == len(set(refs)), app
        assert all(item.markdown.strip() for item in found.items), app


def test_the_erlang_module_lives_in_erts(otp25: Path) -> None:
    erts = by_ref(chunk_items(otp25, "erts"))
    info = erts["erlang.html#system_info/1"]  # nine clause groups in the chunk, one item here
    assert info.markdown.count("\n\n") > 50 and len(set(info.signature or "")) > 1
    for section in ("`allocated_areas`", "`cpu_topology`", "`wordsize`"):
        assert section in info.markdown
    send_after = erts["erlang.html#send_after/3"]
    assert send_after.markdown.startswith("Starts a timer.")
    assert erts["erlang.html#t:nil/0"].markdown == "The empty [list()](`t:list/0`)."


# --- the folder: links the install made, and hostile files -----------------------------------


@pytest.mark.slow
def test_a_doc_folder_linked_as_debian_links_it_is_followed(otp25: Path, tmp_path: Path) -> None:
    """Debian's erlang-doc installs `lib/stdlib-4.2/doc` as a link into /usr/share/doc."""
    real = tmp_path / "usr/share/doc/erlang-doc/lib/stdlib-4.2/doc"
    shutil.copytree(otp25 / "lib" / APPS25["stdlib"] / "doc", real)
    lib = tmp_path / "usr/lib/erlang/lib/stdlib-4.2"
    lib.mkdir(parents=True)
    (lib / "doc").symlink_to("../../../../share/doc/erlang-doc/lib/stdlib-4.2/doc")
    linked = items_from_chunk_dir(lib / "doc" / "chunks", package="stdlib", version="4.2")
    direct = chunk_items(otp25, "stdlib")
    assert [i.ref for i in linked.items] == [i.ref for i in direct.items]
    assert linked.items[0].hexdocs_url.startswith("https://hexdocs.pm/stdlib/4.2/")


def test_hostile_chunk_files_are_counted_not_raised(otp25: Path, tmp_path: Path) -> None:
    source = otp25 / "lib" / APPS25["stdlib"] / "doc" / "chunks"
    folder = tmp_path / "chunks"
    folder.mkdir()
    shutil.copy(source / "lists.chunk", folder / "lists.chunk")
    cap = (folder / "lists.chunk").stat().st_size
    (tmp_path / "secret.chunk").write_bytes((source / "ets.chunk").read_bytes())
    (folder / "outside.chunk").symlink_to(tmp_path / "secret.chunk")
    os.mkfifo(folder / "fifo.chunk")
    (folder / "garbage.chunk").write_bytes(b"\x83\x01garbage")
    (folder / "bomb.chunk").write_bytes(b"\x83P\xff\xff\xff\xffxx")
    (folder / "big.chunk").write_bytes(b"\x83" + b"\0" * cap)
    (folder / "shape.chunk").write_bytes(encode((Atom("docs_v2"), 1)))
    html_docs = (Atom("docs_v1"), 1, Atom("erlang"), b"text/html", Atom("none"), {}, [])
    (folder / "html.chunk").write_bytes(encode(html_docs))
    (folder / ".chunk").write_bytes(encode(html_docs))
    found = items_from_chunk_dir(folder, package="stdlib", version="4.2", max_file_bytes=cap)
    assert found.skipped.pop("bad_etf") == 2
    files = {k: v for k, v in found.skipped.items() if not k.startswith(("entry_", "module_"))}
    assert files == {
        "outside_tree": 1,
        "not_regular": 1,
        "too_large": 1,
        "bad_docs_shape": 1,
        "no_module_name": 1,
        "not_markdown": 1,
    }
    assert {item.module for item in found.items} == {"lists"}


def test_a_markdown_chunk_reads_like_a_beam() -> None:
    entry = ((Atom("function"), Atom("f"), 0), 1, [b"f()"], {b"en": b"Does *f*."}, {})
    term = (Atom("docs_v1"), 1, Atom("erlang"), b"text/markdown", {b"en": b"M."}, {}, [entry])
    docs = read_chunk_docs(encode(term), "m")
    assert (docs.module, docs.module_doc, docs.entries[0].doc) == ("m", "M.", "Does *f*.")


# --- equiv, clause groups and opaque types, made up --------------------------------------------


def erlang_docs_term(entries: list[Any], fmt: bytes = b"application/erlang+html") -> Any:
    return (Atom("docs_v1"), 1, Atom("erlang"), fmt, Atom("none"), {}, entries)


def html_entry(name: str, arity: int, doc: Any, **meta: Any) -> Any:
    metadata = {Atom(k): v for k, v in meta.items()}
    return ((Atom("function"), Atom(name), arity), 1, [f"{name}/{arity}".encode()], doc, metadata)


def p(text: str) -> Any:
    return {b"en": [(Atom("p"), [], [text.encode()])]}


def test_made_up_equiv_clause_groups_and_empty_docs() -> None:
    fun = Atom("function")
    entries = [
        html_entry("get", 1, p("Gets.")),
        html_entry("get", 2, {}, equiv=(fun, Atom("get"), 1)),
        html_entry("put", 2, {}, equiv=(fun, Atom("missing"), 9)),
        html_entry("info", 1, p("Clause one.")),
        html_entry("info", 1, p("Clause two.")),
        html_entry("quiet", 0, {b"en": [(Atom("p"), [], [])]}),
    ]
    docs = read_chunk_docs(encode(erlang_docs_term(entries)), "demo")
    found = {f"{e.name}/{e.arity}": e.doc for e in docs.entries}
    assert found == {
        "get/1": "Gets.",
        "get/2": "Documented together with [`get/1`](`get/1`).\n\nGets.",
        "put/2": None,  # names an entry that is not there: nothing to show
        "info/1": "Clause one.\n\nClause two.",
        "quiet/0": None,
    }


def test_equiv_expressions_of_markdown_beams() -> None:
    entries = [
        html_entry("f", 1, Atom("none"), equiv=b"f(X, [])"),
        html_entry("g", 0, Atom("none"), equiv=b"lists:g(1)"),
        html_entry("h", 0, {b"en": b"Own text."}, equiv=b"h(1)"),
        html_entry("k", 0, Atom("hidden"), equiv=b"k(1)"),
    ]
    term = erlang_docs_term(entries, fmt=b"text/markdown")
    docs = read_chunk_docs(encode(term), "demo")
    assert [(e.name, e.doc) for e in docs.entries] == [
        ("f", "Equivalent to [`f(X, [])`](`f/2`)."),
        ("g", "Equivalent to `lists:g(1)`."),
        ("h", "Own text."),
        ("k", None),
    ]


def test_elixir_docs_ignore_equiv_and_keep_their_rules() -> None:
    entry = (
        (Atom("function"), Atom("f"), 1),
        1,
        [b"f(x)"],
        Atom("none"),
        {Atom("equiv"): b"f(1, 2)"},
    )
    empty = ((Atom("function"), Atom("g"), 0), 1, [b"g()"], {}, {})
    term = (Atom("docs_v1"), 1, Atom("elixir"), b"text/markdown", Atom("none"), {}, [entry, empty])
    docs = read_chunk_docs(encode(term), "Elixir.Demo")
    assert [(e.name, e.doc) for e in docs.entries] == [("f", None)]
    assert docs.bad_entries == 1  # an empty map is not a doc in Elixir's chunks


@pytest.mark.parametrize(
    ("expr", "call"),
    [
        ("send_after(Time, Dest, Msg, [])", ("send_after", 4)),
        ("alias([])", ("alias", 1)),
        ("f()", ("f", 0)),
        ("centre(String, Number, $ )", ("centre", 3)),
        ("words(String, $,)", ("words", 2)),
        ("from_term(Term, '_')", ("from_term", 2)),
        ('f("a, b", <<A, B>>, {x, y}, #{k => v})', ("f", 4)),
        ("init(D, fun(_) -> a, b end)", ("init", 2)),
        ("register_name(N, P, fun random_exit_name/3)", ("register_name", 3)),
        ("'quoted name'(1)", ("quoted name", 1)),
        ("erlang:send_after(T, D, M, [])", None),
        ("f(X) + 1", None),
        ("f(X", None),
        ("f(X))", None),
        ("phash2/2", None),
        ("case(X)", None),
        ("f(fun(_) -> x)", None),
    ],
)
def test_local_call(expr: str, call: tuple[str, int] | None) -> None:
    assert local_call(expr) == call


@pytest.mark.parametrize(
    ("kind", "expr", "text"),
    [
        ("function", "phash2/2", "Equivalent to `phash2/2`."),
        ("type", "t/1", "Equivalent to `t:t/1`."),
        ("callback", "init(Args)", "Equivalent to [`init(Args)`](`c:init/1`)."),
        ("function", "f(A,\n   B)", "Equivalent to [`f(A, B)`](`f/2`)."),
        ("function", "X + 1", "Equivalent to `X + 1`."),
        ("function", "a `tick`", "Equivalent to `` a `tick` ``."),
    ],
)
def test_equivalent_to(kind: str, expr: str, text: str) -> None:
    assert equivalent_to(expr, kind) == text


def _with_dbgi(beam_data: bytes, dbgi: bytes) -> bytes:
    return replace_chunk(beam_data, b"Dbgi", dbgi)


def test_a_hostile_dbgi_chunk_costs_the_opaque_marks_only(otp27: Path) -> None:
    data = (otp27 / "lib" / APPS27["stdlib"] / "ebin" / "ets.beam").read_bytes()
    kinds = {
        e.name: e.metadata.get("opaque") for e in read_beam_docs(data).entries if e.kind == "type"
    }
    assert kinds["tid"] is True and kinds["table_type"] is None
    for dbgi in (b"\x83\x01garbage", b"\x83P\xff\xff\xff\xffxx", b"", b"\x83h\x04w\x09attribute"):
        docs = read_beam_docs(_with_dbgi(data, dbgi))
        assert not any(e.metadata.get("opaque") for e in docs.entries)
        assert len(docs.entries) == len(read_beam_docs(data).entries)


def test_opaque_forms_are_found_in_any_atom_encoding() -> None:
    form = (Atom("attribute"), (3, 2), Atom("opaque"), (Atom("handle"), Atom("any"), [Atom("A")]))
    other = (Atom("attribute"), 4, Atom("type"), (Atom("plain"), Atom("any"), []))
    dbgi = encode(
        (Atom("debug_info_v1"), Atom("erl_abstract_code"), ([other, form], [])), compressed=True
    )
    assert opaque_from_dbgi(dbgi) == {("handle", 1)}
    # Older compilers wrote atoms as ATOM_EXT (tag 100, two-byte length).
    latin1 = encode([form])
    for name in (b"attribute", b"opaque"):
        latin1 = latin1.replace(
            bytes([119, len(name)]) + name, b"d\x00" + bytes([len(name)]) + name
        )
    assert b"d\x00\x06opaque" in latin1
    assert opaque_from_dbgi(latin1) == {("handle", 1)}


# --- OTP 27 and 29: docs in the beams ---------------------------------------------------------


@pytest.mark.parametrize(
    ("ref", "markdown"),
    [
        ("erlang.html#send_after/3", "Equivalent to `erlang:send_after(Time, Dest, Msg, [])`."),
        (
            "erlang.html#check_process_code/2",
            "Equivalent to [`check_process_code(Pid, Module, [])`](`check_process_code/3`).",
        ),
        ("erlang.html#phash2/1", "Equivalent to `phash2/2`."),
    ],
)
def test_equiv_entries_of_otp27(otp27: Path, ref: str, markdown: str) -> None:
    erts = by_ref(beam_items(otp27, "erts", APPS27, 27))
    assert erts[ref].markdown == markdown
    assert erts[ref].hexdocs_url == f"https://www.erlang.org/docs/27/apps/erts/{ref}"


def test_equiv_entries_of_otp29_compressed_beams(otp29: Path) -> None:
    stdlib = by_ref(beam_items(otp29, "stdlib", APPS29, 29))
    call = stdlib["gen_statem.html#call/2"]
    assert call.markdown == "Equivalent to [`call(ServerRef, Request, infinity)`](`call/3`)."
    assert call.hexdocs_url == "https://www.erlang.org/docs/29/apps/stdlib/gen_statem.html#call/2"
    assert stdlib["lists.html#map/2"].markdown.startswith("Takes a function from `A`s to `B`s")
    erts = by_ref(beam_items(otp29, "erts", APPS29, 29))
    assert erts["erlang.html#phash2/1"].markdown == (
        "Equivalent to [`phash2(Term, Range)`](`phash2/2`)."
    )


def _docstring_text(page: html.HtmlElement, anchor: str) -> str:
    (section,) = page.xpath(f'//section[@id="{anchor}"]//section[@class="docstring"]')
    for specs in section.xpath('.//div[@class="specs"]'):
        specs.getparent().remove(specs)
    return " ".join(section.text_content().split())


_MD_LINK = re.compile(r"\[`([^`]*)`\]\(`[^`]*`\)")
_TARGETS = re.compile(r"\]\(`([^`]*)`\)|(?<![\[`])`((?:[tc]:)?(?:[a-z_]\w*:)?[a-z_]\w*/\d+)`(?!\])")


def _page_anchor(target: str) -> str:
    """`t:erlang:x/0` -> `erlang.html#t:x/0`; a local `check_process_code/3` -> `#check...`."""
    prefix = target[:2] if target[:2] in ("c:", "t:") else ""
    module, _, rest = target[len(prefix) :].rpartition(":")
    return f"{module}.html#{prefix}{rest}" if module else f"#{prefix}{rest}"


# The two forms ExDoc gives an entry whose only doc is its `equiv`.
_ONE_LINE_EQUIV = re.compile(r"Equivalent to (?:\[`[^`]+`\]\(`[^`]+`\)|`[^`]+`)\.")


@pytest.mark.parametrize("app", sorted(APPS27))
@pytest.mark.slow
def test_equiv_text_is_what_exdoc_shows(otp27: Path, html27: Path, app: str) -> None:
    """Every "Equivalent to" item reads as ExDoc's HTML page does, and links where it links."""
    equivs = [
        i for i in beam_items(otp27, app, APPS27, 27).items if _ONE_LINE_EQUIV.fullmatch(i.markdown)
    ]
    assert len(equivs) > 5
    pages: dict[str, html.HtmlElement] = {}
    for item in equivs:
        page = pages.setdefault(
            item.page, html.parse(str(html_dir(html27, app) / item.page)).getroot()
        )
        anchor = item.ref.split("#", 1)[1]
        # ExDoc shows an autolinked `t:erlang:x/0` without its prefix.
        text = re.sub(r"`(?:[tcm]:)?([^`]*)`", r"\1", _MD_LINK.sub(r"\1", item.markdown))
        assert _docstring_text(page, anchor) == " ".join(text.split()), item.ref
        (section,) = page.xpath(f'//section[@id="{anchor}"]//section[@class="docstring"]')
        linked = [a.get("href") for a in section.xpath(".//p//a")]
        # A link's target, or a code span ExDoc autolinks (`phash2/2`).
        ours = [a or b for a, b in _TARGETS.findall(item.markdown)]
        assert len(linked) == len(ours), item.ref
        for href, target in zip(linked, ours, strict=True):
            assert href.endswith(_page_anchor(target)), (item.ref, href, target)


# Sections of a page (`#module-...`, `#new/2-examples`) are not items of their own here;
# their text is in the item they belong to.
_SECTION = re.compile(r"#(?:module-|.+/\d+-)")
# ExDoc titles erlang's `nil()` type "erlang./0": it takes the name for Elixir's nil.
KNOWN_TITLES = {("erlang.html#t:nil/0", "erlang.nil/0", "type")}
# Documented in the HTML tree, not installed by Debian's erlang-base (an example module).
NOT_INSTALLED = {"erl_id_trans.html"}


@pytest.mark.parametrize("app", sorted(APPS27))
def test_refs_titles_and_types_are_exdocs(otp27: Path, html27: Path, app: str) -> None:
    exdoc = [i for i in search_items(html27, app) if i["type"] != "extras"]
    exdoc = [i for i in exdoc if not _SECTION.search(i["ref"])]
    theirs = {(i["ref"], i["title"], i["type"]) for i in exdoc}
    ours = {(i.ref, i.title, i.doc_type.value) for i in beam_items(otp27, app, APPS27, 27).items}
    assert ours - theirs <= KNOWN_TITLES
    with_text = {(i["ref"], i["title"], i["type"]) for i in exdoc if i["doc"].strip()}
    missing = {ref for ref, _, _ in with_text - ours if ref.split("#")[0] not in NOT_INSTALLED}
    assert missing == {"erlang.html#t:nil/0"} if app == "erts" else missing == set()
    # What is left out has no text: ExDoc lists it with an empty doc.
    left_out = Counter(kind for _, _, kind in theirs - ours - with_text)
    assert set(left_out) <= {"type", "opaque", "function", "callback"}
    assert len(ours & theirs) / len(theirs) > 0.8


# --- links ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("app", "major", "ref", "url"),
    [
        (
            "stdlib",
            27,
            "ets.html#new/2",
            "https://www.erlang.org/docs/27/apps/stdlib/ets.html#new/2",
        ),
        ("erts", 29, "erlang.html", "https://www.erlang.org/docs/29/apps/erts/erlang.html"),
        (
            "kernel",
            28,
            "gen_tcp.html#t:option/0",
            "https://www.erlang.org/docs/28/apps/kernel/gen_tcp.html#t:option/0",
        ),
        ("stdlib", 26, "ets.html#new/2", "https://www.erlang.org/docs/26/man/ets.html#new-2"),
        ("stdlib", 25, "ets.html#t:tid/0", "https://www.erlang.org/docs/25/man/ets.html#type-tid"),
        (
            "stdlib",
            24,
            "gen_server.html#c:handle_call/3",
            "https://www.erlang.org/docs/24/man/gen_server.html#Module:handle_call-3",
        ),
        ("kernel", 25, "file.html", "https://www.erlang.org/docs/25/man/file.html"),
        (
            "stdlib",
            25,
            "ets.html#module-concurrency",
            "https://www.erlang.org/docs/25/man/ets.html",
        ),
    ],
)
def test_otp_link(app: str, major: int, ref: str, url: str) -> None:
    assert otp_link(app, major)(ref) == url


def test_kramdown_attribute_lists_are_not_left_in_the_text(otp27: Path) -> None:
    # OTP's markdown anchors its options (`[](){: #new_2_read_concurrency }`) and classes
    # its admonitions (`{: .warning}`): markup for ExDoc, noise for whoever reads the text
    items = beam_items(otp27, "stdlib", APPS27, 27).items
    assert not [i.ref for i in items if re.search(r"\{:\s*[.#][A-Za-z_]", i.markdown)]
    new = by_ref(beam_items(otp27, "stdlib", APPS27, 27))["ets.html#new/2"].markdown
    assert "{read_concurrency,boolean()}" in new  # the option itself stays
