"""BEAM Docs chunks -> DocItems: synthetic beams (always), real Elixir beams (when installed)."""

from __future__ import annotations

import json
import os
import re
import struct
import tarfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from hexlocal_core.errors import IngestError
from hexlocal_core.ingest.beam import (
    items_from_beam_dir,
    module_items,
    read_beam_docs,
)
from hexlocal_core.ingest.beam_file import BeamSkipped
from hexlocal_core.ingest.beam_sources import (
    BuildApp,
    app_version,
    elixir_home_from_path,
    find_build_app,
    find_elixir_lib,
)
from hexlocal_core.model import Atom, DocItem, DocType, SourceKind
from tests.support.beams import beam, docs_term, en, entry, make_beam, replace_chunk
from tests.support.elixir import compile_sample
from tests.support.etf import encode
from tests.support.paths import HEXDOCS


def items_of(module: str, term: Any) -> dict[str, DocItem]:
    docs = read_beam_docs(beam(module, term))
    return {i.ref: i for i in module_items(docs, package="demo", version="1.2.3")}


HIDDEN, NONE = Atom("hidden"), Atom("none")

DEMO = docs_term(
    en("Demo docs.\n\n    iex> Demo.f(1)\n    1\n"),
    [
        entry("function", "f", 1, en("Returns `x`."), sig=["f(x)", "f(x, y)"], since="1.1.0"),
        entry("function", "old", 0, en("Old."), sig=["old()"], deprecated="Use f/1 instead"),
        entry("macro", "m", 2, en("A macro."), sig=["m(a, b)"]),
        entry("function", "<>", 2, en("Joins."), sig=["left <> right"]),
        entry("callback", "init", 1, en("Starts.")),
        entry("macrocallback", "mc", 0, en("Macro callback.")),
        entry("type", "t", 0, en("The type.")),
        entry("type", "h", 0, en("A handle."), opaque=Atom("true")),
        entry("function", "secret", 0, HIDDEN),
        entry("function", "bare", 0, NONE),
    ],
    since="1.0.0",
)


def test_items_have_exdoc_refs_titles_and_types() -> None:
    items = items_of("Elixir.Demo", DEMO)
    assert {ref: (i.title, i.doc_type) for ref, i in items.items()} == {
        "Demo.html": ("Demo", DocType.BEHAVIOUR),
        "Demo.html#f/1": ("Demo.f/1", DocType.FUNCTION),
        "Demo.html#old/0": ("Demo.old/0", DocType.FUNCTION),
        "Demo.html#m/2": ("Demo.m/2", DocType.MACRO),
        "Demo.html#%3C%3E/2": ("Demo.<>/2", DocType.FUNCTION),
        "Demo.html#c:init/1": ("Demo.init/1", DocType.CALLBACK),
        "Demo.html#c:mc/0": ("Demo.mc/0", DocType.MACROCALLBACK),
        "Demo.html#t:t/0": ("Demo.t/0", DocType.TYPE),
        "Demo.html#t:h/0": ("Demo.h/0", DocType.OPAQUE),
    }


def test_item_fields() -> None:
    items = items_of("Elixir.Demo", DEMO)
    f = items["Demo.html#f/1"]
    assert (f.module, f.function, f.arity, f.signature, f.since) == (
        "Demo",
        "f",
        1,
        "f(x)",
        "1.1.0",
    )
    assert f.markdown == "Returns `x`."
    assert f.hexdocs_url == "https://hexdocs.pm/demo/1.2.3/Demo.html#f/1"
    assert (f.source, f.source_url, f.package, f.version) == (
        SourceKind.BEAM,
        None,
        "demo",
        "1.2.3",
    )
    assert items["Demo.html#old/0"].deprecated == "Use f/1 instead"
    assert items["Demo.html"].markdown.startswith("Demo docs.")
    assert items["Demo.html"].since == "1.0.0"
    assert items["Demo.html#c:init/1"].signature is None


def test_hidden_and_none_entries_are_counted() -> None:
    docs = read_beam_docs(beam("Elixir.Demo", DEMO))
    skipped: Counter[str] = Counter()
    module_items(docs, package="demo", version="1", skipped=skipped)
    assert dict(skipped) == {"entry_hidden": 1, "entry_doc_none": 1}


def test_a_hidden_module_yields_nothing_even_with_documented_functions() -> None:
    term = docs_term(HIDDEN, [entry("function", "f", 0, en("Documented."))])
    assert items_of("Elixir.Demo.Private", term) == {}


def test_a_module_without_doc_still_gives_its_functions() -> None:
    items = items_of("Elixir.Demo", docs_term(NONE, [entry("function", "f", 0, en("F."))]))
    assert list(items) == ["Demo.html#f/0"]


EXCEPTION_FUNCTIONS = [("exception", 1), ("message", 1), ("__struct__", 0)]


@pytest.mark.parametrize(
    ("module", "entries", "expected"),
    [
        ("Elixir.P", [entry("function", "__protocol__", 1, HIDDEN)], DocType.PROTOCOL),
        (
            "Elixir.E",
            [entry("function", n, a, HIDDEN) for n, a in EXCEPTION_FUNCTIONS],
            DocType.EXCEPTION,
        ),
        ("Elixir.Mix.Tasks.Deps.LoadPaths", [entry("function", "run", 1, HIDDEN)], DocType.TASK),
        ("Elixir.B", [entry("callback", "c", 0, NONE)], DocType.BEHAVIOUR),
        ("Elixir.M", [entry("function", "run", 1, HIDDEN)], DocType.MODULE),
    ],
)
def test_module_kinds(module: str, entries: list[Any], expected: DocType) -> None:
    items = items_of(module, docs_term(en("Doc."), entries))
    assert [i.doc_type for i in items.values()] == [expected]


def test_task_title_is_the_command() -> None:
    term = docs_term(en("D."), [entry("function", "run", 1, HIDDEN)])
    items = items_of("Elixir.Mix.Tasks.Deps.LoadPaths", term)
    assert items["Mix.Tasks.Deps.LoadPaths.html"].title == "mix deps.load_paths"


def test_protocol_callbacks_and_implementations_are_left_out() -> None:
    protocol = docs_term(
        en("A protocol."),
        [
            entry("function", "__protocol__", 1, HIDDEN),
            entry("function", "size", 1, en("S.")),
            entry("callback", "size", 1, en("S.")),
        ],
    )
    assert list(items_of("Elixir.Sizable", protocol)) == ["Sizable.html", "Sizable.html#size/1"]
    impl = docs_term(
        NONE, [entry("function", "__impl__", 1, HIDDEN), entry("function", "size", 1, en("S."))]
    )
    assert items_of("Elixir.Sizable.List", impl) == {}


def test_erlang_modules_keep_their_name() -> None:
    term = docs_term(en("An Erlang module."), [entry("function", "attach", 4, en("Attaches."))])
    items = items_of("telemetry", term)
    assert items["telemetry.html#attach/4"].title == "telemetry.attach/4"
    assert items["telemetry.html"].module == "telemetry"


def test_other_languages_fall_back_to_a_stable_choice() -> None:
    term = docs_term({b"pt": "Olá".encode(), b"de": b"Hallo"}, [])
    assert items_of("Elixir.L", term)["L.html"].markdown == "Hallo"


def test_malformed_entries_are_counted_not_fatal() -> None:
    term = docs_term(
        en("Doc."),
        [
            entry("function", "ok", 0, en("Fine.")),
            ("not", "an", "entry"),
            entry("sorcery", "x", 0, en("Unknown kind.")),
            entry("function", "bad", 0, {b"en": b"\xff\xfe"}),
            ((Atom("function"), Atom("y"), 0), 1, b"not a list", en("Y."), {}),
        ],
    )
    docs = read_beam_docs(beam("Elixir.Demo", term))
    assert [e.name for e in docs.entries] == ["ok"]
    assert docs.bad_entries == 4


def test_compact_atom_table_of_otp_28() -> None:
    name = b"Elixir.Demo"  # 11 bytes: one compact byte (11 << 4)
    table = struct.pack(">i", -1) + bytes([len(name) << 4]) + name
    data = make_beam([(b"AtU8", table), (b"Docs", encode(DEMO))])
    assert read_beam_docs(data).display_name == "Demo"
    long_name = b"Elixir." + b"A" * 100  # 107 bytes: the two-byte form
    table = struct.pack(">i", -1) + bytes([((107 >> 3) & 0xE0) | 0x08, 107 & 0xFF]) + long_name
    data = make_beam([(b"AtU8", table), (b"Docs", encode(DEMO))])
    assert read_beam_docs(data).module == long_name.decode()


# --- hostile files -----------------------------------------------------------------------------

GOOD = beam("Elixir.Demo", DEMO)
HOSTILE_BEAMS = {
    "truncated": GOOD[: len(GOOD) // 2],
    "wrong_magic": b"FOR2" + GOOD[4:],
    "not_even_a_header": b"\x00\x01",
    "empty": b"",
    "bad_etf": replace_chunk(GOOD, b"Docs", b"\x83\x01garbage"),
    "compressed_bomb_size": replace_chunk(GOOD, b"Docs", b"\x83P\xff\xff\xff\xffxx"),
    "huge_chunk_size": GOOD[:12] + b"AtU8" + b"\xff\xff\xff\xf0" + GOOD[20:],
    "huge_form_size": b"FOR1\xff\xff\xff\xff" + GOOD[8:],
    "no_docs_chunk": replace_chunk(GOOD, b"Docs", None),
    "no_atoms": replace_chunk(GOOD, b"AtU8", None),
    "not_markdown": beam("Elixir.Demo", docs_term(NONE, [], fmt=b"application/erlang+html")),
    "bad_shape": beam("Elixir.Demo", (Atom("docs_v2"), 1)),
    "bad_module_doc": beam("Elixir.Demo", docs_term(Atom("maybe"), [])),
}
EXPECTED_REASONS = {
    "truncated": "truncated",
    "wrong_magic": "not_beam",
    "not_even_a_header": "not_beam",
    "empty": "not_beam",
    "bad_etf": "bad_etf",
    "compressed_bomb_size": "bad_etf",
    "huge_chunk_size": "truncated",
    "huge_form_size": "truncated",
    "no_docs_chunk": "no_docs_chunk",
    "no_atoms": "no_atoms",
    "not_markdown": "not_markdown",
    "bad_shape": "bad_docs_shape",
    "bad_module_doc": "bad_docs_shape",
}


@pytest.mark.parametrize("name", sorted(HOSTILE_BEAMS))
def test_read_beam_docs_refuses_with_a_reason(name: str) -> None:
    with pytest.raises(BeamSkipped) as info:
        read_beam_docs(HOSTILE_BEAMS[name])
    assert info.value.reason == EXPECTED_REASONS[name]
    assert isinstance(info.value, IngestError)


def test_a_directory_of_hostile_files_is_counted_not_raised(tmp_path: Path) -> None:
    for name, data in HOSTILE_BEAMS.items():
        (tmp_path / f"{name}.beam").write_bytes(data)
    (tmp_path / "good.beam").write_bytes(GOOD)
    (tmp_path / "big.beam").write_bytes(GOOD + b"\0" * 4096)
    (tmp_path / "folder.beam").mkdir()  # not a regular file
    os.mkfifo(tmp_path / "pipe.beam")  # opening it for reading would block forever
    (tmp_path / "locked.beam").write_bytes(GOOD)
    (tmp_path / "locked.beam").chmod(0)  # unreadable (unless running as root)
    outside = tmp_path.parent / f"{tmp_path.name}-outside.beam"
    outside.write_bytes(GOOD)
    (tmp_path / "escape.beam").symlink_to(outside)  # a good file, but outside the tree
    (tmp_path / "inside.beam").symlink_to(tmp_path / "good.beam")  # followed: inside
    (tmp_path / "notes.txt").write_text("not a beam")
    result = items_from_beam_dir(tmp_path, package="demo", version="1.0.0", max_file_bytes=4096)
    expected: dict[str, int] = {}
    for reason in EXPECTED_REASONS.values():
        expected[reason] = expected.get(reason, 0) + 1
    expected |= {"too_large": 1, "not_regular": 2, "outside_tree": 1}
    expected |= {"entry_hidden": 2, "entry_doc_none": 2}  # good.beam is read twice
    copies = 2  # good.beam and the symlink to it
    if os.geteuid() != 0:
        expected["unreadable"] = 1
    else:  # root reads anything: locked.beam is a third copy of good.beam
        copies = 3
        expected |= {"entry_hidden": 3, "entry_doc_none": 3}
    assert result.skipped == expected
    assert result.modules == copies
    assert len(result.items) == 9 * copies


# --- locating compiled apps ----------------------------------------------------------------


def write_app(ebin: Path, app: str, vsn: str | None) -> None:
    ebin.mkdir(parents=True)
    vsn_line = f'{{vsn,"{vsn}"}},' if vsn is not None else ""
    text = (
        f'{{application,{app},\n  [{{description,"{app}"}},\n   {vsn_line}\n   {{modules,[]}}]}}.\n'
    )
    (ebin / f"{app}.app").write_text(text)


def test_find_build_app_prefers_dev_then_test_then_others(tmp_path: Path) -> None:
    write_app(tmp_path / "_build/test/lib/jason/ebin", "jason", "1.4.1")
    write_app(tmp_path / "_build/zzz/lib/jason/ebin", "jason", "9.9.9")
    found = find_build_app(tmp_path, "jason")
    assert found == BuildApp("jason", "1.4.1", tmp_path / "_build/test/lib/jason/ebin", "test")
    write_app(tmp_path / "_build/dev/lib/jason/ebin", "jason", "1.4.0")
    assert find_build_app(tmp_path, "jason") == BuildApp(
        "jason", "1.4.0", tmp_path / "_build/dev/lib/jason/ebin", "dev"
    )


def test_find_build_app_skips_envs_without_a_version(tmp_path: Path) -> None:
    write_app(tmp_path / "_build/dev/lib/foo/ebin", "foo", None)
    assert find_build_app(tmp_path, "foo") is None
    write_app(tmp_path / "_build/prod/lib/foo/ebin", "foo", "0.1.0-rc.1")
    assert find_build_app(tmp_path, "foo") == BuildApp(
        "foo", "0.1.0-rc.1", tmp_path / "_build/prod/lib/foo/ebin", "prod"
    )
    assert find_build_app(tmp_path, "absent") is None
    assert find_build_app(tmp_path / "no-project", "foo") is None


def test_app_version_reads_spaced_vsn(tmp_path: Path) -> None:
    (tmp_path / "x.app").write_text('{application, x, [{vsn , "2.0.0" }]}.')
    assert app_version(tmp_path, "x") == "2.0.0"
    assert app_version(tmp_path, "missing") is None


def test_find_elixir_lib_from_home_and_from_a_symlinked_binary(tmp_path: Path) -> None:
    home = tmp_path / "elixir-1.99"
    write_app(home / "lib/elixir/ebin", "elixir", "1.99.0")
    write_app(home / "lib/mix/ebin", "mix", "1.99.0")
    (home / "bin").mkdir()
    (home / "bin/elixir").write_text("#!/bin/sh\n")
    (home / "bin/elixir").chmod(0o755)
    assert find_elixir_lib("mix", home) == BuildApp("mix", "1.99.0", home / "lib/mix/ebin")
    assert find_elixir_lib("iex", home) is None
    path_dir = tmp_path / "usr-bin"
    path_dir.mkdir()
    (path_dir / "elixir").symlink_to(home / "bin/elixir")
    assert elixir_home_from_path(str(path_dir)) == home.resolve()
    found = find_elixir_lib("elixir", None, path=str(path_dir))
    assert found is not None and found.version == "1.99.0"


def test_a_shim_that_is_not_a_symlink_gives_none(tmp_path: Path) -> None:
    (tmp_path / "elixir").write_text('#!/bin/sh\nexec real-elixir "$@"\n')
    (tmp_path / "elixir").chmod(0o755)
    assert elixir_home_from_path(str(tmp_path)) is None
    assert find_elixir_lib("elixir", None, path=str(tmp_path / "nowhere")) is None


# --- real Elixir beams -----------------------------------------------------------------------


@pytest.fixture(scope="session")
def elixir_lib() -> BuildApp:
    found = find_elixir_lib("elixir", None)
    if found is None:
        pytest.skip("Elixir is not installed (no `elixir` on PATH with lib/elixir/ebin)")
    return found


@pytest.fixture(scope="session")
def stdlib_items(elixir_lib: BuildApp) -> Any:
    return items_from_beam_dir(elixir_lib.ebin, package="elixir", version=elixir_lib.version)


@pytest.fixture(scope="session")
def by_ref(stdlib_items: Any) -> dict[str, DocItem]:
    return {item.ref: item for item in stdlib_items.items}


@pytest.mark.elixir
def test_enum_map(by_ref: dict[str, DocItem], elixir_lib: BuildApp) -> None:
    item = by_ref["Enum.html#map/2"]
    assert item.title == "Enum.map/2"
    assert item.signature == "map(enumerable, fun)"
    assert item.doc_type is DocType.FUNCTION
    assert "iex> Enum.map(" in item.markdown
    assert item.hexdocs_url == f"https://hexdocs.pm/elixir/{elixir_lib.version}/Enum.html#map/2"
    assert by_ref["Enum.html"].doc_type is DocType.MODULE


@pytest.mark.elixir
def test_genserver(by_ref: dict[str, DocItem]) -> None:
    init = by_ref["GenServer.html#c:init/1"]
    assert (init.title, init.doc_type) == ("GenServer.init/1", DocType.CALLBACK)
    assert by_ref["GenServer.html"].doc_type is DocType.BEHAVIOUR
    assert "supervision" in by_ref["GenServer.html"].markdown


@pytest.mark.elixir
def test_deprecated_functions_and_modules(by_ref: dict[str, DocItem]) -> None:
    assert by_ref["Macro.html#to_string/2"].deprecated == "Use Macro.to_string/1 instead"
    assert by_ref["HashDict.html"].deprecated == "Use Map instead"
    assert by_ref["Enum.html#map/2"].deprecated is None


@pytest.mark.elixir
def test_hidden_modules_and_kinds(stdlib_items: Any, by_ref: dict[str, DocItem]) -> None:
    modules = {item.module for item in stdlib_items.items}
    assert "Kernel.Utils" not in modules and "Agent.Server" not in modules  # @moduledoc false
    assert "Enumerable.List" not in modules  # a protocol implementation
    assert by_ref["Enumerable.html"].doc_type is DocType.PROTOCOL
    assert not any(ref.startswith("Enumerable.html#c:") for ref in by_ref)
    assert by_ref["Inspect.Error.html"].doc_type is DocType.EXCEPTION


@pytest.mark.elixir
def test_whole_stdlib_counts(stdlib_items: Any) -> None:
    assert len(stdlib_items.items) > 1000
    assert stdlib_items.modules > 50
    for reason in ("module_hidden", "entry_hidden", "entry_doc_none", "no_docs_chunk"):
        assert stdlib_items.skipped[reason] > 0
    assert not {"bad_etf", "bad_docs_shape", "truncated", "bad_entry"} & set(stdlib_items.skipped)
    assert len({item.ref for item in stdlib_items.items}) == len(stdlib_items.items)


def _search_data(tarball: Path) -> list[dict[str, str]]:
    with tarfile.open(tarball) as tar:
        member = next(
            m for m in tar.getmembers() if re.search(r"dist/search_data-\w+\.js$", m.name)
        )
        fh = tar.extractfile(member)
        assert fh is not None
        text = fh.read().decode()
    items: list[dict[str, str]] = json.loads(text[text.index("=") + 1 :])["items"]
    return items


@pytest.mark.elixir
def test_items_match_the_exdoc_tarball(stdlib_items: Any, elixir_lib: BuildApp) -> None:
    """Every item has ExDoc's ref, title and type; every ExDoc item we lack has no doc."""
    tarball = HEXDOCS / f"elixir-{elixir_lib.version}.tar.gz"
    if not tarball.is_file():
        pytest.skip(f"no ExDoc tarball for elixir {elixir_lib.version} in the shared corpus")
    published = {
        i["ref"]: i
        for i in _search_data(tarball)
        if i["type"] != "extras" and not re.search(r"(/\d+-|#module-)", i["ref"])
    }
    ours = {item.ref: item for item in stdlib_items.items}
    assert not set(ours) - set(published)
    differing = [
        ref
        for ref, item in ours.items()
        if (published[ref]["title"], published[ref]["type"]) != (item.title, item.doc_type.value)
    ]
    assert differing == []
    assert [r for r in set(published) - set(ours) if published[r]["doc"]] == []


@pytest.mark.elixir
def test_rewritten_real_beams(elixir_lib: BuildApp) -> None:
    real = (elixir_lib.ebin / "Elixir.Enum.beam").read_bytes()
    assert read_beam_docs(real).display_name == "Enum"
    cases = {
        "no_docs_chunk": replace_chunk(real, b"Docs", None),
        "bad_etf": replace_chunk(real, b"Docs", b"\x83m\x00\x00\xff\xff"),
        "truncated": real[: len(real) - 100],
    }
    for reason, data in cases.items():
        with pytest.raises(BeamSkipped) as info:
            read_beam_docs(data)
        assert info.value.reason == reason


@pytest.mark.elixir
def test_compiled_project_module_end_to_end(tmp_path: Path, elixir_lib: BuildApp) -> None:
    compile_sample(tmp_path)
    app = find_build_app(tmp_path, "sample")
    assert app is not None and app.version == "0.3.0"
    result = items_from_beam_dir(app.ebin, package="sample", version=app.version)
    items = {item.ref: item for item in result.items}
    assert sorted(items) == [
        "Hexlocal.Sample.html",
        "Hexlocal.Sample.html#greet/2",
        "Hexlocal.Sample.html#old_greet/1",
        "Hexlocal.Sample.html#t:handle/0",
        "Hexlocal.Sample.html#twice/1",
    ]
    assert items["Hexlocal.Sample.html#old_greet/1"].deprecated == "Use greet/1 instead"
    assert items["Hexlocal.Sample.html#greet/2"].signature == 'greet(name, greeting \\\\ "hi")'
    assert items["Hexlocal.Sample.html#greet/2"].since == "0.1.0"
    assert items["Hexlocal.Sample.html"].since == "0.2.0"
    assert items["Hexlocal.Sample.html#t:handle/0"].doc_type is DocType.OPAQUE
    assert items["Hexlocal.Sample.html#twice/1"].doc_type is DocType.MACRO
    assert items["Hexlocal.Sample.html"].markdown == "A sample module for **hexlocal**.\n"
    assert result.skipped["module_hidden"] == 1
    assert result.skipped["entry_hidden"] >= 1  # secret/0, __info__ and friends
    assert result.skipped["entry_doc_none"] == 1  # undocumented/1
