"""Which compiled apps are the project's own (`project_code.own_apps`): one rule for
indexing them and for reading their calls in upgrade_impact. Every fetched dependency is
in mix.lock; the root app, an umbrella's apps and path dependencies are not."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexlocal_core.ingest.project_code import own_apps
from hexlocal_core.usecases.upgrade_usage import BeamReader, project_uses
from tests.support.projects import write_lock

UMBRELLA = 'defmodule U.MixProject do\n  def project, do: [apps_path: "apps"]\nend\n'
SINGLE = "defmodule A.MixProject do\n  def project, do: [app: :shop, deps: deps()]\nend\n"
HEX = '  "jason": {:hex, :jason, "1.4.4", "h", [:mix], [], "hexpm", "h"},'
GIT = '  "forked": {:git, "https://example.com/forked.git", "abc123", []},'


def compiled(root: Path, app: str, vsn: str = "0.1.0", env: str = "dev") -> Path:
    """`_build/<env>/lib/<app>/ebin` with a beam and an .app file, as mix compile leaves."""
    ebin = root / "_build" / env / "lib" / app / "ebin"
    ebin.mkdir(parents=True)
    (ebin / f"Elixir.{app.title()}.beam").write_bytes(b"FOR1")
    (ebin / f"{app}.app").write_text(f'{{application,{app},[{{modules,[]}},{{vsn,"{vsn}"}}]}}.\n')
    return ebin


def names(root: Path) -> list[str]:
    return [a.app for a in own_apps(root)]


def test_the_root_app_and_a_path_dependency_are_own_and_locked_deps_are_not(
    tmp_path: Path,
) -> None:
    write_lock(tmp_path, HEX, GIT)
    (tmp_path / "mix.exs").write_text(SINGLE)
    for app in ("shop", "local_lib", "jason", "forked"):  # local_lib: {:local_lib, path: ..}
        compiled(tmp_path, app)
    assert names(tmp_path) == ["local_lib", "shop"]
    shop = next(a for a in own_apps(tmp_path) if a.app == "shop")
    assert (shop.vsn, shop.ebin) == ("0.1.0", tmp_path / "_build/dev/lib/shop/ebin")


def test_an_umbrellas_apps_are_own_from_a_child_folder_too(tmp_path: Path) -> None:
    write_lock(tmp_path, HEX)
    (tmp_path / "mix.exs").write_text(UMBRELLA)
    for app in ("core", "web", "jason"):
        compiled(tmp_path, app)
    child = tmp_path / "apps" / "web"
    child.mkdir(parents=True)
    (child / "mix.exs").write_text("defmodule W.MixProject do\nend\n")
    assert names(tmp_path) == names(child) == ["core", "web"]


def test_an_umbrella_without_a_lock_yet_is_found_from_a_child_folder(tmp_path: Path) -> None:
    # `mix new --umbrella` and apps without deps: no mix.lock to lead to the umbrella root,
    # and the child's own folder has no _build (Mix builds into the umbrella's)
    (tmp_path / "mix.exs").write_text(UMBRELLA)
    for app in ("billing", "web"):
        compiled(tmp_path, app)
        child = tmp_path / "apps" / app
        child.mkdir(parents=True)
        (child / "mix.exs").write_text(f"defmodule {app.title()}.MixProject do\nend\n")
    assert names(tmp_path / "apps" / "web") == names(tmp_path) == ["billing", "web"]
    (tmp_path / "mix.exs").write_text(SINGLE)  # not an umbrella: the child is on its own
    assert names(tmp_path / "apps" / "web") == []


def test_one_env_is_read_dev_first(tmp_path: Path) -> None:
    (tmp_path / "mix.exs").write_text(SINGLE)
    compiled(tmp_path, "shop", "0.2.0", env="test")
    assert [(a.app, a.vsn) for a in own_apps(tmp_path)] == [("shop", "0.2.0")]
    compiled(tmp_path, "shop", "0.1.0", env="dev")
    assert [(a.app, a.vsn) for a in own_apps(tmp_path)] == [("shop", "0.1.0")]


@pytest.mark.parametrize("lock_text", ["%{not a lock", "x" * 3_000_000])
def test_an_unreadable_lock_leaves_the_apps_mix_exs_declares(
    tmp_path: Path, lock_text: str
) -> None:
    (tmp_path / "mix.exs").write_text(SINGLE)
    (tmp_path / "mix.lock").write_text(lock_text)
    for app in ("shop", "jason"):
        compiled(tmp_path, app)
    assert names(tmp_path) == ["shop"]  # jason's folder is no longer told from a path dep


def test_an_app_with_no_beams_or_no_version_is_not_an_own_app(tmp_path: Path) -> None:
    (tmp_path / "mix.exs").write_text(SINGLE)
    for beam in compiled(tmp_path, "shop").glob("*.beam"):
        beam.unlink()
    compiled(tmp_path, "odd", vsn="not a version")
    assert names(tmp_path) == []


def test_upgrade_impact_reads_the_beams_of_the_same_apps(tmp_path: Path) -> None:
    write_lock(tmp_path, HEX)
    (tmp_path / "mix.exs").write_text(SINGLE)
    for app in ("shop", "local_lib", "jason"):
        compiled(tmp_path, app)
    uses = project_uses(tmp_path, [], [], BeamReader())
    # The fake beams cannot be parsed: what matters is which files were opened.
    read = sorted(
        {Path(key[0]).parent.parent.name for key in uses.fingerprint if key[0].endswith(".beam")}
    )
    assert read == ["local_lib", "shop"]
