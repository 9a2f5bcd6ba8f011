"""An Erlang/OTP install as its files describe it: the release and its application versions.

An install root holds `releases/<major>/OTP_VERSION` (the full release, `27.3.4.1`),
`releases/<major>/installed_application_versions` (one `app-vsn` a line, every app of the
release) and `lib/<app>-<vsn>/` for the apps actually present (a distribution may split
them across packages). Nothing here runs a program or searches the machine: see
`otp_probe.py` for that. Every file is read through `read_regular` with a size cap.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from attrs import field, frozen

from hexlocal_core.errors import HexlocalError, UserInputError
from hexlocal_core.untrusted import NotReadable, clip, read_regular, unreadable

__all__ = [
    "OTP_APPS",
    "NotAnOtpInstall",
    "OtpInstall",
    "OtpVersion",
    "is_otp_root",
    "otp_version_for",
    "parse_otp_release",
    "read_otp_install",
    "release_matches",
]

# Every application OTP ships (Elixir's `logger` is not one: `:logger` is kernel's module).
OTP_APPS = frozenset(
    {
        "asn1", "common_test", "compiler", "crypto", "debugger", "dialyzer", "diameter",
        "edoc", "eldap", "erl_docgen", "erl_interface", "erts", "et", "eunit", "ftp",
        "inets", "jinterface", "kernel", "megaco", "mnesia", "observer", "odbc", "os_mon",
        "parsetools", "public_key", "reltool", "runtime_tools", "sasl", "snmp", "ssh",
        "ssl", "stdlib", "syntax_tools", "tftp", "tools", "wx", "xmerl",
    }
)  # fmt: skip
CORE_APPS = ("erts", "kernel", "stdlib")  # every BEAM runs these

MAX_OTP_VERSION_BYTES = 256  # "27.3.4.1\n"; a patched install appends " **"
MAX_APP_VERSIONS_BYTES = 64 * 1024  # 36 lines of ~15 bytes
MAX_LIB_ENTRIES = 2_000  # a full install has ~40 apps; a few versions each after patches
# The first OTP named by number was 17 (before it: R16B03). Application versions start
# far lower (stdlib 6, kernel 10) except erts (17 in OTP 29); see `otp_version_for`.
FIRST_OTP_MAJOR = 17
RELEASE_GUESS_MAJOR = 23  # a bare version from this major up is read as a release

_RELEASE = re.compile(r"^(?:OTP[-_ ]?)?(\d{2,3}(?:\.\d{1,6}){0,5}(?:-rc\d{1,3})?)$", re.I)
_APP_DIR = re.compile(r"^([a-z][a-z0-9_]{0,63})-(\d{1,6}(?:\.\d{1,9}){0,6})$")
_APP_VSN = re.compile(r"^\d{1,6}(?:\.\d{1,9}){0,6}(?:-[0-9A-Za-z.]{1,32})?$")


class NotAnOtpInstall(HexlocalError):
    """A folder given as an OTP install root is not one; the message says what is missing."""


def parse_otp_release(text: str) -> str | None:
    """An OTP release as written anywhere (`OTP-27.3.4.1`, `27.3.4.1`, `27`, `OTP 28.0-rc1`,
    an OTP_VERSION file's `27.3.4.1 **`) -> `27.3.4.1`; None when it is none (`R16B03`,
    `ref:master`, `system`)."""
    if not isinstance(text, str) or len(text) > 64:
        return None
    value = text.strip().removesuffix("**").strip()
    m = _RELEASE.match(value)
    if m is None or int(m.group(1).split(".")[0].split("-")[0]) < FIRST_OTP_MAJOR:
        return None
    return m.group(1).lower()


def _major(release: str) -> int:
    return int(release.split(".")[0].split("-")[0])


def release_matches(release: str, wanted: str) -> bool:
    """True when the install's `release` is what `wanted` asks for: the same release, or
    one of the releases it names by prefix (`27` and `27.3` both take `27.3.4.1`, as
    mise resolves a fuzzy pin; a release candidate only matches itself)."""
    if release == wanted:
        return True
    if "-" in wanted or "-" in release:
        return False
    have, want = release.split("."), wanted.split(".")
    return len(want) < len(have) and have[: len(want)] == want


def _version_key(vsn: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", vsn)[:8])


@frozen
class OtpInstall:
    """One installed OTP release: where it is, which release, which application versions."""

    root: Path
    release: str  # "27.3.4.1"
    major: int
    apps: Mapping[str, str] = field(factory=dict)  # every app of the release -> its vsn
    lib_dirs: Mapping[str, Path] = field(factory=dict)  # the apps present -> lib/<app>-<vsn>

    def app_version(self, app: str) -> str | None:
        return self.apps.get(app)


def is_otp_root(path: Path) -> bool:
    """Cheap shape check: a `releases` and a `lib` folder (no file is read)."""
    return (path / "releases").is_dir() and (path / "lib").is_dir()


def _read_small(path: Path, cap: int) -> str:
    try:
        return read_regular(path, cap).decode("utf-8", errors="replace")
    except NotReadable as exc:
        raise NotAnOtpInstall(unreadable(path, exc)) from exc


def _release_dir(root: Path) -> tuple[Path, int]:
    try:
        majors = sorted((int(p.name), p) for p in (root / "releases").iterdir() if p.name.isdigit())
    except OSError as exc:
        raise NotAnOtpInstall(
            f"{clip(str(root))} is not an Erlang/OTP install: it has no readable releases/ "
            f"folder ({exc.strerror or exc}); give the folder that holds bin/, lib/ and "
            "releases/ (what `erl -noshell -eval 'io:format(code:root_dir()), halt().'` prints)"
        ) from exc
    for major, path in reversed(majors):
        if (path / "OTP_VERSION").exists():
            return path, major
    raise NotAnOtpInstall(
        f"{clip(str(root))} is not an Erlang/OTP install: no releases/<major>/OTP_VERSION"
    )


def _read_release(release_dir: Path, major: int) -> str:
    path = release_dir / "OTP_VERSION"
    text = _read_small(path, MAX_OTP_VERSION_BYTES)
    release = parse_otp_release(text)
    if release is None or _major(release) != major:
        raise NotAnOtpInstall(
            f"{clip(str(path))} does not hold an OTP {major} release like {major}.0 "
            f"(it reads {clip(text.strip(), 40)!r})"
        )
    return release


def _listed_versions(release_dir: Path) -> dict[str, str]:
    """`installed_application_versions`: absent or odd lines are skipped, never fatal."""
    path = release_dir / "installed_application_versions"
    if not path.exists():
        return {}
    try:
        text = read_regular(path, MAX_APP_VERSIONS_BYTES).decode("utf-8", errors="replace")
    except NotReadable:
        return {}
    found = (_APP_DIR.match(line.strip()) for line in text.splitlines())
    return {m.group(1): m.group(2) for m in found if m}


def _lib_dirs(root: Path, listed: Mapping[str, str]) -> dict[str, Path]:
    """`lib/<app>-<vsn>` per app: the listed version when present, else the highest."""
    by_app: dict[str, list[tuple[str, Path]]] = {}
    try:
        with os.scandir(root / "lib") as entries:
            for count, entry in enumerate(entries):
                if count >= MAX_LIB_ENTRIES:
                    break
                m = _APP_DIR.match(entry.name)
                if m and entry.is_dir():
                    by_app.setdefault(m.group(1), []).append((m.group(2), Path(entry.path)))
    except OSError:
        return {}
    chosen: dict[str, Path] = {}
    for app, versions in by_app.items():
        exact = [p for vsn, p in versions if vsn == listed.get(app)]
        chosen[app] = exact[0] if exact else max(versions, key=lambda v: _version_key(v[0]))[1]
    return chosen


def read_otp_install(root: Path) -> OtpInstall:
    """The install at `root`. Raises NotAnOtpInstall naming what is missing or malformed."""
    try:
        root = root.expanduser().resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise NotAnOtpInstall(f"{clip(str(root))} does not exist or cannot be resolved") from exc
    release_dir, major = _release_dir(root)
    release = _read_release(release_dir, major)
    listed = _listed_versions(release_dir)
    lib_dirs = _lib_dirs(root, listed)
    if not lib_dirs:
        raise NotAnOtpInstall(f"{clip(str(root))} has no lib/<app>-<vsn> folders")
    apps = dict(listed)
    apps.update({app: path.name.split("-", 1)[1] for app, path in lib_dirs.items()})
    return OtpInstall(
        root=root,
        release=release,
        major=major,
        apps=dict(sorted(apps.items())),
        lib_dirs=dict(sorted(lib_dirs.items())),
    )


# --------------------------------------------------------------------------- explicit


@frozen
class OtpVersion:
    """What an explicit version given for an OTP app means: an application version, an
    OTP release, or both when the install ties them together."""

    app_vsn: str | None  # the application's own version ("6.2.2.1"), when known
    release: str | None  # the OTP release ("27.3.4.1"), when known


def otp_version_for(app: str, wanted: str, install: OtpInstall | None) -> OtpVersion:
    """Reads `wanted` for OTP application `app`: `OTP-27.3.4.1` and a bare major (`27`)
    are releases; a version the install ties to `app` or to its release means that; any
    other version whose major is at least RELEASE_GUESS_MAJOR is a release (no OTP
    application but erts has come near: stdlib is at 8, erts at 17 in OTP 29), the rest
    an application version. Raises UserInputError for text that is neither.
    """
    text = wanted.strip()
    installed_app = install.apps.get(app) if install is not None else None
    release = parse_otp_release(text)
    explicit_release = release is not None and (text[:3].upper() == "OTP" or "." not in text)
    if install is not None and release is not None and release_matches(install.release, release):
        if explicit_release or text != installed_app:
            return OtpVersion(installed_app, install.release)
    if text == installed_app and install is not None:
        return OtpVersion(text, install.release)
    if release is not None and (explicit_release or _major(release) >= RELEASE_GUESS_MAJOR):
        return OtpVersion(None, release)
    if _APP_VSN.match(text):
        return OtpVersion(text, None)
    raise UserInputError(
        f"{clip(text, 40)!r} is not a version of OTP application {app}: give the "
        "application's version (like 6.2.2.1 for stdlib) or an OTP release (like "
        "OTP-27.3.4.1 or 27)"
    )
