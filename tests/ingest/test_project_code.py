"""The project's own modules: their @moduledoc/@doc, compiled for real by elixirc into
`_build`, searchable with source locations, reachable by get_docs, read again when the
beams change (`ingest/project_code.py`)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hexlocal_core.ingest.project_code import fingerprint, own_app_names, own_apps
from hexlocal_core.model import SourceKind
from hexlocal_core.service import Hexlocal, build
from hexlocal_mcp import formatting
from tests.fakes.fake_hex import FakeHex, client_for, settings_for
from tests.support.elixir import compile_app
from tests.support.helpers import HashingEmbedder, project_root

pytestmark = [pytest.mark.elixir, pytest.mark.integration]

GREETER = '''defmodule MyApp.Greeter do
  @moduledoc """
  Greets the people who sign up, in their own language.
  """

  @doc """
  Says hello to `name`, in the greeting the account chose at sign-up.
  """
  def hello(name), do: "hello #{name}"

  @doc "The farewell sent when an account is closed."
  @callback farewell(String.t()) :: String.t()
end
'''
BILLING = """defmodule MyApp.Billing do
  @moduledoc "Invoices and the monthly proration of plan upgrades."

  @doc "Prorates an upgrade over the days left in the billing month."
  def prorate(amount, days_left), do: amount * days_left / 30
end
"""


def make(fake: FakeHex, tmp_path: Path, mix_exs: str) -> Hexlocal:
    settings = settings_for(fake, tmp_path, ai_rerank_model="off", sync_on_start=False)
    (settings.project_root / "mix.exs").write_text(mix_exs)
    return build(
        settings,
        embedder=HashingEmbedder(),
        reranker=None,
        registry=client_for(settings),
        load_models=False,
    )


SINGLE = 'defmodule MyApp.MixProject do\n  def project, do: [app: :my_app, version: "0.1.0"]\nend\n'


@pytest.fixture
async def svc(fake_hex: FakeHex, tmp_path: Path) -> AsyncIterator[Hexlocal]:
    service = make(fake_hex, tmp_path, SINGLE)
    root = project_root(service)
    compile_app(
        root,
        "my_app",
        {"lib/my_app/greeter.ex": GREETER, "lib/my_app/billing.ex": BILLING},
    )
    yield service
    await service.aclose()


async def test_own_modules_are_searched_with_their_source_locations(svc: Hexlocal) -> None:
    result = await svc.search_project_docs("prorate an upgrade for the rest of the month")
    assert result.hits, result.notices
    hit = result.hits[0]
    assert (hit.package, hit.title) == ("my_app", "MyApp.Billing.prorate/2")
    assert hit.source == SourceKind.PROJECT.value
    assert hit.local_source == "lib/my_app/billing.ex:4"
    text = formatting.search_result(formatting.project_answer(result.to_dict()))
    assert "file: lib/my_app/billing.ex:4" in text


async def test_get_docs_reaches_an_own_module_without_a_package(svc: Hexlocal) -> None:
    result = await svc.get_docs(None, "MyApp.Greeter.hello/1")
    assert result.package == "my_app" and result.version is not None
    assert result.version.startswith("0.1.0+")  # the .app vsn and the beams' fingerprint
    assert [h.local_source for h in result.hits] == ["lib/my_app/greeter.ex:6"]
    assert any("the project's own app" in n.message for n in result.notices)
    callback = await svc.get_docs("my_app", "c:MyApp.Greeter.farewell/1")
    assert callback.hits and callback.hits[0].local_source == "lib/my_app/greeter.ex:11"


async def test_a_recompile_is_read_again(svc: Hexlocal) -> None:
    first = await svc.get_docs(None, "MyApp.Billing.prorate/2")
    root = project_root(svc)
    changed = BILLING.replace("Prorates an upgrade", "Splits a plan change fairly")
    compile_app(
        root, "my_app", {"lib/my_app/greeter.ex": GREETER, "lib/my_app/billing.ex": changed}
    )
    second = await svc.get_docs(None, "MyApp.Billing.prorate/2")
    assert second.version != first.version
    assert "Splits a plan change fairly" in second.hits[0].content
    assert any(n.code == "project_reindexed" for n in second.notices)
    again = await svc.get_docs(None, "MyApp.Billing.prorate/2")  # unchanged: no new read
    assert again.version == second.version
    assert not any(n.code == "project_reindexed" for n in again.notices)


async def test_project_wide_search_includes_the_own_apps(svc: Hexlocal) -> None:
    await svc.sync(wait=True)
    result = await svc.search_project_deps("greeting chosen at sign-up", mode="fts")
    assert any(h.package == "my_app" for h in result.hits), result.notices


UMBRELLA = 'defmodule Umbrella.MixProject do\n  def project, do: [apps_path: "apps"]\nend\n'


async def test_umbrella_apps_are_each_an_own_app(fake_hex: FakeHex, tmp_path: Path) -> None:
    service = make(fake_hex, tmp_path, UMBRELLA)
    try:
        root = project_root(service)
        for app, mod, code in (("core", "billing", BILLING), ("web", "greeter", GREETER)):
            (root / "apps" / app).mkdir(parents=True)
            (root / "apps" / app / "mix.exs").write_text(
                f"defmodule X.MixProject do\n  def project, do: [app: :{app}]\nend\n"
            )
            compile_app(root, app, {f"apps/{app}/lib/{mod}.ex": code})
        assert own_app_names(root) == ["core", "web"]
        result = await service.search_project_docs("say hello in the account's language")
        assert {h.package for h in result.hits} >= {"web"}
        hello = next(h for h in result.hits if h.title == "MyApp.Greeter.hello/1")
        assert hello.local_source == "apps/web/lib/greeter.ex:6"
    finally:
        await service.aclose()


def test_nothing_compiled_or_no_mix_project_means_no_own_apps(tmp_path: Path) -> None:
    assert own_apps(tmp_path) == []
    (tmp_path / "mix.exs").write_text(SINGLE)
    assert own_app_names(tmp_path) == ["my_app"]
    assert own_apps(tmp_path) == []  # not compiled


def test_the_fingerprint_follows_the_beams(tmp_path: Path) -> None:
    (tmp_path / "A.beam").write_bytes(b"x")
    first = fingerprint(tmp_path)
    assert fingerprint(tmp_path) == first
    os.utime(tmp_path / "A.beam", ns=(1, 1))
    assert fingerprint(tmp_path) != first
