"""Which OTP application owns a module, and which OTP applications a project uses.

Both come from `.app` files (read by `app_file.py`): an installed app's
`ebin/<app>.app` lists its `modules`; a compiled Mix app's lists the `applications` it
starts. A project's `mix.exs` is scanned as text for its `applications` and
`extra_applications` lists (no Elixir is evaluated). Every read is capped in size and
count, and an unreadable file is a notice or a skip, never an exception.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from attrs import field, frozen

from hexlocal_core.model import Notice
from hexlocal_core.notice_codes import NoticeCode
from hexlocal_core.untrusted import NotReadable, clip, read_regular
from hexlocal_core.versions.app_file import read_app_spec
from hexlocal_core.versions.location import find_mix_root
from hexlocal_core.versions.names import ELIXIR_APPS
from hexlocal_core.versions.otp import CORE_APPS, OTP_APPS, OtpInstall
from hexlocal_core.versions.probes import build_roots

__all__ = [
    "ModuleOwners",
    "module_apps",
    "project_otp_apps",
]

log = logging.getLogger("hexlocal.versions.otp")

MAX_EBIN_BEAMS = 5_000  # the largest OTP app (wx) has ~250 modules
MAX_MIX_EXS_BYTES = 512 * 1024  # a large mix.exs is ~20 KB
MAX_UMBRELLA_APPS = 200
MAX_BUILD_APPS = 2_000  # compiled apps read per project (deps x envs)
_APP_LIST = re.compile(r"\b(?:extra_|included_)?applications:\s*\[([^\]]{0,20000})\]")
_ATOM = re.compile(r"(?<![\w:]):([a-z][a-z0-9_]*)\b")
_APPS_PATH = re.compile(r"\bapps_path:\s*\"([^\"\n]{1,200})\"")


# --------------------------------------------------------------------------- module -> app


@frozen
class ModuleOwners:
    """Module -> the OTP applications whose `.app` lists it (normally one)."""

    owners: Mapping[str, tuple[str, ...]] = field(factory=dict)
    notices: tuple[Notice, ...] = ()  # `.app` files that could not be read

    def apps_of(self, module: str) -> tuple[str, ...]:
        """The apps owning `module`, written as Erlang (`ets`) or Elixir (`:ets`) writes it."""
        return self.owners.get(module.removeprefix(":"), ())

    def ambiguous(self) -> Mapping[str, tuple[str, ...]]:
        return {m: apps for m, apps in self.owners.items() if len(apps) > 1}

    def owner_notice(self, module: str) -> Notice | None:
        """A notice for a module two applications claim; None when one (or none) does."""
        apps = self.apps_of(module)
        if len(apps) < 2:
            return None
        return Notice(
            NoticeCode.MODULE_IN_SEVERAL_APPS,
            f"module {clip(module.removeprefix(':'), 80)} is listed by {len(apps)} OTP "
            f"applications ({', '.join(apps)}); pass the package to choose one",
        )


def _app_order(apps: Iterable[str]) -> list[str]:
    """erts, kernel, stdlib first (every node runs them), then by name."""
    rank = {app: i for i, app in enumerate(CORE_APPS)}
    return sorted(apps, key=lambda a: (rank.get(a, len(rank)), a))


def module_apps(install: OtpInstall) -> ModuleOwners:
    """Module -> owning apps over every app present in `install`: each `ebin/<app>.app`'s
    `modules`, plus the `.beam` files its ebin holds that the list leaves out (erts's
    `erl_tracer`; Debian's asn1 lists only its runtime). An `.app` that exists but cannot
    be read is a notice; its beams still count."""
    owners: dict[str, list[str]] = {}
    notices: list[Notice] = []
    for app in _app_order(install.lib_dirs):
        ebin = install.lib_dirs[app] / "ebin"
        app_file = ebin / f"{app}.app"
        listed: tuple[str, ...] = ()
        try:
            listed = read_app_spec(app_file).modules
        except ValueError as exc:
            if os.path.lexists(app_file):  # erl_interface and jinterface have none: normal
                notices.append(
                    Notice(
                        NoticeCode.OTP_APP_FILE_UNREADABLE, f"{exc}; using the names of its beams"
                    )
                )
        for module in dict.fromkeys((*listed, *_beam_files(ebin))):
            owners.setdefault(module, []).append(app)
    return ModuleOwners({m: tuple(a) for m, a in owners.items()}, tuple(notices))


def _beam_files(ebin: Path) -> list[str]:
    try:
        with os.scandir(ebin) as entries:
            found = [e.name for _, e in zip(range(MAX_EBIN_BEAMS), entries, strict=False)]
    except OSError:
        return []
    return sorted(name.removesuffix(".beam") for name in found if name.endswith(".beam"))


# --------------------------------------------------------------------------- project apps


def _read_text(path: Path, cap: int) -> str | None:
    try:
        return read_regular(path, cap).decode("utf-8", errors="replace")
    except NotReadable as exc:
        log.debug("ignoring %s: %s", path, exc)
        return None


def _mix_exs_files(mix_root: Path) -> Iterator[Path]:
    """The project's mix.exs, then its umbrella apps' (`apps_path`, default `apps`)."""
    mix_exs = mix_root / "mix.exs"
    yield mix_exs
    text = _read_text(mix_exs, MAX_MIX_EXS_BYTES) or ""
    m = _APPS_PATH.search(text)
    if m is None and "apps_path" not in text:
        return
    apps_dir = (mix_root / (m.group(1) if m else "apps")).resolve()
    if not apps_dir.is_relative_to(mix_root.resolve()):
        return  # an apps_path outside the project is not this project's to scan
    try:
        children = sorted(p for p in apps_dir.iterdir() if (p / "mix.exs").is_file())
    except OSError:
        return
    yield from (child / "mix.exs" for child in children[:MAX_UMBRELLA_APPS])


def mix_exs_applications(project_root: Path) -> set[str]:
    """Atoms in the `applications:` / `extra_applications:` lists of the project's mix.exs
    files (umbrella apps included), read as text."""
    mix_root = find_mix_root(project_root)
    if mix_root is None:
        return set()
    found: set[str] = set()
    for path in _mix_exs_files(mix_root):
        text = _read_text(path, MAX_MIX_EXS_BYTES)
        for app_list in _APP_LIST.finditer(text or ""):
            found.update(_ATOM.findall(app_list.group(1)))
    return found


def _compiled_app_files(project_root: Path) -> Iterator[Path]:
    """`_build/<env>/lib/<app>/ebin/<app>.app`, each app once (dev's first), capped."""
    seen: set[str] = set()
    for root in build_roots(project_root):
        try:
            found = [p for p in (root / "_build").iterdir() if p.is_dir()]
            envs = sorted(found, key=lambda p: (p.name != "dev", p.name))
        except OSError:
            continue
        for env in envs:
            try:
                apps = sorted(p.name for p in (env / "lib").iterdir())
            except OSError:
                continue
            for app in apps:
                if app in seen or len(seen) >= MAX_BUILD_APPS:
                    continue
                seen.add(app)
                yield env / "lib" / app / "ebin" / f"{app}.app"


def build_applications(project_root: Path) -> set[str]:
    """Every application the compiled apps in the project's `_build` start."""
    found: set[str] = set()
    for path in _compiled_app_files(project_root):
        if not path.is_file():
            continue
        try:
            found.update(read_app_spec(path).applications)
        except ValueError as exc:
            log.debug("ignoring %s", exc)
    return found


def project_otp_apps(project_root: Path, install: OtpInstall | None = None) -> tuple[str, ...]:
    """The OTP applications the project uses: erts, kernel and stdlib always, plus those
    its mix.exs files list and its compiled apps start. Elixir's apps (its `logger` is
    not kernel's) and Hex packages are left out; `install`'s own apps count as OTP's."""
    known = (OTP_APPS | set(install.apps if install is not None else ())) - ELIXIR_APPS
    named = mix_exs_applications(project_root) | build_applications(project_root)
    return tuple(_app_order(set(CORE_APPS) | (named & known)))
