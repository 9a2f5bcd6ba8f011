"""upgrade_impact end to end: the compiled acceptance project, the real ecto, decimal and
Elixir tarballs served by the fake hex.pm, the real service, MCP tool and CLI.

The project (tests/fixtures/upgrade_project) pins ecto 3.12.5 and decimal 2.3.0; it
calls `Repo.transaction/2` through its own `use Ecto.Repo` module, `Ecto.Changeset.cast/4`,
`Ecto.UUID.generate/0`, the `from` macro of Ecto.Query, `Decimal.cmp/2`, `Decimal.cast/1`,
`Decimal.new/1` and `&Decimal.add/2`.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastmcp import Client

from hexlocal_cli import common
from hexlocal_cli.main import cli
from hexlocal_core.config import Settings
from hexlocal_core.errors import UserInputError, VersionNotFound
from hexlocal_core.service import Hexlocal, build
from hexlocal_core.usecases.upgrade_impact import UpgradeReport
from hexlocal_mcp.server import create_server
from tests.fakes.fake_hex import FakeHex
from tests.support.helpers import HashingEmbedder
from tests.support.hex_fixtures import client_for, settings_for
from tests.support.upgrade_project import compiled_project, copy_project

pytestmark = pytest.mark.integration

CONTRACT_KEYS = {"package", "from", "to", "affected", "not_affected", "changelog",
                 "requirements", "notices"}  # fmt: skip


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compiled_project(tmp_path_factory)


def make(settings: Settings) -> Hexlocal:
    return build(
        settings,
        embedder=HashingEmbedder(),
        reranker=None,
        registry=client_for(settings),
        load_models=False,
    )


def settings_at(fake_hex: FakeHex, tmp_path: Path, project: Path) -> Settings:
    return settings_for(fake_hex, tmp_path, ai_rerank_model="off", project_root=project)


@pytest.fixture
async def svc(fake_hex: FakeHex, tmp_path: Path, shop: Path) -> AsyncIterator[Hexlocal]:
    async with make(settings_at(fake_hex, tmp_path, shop)) as service:
        yield service


def entry(report: UpgradeReport, identifier: str) -> dict[str, Any]:
    found = [a for a in report.to_dict()["affected"] if a["identifier"] == identifier]
    assert len(found) == 1, [a["identifier"] for a in report.to_dict()["affected"]]
    return found[0]


def sites(item: dict[str, Any]) -> list[tuple[str, int, str]]:
    return [(s["file"], s["line"], s["caller"]) for s in item["call_sites"]]


# -- the acceptance example -----------------------------------------------------------------


async def test_moving_ecto_reports_what_the_project_meets(svc: Hexlocal) -> None:
    report = await svc.upgrade_impact("ecto", "3.14.2")
    data = report.to_dict()
    assert CONTRACT_KEYS <= set(data)
    assert (data["from"], data["to"], data["from_source"]) == ("3.12.5", "3.14.2", "mix.lock")

    transaction = entry(report, "c:Ecto.Repo.transaction/2")
    assert transaction["change"] == "deprecated"
    assert "Use Repo.transact/2" in transaction["detail"]
    assert transaction["call_sites"] == [
        {
            "file": "lib/shop/orders.ex",
            "line": 9,
            "caller": "Shop.Orders.place/2",
            "via": "Shop.Repo.transaction/2",
        }
    ]

    cast = entry(report, "Ecto.Changeset.cast/4")
    assert cast["change"] == "docs_changed"
    assert "+ * `:trim_values`" in cast["detail"]  # a sentence 3.14 adds, quoted briefly
    assert sites(cast) == [("lib/shop/orders.ex", 13, "Shop.Orders.changeset/2")]

    # A macro leaves no call in the beam: the source scan finds it, and says so.
    from_macro = entry(report, "Ecto.Query.from/2")
    assert [(s["line"], s["via"]) for s in from_macro["call_sites"]] == [(21, "source")]

    # generate/0 is gone, but generate/1 has `opts \\ []`: not a break, and said why.
    (generate,) = data["not_affected"]
    assert generate["identifier"] == "Ecto.UUID.generate/0"
    assert "default argument" in generate["why"] and "generate/1" in generate["why"]
    assert sites(generate) == [("lib/shop/orders.ex", 17, "Shop.Orders.new_reference/0")]

    listed = {a["identifier"] for a in data["affected"]}
    assert not any("literal" in i for i in listed)  # removed, but the project never calls it
    assert not any(a["change"] == "removed" for a in data["affected"])
    assert data["diff"]["removed"] >= 2  # the diff has removals; none is the project's

    # ecto 3.14.0's changelog says "Require decimal v3"; the lock pins decimal 2.3.0.
    (decimal,) = data["requirements"]
    assert (decimal["package"], decimal["locked"], decimal["satisfied"]) == (
        "decimal",
        "2.3.0",
        False,
    )
    assert "Require decimal v3" in decimal["source"]

    versions = [v["version"] for v in data["changelog"]]
    assert versions[0] == "3.14.2" and "3.12.5" not in versions and "3.13.0" in versions
    assert data["call_sites"] == {"beams": 3, "source": 1}
    assert svc.list_packages() == []  # nothing indexed


async def test_moving_decimal_reports_the_signature_and_the_deprecation(svc: Hexlocal) -> None:
    report = await svc.upgrade_impact("decimal")  # the latest stable: 3.1.1
    assert (report.from_version, report.to_version) == ("2.3.0", "3.1.1")
    cast = entry(report, "Decimal.cast/1")
    assert cast["change"] == "signature_changed"
    assert cast["detail"] == "cast(integer) -> cast(term)"
    assert sites(cast) == [("lib/shop/money.ex", 9, "Shop.Money.parse/1")]
    cmp = entry(report, "Decimal.cmp/2")
    assert cmp["change"] == "deprecated" and "Use compare/2 instead" in cmp["detail"]
    assert sites(cmp) == [("lib/shop/money.ex", 5, "Shop.Money.bigger?/2")]
    assert "no_changelog" in {n.code for n in report.notices}  # decimal's docs have none


async def test_every_call_site_of_a_used_entry_is_listed(svc: Hexlocal) -> None:
    report = await svc.upgrade_impact("decimal", "3.1.1")
    assert sites(entry(report, "Decimal.new/1")) == [
        ("lib/shop/ledger.ex", 4, "Shop.Ledger.total/1")
    ]


async def test_a_second_identical_call_downloads_nothing(svc: Hexlocal, fake_hex: FakeHex) -> None:
    first = await svc.upgrade_impact("ecto", "3.14.2")
    requests = len(fake_hex.requests)
    second = await svc.upgrade_impact("ecto", "3.14.2")
    assert second == first
    assert len(fake_hex.requests) == requests


async def test_a_requirement_picks_the_newest_release_meeting_it(svc: Hexlocal) -> None:
    report = await svc.upgrade_impact("ecto", "~> 3.14")
    assert report.to_version == "3.14.2"
    assert "requirement_matched" in {n.code for n in report.notices}


async def test_hex_release_data_names_requirement_changes(
    fake_hex: FakeHex, tmp_path: Path, shop: Path
) -> None:
    fake_hex.add_release("ecto", "3.12.5", {"decimal": "~> 2.0", "telemetry": "~> 1.0"})
    fake_hex.add_release("ecto", "3.14.2", {"decimal": "~> 3.0", "telemetry": "~> 1.0"})
    async with make(settings_at(fake_hex, tmp_path, shop)) as service:
        data = (await service.upgrade_impact("ecto", "3.14.2")).to_dict()
    (decimal,) = [r for r in data["requirements"] if r["source"] == "hex.pm"]
    assert decimal == {
        "package": "decimal",
        "requirement": "~> 3.0",
        "previous": "~> 2.0",
        "locked": "2.3.0",
        "satisfied": False,
        "source": "hex.pm",
    }
    assert len(data["requirements"]) == 1  # the changelog's line says the same: once


# -- Elixir's own apps ----------------------------------------------------------------------


async def test_moving_elixir_itself(fake_hex: FakeHex, tmp_path: Path, shop: Path) -> None:
    project = copy_project(shop, tmp_path / "shop")
    (project / ".tool-versions").write_text("elixir 1.14.0-otp-25\n")
    async with make(settings_at(fake_hex, tmp_path, project)) as service:
        report = await service.upgrade_impact("elixir", "1.18.4")
        with pytest.raises(UserInputError, match="ships with Elixir"):
            await service.upgrade_impact("elixir")
    assert (report.from_version, report.to_version) == ("1.14.0", "1.18.4")
    reduce = entry(report, "Enum.reduce/3")
    assert sites(reduce) == [("lib/shop/ledger.ex", 4, "Shop.Ledger.total/1")]
    assert report.changelog and report.changelog[0].version == "1.18.4"


# -- bad input ------------------------------------------------------------------------------


async def test_a_project_never_compiled_is_scanned_from_source(
    fake_hex: FakeHex, tmp_path: Path, shop: Path
) -> None:
    project = copy_project(shop, tmp_path / "shop", with_build=False)
    async with make(settings_at(fake_hex, tmp_path, project)) as service:
        report = await service.upgrade_impact("ecto", "3.14.2")
    (notice,) = [n for n in report.notices if n.code == "not_compiled"]
    assert "mix compile" in notice.message
    transaction = entry(report, "c:Ecto.Repo.transaction/2")
    assert [(s["line"], s["via"]) for s in transaction["call_sites"]] == [
        (9, "Shop.Repo.transaction/2, source")
    ]
    assert sites(entry(report, "Ecto.Changeset.cast/4")) == [
        ("lib/shop/orders.ex", 13, "Shop.Orders.changeset")
    ]
    assert report.beam_sites == 0 and report.source_sites >= 4


async def test_an_unknown_target_names_the_releases_that_exist(svc: Hexlocal) -> None:
    with pytest.raises(VersionNotFound, match="3.14.2"):
        await svc.upgrade_impact("ecto", "3.15.0")


async def test_a_package_the_project_does_not_lock(svc: Hexlocal) -> None:
    with pytest.raises(UserInputError, match="from_version"):
        await svc.upgrade_impact("jason", "1.4.4")
    report = await svc.upgrade_impact("jason", "1.4.4", from_version="1.2.2")
    assert "not_locked" in {n.code for n in report.notices}
    assert report.affected == () and sum(report.diff_counts.values()) > 0


async def test_a_beam_without_line_table_or_attributes_still_names_the_caller(
    fake_hex: FakeHex, tmp_path: Path, shop: Path
) -> None:
    from tests.support.beams import replace_chunk

    project = copy_project(shop, tmp_path / "shop")
    ebin = project / "_build/dev/lib/shop/ebin"
    orders = ebin / "Elixir.Shop.Orders.beam"
    orders.write_bytes(replace_chunk(orders.read_bytes(), b"Line", None))
    repo = ebin / "Elixir.Shop.Repo.beam"
    repo.write_bytes(replace_chunk(repo.read_bytes(), b"Attr", None))
    async with make(settings_at(fake_hex, tmp_path, project)) as service:
        report = await service.upgrade_impact("ecto", "3.14.2")
    codes = {n.code: n.message for n in report.notices}
    assert "Shop.Orders" in codes["no_line_table"] and "Shop.Repo" in codes["no_attributes"]
    cast = entry(report, "Ecto.Changeset.cast/4")
    assert sites(cast) == [(None, None, "Shop.Orders.changeset/2")]
    # Without Repo's behaviour attribute, transaction/2 cannot be tied to the callback.
    assert "c:Ecto.Repo.transaction/2" not in {a.identifier for a in report.affected}


async def test_thousands_of_beams_are_read_and_counted(
    fake_hex: FakeHex, tmp_path: Path, shop: Path
) -> None:
    project = copy_project(shop, tmp_path / "shop")
    ebin = project / "_build/dev/lib/shop/ebin"
    money = (ebin / "Elixir.Shop.Money.beam").read_bytes()
    for i in range(3000):
        (ebin / f"Elixir.Shop.Money{i}.beam").write_bytes(money)
    (ebin / "Elixir.Shop.Junk.beam").write_bytes(b"FOR1\0\1\0\0BEAM" + b"\xff" * 64)
    async with make(settings_at(fake_hex, tmp_path, project)) as service:
        report = await service.upgrade_impact("decimal", "3.1.1")
    assert len(entry(report, "Decimal.cmp/2")["call_sites"]) == 1  # the same site, once
    assert report.beam_sites >= 3001 * 2
    (skipped,) = [n for n in report.notices if n.code == "beams_skipped"]
    assert "truncated: 1" in skipped.message


# -- the faces ------------------------------------------------------------------------------


async def test_mcp_tool_returns_the_contract_and_the_text(
    fake_hex: FakeHex, tmp_path: Path, shop: Path
) -> None:
    settings = settings_at(fake_hex, tmp_path, shop)
    async with Client(create_server(lambda: make(settings))) as client:
        result = await client.call_tool(
            "upgrade_impact", {"package": "ecto", "to_version": "3.14.2"}
        )
        bad = await client.call_tool(
            "upgrade_impact", {"package": "ecto", "to_version": "9.9.9"}, raise_on_error=False
        )
    data = result.structured_content
    assert data is not None and CONTRACT_KEYS <= set(data)
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.splitlines()[0] == "ecto 3.12.5 -> 3.14.2: 0 breaks, 3 used entries changed"
    assert all(len(line) <= 80 for line in text.splitlines())
    assert bad.is_error and "9.9.9" in bad.content[0].text  # type: ignore[union-attr]


async def test_cli_prints_80_columns_leading_with_breaks_and_json(
    fake_hex: FakeHex, tmp_path: Path, shop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = copy_project(shop, tmp_path / "shop")
    # Make one break: the project now calls a function 3.14.2 removes.
    orders = project / "lib/shop/orders.ex"
    orders.write_text(
        orders.read_text().replace(
            "  defp insert!", "  def lit(q), do: Ecto.Query.API.literal(q)\n\n  defp insert!"
        )
    )
    shutil.rmtree(project / "_build")
    from tests.support.upgrade_project import compile_project

    compile_project(project)
    settings = settings_at(fake_hex, tmp_path, project)
    for name, value in {
        "HEX_API_URL": fake_hex.api_url,
        "HEX_MIRROR": fake_hex.mirror_url,
        "PROJECT_ROOT": str(project),
        "DATABASE_PATH": str(settings.database_path),
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(common, "build_service", lambda s, load_models=True: make(s))

    def invoke(*args: str) -> Any:
        return asyncio.to_thread(CliRunner().invoke, cli, list(args), prog_name="hexlocal")

    text = await invoke("upgrade-impact", "ecto", "3.14.2")
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    assert lines[0] == "ecto 3.12.5 -> 3.14.2: 1 break, 4 used entries changed"
    assert lines[lines.index("BREAKS: removed (the call will fail)") + 1] == (
        "  Ecto.Query.API.literal/1"
    )
    assert lines.index("BREAKS: removed (the call will fail)") < lines.index("DEPRECATED")
    assert all(len(line) <= 80 for line in lines)
    as_json = await invoke("upgrade-impact", "ecto", "3.14.2", "--json")
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.output)
    (removed,) = [a for a in data["affected"] if a["change"] == "removed"]
    assert removed["call_sites"][0]["caller"] == "Shop.Orders.lit/1"
    missing = await invoke("upgrade-impact", "jason")
    assert missing.exit_code == 2 and "--from" in missing.output
