"""Finding the project's Erlang/OTP: the pinned release and the install that provides it.

In order, first found wins:

1. `otp_root` (HEXLOCAL_OTP_ROOT): an install root, overriding the search;
2. the release the project pins (`erlang` in `.tool-versions` / `mise.toml`), installed
   by asdf (`~/.asdf/installs/erlang/<v>`) or mise (`~/.local/share/mise/installs/erlang/<v>`);
3. `erl` on PATH, followed through symlinks (Debian: /usr/bin/erl -> /usr/lib/erlang/bin/erl)
   to `<root>/bin/erl` or `<root>/erts-<v>/bin/erl`, or through the `ROOTDIR=` its script sets;
4. an asdf or mise shim (a script or a link to `mise`, far from any install): the one
   version the version manager has installed;
5. last, `erl` itself asked for `code:root_dir()`, bounded by `timeout_s` and run as every
   probe is (`probe_run.py`: outside the project, no crash dump, never outliving hexlocal).

A pinned release that is not what was found is a notice (`otp_pin_not_installed`); the
caller may then take its docs from elsewhere (the release's doc tarball).
"""

from __future__ import annotations

import logging
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

from attrs import frozen

from hexlocal_core.model import Notice
from hexlocal_core.notice_codes import NoticeCode
from hexlocal_core.untrusted import NotReadable, clip, read_regular
from hexlocal_core.versions.otp import (
    NotAnOtpInstall,
    OtpInstall,
    is_otp_root,
    parse_otp_release,
    read_otp_install,
    release_matches,
)
from hexlocal_core.versions.pins import find_pin
from hexlocal_core.versions.probe_run import run_probe

__all__ = ["ERL_TIMEOUT_S", "OtpFound", "find_otp", "manager_install_dirs", "pinned_otp"]

log = logging.getLogger("hexlocal.versions.otp")

ERL_TIMEOUT_S = 5.0  # a cold `erl` answers in ~0.3 s, through an asdf shim ~0.5 s
MAX_SCRIPT_BYTES = 64 * 1024  # the erl script is ~2 KB, an asdf shim ~200 bytes
MAX_MANAGER_VERSIONS = 500  # installs per version manager looked at
_ROOTDIR = re.compile(r"""^\s*(?:export\s+)?ROOTDIR=["']?(/[^"'\s$`]+)["']?\s*$""", re.M)
_ASDF_PLUGIN = re.compile(r"^#\s*asdf-plugin:\s*erlang\s+(\S+)\s*$", re.M)
_ROOT_DIR_EVAL = 'io:format("~ts~n", [code:root_dir()]), halt().'


@frozen
class OtpFound:
    """The OTP a project uses, as far as the machine tells, and what got in the way."""

    install: OtpInstall | None
    pinned: str | None = None  # the release the project pins ("27.3.4.1", "27")
    pin_file: Path | None = None
    how: str = ""  # how the install was found, for `doctor` and notices
    notices: tuple[Notice, ...] = ()

    @property
    def pin_installed(self) -> bool:
        """False when the project pins a release the found install is not."""
        if self.pinned is None:
            return True
        return self.install is not None and release_matches(self.install.release, self.pinned)


def pinned_otp(project_root: Path) -> tuple[str | None, Path | None, tuple[Notice, ...]]:
    """The OTP release the project pins (`erlang` in .tool-versions or mise.toml)."""
    pin = find_pin(project_root, "erlang", parse_otp_release, example="27.3.4.1")
    return pin.version, pin.file, pin.notices


def manager_install_dirs(home: Path) -> tuple[tuple[str, Path], ...]:
    """(manager, folder) where asdf and mise keep their Erlang installs (default data dirs)."""
    return (
        ("asdf", home / ".asdf" / "installs" / "erlang"),
        ("mise", home / ".local" / "share" / "mise" / "installs" / "erlang"),
    )


def _try_read(root: Path) -> OtpInstall | None:
    try:
        return read_otp_install(root)
    except NotAnOtpInstall as exc:
        log.debug("not an OTP install: %s", exc)
        return None


def _manager_versions(base: Path) -> Iterator[tuple[str, Path]]:
    """(release, folder) of the installs under one version manager's erlang folder."""
    try:
        entries = sorted(base.iterdir())[:MAX_MANAGER_VERSIONS]
    except OSError:
        return
    for entry in entries:
        release = parse_otp_release(entry.name)
        if release is not None and is_otp_root(entry):
            yield release, entry


def _pinned_in_managers(pinned: str, home: Path) -> tuple[OtpInstall, str] | None:
    """The pinned release installed by asdf or mise: the exact folder, else the newest
    folder the pin names by prefix (`27` -> `27.3.4.1`), as mise resolves it."""
    for manager, base in manager_install_dirs(home):
        found = [(r, p) for r, p in _manager_versions(base) if release_matches(r, pinned)]
        if not found:
            continue
        exact = [p for r, p in found if r == pinned]
        newest = max(found, key=lambda rp: [int(x) for x in re.findall(r"\d+", rp[0])])[1]
        install = _try_read(exact[0] if exact else newest)
        if install is not None:
            return install, f"the pinned release, installed by {manager}"
    return None


def _script_text(exe: Path) -> str:
    try:
        return read_regular(exe, MAX_SCRIPT_BYTES).decode("utf-8", errors="replace")
    except NotReadable:  # a binary over the cap, or unreadable: not a script we can read
        return ""


def _root_from_erl(exe: Path) -> OtpInstall | None:
    """The install an `erl` belongs to: its real path's `<root>/bin` or `<root>/erts-<v>/bin`,
    else the absolute `ROOTDIR=` its script sets."""
    try:
        real = exe.resolve(strict=True)
    except (OSError, RuntimeError):  # a broken or looping link
        return None
    candidates = [real.parent.parent]
    if real.parent.parent.name.startswith("erts-"):
        candidates.append(real.parent.parent.parent)
    candidates += [Path(m) for m in _ROOTDIR.findall(_script_text(real))]
    for root in candidates:
        if is_otp_root(root) and (install := _try_read(root)) is not None:
            return install
    return None


def _shim_install(exe: Path, home: Path) -> tuple[OtpInstall, str] | None:
    """An asdf or mise shim's Erlang when the manager has exactly one installed (with
    several, only the manager knows which applies: `erl` is asked instead)."""
    try:
        real = exe.resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    text = _script_text(real)  # "" for the mise binary a mise shim links to
    asdf_versions = set(_ASDF_PLUGIN.findall(text))
    is_mise = real.name.startswith("mise") or exe.parent.parent.name == "mise"
    if not asdf_versions and "asdf" not in text and not is_mise:
        return None
    for manager, base in manager_install_dirs(home):
        installed = list(_manager_versions(base))
        listed = [p for r, p in installed if not asdf_versions or r in asdf_versions]
        if len(listed) == 1 and (install := _try_read(listed[0])) is not None:
            return install, f"the only Erlang {manager} has installed"
    return None


async def _ask_erl(exe: str, timeout_s: float) -> tuple[OtpInstall | None, Notice | None]:
    argv = [exe, "-boot", "no_dot_erlang", "-noshell", "-noinput", "-eval", _ROOT_DIR_EVAL]
    run = await run_probe(argv, timeout_s=timeout_s)
    lines = run.stdout.strip().splitlines()
    if not run.ok or not lines:
        why = run.problem or f"it exited with status {run.returncode} and printed no root"
        return None, Notice(
            NoticeCode.OTP_PROBE_FAILED,
            f"could not ask {clip(exe)} where OTP is installed: {why}. "
            "Set HEXLOCAL_OTP_ROOT to the OTP install's root folder.",
        )
    install = _try_read(Path(lines[-1].strip()))
    if install is None:
        return None, Notice(
            NoticeCode.OTP_PROBE_FAILED,
            f"{clip(exe)} named {clip(lines[-1].strip())!r} as its root, which is not an "
            "OTP install; set HEXLOCAL_OTP_ROOT to the OTP install's root folder.",
        )
    return install, None


async def _installed(
    pinned: str | None, *, path: str | None, home: Path | None, timeout_s: float
) -> tuple[OtpInstall | None, str, tuple[Notice, ...]]:
    """Steps 2 to 5 of the module docstring."""
    if pinned is not None and home is not None:
        managed = _pinned_in_managers(pinned, home)
        if managed is not None:
            return managed[0], managed[1], ()
    exe = shutil.which("erl", path=path)
    if exe is None:
        return None, "", (_NOT_FOUND,)
    install = _root_from_erl(Path(exe))
    if install is not None:
        return install, f"erl on PATH ({exe})", ()
    shim = _shim_install(Path(exe), home) if home is not None else None
    if shim is not None:
        return shim[0], shim[1], ()
    asked, notice = await _ask_erl(exe, timeout_s)
    how = f"{exe} (code:root_dir())" if asked is not None else ""
    return asked, how, (notice,) if notice is not None else ()


async def find_otp(
    project_root: Path,
    *,
    otp_root: Path | None = None,
    path: str | None = None,
    home: Path | None = None,
    timeout_s: float = ERL_TIMEOUT_S,
) -> OtpFound:
    """The project's OTP (see the module docstring). `path` is the PATH to search (None:
    hexlocal's own), `home` the user's home for asdf and mise (None: not looked at).
    Never raises for what it finds on the machine: each problem is a notice."""
    pinned, pin_file, pin_notices = pinned_otp(project_root)
    notices = list(pin_notices)
    install, how = None, ""
    if otp_root is not None:
        try:
            install, how = read_otp_install(otp_root), "HEXLOCAL_OTP_ROOT"
        except NotAnOtpInstall as exc:
            notices.append(
                Notice(
                    NoticeCode.OTP_ROOT_IGNORED,
                    f"HEXLOCAL_OTP_ROOT is ignored: {exc}. Looking for the project's OTP "
                    "as if it were unset.",
                )
            )
    if install is None:
        install, how, found_notices = await _installed(
            pinned, path=path, home=home, timeout_s=timeout_s
        )
        notices.extend(found_notices)
    found = OtpFound(install, pinned, pin_file, how, ())
    outcome = _outcome_notices(found)
    if outcome:  # the pin's notice already says nothing was found
        notices = [n for n in notices if n is not _NOT_FOUND]
    return OtpFound(install, pinned, pin_file, how, tuple(notices) + outcome)


def _outcome_notices(found: OtpFound) -> tuple[Notice, ...]:
    if not found.pin_installed:
        have = (
            f"the OTP found is {found.install.release} at {found.install.root}"
            if found.install is not None
            else "no OTP install was found"
        )
        return (
            Notice(
                NoticeCode.OTP_PIN_NOT_INSTALLED,
                f"{found.pin_file} pins OTP {found.pinned}, which is not installed ({have}). "
                f"Install it (`asdf install erlang {found.pinned}` or "
                f"`mise install erlang@{found.pinned}`) or set HEXLOCAL_OTP_ROOT.",
            ),
        )
    return ()


_NOT_FOUND = Notice(
    NoticeCode.OTP_NOT_FOUND,
    "no Erlang/OTP install found: `erl` is not on PATH and no asdf or mise install of a "
    "pinned release applies. Set HEXLOCAL_OTP_ROOT to the OTP install's root folder.",
)
