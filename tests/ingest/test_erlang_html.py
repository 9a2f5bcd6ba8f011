"""erlang+html -> markdown: real elements of OTP 25's `.chunk` files, hand-made edge cases,
hostile trees, and the whole OTP 25 corpus against OTP 27's own markdown of the same docs."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hexlocal_core.errors import IngestError
from hexlocal_core.ingest import etf
from hexlocal_core.ingest.beam import read_beam_docs
from hexlocal_core.ingest.erlang_html import (
    ErlangHtmlError,
    inline_code,
    quote_atom,
    see_target,
    to_markdown,
)
from hexlocal_core.model import Atom
from tests.support.otp_corpus import APPS25, APPS27, OTP25, OTP27, install


@pytest.fixture(scope="module")
def otp25(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install(tmp_path_factory, OTP25)


def el(tag: str, content: Any = None, **attrs: str) -> tuple[Any, ...]:
    """An erlang+html element as the ETF decoder returns it."""
    pairs = [(Atom(k), v.encode()) for k, v in attrs.items()]
    if content is None:
        content = []
    elif not isinstance(content, list):
        content = [content]
    return (Atom(tag), pairs, [c.encode() if isinstance(c, str) else c for c in content])


def chunk(root: Path, app: str, module: str) -> Any:
    path = root / "lib" / APPS25[app] / "doc" / "chunks" / f"{module}.chunk"
    return etf.decode(path.read_bytes())


def doc_of(term: Any, key: str) -> Any:
    """The `en` doc of the module (`key` "module") or of an entry ("function:new/2")."""
    if key == "module":
        return term[4][b"en"]
    kind, name_arity = key.split(":", 1)
    name, arity = name_arity.rsplit("/", 1)
    for (k, n, a), _anno, _sig, doc, _meta in term[6]:
        if (k.name, n.name, a) == (kind, name, int(arity)):
            return doc[b"en"]
    raise KeyError(key)


def raw_text(node: Any) -> str:
    if isinstance(node, bytes):
        return node.decode()
    if isinstance(node, list):
        return "".join(raw_text(n) for n in node)
    return raw_text(node[2])


def elements(node: Any) -> Iterator[Any]:
    if isinstance(node, list):
        for child in node:
            yield from elements(child)
    elif isinstance(node, tuple):
        yield node
        yield from elements(node[2])


def find(doc: Any, tag: str, snippet: str) -> Any:
    """The first `tag` element of a doc whose text holds `snippet`."""
    return next(e for e in elements(doc) if e[0].name == tag and snippet in raw_text(e))


# --- real elements ---------------------------------------------------------------------------

REAL = [
    pytest.param(
        ("erts", "erlang", "function:send_nosuspend/2", "div", "extreme care"),
        "> #### Warning {: .warning }\n>\n> Use with extreme care.",
        id="div-warning",
    ),
    pytest.param(
        ("erts", "erlang", "function:demonitor/2", "div", "future release"),
        "> #### Note {: .info }\n>\n> More options can be added in a future release.",
        id="div-note",
    ),
    pytest.param(
        ("stdlib", "gen_event", "function:send_request/3", "p", "to handle the request"),
        "The event manager calls [`Module:handle_call/2`](`c:gen_event:handle_call/2`) to"
        " handle the request.",
        id="seemfa-callback",
    ),
    pytest.param(
        ("stdlib", "erl_anno", "function:from_term/1", "p", "See also"),
        "See also [to_term()](`erl_anno:to_term/1`).",
        id="seemfa",
    ),
    pytest.param(
        ("stdlib", "sofs", "type:type/0", "p", "A type"),
        "A [type](`m:sofs#type`).",
        id="seeerl-fragment",
    ),
    pytest.param(
        ("erts", "erlang", "type:nil/0", "p", "The empty"),
        "The empty [list()](`t:erlang:list/0`).",
        id="seetype",
    ),
    pytest.param(
        ("erts", "erlang", "type:function/0", "p", "An Erlang"),
        "An Erlang fun.",
        id="seeguide-text-only",
    ),
    pytest.param(
        ("erts", "erlang", "type:nif_resource/0", "p", "opaque handle"),
        "An opaque handle identifying a NIF resource object.",
        id="seecref-text-only",
    ),
    pytest.param(
        ("stdlib", "base64", "type:base64_alphabet/0", "p", "RFC"),
        "Base 64 Encoding alphabet, see [RFC 4648](https://www.ietf.org/rfc/rfc4648.txt).",
        id="http-link",
    ),
    pytest.param(
        ("kernel", "socket", "function:which_sockets/0", "p", "type of the socket"),
        "Selection based on the type of the socket.\nOnly a subset is valid.",
        id="br",
    ),
    pytest.param(
        ("erts", "persistent_term", "module", "p", "Term lookup"),
        "Term lookup (using [`get/1`](`persistent_term:get/1`)) is done in constant time and"
        " without taking any locks, and the term is **not** copied to the heap (as is the"
        " case with terms stored in ETS tables).",
        id="strong",
    ),
    pytest.param(
        ("stdlib", "supervisor", "module", "h4", "Restart Strategies"),
        "#### Restart Strategies",
        id="h4",
    ),
    pytest.param(
        ("stdlib", "proplists", "function:append_values/2", "pre", "[1,2,3,4]"),
        "```text\n[1,2,3,4]\n```",
        id="pre-type-none",
    ),
    pytest.param(
        ("stdlib", "re", "function:run/3", "pre", "a?b?"),
        "```erlang\na?b?\n```",
        id="pre-erlang",
    ),
    pytest.param(
        ("erts", "erlang", "function:is_alive/0", "ol", "LONGNAME"),
        '1. `"erl -name LONGNAME"` or,\n2. `"erl -sname SHORTNAME"`.',
        id="ol-seecom",
    ),
    pytest.param(
        ("kernel", "application", "function:start/1", "ul", "transient application"),
        "- If a permanent application terminates, all other applications and the entire"
        " Erlang node are also terminated.\n- If a transient application terminates:\n"
        "  - with `Reason == normal`, this is reported but no other applications are"
        " terminated.\n  - abnormally, all other applications and the entire Erlang node are"
        " also terminated.\n- If a temporary application terminates, this is reported but no"
        " other applications are terminated.",
        id="nested-ul",
    ),
    pytest.param(
        ("kernel", "os", "function:cmd/1", "dl", "max_size"),
        "- **`max_size`** - The maximum size of the data returned by the `os:cmd` call. This"
        " option is a safety feature that should be used when the command executed can"
        " return a very large, possibly infinite, result.\n\n  ```text\n"
        '  > os:cmd("cat /dev/zero", #{ max_size => 20 }).\n'
        "  [0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]\n  ```",
        id="dl-with-pre",
    ),
    pytest.param(
        ("stdlib", "binary", "function:match/3", "ul", ""),
        "Types:\n\n- `part()`",
        id="types-by-name",
    ),
]


@pytest.mark.parametrize(("where", "expected"), REAL)
def test_real_elements(otp25: Path, where: tuple[str, ...], expected: str) -> None:
    app, module, key, tag, snippet = where
    element = find(doc_of(chunk(otp25, app, module), key), tag, snippet)
    assert to_markdown([element]) == expected


# --- hand-made cases -------------------------------------------------------------------------

SEE = "https://erlang.org/doc/link/"

MADE = [
    pytest.param(
        [el("h1", "Title"), el("p", "  Body\n  text.  ")], "# Title\n\nBody text.", id="h1-p"
    ),
    pytest.param(
        [b"Loose ", el("em", "inline"), b" text ", el("p", "then a block")],
        "Loose *inline* text\n\nthen a block",
        id="loose-text-is-a-paragraph",
    ),
    pytest.param(
        [el("ul", [el("li", [b"one", el("ol", [el("li", "a"), el("li", "b")])]), el("li", "two")])],
        "- one\n  1. a\n  2. b\n- two",
        id="ol-in-ul",
    ),
    pytest.param(
        [
            el(
                "dl",
                [el("dt", el("code", "a")), el("dt", el("code", "b")), el("dd", el("p", "Both."))],
            )
        ],
        "- **`a`**, **`b`** - Both.",
        id="two-terms-one-description",
    ),
    pytest.param(
        [el("dl", [el("dt", "opts"), el("dd", el("ul", [el("li", "x"), el("li", "y")]))])],
        "- **opts**\n\n  - x\n  - y",
        id="description-that-is-a-list",
    ),
    pytest.param([el("dl", [el("dt", "lonely")])], "- **lonely**", id="term-without-description"),
    pytest.param(
        [el("div", el("p", "Prefer this."), **{"class": "do"})],
        "> #### Do {: .tip }\n>\n> Prefer this.",
        id="div-do",
    ),
    pytest.param(
        [el("div", el("p", "Not this."), **{"class": "dont"})],
        "> #### Don't {: .error }\n>\n> Not this.",
        id="div-dont",
    ),
    pytest.param(
        [el("div", el("p", "Quoted."), **{"class": "quote"}), el("blockquote", el("p", "Too."))],
        "> Quoted.\n\n> Too.",
        id="quote-and-blockquote",
    ),
    pytest.param(
        [el("div", el("p", "Odd."), **{"class": "see-also <b>"})],
        "> #### See-Also B {: .info }\n>\n> Odd.",
        id="unknown-div-class-sanitised",
    ),
    pytest.param(
        [el("p", [b"Use ", el("code", "a `tick`"), b" and ", el("code", "`x`")])],
        "Use `` a `tick` `` and `` `x` ``",
        id="code-with-backticks",
    ),
    pytest.param(
        [
            el(
                "p",
                [
                    el("a", "site", href="https://example.org/a b"),
                    b" ",
                    el("a", "js", href="javascript:x"),
                ],
            )
        ],
        "site js",
        id="unsafe-links-keep-their-text",
    ),
    pytest.param(
        [el("p", el("a", href="https://example.org/"))], "<https://example.org/>", id="bare-url"
    ),
    pytest.param(
        [el("p", el("a", el("code", "//stdlib/ets"), href="stdlib:ets", rel=SEE + "seeerl"))],
        "[`ets`](`m:ets`)",
        id="seeerl-strips-the-app",
    ),
    pytest.param(
        [el("p", el("a", "broken", href="stdlib:ets#nope", rel=SEE + "seemfa"))],
        "broken",
        id="malformed-seemfa-is-text",
    ),
    pytest.param(
        [el("p", [el("custom", [b"kept ", el("em", "content")])])],
        "kept *content*",
        id="unknown-tag-keeps-content",
    ),
    pytest.param(
        [el("pre", el("code", "\nf() ->\n    ok.\n\t  "))],
        "```erlang\nf() ->\n    ok.\n```",
        id="pre-trimmed",
    ),
    pytest.param(
        [el("pre", "```\nfence\n```")],
        "````erlang\n```\nfence\n```\n````",
        id="pre-fences-past-its-backticks",
    ),
    pytest.param([el("p", [b"caf\xc3\xa9 \xff"])], "café \ufffd", id="utf8-and-a-bad-byte"),
    pytest.param([el("p", [el("a", id="anchor")]), el("p", "  ")], "", id="nothing-to-say"),
    pytest.param(b"A bare binary.", "A bare binary.", id="binary-content"),
]


@pytest.mark.parametrize(("content", "expected"), MADE)
def test_made_up_elements(content: Any, expected: str) -> None:
    assert to_markdown(content) == expected


@pytest.mark.parametrize(
    ("rel", "href", "target"),
    [
        ("seeerl", "stdlib:ets", "m:ets"),
        ("seeerl", "kernel:gen_tcp#options", "m:gen_tcp#options"),
        ("seeerl", "ets", "m:ets"),
        ("seemfa", "stdlib:ets#new/2", "ets:new/2"),
        ("seemfa", "#new/2", "new/2"),
        ("seemfa", "stdlib:gen_server#Module:handle_call/3", "c:gen_server:handle_call/3"),
        ("seemfa", "erts:erlang#'=:='/2", None),  # a colon in the name: ExDoc cannot split it
        ("seemfa", "erts:erlang#spawn", None),
        ("seetype", "stdlib:ets#tid", "t:ets:tid/0"),
        ("seetype", "erts:erlang#list()", "t:erlang:list/0"),
        ("seetype", "stdlib:gb_trees#tree/2", "t:gb_trees:tree/2"),
        ("seeguide", "system/reference_manual:data_types#fun", None),
        ("seeapp", "kernel:kernel_app", None),
        ("seeerl", "a:b:c", None),
    ],
)
def test_see_targets(rel: str, href: str, target: str | None) -> None:
    assert see_target(SEE + rel, href) == target


@pytest.mark.parametrize(
    ("name", "quoted"),
    [("ets", "ets"), ("Elixir.Enum", "'Elixir.Enum'"), ("end", "'end'"), ("it's", "'it\\'s'")],
)
def test_quote_atom(name: str, quoted: str) -> None:
    assert quote_atom(name) == quoted


def test_inline_code_fences_past_backticks() -> None:
    assert inline_code("plain") == "`plain`"
    assert inline_code("a``b") == "```a``b```"
    assert inline_code("") == ""


# --- hostile trees ---------------------------------------------------------------------------


def emphasised(depth: int) -> Any:
    node: Any = b"x"
    for _ in range(depth):
        node = el("em", [node])
    return node


def nested(depth: int, leaf: Any) -> Any:
    node = leaf
    for _ in range(depth):
        node = el("ul", el("li", [node]))
    return node


@pytest.mark.parametrize(
    "content",
    [
        pytest.param([42], id="an-integer"),
        pytest.param([(Atom("p"), [])], id="a-two-tuple"),
        pytest.param([(Atom("p"), b"attrs", [])], id="attrs-not-a-list"),
        pytest.param([(b"p", [], [])], id="tag-not-an-atom"),
        pytest.param([el("p", [3.5])], id="a-float-inside"),
        pytest.param(Atom("none"), id="not-a-list"),
        pytest.param([nested(41, b"deep")], id="nests-too-deep"),
    ],
)
def test_malformed_trees_raise(content: Any) -> None:
    with pytest.raises(ErlangHtmlError) as info:
        to_markdown(content)
    assert isinstance(info.value, IngestError)


def test_work_is_capped_where_indentation_multiplies_text() -> None:
    """20 nested lists around 100 KB re-indent it at every level: capped, not computed."""
    tree = [nested(20, el("p", "line\n" * 20_000))]
    assert len(to_markdown([el("p", "line\n" * 20_000)])) < 120_000
    with pytest.raises(ErlangHtmlError, match="more than"):
        to_markdown(tree, max_work=1_000_000)


def test_work_is_capped_where_inline_nesting_copies_text() -> None:
    """Each of 35 nested <em> copies a 1 MB text once more: capped at the default budget."""
    node: Any = b"x" * 1_000_000
    for _ in range(35):
        node = el("em", [node])
    with pytest.raises(ErlangHtmlError, match="more than"):
        to_markdown([el("p", [node])])


def test_depth_within_the_cap_renders() -> None:
    assert to_markdown([nested(19, b"leaf")]) == "- " * 19 + "leaf"


def test_a_hostile_chunk_entry_is_a_bad_entry_not_a_failed_module() -> None:
    """Through the BEAM reader: one entry nested too deep is counted, the rest are read."""
    from tests.support.beams import beam
    from tests.support.beams import entry as make_entry

    good = make_entry("function", "ok", 0, {b"en": [el("p", "Fine.")]})
    bad = make_entry("function", "deep", 0, {b"en": [emphasised(45)]})
    term = (
        Atom("docs_v1"),
        1,
        Atom("erlang"),
        b"application/erlang+html",
        Atom("none"),
        {},
        [good, bad],
    )
    docs = read_beam_docs(beam("hostile", term))
    assert [e.name for e in docs.entries] == ["ok"]
    assert docs.entries[0].doc == "Fine."
    assert docs.bad_entries == 1


# --- the whole OTP 25 corpus -----------------------------------------------------------------

_LINK = re.compile(r"\]\(`([^`]*)`\)")
_LEAK = re.compile(r"Atom\(name=|(?<!\w)b'")
_ATOM = r"(?:[a-z][\w@]*|'[^']+')"
_TARGET = re.compile(rf"(?:c:|t:)?(?:{_ATOM}:)?{_ATOM}/\d+|m:{_ATOM}(?:#[^`]+)?")


def all_docs(root: Path) -> Iterator[tuple[str, str, Any]]:
    for path in sorted((root / "lib").glob("*/doc/chunks/*.chunk")):
        term = etf.decode(path.read_bytes())
        docs = [("module", term[4])] + [(repr(e[0]), e[3]) for e in term[6]]
        for key, doc in docs:
            if isinstance(doc, dict) and b"en" in doc:
                yield path.stem, key, doc[b"en"]


@pytest.mark.slow
def test_every_otp25_doc_converts(otp25: Path) -> None:
    converted = 0
    for module, key, doc in all_docs(otp25):
        text = to_markdown(doc, module=module)
        converted += 1
        assert not _LEAK.search(text), (module, key)  # no Python repr of a term
        for target in _LINK.findall(text):
            assert _TARGET.fullmatch(target), (module, key, target)
    assert converted > 2500  # 87 stdlib, 51 kernel, 28 erts and 2 crypto modules


@pytest.fixture(scope="module")
def otp27(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install(tmp_path_factory, OTP27)


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize(
    ("module", "key", "tag", "snippet"),
    [
        ("ets", "function:new/2", "dd", "one key, one object, no order"),
        ("ets", "function:select/3", "p", "to guarantee"),
        ("ets", "module", "p", "Data is organized as a set of dynamic tables"),
        ("lists", "function:keysort/2", "p", "Returns a list containing the sorted elements"),
    ],
)
def test_otp25_reads_as_otp27_wrote_it(
    otp25: Path, otp27: Path, module: str, key: str, tag: str, snippet: str
) -> None:
    """OTP 27 converted these XML docs to markdown; the same element converted here is a
    line of that markdown (line wrapping aside)."""
    element = find(doc_of(chunk(otp25, "stdlib", module), key), tag, snippet)
    mine = _flat(
        to_markdown(
            [element] if tag != "dd" else [el("dl", [el("dt", el("code", "set")), element])],
            module=module,
        )
    )
    beam = read_beam_docs(
        (otp27 / "lib" / APPS27["stdlib"] / "ebin" / f"{module}.beam").read_bytes()
    )
    if key == "module":
        theirs = beam.module_doc or ""
    else:
        kind, name_arity = key.split(":")
        name, arity = name_arity.rsplit("/", 1)
        (found,) = [
            e for e in beam.entries if (e.kind, e.name, e.arity) == (kind, name, int(arity))
        ]
        theirs = found.doc or ""
    assert mine in _flat(theirs)
