"""Which OTP a project uses, where it is installed, its application versions, and which
application owns a module: real installs (the shared corpus, this machine's Debian OTP),
asdf and mise layouts and shims built in tmp, and the bad inputs a machine holds."""

from __future__ import annotations

import os
import shutil
import tarfile
import time
from pathlib import Path

import pytest

from hexlocal_core.config import Settings
from hexlocal_core.errors import UserInputError
from hexlocal_core.versions import (
    OTP_APPS,
    NotAnOtpInstall,
    OtpVersion,
    find_otp,
    module_apps,
    otp_version_for,
    parse_otp_release,
    pinned_otp,
    project_otp_apps,
    read_otp_install,
    release_matches,
)
from hexlocal_core.versions.app_file import read_app_spec
from tests.support.paths import CORPUS
from tests.support.waiting import wait_until

OTP_CORPUS = CORPUS / "otp"
RELEASES = ("25.2.3", "27.3.4.1", "29.1.2")
DEBIAN_ERL = Path("/usr/bin/erl")


@pytest.fixture(scope="module")
def installs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The corpus's three real install roots, unpacked: release -> root."""
    if not OTP_CORPUS.is_dir():
        pytest.skip(f"OTP corpus not found at {OTP_CORPUS}")
    base = tmp_path_factory.mktemp("otp")
    for release in RELEASES:
        with tarfile.open(OTP_CORPUS / f"otp-{release}-install.tar.gz") as tar:
            tar.extractall(base, filter="data")
    return {release: base / f"otp-{release}" for release in RELEASES}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / ".git").mkdir()  # the pin walk stops here, never at the host's files
    (root / "mix.exs").write_text("defmodule App.MixProject do\nend\n")
    return root


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


def _script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def _fake_install(root: Path, release: str, apps: dict[str, list[str]]) -> Path:
    """An install root with `apps` (app -> modules) at version 1.0, release `release`."""
    major = release.split(".")[0]
    (root / "releases" / major).mkdir(parents=True)
    (root / "releases" / major / "OTP_VERSION").write_text(release + "\n")
    for app, modules in apps.items():
        ebin = root / "lib" / f"{app}-1.0" / "ebin"
        ebin.mkdir(parents=True)
        mods = ", ".join(modules)
        (ebin / f"{app}.app").write_text(
            f'{{application, {app},\n [{{vsn, "1.0"}},\n  {{modules, [{mods}]}}]}}.\n'
        )
    return root


# --------------------------------------------------------------------------- releases


@pytest.mark.parametrize(
    ("text", "release"),
    [
        ("OTP-27.3.4.1", "27.3.4.1"),
        ("27.3.4.1", "27.3.4.1"),
        ("27.3.4.1\n", "27.3.4.1"),
        ("22.3.4.1 **", "22.3.4.1"),  # OTP_VERSION after otp_patch_apply
        ("27", "27"),
        ("otp-26.2", "26.2"),
        ("OTP 28.0-rc1", "28.0-rc1"),
        ("R16B03-1", None),  # before OTP releases had numbers
        ("16.0", None),
        ("6.2.2.1", None),  # stdlib's version, not a release
        ("ref:master", None),
        ("system", None),
        ("latest", None),
        ("27.3.4.1.2.3.4.5", None),
        ("2" * 70, None),
        ("", None),
    ],
)
def test_parse_otp_release(text: str, release: str | None) -> None:
    assert parse_otp_release(text) == release


@pytest.mark.parametrize(
    ("release", "wanted", "matches"),
    [
        ("27.3.4.1", "27.3.4.1", True),
        ("27.3.4.1", "27", True),
        ("27.3.4.1", "27.3", True),
        ("27.3.4.1", "27.3.4", True),
        ("27.3.4.1", "27.3.4.2", False),
        ("27.3.4.1", "27.3.4.1.1", False),
        ("27.3.4.1", "2", False),
        ("27.0", "27.0-rc3", False),
        ("28.0-rc1", "28", False),  # a pin on 28 means a release, not its candidate
    ],
)
def test_release_matches(release: str, wanted: str, matches: bool) -> None:
    assert release_matches(release, wanted) is matches


# --------------------------------------------------------------------------- real installs


@pytest.mark.parametrize(
    ("release", "present", "stdlib"),
    [
        ("25.2.3", ["crypto", "erts", "kernel", "stdlib"], "4.2"),
        ("27.3.4.1", ["erts", "kernel", "stdlib"], "6.2.2.1"),
        ("29.1.2", ["erts", "kernel", "stdlib"], "8.1.1"),
    ],
)
def test_a_real_install_gives_its_release_and_every_application_version(
    installs: dict[str, Path], release: str, present: list[str], stdlib: str
) -> None:
    install = read_otp_install(installs[release])
    assert (install.release, install.major) == (release, int(release.split(".")[0]))
    assert install.root == installs[release].resolve()
    assert install.app_version("stdlib") == stdlib
    assert sorted(install.lib_dirs) == present
    assert all(p.name == f"{app}-{install.apps[app]}" for app, p in install.lib_dirs.items())
    # Apps of the release that this install does not hold still have their version.
    listed = installs[release] / "releases" / str(install.major) / "installed_application_versions"
    lines = listed.read_text().split()
    assert {line.rsplit("-", 1)[0]: line.rsplit("-", 1)[1] for line in lines} == install.apps
    assert set(install.apps) <= OTP_APPS


@pytest.mark.parametrize("release", RELEASES)
def test_modules_belong_to_their_real_applications(installs: dict[str, Path], release: str) -> None:
    owners = module_apps(read_otp_install(installs[release]))
    expected = {
        "erlang": "erts",
        "ets": "stdlib",
        "lists": "stdlib",
        "maps": "stdlib",
        "gen_server": "stdlib",
        "gen_statem": "stdlib",
        "supervisor": "stdlib",
        "gen_tcp": "kernel",
        "inet": "kernel",
        "file": "kernel",
        "logger": "kernel",  # Erlang's :logger; Elixir's Logger is Elixir's own app
        "erl_tracer": "erts",  # a beam erts.app leaves out of its modules list
    }
    assert {m: owners.apps_of(m) for m in expected} == {m: (a,) for m, a in expected.items()}
    assert owners.apps_of(":ets") == ("stdlib",)  # as Elixir writes it
    assert owners.apps_of("Elixir.Logger") == () and owners.apps_of("no_such_module") == ()
    assert owners.ambiguous() == {} and owners.notices == ()


def test_a_module_claimed_by_two_apps_names_both(tmp_path: Path) -> None:
    root = _fake_install(
        tmp_path / "otp",
        "27.1",
        {"kernel": ["shared", "only_kernel"], "zapp": ["shared"], "stdlib": ["shared"]},
    )
    owners = module_apps(read_otp_install(root))
    assert owners.apps_of("shared") == ("kernel", "stdlib", "zapp")
    assert owners.ambiguous() == {"shared": ("kernel", "stdlib", "zapp")}
    notice = owners.owner_notice(":shared")
    assert notice is not None and notice.code == "module_in_several_apps"
    assert "kernel, stdlib, zapp" in notice.message and "shared" in notice.message
    assert owners.owner_notice("only_kernel") is None


def test_an_unreadable_app_file_is_a_notice_and_its_beams_still_count(tmp_path: Path) -> None:
    root = _fake_install(tmp_path / "otp", "27.1", {"kernel": ["gen_tcp"], "stdlib": ["lists"]})
    ebin = root / "lib" / "stdlib-1.0" / "ebin"
    (ebin / "stdlib.app").write_text("{application, stdlib, [{modules, [Lists]}]}.")
    (ebin / "lists.beam").write_bytes(b"FOR1")
    owners = module_apps(read_otp_install(root))
    assert owners.apps_of("lists") == ("stdlib",)
    assert [n.code for n in owners.notices] == ["otp_app_file_unreadable"]
    assert "stdlib.app" in owners.notices[0].message


def test_the_listed_version_of_an_app_wins_over_a_stray_folder(tmp_path: Path) -> None:
    root = _fake_install(tmp_path / "otp", "27.3", {"kernel": ["gen_tcp"]})
    for vsn in ("11.2.12", "11.2.9", "11.2.12.1"):
        (root / "lib" / f"ssl-{vsn}" / "ebin").mkdir(parents=True)
    listed = root / "releases" / "27" / "installed_application_versions"
    assert read_otp_install(root).lib_dirs["ssl"].name == "ssl-11.2.12.1"  # the newest
    listed.write_text("kernel-1.0\nssl-11.2.12\nnot a line\n")
    install = read_otp_install(root)
    assert install.lib_dirs["ssl"].name == "ssl-11.2.12"
    assert install.apps == {"kernel": "1.0", "ssl": "11.2.12"}


# --------------------------------------------------------------------------- bad installs


def _not_an_install(root: Path) -> str:
    with pytest.raises(NotAnOtpInstall) as caught:
        read_otp_install(root)
    return str(caught.value)


def test_a_folder_that_is_not_an_install_says_what_is_missing(
    tmp_path: Path, installs: dict[str, Path]
) -> None:
    assert "does not exist" in _not_an_install(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    assert "releases/" in _not_an_install(tmp_path / "empty")
    (tmp_path / "file").write_text("x")
    assert "releases/" in _not_an_install(tmp_path / "file")
    # The project itself, or an OTP lib folder, given by mistake:
    assert "releases/" in _not_an_install(installs["27.3.4.1"] / "lib")
    (tmp_path / "norel" / "releases" / "27").mkdir(parents=True)
    assert "OTP_VERSION" in _not_an_install(tmp_path / "norel")


@pytest.mark.parametrize(
    "content", ["garbage\n", "29.1.2\n", "", "R16B03\n", "27." + "1" * 300 + "\n"]
)
def test_a_malformed_otp_version_is_refused(tmp_path: Path, content: str) -> None:
    root = _fake_install(tmp_path / "otp", "27.3", {"kernel": ["gen_tcp"]})
    (root / "releases" / "27" / "OTP_VERSION").write_text(content)
    assert "OTP_VERSION" in _not_an_install(root)


def test_an_otp_version_fifo_does_not_block(tmp_path: Path) -> None:
    root = _fake_install(tmp_path / "otp", "27.3", {"kernel": ["gen_tcp"]})
    version = root / "releases" / "27" / "OTP_VERSION"
    version.unlink()
    os.mkfifo(version)
    started = time.monotonic()
    message = _not_an_install(root)
    assert message == f"{version} is not a regular file"
    assert time.monotonic() - started < 5


def test_an_install_without_applications_is_refused(tmp_path: Path) -> None:
    root = _fake_install(tmp_path / "otp", "27.3", {})
    (root / "lib").mkdir()
    assert "no lib/<app>-<vsn>" in _not_an_install(root)


# --------------------------------------------------------------------------- explicit version


@pytest.mark.parametrize(
    ("app", "wanted", "expected"),
    [
        ("stdlib", "6.2.2.1", OtpVersion("6.2.2.1", "27.3.4.1")),  # the app's own version
        ("stdlib", "27.3.4.1", OtpVersion("6.2.2.1", "27.3.4.1")),  # the release
        ("stdlib", "OTP-27.3.4.1", OtpVersion("6.2.2.1", "27.3.4.1")),
        ("kernel", "27", OtpVersion("10.2.7.1", "27.3.4.1")),  # a major names the install
        ("erts", "15.2.7", OtpVersion("15.2.7", "27.3.4.1")),
        ("stdlib", "OTP-26.2.5", OtpVersion(None, "26.2.5")),  # another release
        ("stdlib", "26.2.5", OtpVersion(None, "26.2.5")),
        ("stdlib", "5.2", OtpVersion("5.2", None)),  # another app version
        ("erts", "17.1.1", OtpVersion("17.1.1", None)),  # erts of OTP 29, not OTP 17
        ("stdlib", "OTP-27", OtpVersion("6.2.2.1", "27.3.4.1")),
    ],
)
def test_an_explicit_version_means_an_app_version_or_a_release(
    installs: dict[str, Path], app: str, wanted: str, expected: OtpVersion
) -> None:
    assert otp_version_for(app, wanted, read_otp_install(installs["27.3.4.1"])) == expected


def test_an_explicit_version_without_an_install(installs: dict[str, Path]) -> None:
    assert otp_version_for("stdlib", "27.3.4.1", None) == OtpVersion(None, "27.3.4.1")
    assert otp_version_for("stdlib", "6.2.2.1", None) == OtpVersion("6.2.2.1", None)
    erts29 = read_otp_install(installs["29.1.2"])
    assert otp_version_for("erts", "17.1.1", erts29) == OtpVersion("17.1.1", "29.1.2")
    with pytest.raises(UserInputError, match="OTP-27.3.4.1"):
        otp_version_for("stdlib", "latest; rm -rf", None)


# --------------------------------------------------------------------------- pins


@pytest.mark.parametrize(
    ("filename", "text", "pinned"),
    [
        (".tool-versions", "elixir 1.18.4-otp-27\nerlang 27.3.4.1\n", "27.3.4.1"),
        (".tool-versions", "erlang   ref:OTP-27 26.2.5 # fallback\n", "26.2.5"),
        (".tool-versions", "erlang OTP-27.3\n", "27.3"),
        ("mise.toml", '[tools]\nerlang = "27"\nelixir = "1.18.4"\n', "27"),
        ("mise.toml", '[tools]\nerlang = ["28.0-rc1", "27.3"]\n', "28.0-rc1"),
        (".mise.toml", '[tools.erlang]\nversion = "29.1.2"\n', "29.1.2"),
    ],
)
def test_pinned_otp(project: Path, filename: str, text: str, pinned: str) -> None:
    (project / filename).write_text(text)
    assert pinned_otp(project) == (pinned, project / filename, ())


def test_unusable_erlang_pins_are_notices(project: Path) -> None:
    (project / ".tool-versions").write_text("erlang system\n")
    (project / "mise.toml").write_text("[tools\n")
    version, path, notices = pinned_otp(project)
    assert (version, path) == (None, None)
    assert [n.code for n in notices] == ["erlang_pin_unusable", "erlang_pin_unreadable"]
    assert "27.3.4.1" in notices[0].message


# --------------------------------------------------------------------------- finding it


@pytest.mark.skipif(not DEBIAN_ERL.is_symlink(), reason="no Debian erl symlink here")
async def test_the_real_debian_otp_through_the_erl_symlink(project: Path, home: Path) -> None:
    found = await find_otp(project, path=str(DEBIAN_ERL.parent), home=home)
    assert found.install is not None
    real_root = DEBIAN_ERL.resolve().parent.parent
    assert found.install.root == real_root
    release_dir = real_root / "releases" / str(found.install.major)
    assert found.install.release == (release_dir / "OTP_VERSION").read_text().strip()
    assert found.how == f"erl on PATH ({DEBIAN_ERL})"
    assert (found.notices, found.pinned, found.pin_installed) == ((), None, True)
    owners = module_apps(found.install)
    assert owners.apps_of("ets") == ("stdlib",) and owners.apps_of("ssl") == ("ssl",)


async def test_otp_root_overrides_the_search(
    project: Path, home: Path, installs: dict[str, Path]
) -> None:
    found = await find_otp(project, otp_root=installs["29.1.2"], path="/usr/bin", home=home)
    assert found.install is not None and found.install.release == "29.1.2"
    assert (found.how, found.notices) == ("HEXLOCAL_OTP_ROOT", ())


async def test_an_otp_root_that_is_not_an_install_is_a_notice(
    project: Path, home: Path, installs: dict[str, Path], tmp_path: Path
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "erl").symlink_to(_erl_in(installs["27.3.4.1"]))
    found = await find_otp(project, otp_root=project, path=str(bin_dir), home=home)
    assert [n.code for n in found.notices] == ["otp_root_ignored"]
    assert str(project) in found.notices[0].message and "releases/" in found.notices[0].message
    assert found.install is not None and found.install.release == "27.3.4.1"


def _erl_in(root: Path, *, erts: bool = False) -> Path:
    """A `bin/erl` (or `erts-<v>/bin/erl`) script inside an install, as real ones have."""
    where = root / "erts-15.2.7" / "bin" if erts else root / "bin"
    return _script(where / "erl", '#!/bin/sh\nexec "$BINDIR/erlexec" ${1+"$@"}\n')


async def test_a_symlink_into_an_erts_bin_folder(
    project: Path, home: Path, installs: dict[str, Path], tmp_path: Path
) -> None:
    root = tmp_path / "copy"
    shutil.copytree(installs["27.3.4.1"], root)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "erl").symlink_to(_erl_in(root, erts=True))
    found = await find_otp(project, path=str(tmp_path / "bin"), home=home)
    assert found.install is not None and found.install.root == root.resolve()


async def test_an_erl_script_naming_its_rootdir(
    project: Path, home: Path, installs: dict[str, Path], tmp_path: Path
) -> None:
    root = installs["25.2.3"]
    _script(
        tmp_path / "bin" / "erl",
        f'#!/bin/sh\nROOTDIR="{root}"\nexport ROOTDIR\nexec "$ROOTDIR/bin/erlexec" "$@"\n',
    )
    found = await find_otp(project, path=str(tmp_path / "bin"), home=home)
    assert found.install is not None and found.install.release == "25.2.3"


def _asdf_shim(bin_dir: Path, *versions: str) -> Path:
    plugins = "".join(f"# asdf-plugin: erlang {v}\n" for v in versions)
    return _script(
        bin_dir / "erl",
        f'#!/usr/bin/env bash\n{plugins}exec asdf exec "erl" "$@" # asdf_allow: \' asdf \'\n',
    )


def _install_with(manager_dir: Path, name: str, root: Path) -> None:
    manager_dir.mkdir(parents=True, exist_ok=True)
    (manager_dir / name).symlink_to(root, target_is_directory=True)


ASDF = Path(".asdf/installs/erlang")
MISE = Path(".local/share/mise/installs/erlang")


async def test_an_asdf_pin_is_found_through_its_shim(
    project: Path, home: Path, installs: dict[str, Path]
) -> None:
    for release in ("27.3.4.1", "29.1.2"):
        _install_with(home / ASDF, release, installs[release])
    shims = _asdf_shim(home / ".asdf" / "shims", "27.3.4.1", "29.1.2").parent
    (project / ".tool-versions").write_text("erlang 27.3.4.1\nelixir 1.18.4-otp-27\n")
    found = await find_otp(project, path=str(shims), home=home)
    assert found.install is not None and found.install.release == "27.3.4.1"
    assert found.how == "the pinned release, installed by asdf"
    assert (found.pinned, found.pin_file, found.pin_installed) == (
        "27.3.4.1",
        project / ".tool-versions",
        True,
    )
    # A client that started the server without the shell's PATH still finds it.
    assert (await find_otp(project, path="", home=home)).install == found.install


async def test_a_fuzzy_mise_pin_takes_the_newest_matching_install(
    project: Path, home: Path, installs: dict[str, Path], tmp_path: Path
) -> None:
    _install_with(home / MISE, "29.1.2", installs["29.1.2"])
    _install_with(home / MISE, "27.3.4.1", installs["27.3.4.1"])
    (project / "mise.toml").write_text('[tools]\nerlang = "29"\n')
    found = await find_otp(project, path="", home=home)
    assert found.install is not None and found.install.release == "29.1.2"
    assert found.how == "the pinned release, installed by mise" and found.pin_installed


async def test_a_shim_without_a_pin_uses_the_only_install(
    project: Path, home: Path, installs: dict[str, Path]
) -> None:
    _install_with(home / ASDF, "25.2.3", installs["25.2.3"])
    shims = _asdf_shim(home / ".asdf" / "shims", "25.2.3").parent
    found = await find_otp(project, path=str(shims), home=home)
    assert found.install is not None and found.install.release == "25.2.3"
    assert found.how == "the only Erlang asdf has installed"


async def test_a_mise_shim_links_to_the_mise_binary(
    project: Path, home: Path, installs: dict[str, Path]
) -> None:
    _install_with(home / MISE, "27.3.4.1", installs["27.3.4.1"])
    mise = _script(home / ".local" / "bin" / "mise", "#!/bin/sh\nexit 1\n")
    shims = home / ".local" / "share" / "mise" / "shims"
    shims.mkdir(parents=True)
    (shims / "erl").symlink_to(mise)
    found = await find_otp(project, path=str(shims), home=home)
    assert found.install is not None and found.install.release == "27.3.4.1"
    assert found.how == "the only Erlang mise has installed"


async def test_with_several_installs_and_no_pin_erl_is_asked(
    project: Path, home: Path, installs: dict[str, Path], tmp_path: Path
) -> None:
    """The last resort: `erl` itself, answering code:root_dir() (here a stand-in that
    prints the root it was asked about, as a version manager's erl would)."""
    for release in ("27.3.4.1", "29.1.2"):
        _install_with(home / ASDF, release, installs[release])
    args = tmp_path / "args"
    _script(
        home / ".asdf" / "shims" / "erl",
        f'#!/bin/sh\n# asdf exec erl\necho "$@" > "{args}"\necho {installs["29.1.2"]}\n',
    )
    found = await find_otp(project, path=str(home / ".asdf" / "shims"), home=home)
    assert found.install is not None and found.install.release == "29.1.2"
    assert "code:root_dir()" in found.how and found.notices == ()
    assert "no_dot_erlang" in args.read_text()  # the user's ~/.erlang is not run


async def test_an_erl_that_hangs_is_bounded_then_a_notice(
    project: Path, home: Path, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    _script(tmp_path / "bin" / "erl", f'#!/bin/sh\necho $$ > "{pids}"\nexec sleep 60\n')
    started = time.monotonic()
    found = await find_otp(project, path=str(tmp_path / "bin"), home=home, timeout_s=0.5)
    assert time.monotonic() - started < 5
    assert found.install is None
    assert [n.code for n in found.notices] == ["otp_probe_failed"]
    assert "took longer than 0.5 s" in found.notices[0].message
    assert "HEXLOCAL_OTP_ROOT" in found.notices[0].message
    pid = int(pids.read_text())
    wait_until(lambda: not _alive(pid), what="the hanging erl is killed", timeout=5)
    assert sorted(p.name for p in project.iterdir()) == [".git", "mix.exs"]


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


async def test_an_erl_that_names_no_install_is_a_notice(
    project: Path, home: Path, tmp_path: Path
) -> None:
    _script(tmp_path / "bin" / "erl", f"#!/bin/sh\necho {tmp_path}\n")
    found = await find_otp(project, path=str(tmp_path / "bin"), home=home)
    assert found.install is None and [n.code for n in found.notices] == ["otp_probe_failed"]
    assert "not an OTP install" in found.notices[0].message


async def test_a_pinned_otp_that_is_not_installed_says_so(
    project: Path, home: Path, installs: dict[str, Path], tmp_path: Path
) -> None:
    (project / ".tool-versions").write_text("erlang 26.2.5\n")
    _install_with(home / ASDF, "27.3.4.1", installs["27.3.4.1"])
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "erl").symlink_to(_erl_in(installs["25.2.3"]))
    found = await find_otp(project, path=str(tmp_path / "bin"), home=home)
    assert found.install is not None and found.install.release == "25.2.3"
    assert (found.pinned, found.pin_installed) == ("26.2.5", False)
    assert [n.code for n in found.notices] == ["otp_pin_not_installed"]
    message = found.notices[0].message
    assert "26.2.5" in message and "25.2.3" in message and ".tool-versions" in message
    nothing = await find_otp(project, path="", home=home)
    assert nothing.install is None and not nothing.pin_installed
    assert [n.code for n in nothing.notices] == ["otp_pin_not_installed"]
    assert "no OTP install was found" in nothing.notices[0].message


async def test_no_erl_anywhere_is_a_notice(project: Path, home: Path) -> None:
    found = await find_otp(project, path="", home=home)
    assert found.install is None and [n.code for n in found.notices] == ["otp_not_found"]
    assert "HEXLOCAL_OTP_ROOT" in found.notices[0].message


def test_hexlocal_otp_root_setting(tmp_path: Path) -> None:
    assert Settings.from_env({}).otp_root is None
    assert Settings.from_env({"HEXLOCAL_OTP_ROOT": str(tmp_path)}).otp_root == tmp_path
    assert Settings.from_env({"HEXLOCAL_OTP_ROOT": "~/otp"}).otp_root == Path.home() / "otp"


# --------------------------------------------------------------------------- project apps


def test_a_project_uses_the_core_apps_and_those_it_names(
    project: Path, installs: dict[str, Path]
) -> None:
    assert project_otp_apps(project) == ("erts", "kernel", "stdlib")
    (project / "mix.exs").write_text(
        "defmodule App.MixProject do\n  use Mix.Project\n"
        '  def project, do: [app: :app, apps_path: "apps", deps: [{:ssl_verify_fun, "~> 1.1"}]]\n'
        "  def application do\n"
        "    [extra_applications: [:logger, :crypto, :runtime_tools], mod: {App, []}]\n"
        "  end\nend\n"
    )
    web = project / "apps" / "web"
    web.mkdir(parents=True)
    (web / "mix.exs").write_text(
        "defmodule Web.MixProject do\n  def application do\n"
        "    [applications: [:inets,\n                  :mnesia]]\n  end\nend\n"
    )
    ebin = project / "_build" / "dev" / "lib" / "hackney" / "ebin"
    ebin.mkdir(parents=True)
    (ebin / "hackney.app").write_text(
        "{application,hackney,[{applications,[kernel,stdlib,crypto,asn1,public_key,ssl,"
        "certifi,idna]},{optional_applications,[]},{modules,['Elixir.Hackney']},"
        '{vsn,"1.20.1"},{env,[{timeout,150000},{name,<<"x">>},{m,#{a => 1}}]}]}.\n'
    )
    install = read_otp_install(installs["27.3.4.1"])
    assert project_otp_apps(project, install) == (
        "erts",
        "kernel",
        "stdlib",
        "asn1",
        "crypto",
        "inets",
        "mnesia",
        "public_key",
        "runtime_tools",
        "ssl",
    )
    assert project_otp_apps(web) == ("erts", "kernel", "stdlib", "inets", "mnesia")


def test_a_broken_compiled_app_file_is_skipped(project: Path) -> None:
    ebin = project / "_build" / "test" / "lib" / "bad" / "ebin"
    ebin.mkdir(parents=True)
    (ebin / "bad.app").write_text("{application, bad, [{applications, [ssl")
    big = project / "_build" / "test" / "lib" / "big" / "ebin"
    big.mkdir(parents=True)
    (big / "big.app").write_text("{application,big,[{applications,[xmerl]}]}.\n" + " " * 2**21)
    assert project_otp_apps(project) == ("erts", "kernel", "stdlib")


@pytest.mark.skipif(not Path("/usr/lib/elixir/lib").is_dir(), reason="no Debian Elixir")
def test_app_files_written_by_mix_are_read() -> None:
    """Elixir's own apps were built by Mix: quoted atoms, `~p` layout."""
    spec = read_app_spec(Path("/usr/lib/elixir/lib/elixir/ebin/elixir.app"))
    assert spec.name == "elixir" and spec.vsn is not None
    assert "Elixir.Enum" in spec.modules and "elixir" in spec.modules
    assert {"kernel", "stdlib", "compiler"} <= set(spec.applications)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "no {application"),
        ("{application, x}.", "no {application"),
        ('[{vsn, "1"}].', "no {application"),
        ("{application, X, []}.", "not an Erlang term"),
        ('{application, x, [{vsn, "1"}]', "not an Erlang term"),
    ],
)
def test_a_malformed_app_file_says_why(tmp_path: Path, text: str, why: str) -> None:
    path = tmp_path / "x.app"
    path.write_text(text)
    with pytest.raises(ValueError, match=why):
        read_app_spec(path)
