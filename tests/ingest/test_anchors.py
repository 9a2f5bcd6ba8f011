"""Anchor text: references found in the docs' prose, resolved to the items they describe."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from hexlocal_core.ingest.anchors import Target, mine, references, resolve
from hexlocal_core.ingest.hexdocs import parse_hexdocs
from hexlocal_core.ingest.tarball import read_docs_tarball
from hexlocal_core.model import DocItem, DocType
from hexlocal_core.search.anchor_arm import item_of
from tests.support.paths import HEXDOCS


def item(ref: str, markdown: str, package: str = "demo", module: str | None = None) -> DocItem:
    return DocItem(
        package=package,
        version="1.0.0",
        ref=ref,
        title=ref,
        doc_type=DocType.FUNCTION,
        markdown=markdown,
        module=module,
    )


@pytest.mark.parametrize(
    ("markdown", "target", "mention"),
    [
        ("Group with [`group_by/3`](`Enum.group_by/3`).", "Enum.html#group_by/3", "group_by/3"),
        ("See `Kernel.SpecialForms.with/1` for chains.", "Kernel.SpecialForms.html#with/1", ""),
        ("Implement `c:GenServer.init/1` first.", "GenServer.html#c:init/1", ""),
        ("Returns `t:Date.t/0` values.", "Date.html#t:t/0", ""),
        ("Read the [guide](getting-started.md#setup).", "getting-started.html#setup", "guide"),
        ("Old docs: [here](Enum.html#map/2) it maps.", "Enum.html#map/2", "here"),
        ("Use [`m:Task`](`m:Task`) for it.", "Task.html", "Task"),
        ("See the [Ecto guide](`e:ecto:getting-started.md`).", "getting-started.html", ""),
        (
            "As [Req](https://hexdocs.pm/req/0.7.3/Req.html#new/2) builds it.",
            "Req.html#new/2",
            "Req",
        ),
    ],
)
def test_a_reference_is_found_with_its_target(markdown: str, target: str, mention: str) -> None:
    found = references(item("Other.html#f/1", markdown))
    assert [r.target.ref for r in found] == [target]
    if mention:
        assert found[0].mention == mention


def test_context_is_the_sentence_around_the_reference_flattened() -> None:
    doc = "First sentence here. Bail out early with `with/1` when a step fails. Last one."
    (ref,) = references(item("Kernel.html#if/2", doc, module="Kernel"))
    assert ref.text == "Bail out early with with/1 when a step fails."
    assert ref.target == Target("Kernel.html#with/1", local=True)


def test_code_sessions_and_boilerplate_pages_are_not_descriptions() -> None:
    doc = "```elixir\n# uses `Enum.map/2`\n```\n\n    iex> `Enum.map/2`\n"
    assert references(item("Mod.html#f/1", doc)) == []
    assert references(item("changelog.html#v1-0-0", "Add `Enum.map/2`.")) == []


def test_a_long_sentence_keeps_a_window_around_the_reference() -> None:
    doc = ("word " * 200) + "see `Enum.map/2` here " + ("tail " * 200)
    (ref,) = references(item("Mod.html#f/1", doc))
    assert "Enum.map/2" in ref.text and len(ref.text) < 400


def test_table_rows_are_sentences_of_their_own() -> None:
    doc = "| Deprecated | Use instead |\n|---|---|\n| `Old.f/1` | `New.f/1` (v1.0) |\n"
    targets = [r.target.ref for r in references(item("page.html#table", doc))]
    assert targets == ["Old.html#f/1", "New.html#f/1"]


def _known(*pairs: tuple[str, Iterable[str]]) -> dict[str, frozenset[str]]:
    return {package: frozenset(refs) for package, refs in pairs}


def test_resolve_looks_in_the_source_package_then_the_pages_home() -> None:
    refs = references(item("Ecto.Migration.html#f/1", "Like `Ecto.Changeset.cast/4` does."))
    known = _known(
        ("ecto_sql", ["Ecto.Migration.html#f/1"]), ("ecto", ["Ecto.Changeset.html#cast/4"])
    )
    home = {"Ecto.Changeset.html": "ecto", "Ecto.Migration.html": "ecto_sql"}
    (anchor,) = resolve(refs, "ecto_sql", known, home)
    assert (anchor.package, anchor.ref, anchor.source_package) == (
        "ecto",
        "Ecto.Changeset.html#cast/4",
        "ecto_sql",
    )


def test_a_local_function_falls_back_to_kernel_and_unknown_targets_are_dropped() -> None:
    doc = "Compare with `is_nil/1`. Nothing named `nowhere/3` exists."
    refs = references(item("Map.html#get/3", doc, package="elixir", module="Map"))
    known = _known(("elixir", ["Map.html#get/3", "Kernel.html#is_nil/1"]))
    anchors = resolve(refs, "elixir", known, {"Kernel.html": "elixir", "Map.html": "elixir"})
    assert [a.ref for a in anchors] == ["Kernel.html#is_nil/1"]


def test_references_between_an_item_and_its_sections_are_dropped() -> None:
    refs = references(item("Req.html#new/2-options", "As `Req.new/2` says."))
    known = _known(("req", ["Req.html#new/2", "Req.html#new/2-options"]))
    assert resolve(refs, "req", known, {"Req.html": "req"}) == []


def test_a_section_link_the_parser_merged_resolves_to_its_page() -> None:
    refs = references(item("a.html#x", "Read [how](guide.md#merged-away) it works."))
    known = _known(("demo", ["a.html#x", "guide.html"]))
    (anchor,) = resolve(refs, "demo", known, {})
    assert anchor.ref == "guide.html"


@pytest.mark.parametrize(
    ("ref", "item"),
    [
        ("Task.html#async_stream/5-options", "Task.html#async_stream/5"),
        ("Ecto.Repo.html#c:insert/2-upserts", "Ecto.Repo.html#c:insert/2"),
        ("Kernel.html#%7C%3E/2-pitfalls", "Kernel.html#%7C%3E/2"),
        ("Mod.html#module-section", "Mod.html#module-section"),
        ("guide.html#a-b", "guide.html#a-b"),
    ],
)
def test_a_heading_section_reads_its_items_anchors(ref: str, item: str) -> None:
    assert item_of(ref) == item


def test_elixir_describes_hundreds_of_its_functions(corpus: object) -> None:
    files = read_docs_tarball((HEXDOCS / "elixir-1.18.4.tar.gz").read_bytes(), max_bytes=10**9)
    items = parse_hexdocs(files, package="elixir", version="1.18.4").items
    anchors = mine({"elixir": items})
    functions = {a.ref for a in anchors if "/" in a.ref.split("#")[-1]}
    assert len(functions) > 600
    with_ = [a for a in anchors if a.ref == "Kernel.SpecialForms.html#with/1"]
    assert with_ and all(a.source_ref != a.ref for a in with_)
