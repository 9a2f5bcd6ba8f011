"""Hex SemVer, project probes and the resolution chain (against the fake Hex)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hexlocal_core import versions
from hexlocal_core.adapters.hex import HexClient
from hexlocal_core.errors import (
    PackageNotFound,
    RemoteError,
    UserInputError,
    VersionNotFound,
)
from hexlocal_core.model import HexPackageInfo, HexRelease, VersionSource
from hexlocal_core.versions import (
    build_version,
    is_stable,
    lockfile,
    nearest_versions,
    parse_version,
    pick_latest,
    pinned_elixir,
    probes,
    resolve_version,
    try_parse_version,
    validate_package_name,
)
from tests.fakes.fake_hex import FakeHex, client_for, settings_for
from tests.support.projects import NoRegistry, jason_lock, write_lock


def write_app(root: Path, app: str, vsn: str, env: str = "dev", quote: str = '"') -> Path:
    ebin = root / "_build" / env / "lib" / app / "ebin"
    ebin.mkdir(parents=True, exist_ok=True)
    path = ebin / f"{app}.app"
    path.write_text(
        f"{{application,{app},\n [{{modules,[]}},\n  {{optional_applications,[]}},\n"
        f'  {{description,"{app}"}},\n  {{registered,[]}},\n  {{vsn,{quote}{vsn}{quote}}}]}}.\n'
    )
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / ".git").mkdir()  # bounds every upward walk inside tmp
    return root


# --------------------------------------------------------------------------- SemVer


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("1.2.3", (1, 2, 3, (), "")),
        ("0.0.0", (0, 0, 0, (), "")),
        ("10.20.30", (10, 20, 30, (), "")),
        ("1.5.0-alpha.2", (1, 5, 0, ("alpha", 2), "")),
        ("1.0.0-rc.1+build.5", (1, 0, 0, ("rc", 1), "build.5")),
        ("1.0.0+20130313144700", (1, 0, 0, (), "20130313144700")),
        ("1.0.0-0.3.7", (1, 0, 0, (0, 3, 7), "")),
        ("1.0.0-x.7.z.92", (1, 0, 0, ("x", 7, "z", 92), "")),
        ("1.0.0-x-y-z.--", (1, 0, 0, ("x-y-z", "--"), "")),
        ("1.0.0-0a", (1, 0, 0, ("0a",), "")),
        (" 1.2.3 ", (1, 2, 3, (), "")),
    ],
)
def test_parse_valid_versions(text: str, parts: tuple[object, ...]) -> None:
    v = parse_version(text)
    assert (v.major, v.minor, v.patch, v.pre, v.build) == parts
    assert str(v) == text.strip()


@pytest.mark.parametrize(
    "text",
    ["", " ", "1", "1.2", "1.2.3.4", "v1.2.3", "01.2.3", "1.02.3", "1.2.03", "1.2.3-01",
     "1.2.3-", "1.2.3+", "1.2.3-alpha..1", "1.2.3-al_pha", "1.2.x", "latest", "a.b.c",
     "1.2.3 4", "-1.2.3", "1.2.3-" + "a" * 200],
)  # fmt: skip
def test_parse_invalid_versions(text: str) -> None:
    assert try_parse_version(text) is None
    with pytest.raises(UserInputError, match="not a valid version"):
        parse_version(text)


@pytest.mark.parametrize(
    ("text", "hint"), [("v1.2.3", "drop the leading 'v'"), ("1.18", "three parts")]
)
def test_parse_errors_hint_at_the_fix(text: str, hint: str) -> None:
    with pytest.raises(UserInputError, match=hint):
        parse_version(text)


def test_precedence_follows_semver_2() -> None:
    # The SemVer 2.0 spec's own example chain, then numeric (not text) comparison.
    chain = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
             "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.9.0", "1.10.0", "1.11.0",
             "2.0.0-0", "2.0.0", "10.0.0"]  # fmt: skip
    parsed = [parse_version(v) for v in chain]
    assert sorted(reversed(parsed)) == parsed
    assert all(a < b for a, b in zip(parsed, parsed[1:], strict=False))


def test_build_metadata_is_ignored_in_precedence() -> None:
    a, b = parse_version("1.0.0+a"), parse_version("1.0.0+b.2")
    assert a == b and hash(a) == hash(b) and not a < b
    assert parse_version("1.0.0-rc.1+x") < parse_version("1.0.0")
    assert a != "1.0.0"


@pytest.mark.parametrize(
    ("text", "stable"),
    [("1.4.5", True), ("1.0.0+build", True), ("1.5.0-alpha.2", False), ("junk", False)],
)
def test_is_stable(text: str, stable: bool) -> None:
    assert is_stable(text) is stable


def test_corpus_release_lists_are_in_our_descending_order(corpus: Path) -> None:
    # The API lists releases with Hex's own SemVer sort: ours must agree on real data.
    for path in sorted((corpus / "hexapi").glob("*.json")):
        listed = [r["version"] for r in json.loads(path.read_text())["releases"]]
        assert sorted(listed, key=parse_version, reverse=True) == listed, path.name


_ident = st.one_of(
    st.integers(0, 50).map(str), st.from_regex(r"[a-z][a-z0-9-]{0,5}", fullmatch=True)
)
_semver_text = st.builds(
    lambda nums, pre, build: (
        ".".join(map(str, nums))
        + (f"-{'.'.join(pre)}" if pre else "")
        + (f"+{'.'.join(build)}" if build else "")
    ),
    st.tuples(st.integers(0, 30), st.integers(0, 30), st.integers(0, 30)),
    st.lists(_ident, max_size=3),
    st.lists(st.from_regex(r"[0-9A-Za-z-]{1,4}", fullmatch=True), max_size=2),
)


@given(_semver_text)
def test_parse_round_trips(text: str) -> None:
    assert str(parse_version(text)) == text


@given(_semver_text, _semver_text, _semver_text)
def test_order_is_total_and_transitive(a: str, b: str, c: str) -> None:
    x, y, z = parse_version(a), parse_version(b), parse_version(c)
    assert (x < y) + (y < x) + (x == y) == 1
    if x <= y and y <= z:
        assert x <= z


# --------------------------------------------------------------------------- helpers


JASON_VERSIONS = ["1.5.0-alpha.2", "1.5.0-alpha.1", "1.4.5", "1.4.4", "1.4.3", "1.4.2",
                  "1.4.1", "1.4.0", "1.3.0", "1.2.2", "1.2.1", "1.2.0", "1.1.2", "1.0.0",
                  "1.0.0-rc.3"]  # fmt: skip


@pytest.mark.parametrize(
    ("target", "nearest"),
    [
        ("1.4.9", ["1.4.5", "1.4.4", "1.4.3", "1.4.2", "1.4.1"]),
        ("1.3.5", ["1.4.2", "1.4.1", "1.4.0", "1.3.0", "1.2.2"]),
        ("9.9.9", ["1.4.5", "1.4.4", "1.4.3", "1.4.2", "1.4.1"]),
        ("1.5.0-beta.1", ["1.5.0-alpha.2", "1.5.0-alpha.1", "1.4.5", "1.4.4", "1.4.3"]),
        (
            "0.1.0",
            ["1.2.2", "1.2.1", "1.2.0", "1.1.2", "1.0.0"],
        ),
    ],
)
def test_nearest_versions(target: str, nearest: list[str]) -> None:
    assert nearest_versions(target, JASON_VERSIONS) == nearest


def test_nearest_versions_edge_cases() -> None:
    assert nearest_versions("1.0.0", []) == []
    assert nearest_versions("1.0.0", ["junk", "1.0.1"], n=3) == ["1.0.1"]
    assert nearest_versions("1.0.0", JASON_VERSIONS, n=0) == []
    assert nearest_versions("not a version", ["1.0.0", "2.0.0"]) == ["2.0.0", "1.0.0"]
    assert nearest_versions(parse_version("1.2.2"), JASON_VERSIONS, n=1) == ["1.2.2"]


def _info(releases: list[str], stable: str | None = None) -> HexPackageInfo:
    return HexPackageInfo(
        name="pkg",
        releases=tuple(HexRelease(v) for v in releases),
        latest_version=releases[0] if releases else None,
        latest_stable_version=stable,
    )


def test_pick_latest() -> None:
    assert pick_latest(_info(["2.0.0-rc.0", "1.9.0"], stable="1.9.0")) == ("1.9.0", ())
    # A null latest_stable_version: the newest stable by SemVer, not by list position.
    assert pick_latest(_info(["2.0.0-rc.0", "1.9.0", "1.10.0"])) == ("1.10.0", ())
    version, notices = pick_latest(_info(["0.2.0-beta.1", "0.2.0-alpha.3"]))
    assert version == "0.2.0-beta.1"
    assert [n.code for n in notices] == ["prerelease_only"]
    with pytest.raises(VersionNotFound, match="no releases for pkg"):
        pick_latest(_info([]))


@pytest.mark.parametrize("name", ["jason", "phoenix_live_view", "a1", "ex_unit", "a" * 64])
def test_valid_package_names(name: str) -> None:
    assert validate_package_name(name) == name


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("Jason", "did you mean 'jason'"),
        ("phoenix-live-view", "did you mean 'phoenix_live_view'"),
        ("Jason.decode", "did you mean 'jason'\\?"),
        (":jason", "did you mean 'jason'"),
        ("Elixir.Jason", "did you mean 'jason'\\?"),
        ("Phoenix.LiveView", "did you mean 'phoenix_live_view' or 'phoenix'"),
        ("jason 1.4.4", "did you mean package 'jason' at version '1.4.4'"),
        ("jason@1.5.0-alpha.2", "did you mean package 'jason' at version '1.5.0-alpha.2'"),
        ("nimble-options-v1.1.1", "did you mean package 'nimble_options' at version '1.1.1'"),
        ("1abc", "starting with a letter"),
        ("../etc/passwd", "not a Hex package name"),
        ("", "a package name is required"),
        ("a" * 65, "at most 64"),
    ],
)
def test_invalid_package_names(name: str, hint: str) -> None:
    with pytest.raises(UserInputError, match=hint):
        validate_package_name(name)


# --------------------------------------------------------------------------- _build


def test_build_version_prefers_dev(project: Path) -> None:
    write_app(project, "jason", "1.4.0", env="prod")
    dev = write_app(project, "jason", "1.4.4", env="dev")
    assert build_version("jason", project) == ("1.4.4", dev)


def test_build_version_falls_back_to_any_env_and_reads_charlists(project: Path) -> None:
    test = write_app(project, "telemetry", "1.2.1", env="test", quote="'")
    assert build_version("telemetry", project) == ("1.2.1", test)


def test_build_version_skips_junk(project: Path) -> None:
    write_app(project, "odd", "not-a-version", env="dev")
    prod = write_app(project, "odd", "0.3.0", env="prod")
    assert build_version("odd", project) == ("0.3.0", prod)
    assert build_version("absent", project) is None


def test_build_version_of_an_umbrella_child_reads_the_root_build(project: Path) -> None:
    jason_lock(project, "1.4.5")
    app = write_app(project, "jason", "1.4.5")
    child = project / "apps" / "web"
    child.mkdir(parents=True)
    (child / "mix.exs").write_text("")
    assert build_version("jason", child) == ("1.4.5", app)


# --------------------------------------------------------------------------- pinned Elixir


@pytest.mark.parametrize(
    ("filename", "text", "version"),
    [
        (".tool-versions", "erlang 27.3\nelixir 1.18.4-otp-27\n", "1.18.4"),
        (".tool-versions", "# pins\nelixir   1.17.3-otp-26 1.16.0 # newest first\n", "1.17.3"),
        (".tool-versions", "elixir 1.19.0-rc.0-otp-28\n", "1.19.0-rc.0"),
        (".tool-versions", "elixir ref:v1.18.0 1.18.4\n", "1.18.4"),
        ("mise.toml", '[tools]\nelixir = "1.18.4"\nerlang = "27"\n', "1.18.4"),
        ("mise.toml", '[tools]\nelixir = ["1.18.4-otp-27", "1.17.0"]\n', "1.18.4"),
        (".mise.toml", '[tools.elixir]\nversion = "1.16.3"\n', "1.16.3"),
    ],
)
def test_pinned_elixir(project: Path, filename: str, text: str, version: str) -> None:
    (project / filename).write_text(text)
    found, path, notices = pinned_elixir(project)
    assert (found, path, notices) == (version, project / filename, ())


def test_pinned_elixir_nearest_directory_wins(project: Path) -> None:
    (project / ".tool-versions").write_text("elixir 1.15.0-otp-26\n")
    child = project / "apps" / "web"
    child.mkdir(parents=True)
    (child / "mise.toml").write_text('[tools]\nelixir = "1.18.4"\n')
    assert pinned_elixir(child)[:2] == ("1.18.4", child / "mise.toml")


def test_unusable_pins_become_notices(project: Path) -> None:
    (project / ".tool-versions").write_text("elixir system\n")
    (project / "mise.toml").write_text("[tools\nbroken")
    version, path, notices = pinned_elixir(project)
    assert (version, path) == (None, None)
    assert [n.code for n in notices] == ["elixir_pin_unusable", "elixir_pin_unreadable"]


# --------------------------------------------------------------------------- Elixir's own apps


def fake_elixir(bin_dir: Path, script: str) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / "elixir"
    exe.write_text("#!/bin/sh\n" + script)
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)


@pytest.mark.parametrize("app", sorted(versions.ELIXIR_APPS))
async def test_elixir_apps_use_the_pinned_elixir(project: Path, app: str) -> None:
    (project / ".tool-versions").write_text("elixir 1.18.4-otp-27\n")
    resolved = await resolve_version(app, None, project_root=project, registry=NoRegistry())
    assert (resolved.version, resolved.source) == ("1.18.4", VersionSource.TOOL_VERSIONS)
    assert resolved.detail == str(project / ".tool-versions")


async def test_elixir_apps_take_an_explicit_version(project: Path) -> None:
    (project / ".tool-versions").write_text("elixir 1.18.4-otp-27\n")
    resolved = await resolve_version(
        "ex_unit", "1.14.0", project_root=project, registry=NoRegistry()
    )
    assert (resolved.version, resolved.source) == ("1.14.0", VersionSource.EXPLICIT)
    with pytest.raises(UserInputError, match="not a valid version"):
        await resolve_version("ex_unit", "1.14", project_root=project, registry=NoRegistry())


async def test_elixir_apps_latest_means_the_projects_elixir(project: Path) -> None:
    (project / "mise.toml").write_text('[tools]\nelixir = "1.18.4"\n')
    resolved = await resolve_version(
        "logger", "latest", project_root=project, registry=NoRegistry()
    )
    assert resolved.version == "1.18.4"
    assert [n.code for n in resolved.notices] == ["elixir_latest"]


async def test_elixir_apps_fall_back_to_elixir_on_path(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    banner = "Erlang/OTP 24 [erts-12.0] [64-bit]\n\nElixir 1.14.0 (compiled with Erlang/OTP 24)\n"
    fake_elixir(tmp_path / "bin", f"printf '{banner}'\n")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    resolved = await resolve_version("eex", None, project_root=project, registry=NoRegistry())
    assert (resolved.version, resolved.source) == ("1.14.0", VersionSource.ELIXIR_ON_PATH)
    assert resolved.detail == f"{tmp_path / 'bin' / 'elixir'} --version"


async def test_elixir_apps_without_any_elixir_ask_for_a_version(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(UserInputError) as caught:
        await resolve_version("elixir", None, project_root=project, registry=NoRegistry())
    message = str(caught.value)
    assert "ships with Elixir" in message and "Pass a version, like 1.18.4" in message
    assert ".tool-versions" in message and "no such package" not in message


async def test_a_hanging_elixir_is_abandoned(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_elixir(tmp_path / "bin", "exec sleep 30\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}/usr/bin:/bin")
    monkeypatch.setattr(probes, "ELIXIR_VERSION_TIMEOUT_S", 0.3)
    with pytest.raises(UserInputError, match="Pass a version"):
        await resolve_version("mix", None, project_root=project, registry=NoRegistry())


@pytest.mark.elixir
async def test_the_real_elixir_on_path() -> None:
    found = await versions.elixir_on_path()
    if found is None:
        pytest.skip("no elixir on PATH")
    assert try_parse_version(found[0]) is not None


# --------------------------------------------------------------------------- the chain


async def test_unpinned_package_gets_the_latest_stable(
    project: Path, hex_client: HexClient
) -> None:
    resolved = await resolve_version("jason", None, project_root=project, registry=hex_client)
    assert (resolved.version, resolved.source) == ("1.4.5", VersionSource.HEX_LATEST)
    assert resolved.lock_entry is None and resolved.notices == ()


async def test_lock_pin_wins_even_as_a_downgrade(
    project: Path, hex_client: HexClient, fake_hex: FakeHex
) -> None:
    lock = jason_lock(project, "1.2.2")
    resolved = await resolve_version("jason", None, project_root=project, registry=hex_client)
    assert (resolved.version, resolved.source) == ("1.2.2", VersionSource.MIX_LOCK)
    assert resolved.detail == str(lock)
    assert resolved.lock_entry is not None
    assert resolved.lock_entry.version == "1.2.2" and resolved.lock_entry.kind == "hex"
    assert fake_hex.requests == []  # a lock hit needs no network


async def test_lock_pinned_prerelease_is_honoured(project: Path, hex_client: HexClient) -> None:
    jason_lock(project, "1.5.0-alpha.2")
    resolved = await resolve_version("jason", None, project_root=project, registry=hex_client)
    assert (resolved.version, resolved.source) == ("1.5.0-alpha.2", VersionSource.MIX_LOCK)


async def test_lock_is_read_fresh_on_every_call(project: Path, hex_client: HexClient) -> None:
    jason_lock(project, "1.4.4")
    first = await resolve_version("jason", None, project_root=project, registry=hex_client)
    jason_lock(project, "1.2.2")
    second = await resolve_version("jason", None, project_root=project, registry=hex_client)
    (project / "mix.lock").unlink()
    third = await resolve_version("jason", None, project_root=project, registry=hex_client)
    assert [first.version, second.version, third.version] == ["1.4.4", "1.2.2", "1.4.5"]


async def test_umbrella_child_uses_the_root_lock(project: Path) -> None:
    lock = jason_lock(project, "1.4.4")
    child = project / "apps" / "api"
    child.mkdir(parents=True)
    (child / "mix.exs").write_text("")
    resolved = await resolve_version("jason", None, project_root=child, registry=NoRegistry())
    assert (resolved.version, resolved.detail) == ("1.4.4", str(lock))


async def test_lock_matches_a_hex_package_named_unlike_its_app(project: Path) -> None:
    write_lock(
        project, '  "eini": {:hex, :eini_beam, "2.2.4", "ab", [:rebar3], [], "hexpm", "cd"},\n'
    )
    resolved = await resolve_version("eini_beam", None, project_root=project, registry=NoRegistry())
    assert resolved.lock_entry is not None
    assert (resolved.version, resolved.lock_entry.name) == ("2.2.4", "eini")


async def test_malformed_lock_is_a_notice_and_falls_through(
    project: Path, hex_client: HexClient
) -> None:
    write_lock(project, '  "jason": {:hex, :jason, "1.2.2", \n')  # cut off mid-entry
    resolved = await resolve_version("jason", None, project_root=project, registry=hex_client)
    assert (resolved.version, resolved.source) == ("1.4.5", VersionSource.HEX_LATEST)
    [notice] = resolved.notices
    assert notice.code == "mixlock_unreadable" and str(project / "mix.lock") in notice.message


async def test_lock_entry_with_a_bad_version_falls_through(project: Path) -> None:
    write_lock(project, '  "jason": {:hex, :jason, "one.two"},\n')
    write_app(project, "jason", "1.4.4")
    resolved = await resolve_version("jason", None, project_root=project, registry=NoRegistry())
    assert (resolved.version, resolved.source) == ("1.4.4", VersionSource.BUILD)
    assert [n.code for n in resolved.notices] == ["mixlock_bad_version"]


async def test_build_is_used_when_there_is_no_lock(project: Path) -> None:
    app = write_app(project, "decimal", "2.3.0")
    resolved = await resolve_version("decimal", None, project_root=project, registry=NoRegistry())
    assert (resolved.version, resolved.source, resolved.detail) == (
        "2.3.0",
        VersionSource.BUILD,
        str(app),
    )


async def test_git_dep_takes_its_version_from_build(project: Path) -> None:
    write_lock(
        project,
        '  "req": {:git, "https://github.com/wojtekmach/req.git", "abc123", [branch: "main"]},\n',
    )
    write_app(project, "req", "0.8.0-rc.0")
    resolved = await resolve_version("req", None, project_root=project, registry=NoRegistry())
    assert (resolved.version, resolved.source) == ("0.8.0-rc.0", VersionSource.BUILD)
    assert resolved.lock_entry is not None
    assert resolved.lock_entry.kind == "git" and resolved.lock_entry.ref == "abc123"
    assert [n.code for n in resolved.notices] == ["not_hex_dependency"]


async def test_uncompiled_git_dep_falls_back_to_hex_latest(
    project: Path, hex_client: HexClient
) -> None:
    write_lock(project, '  "req": {:git, "https://github.com/wojtekmach/req.git", "abc123", []},\n')
    resolved = await resolve_version("req", None, project_root=project, registry=hex_client)
    assert (resolved.version, resolved.source) == ("0.7.3", VersionSource.HEX_LATEST)
    assert resolved.lock_entry is not None
    assert resolved.lock_entry.kind == "git"
    [notice] = resolved.notices
    assert notice.code == "not_hex_dependency" and "mix compile" in notice.message


async def test_livebook_git_dep_unknown_to_hex(
    corpus: Path, project: Path, hex_client: HexClient
) -> None:
    (project / "mix.exs").write_text("")
    (project / "mix.lock").write_bytes(
        (corpus / "mixlock" / "livebook-dev_livebook.mix.lock").read_bytes()
    )
    with pytest.raises(PackageNotFound, match="'elixirkit'"):
        await resolve_version("elixirkit", None, project_root=project, registry=hex_client)
    write_app(project, "elixirkit", "0.1.0")
    resolved = await resolve_version("elixirkit", None, project_root=project, registry=hex_client)
    assert resolved.lock_entry is not None
    assert (resolved.version, resolved.lock_entry.repo) == (
        "0.1.0",
        "https://github.com/livebook-dev/elixirkit.git",
    )


async def test_explicit_version_wins_over_the_lock(project: Path, hex_client: HexClient) -> None:
    jason_lock(project, "1.2.2")
    resolved = await resolve_version("jason", "1.4.4", project_root=project, registry=hex_client)
    assert (resolved.version, resolved.source) == ("1.4.4", VersionSource.EXPLICIT)


async def test_latest_means_the_latest_stable(project: Path, hex_client: HexClient) -> None:
    jason_lock(project, "1.2.2")
    resolved = await resolve_version("jason", "LATEST", project_root=project, registry=hex_client)
    assert (resolved.version, resolved.source) == ("1.4.5", VersionSource.HEX_LATEST)
    assert resolved.detail == "'latest' requested"


async def test_explicit_unknown_version_names_the_nearest(
    project: Path, hex_client: HexClient
) -> None:
    with pytest.raises(VersionNotFound) as caught:
        await resolve_version("jason", "1.4.9", project_root=project, registry=hex_client)
    message = str(caught.value)
    assert "no version 1.4.9 of jason" in message
    assert "1.4.5, 1.4.4, 1.4.3, 1.4.2, 1.4.1" in message


async def test_explicit_malformed_version_is_user_input(
    project: Path, hex_client: HexClient, fake_hex: FakeHex
) -> None:
    with pytest.raises(UserInputError, match="'1.4' is not a valid version"):
        await resolve_version("jason", "1.4", project_root=project, registry=hex_client)
    assert fake_hex.requests == []


async def test_explicit_version_is_accepted_when_hex_is_unreachable(
    project: Path, fake_hex: FakeHex, tmp_path: Path
) -> None:
    fake_hex.fail("/api/*", status=503)
    async with client_for(settings_for(fake_hex, tmp_path)) as client:
        resolved = await resolve_version("jason", "1.4.9", project_root=project, registry=client)
    assert (resolved.version, resolved.source) == ("1.4.9", VersionSource.EXPLICIT)
    [notice] = resolved.notices
    assert notice.code == "registry_unreachable" and "503" in notice.message


async def test_explicit_version_without_a_registry_is_unverified(project: Path) -> None:
    resolved = await resolve_version("jason", "1.4.5", project_root=project, registry=None)
    assert resolved.version == "1.4.5"
    assert [n.code for n in resolved.notices] == ["version_unverified"]


async def test_nothing_to_go_on_without_a_registry(project: Path) -> None:
    with pytest.raises(UserInputError, match="Pass a version"):
        await resolve_version("jason", None, project_root=project, registry=None)
    with pytest.raises(UserInputError, match="'latest' needs hex.pm"):
        await resolve_version("jason", "latest", project_root=project, registry=None)


async def test_unknown_package(project: Path, hex_client: HexClient) -> None:
    with pytest.raises(PackageNotFound, match="'nope_nope'"):
        await resolve_version("nope_nope", None, project_root=project, registry=hex_client)


async def test_unreachable_hex_without_a_pin_is_a_remote_error(
    project: Path, fake_hex: FakeHex, hex_client: HexClient
) -> None:
    fake_hex.fail("/api/*", status=500)
    with pytest.raises(RemoteError, match="returned 500"):
        await resolve_version("jason", None, project_root=project, registry=hex_client)


async def test_prerelease_only_package(
    project: Path, fake_hex: FakeHex, hex_client: HexClient
) -> None:
    fake_hex.add_package(
        "fresh_pkg",
        {
            "name": "fresh_pkg",
            "releases": [{"version": "0.1.0-rc.1"}, {"version": "0.1.0-rc.0"}],
            "latest_version": "0.1.0-rc.1",
            "latest_stable_version": None,
        },
    )
    resolved = await resolve_version("fresh_pkg", None, project_root=project, registry=hex_client)
    assert resolved.version == "0.1.0-rc.1"
    assert [n.code for n in resolved.notices] == ["prerelease_only"]


async def test_invalid_name_fails_before_any_lookup(
    project: Path, hex_client: HexClient, fake_hex: FakeHex
) -> None:
    with pytest.raises(UserInputError, match="did you mean 'phoenix_html'"):
        await resolve_version("Phoenix.HTML", None, project_root=project, registry=hex_client)
    assert fake_hex.requests == []


# --------------------------------------------------------------------------- from a subfolder


async def test_a_subfolder_of_the_project_uses_its_lock(project: Path) -> None:
    lock = jason_lock(project, "1.4.4")
    deep = project / "lib" / "my_app" / "live" / "components" / "forms"
    deep.mkdir(parents=True)
    resolved = await resolve_version("jason", None, project_root=deep, registry=NoRegistry())
    assert (resolved.version, resolved.source, resolved.detail) == (
        "1.4.4",
        VersionSource.MIX_LOCK,
        str(lock),
    )


async def test_a_subfolder_of_an_umbrella_child_uses_the_root_lock(project: Path) -> None:
    lock = jason_lock(project, "1.4.4")
    child = project / "apps" / "web"
    (child / "lib" / "web" / "live").mkdir(parents=True)
    (child / "mix.exs").write_text("")
    resolved = await resolve_version(
        "jason", None, project_root=child / "lib" / "web" / "live", registry=NoRegistry()
    )
    assert (resolved.version, resolved.detail) == ("1.4.4", str(lock))


async def test_a_subfolder_finds_build_without_a_lock(project: Path) -> None:
    (project / "mix.exs").write_text("")
    app = write_app(project, "decimal", "2.3.0")
    sub = project / "test" / "support"
    sub.mkdir(parents=True)
    resolved = await resolve_version("decimal", None, project_root=sub, registry=NoRegistry())
    assert (resolved.version, resolved.source, resolved.detail) == (
        "2.3.0",
        VersionSource.BUILD,
        str(app),
    )


async def test_a_subfolder_finds_the_projects_elixir_pin(project: Path) -> None:
    (project / ".tool-versions").write_text("elixir 1.18.4-otp-27\n")
    deep = project / "lib" / "a" / "b" / "c" / "d"
    deep.mkdir(parents=True)
    resolved = await resolve_version("logger", None, project_root=deep, registry=NoRegistry())
    assert (resolved.version, resolved.detail) == ("1.18.4", str(project / ".tool-versions"))


async def test_the_walk_stops_at_the_vcs_root(tmp_path: Path, hex_client: HexClient) -> None:
    jason_lock(tmp_path, "1.2.2")  # above the checkout: not this project's
    repo = tmp_path / "checkout"
    (repo / ".git").mkdir(parents=True)
    (repo / "lib").mkdir()
    resolved = await resolve_version("jason", None, project_root=repo / "lib", registry=hex_client)
    assert (resolved.version, resolved.source) == ("1.4.5", VersionSource.HEX_LATEST)


async def test_a_lock_changed_between_calls_changes_the_answer_at_once(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Even with the parse cached (the racy window off), an edit is seen on the next call.
    monkeypatch.setattr(lockfile, "RACY_WINDOW_NS", -(10**12))
    lock = jason_lock(project, "1.4.4")
    first = await resolve_version("jason", None, project_root=project, registry=NoRegistry())
    jason_lock(project, "1.2.2")
    past = lock.stat().st_mtime - 60  # a distinct mtime, however coarse the clock
    os.utime(lock, (past, past))
    second = await resolve_version("jason", None, project_root=project, registry=NoRegistry())
    assert [first.version, second.version] == ["1.4.4", "1.2.2"]


def test_a_stray_byte_in_tool_versions_does_not_hide_the_pin(project: Path) -> None:
    (project / ".tool-versions").write_bytes(b"# caf\xe9\nelixir 1.18.4-otp-27\n")
    assert pinned_elixir(project)[:2] == ("1.18.4", project / ".tool-versions")


async def test_a_misspelt_package_names_the_locks_packages_spelt_like_it(
    tmp_path: Path, hex_client: HexClient
) -> None:
    jason_lock(tmp_path, "1.4.4")
    with pytest.raises(PackageNotFound, match="In the project's mix.lock: jason\\."):
        await resolve_version("jasn", None, project_root=tmp_path, registry=hex_client)
    with pytest.raises(PackageNotFound) as caught:  # nothing spelt like it: no hint
        await resolve_version("zzzqqq", "1.0.0", project_root=tmp_path, registry=hex_client)
    assert "mix.lock" not in str(caught.value)
