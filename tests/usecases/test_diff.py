"""`diff_versions`: what changed between two versions of a package.

The pure diff is tested with small tables of items; the use case, the MCP tool and the
CLI run over real SQLite and the real tarball parser, with only hex.pm faked (the loopback
fake serving the corpus's real ecto 3.12.5 and 3.14.2 tarballs).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from click.testing import CliRunner
from fastmcp import Client

from hexlocal_cli import common
from hexlocal_cli.main import cli
from hexlocal_core.config import Settings
from hexlocal_core.errors import UserInputError, VersionNotFound
from hexlocal_core.model import DocItem, DocType
from hexlocal_core.service import Hexlocal, build
from hexlocal_core.usecases.diff import (
    KINDS,
    Change,
    api_entries,
    count_kinds,
    diff_entries,
    page_changes,
)
from hexlocal_mcp.server import create_server
from tests.fakes.fake_hex import FakeHex
from tests.support.helpers import HashingEmbedder, item
from tests.support.hex_fixtures import client_for, settings_for

pytestmark = pytest.mark.integration

OLD, NEW = "3.12.5", "3.14.2"


def fn(
    ref: str,
    markdown: str = "doc",
    *,
    signature: str | None = None,
    deprecated: str | None = None,
    doc_type: DocType | None = None,
) -> DocItem:
    """An item of the module its ref's page names (`M.html#...` is in `M`)."""
    module = ref.partition(".html")[0]
    kind = doc_type or (DocType.CALLBACK if "#c:" in ref else DocType.FUNCTION)
    made = item(ref, markdown, module=module, doc_type=kind)
    return attrs.evolve(made, signature=signature, deprecated=deprecated)


def names(changes: tuple[Change, ...], kind: str) -> set[tuple[str, str]]:
    return {(c.module, c.name) for c in changes if c.kind == kind}


# -- the pure diff ------------------------------------------------------------------------


def test_sub_sections_fold_into_their_item() -> None:
    entries = api_entries(
        [
            fn("M.html", "moduledoc", doc_type=DocType.MODULE),
            fn("M.html#module-options", "options"),
            fn("M.html#c:run/2", "runs"),
            fn("M.html#c:run/2-examples", "example"),
            item("readme.html", "intro"),
            item("readme.html#install", "mix deps.get"),
        ]
    )
    assert [(e.group, e.name) for e in entries] == [
        ("M", "M"),
        ("M", "c:run/2"),
        ("guides", "readme.html"),
    ]


def test_each_change_is_listed_once_under_its_most_telling_kind() -> None:
    old = api_entries(
        [
            fn("M.html#a/1"),
            fn("M.html#gone/0"),
            fn("M.html#b/1", signature="b(x)"),
            fn("M.html#c/1", "old words"),
            fn("M.html#d/1", "same"),
            fn("M.html#e/1", "text"),
        ]
    )
    new_items = [
        fn("M.html#a/1"),
        fn("M.html#new/2"),
        fn("M.html#b/1", signature="b(x, opts \\\\ [])"),
        fn("M.html#c/1", "new words"),
        fn("M.html#d/1", "same"),
        fn("M.html#e/1", "text, now deprecated", deprecated="Use a/1 instead"),
    ]
    changes = diff_entries(old, api_entries(new_items))
    assert names(changes, "added") == {("M", "new/2")}
    assert names(changes, "removed") == {("M", "gone/0")}
    assert names(changes, "signature_changed") == {("M", "b/1")}
    assert names(changes, "docs_changed") == {("M", "c/1")}
    (dep,) = [c for c in changes if c.kind == "deprecated"]
    assert (dep.name, dep.deprecated, dep.also) == ("e/1", "Use a/1 instead", ("docs_changed",))
    assert count_kinds(changes) == dict.fromkeys(KINDS, 1)


def test_spacing_is_not_a_doc_change() -> None:
    old = api_entries([fn("M.html#a/1", "Runs  it.\n")])
    new = api_entries([fn("M.html#a/1", "Runs\nit.")])
    assert diff_entries(old, new) == ()


def test_a_module_added_whole_is_one_entry_counting_its_members() -> None:
    old = api_entries([fn("M.html", "m", doc_type=DocType.MODULE)])
    new = api_entries(
        [
            fn("M.html", "m", doc_type=DocType.MODULE),
            fn("N.html", "n", doc_type=DocType.MODULE),
            fn("N.html#x/0"),
            fn("N.html#t:t/0", doc_type=DocType.TYPE),
        ]
    )
    (added,) = diff_entries(old, new)
    assert (added.kind, added.module, added.name, added.members) == ("added", "N", "N", 2)
    # Docs changed in a module and in its members: each entry stays listed.
    changed = diff_entries(new, api_entries([fn("N.html", "n2"), fn("N.html#x/0", "x2")]))
    assert {(c.kind, c.name, c.members) for c in changed} == {
        ("removed", "M", 0),
        ("removed", "t:t/0", 0),
        ("docs_changed", "N", 0),
        ("docs_changed", "x/0", 0),
    }


def test_pages_cut_each_kind_and_keep_module_order() -> None:
    new = api_entries([fn(f"Z.html#f{i}/0") for i in range(3)] + [fn("A.html#a/0")])
    changes = diff_entries(api_entries([fn(f"B.html#g{i}/0") for i in range(3)]), new)
    assert [c.name for c in changes if c.kind == "added"] == ["a/0", "f0/0", "f1/0", "f2/0"]
    page = page_changes(changes, kind=None, limit=2, offset=1)
    assert [(c.kind, c.name) for c in page] == [
        ("added", "f0/0"),
        ("added", "f1/0"),
        ("removed", "g1/0"),
        ("removed", "g2/0"),
    ]
    assert [c.name for c in page_changes(changes, kind="added", limit=9, offset=3)] == ["f2/0"]


# -- the use case on the real ecto tarballs -------------------------------------------------


@pytest.fixture
def settings(fake_hex: FakeHex, tmp_path: Path) -> Settings:
    return settings_for(fake_hex, tmp_path, ai_rerank_model="off")


def make(settings: Settings) -> Hexlocal:
    return build(
        settings,
        embedder=HashingEmbedder(),
        reranker=None,
        registry=client_for(settings),
        load_models=False,
    )


@pytest.fixture
async def svc(settings: Settings) -> AsyncIterator[Hexlocal]:
    async with make(settings) as service:
        yield service


def lock(settings: Settings, pins: dict[str, str]) -> None:
    root = settings.project_root
    (root / "mix.exs").write_text("defmodule App.MixProject do\nend\n")
    lines = [
        f'  "{n}": {{:hex, :{n}, "{v}", "abc", [:mix], [], "hexpm", "def"}},'
        for n, v in pins.items()
    ]
    (root / "mix.lock").write_text("%{\n" + "\n".join(lines) + "\n}\n")


async def test_ecto_upgrade_lists_what_the_release_notes_promise(svc: Hexlocal) -> None:
    diff = await svc.diff_versions("ecto", OLD, NEW, limit=200)
    added, removed = names(diff.changes, "added"), names(diff.changes, "removed")
    assert {
        ("Ecto.Repo", "c:transact/2"),
        ("Ecto.Repo", "c:all_by/3"),
        ("Ecto.UUID", "generate/1"),
    } <= added
    assert {("Ecto.Query.API", "literal/1"), ("Ecto.UUID", "generate/0")} <= removed
    (transaction,) = [c for c in diff.shown("deprecated") if c.name == "c:transaction/2"]
    assert transaction.deprecated and "Repo.transact/2" in transaction.deprecated
    transact = next(c for c in diff.changes if c.name == "c:transact/2")
    assert transact.to_url == f"https://ecto.hexdocs.pm/{NEW}/Ecto.Repo.html#c:transact/2"
    assert transact.from_url is None
    literal = next(c for c in diff.changes if c.name == "literal/1")
    assert literal.from_url == f"https://ecto.hexdocs.pm/{OLD}/Ecto.Query.API.html#literal/1"
    assert (diff.from_side.hexdocs_url, diff.to_side.hexdocs_url) == (
        f"https://ecto.hexdocs.pm/{OLD}/",
        f"https://ecto.hexdocs.pm/{NEW}/",
    )
    assert diff.counts["added"] == len(added) and diff.counts["removed"] == len(removed)
    # Nothing was indexed: the diff reads tarballs in memory only.
    assert svc.list_packages() == []


async def test_paging_reads_each_tarball_once(svc: Hexlocal, fake_hex: FakeHex) -> None:
    first = await svc.diff_versions("ecto", OLD, NEW, kind="added", limit=5)
    assert [c.kind for c in first.changes] == ["added"] * 5
    assert first.next_offset("added") == 5
    second = await svc.diff_versions("ecto", OLD, NEW, kind="added", limit=5, offset=5)
    assert not {c.name for c in first.changes} & {c.name for c in second.changes}
    assert second.counts == first.counts
    whole = await svc.diff_versions("ecto", OLD, NEW)
    assert len(whole.shown("added")) == min(20, whole.counts["added"])
    assert len(fake_hex.requests_to("/repo/docs/*")) == 2


async def test_defaults_compare_the_locked_version_with_the_latest_stable(
    settings: Settings,
) -> None:
    lock(settings, {"ecto": OLD})
    async with make(settings) as svc:
        diff = await svc.diff_versions("ecto")
    assert (diff.from_side.version, diff.from_side.source) == (OLD, "mix.lock")
    assert (diff.to_side.version, diff.to_side.source) == (NEW, "hex latest stable")
    assert diff.counts["added"] > 0


async def test_nothing_to_diff_from_is_a_clear_error(svc: Hexlocal) -> None:
    with pytest.raises(UserInputError, match="hexlocal diff ecto FROM"):
        await svc.diff_versions("ecto")
    with pytest.raises(UserInputError, match="kind must be one of"):
        await svc.diff_versions("ecto", OLD, NEW, kind="renamed")
    with pytest.raises(UserInputError, match="limit"):
        await svc.diff_versions("ecto", OLD, NEW, limit=0)


async def test_a_side_without_docs_says_why_and_what_to_ask_for(svc: Hexlocal) -> None:
    # telemetry 1.4.1 is listed with docs on hex.pm, but the mirror has no tarball of it.
    with pytest.raises(VersionNotFound) as caught:
        await svc.diff_versions("telemetry", "1.2.1", "1.4.1")
    message = str(caught.value)
    assert "telemetry 1.4.1: there is no docs tarball" in message
    assert "the docs mirror may lag behind it" in message and "Ask for version 1.4.0" in message


async def test_the_same_version_twice_is_an_empty_diff_with_a_notice(svc: Hexlocal) -> None:
    diff = await svc.diff_versions("ecto", NEW, NEW)
    assert sum(diff.counts.values()) == 0
    assert [n.code for n in diff.notices] == ["same_version"]


# -- the faces ----------------------------------------------------------------------------


async def test_mcp_tool_answers_a_summary_then_pages(settings: Settings) -> None:
    async with Client(create_server(lambda: make(settings))) as client:
        result = await client.call_tool(
            "diff_versions",
            {"package": "ecto", "from_version": OLD, "to_version": NEW, "limit": 3},
        )
    data = result.structured_content
    assert data is not None
    assert set(data["summary"]) == set(KINDS)
    assert all(len(v) <= 3 for v in data["changes"].values())
    text = result.content[0].text  # type: ignore[union-attr]
    head = text.splitlines()
    assert head[0] == f"ecto {OLD} (explicit) -> {NEW} (explicit)"
    assert head[2].startswith("summary: ")
    assert "kind='added', offset=3" in text


async def test_cli_diff_prints_text_and_json(
    fake_hex: FakeHex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for(fake_hex, tmp_path, ai_rerank_model="off")
    for name, value in {
        "HEX_API_URL": fake_hex.api_url,
        "HEX_MIRROR": fake_hex.mirror_url,
        "PROJECT_ROOT": str(settings.project_root),
        "DATABASE_PATH": str(settings.database_path),
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(common, "build_service", lambda s, load_models=True: make(s))

    def invoke(*args: str) -> Any:
        return asyncio.to_thread(CliRunner().invoke, cli, list(args), prog_name="hexlocal")

    text = await invoke("diff", "ecto", OLD, NEW, "--kind", "removed")
    assert text.exit_code == 0, text.output
    assert "REMOVED" in text.output and "literal/1" in text.output
    assert "ADDED" not in text.output
    as_json = await invoke("diff", "ecto", OLD, NEW, "--json", "--limit", "1")
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.output)
    assert data["from"]["version"] == OLD and data["to"]["version"] == NEW
    assert len(data["changes"]["added"]) == 1
    bad = await invoke("diff", "ecto")
    assert bad.exit_code == 2 and "FROM" in bad.output
