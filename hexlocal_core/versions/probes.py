"""What the project says about versions outside mix.lock: `_build`, pin files, Elixir on PATH.

Each probe answers None (or a notice) when its source is absent, odd or slow; none
raises for a file the project holds. Files are read through `read_regular` (no FIFO,
no device, a size cap) and parsed with bounded cost.
"""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path

from hexlocal_core.model import Notice
from hexlocal_core.versions.app_file import read_app_vsn
from hexlocal_core.versions.location import find_lock, find_mix_root
from hexlocal_core.versions.pins import find_pin
from hexlocal_core.versions.probe_run import run_probe
from hexlocal_core.versions.semver import try_parse_version

__all__ = [
    "ELIXIR_VERSION_TIMEOUT_S",
    "build_roots",
    "build_version",
    "elixir_on_path",
    "pinned_elixir",
]

log = logging.getLogger("hexlocal.versions")

ELIXIR_VERSION_TIMEOUT_S = 10.0  # a cold BEAM start takes ~0.5 s; this only guards a hang


# --------------------------------------------------------------------------- _build


def build_roots(project_root: Path) -> list[Path]:
    """Where `_build` may live: the project, its Mix root, and an umbrella root with the lock."""
    roots = [project_root.resolve()]
    mix_root = find_mix_root(project_root)
    lock = find_lock(project_root)
    for extra in (mix_root, lock.parent if lock is not None else None):
        if extra is not None and extra not in roots:
            roots.append(extra)
    return roots


def _app_files(root: Path, app: str) -> list[Path]:
    """`_build/<env>/lib/<app>/ebin/<app>.app` for every env, dev first."""
    build = root / "_build"
    try:
        found = [p.name for p in build.iterdir() if p.is_dir()]
    except OSError:  # absent, not a directory, or unreadable: nothing compiled to read
        return []
    envs = sorted(found, key=lambda e: (e != "dev", e))
    files = (build / env / "lib" / app / "ebin" / f"{app}.app" for env in envs)
    return [f for f in files if f.is_file()]


def build_version(app: str, project_root: Path) -> tuple[str, Path] | None:
    """The compiled version of `app` in the project's `_build` (dev preferred)."""
    for root in build_roots(project_root):
        for app_file in _app_files(root, app):
            vsn = read_app_vsn(app_file)
            if vsn is not None and try_parse_version(vsn) is not None:
                return vsn.strip(), app_file
            log.debug("ignoring %s: vsn %r is not a version", app_file, vsn)
    return None


# --------------------------------------------------------------------------- pinned Elixir


def _elixir_pin(text: str) -> str | None:
    """A full version from an asdf/mise value: '1.18.4-otp-27' -> '1.18.4'."""
    value = re.sub(r"-otp-\d+$", "", text.strip())
    return value if try_parse_version(value) is not None else None


def pinned_elixir(project_root: Path) -> tuple[str | None, Path | None, tuple[Notice, ...]]:
    """The Elixir version the project pins, the file pinning it, and notices for bad pins.

    Looks in the project and its parents (nearest first), like asdf and mise do.
    """
    pin = find_pin(project_root, "elixir", _elixir_pin, example="1.18.4")
    return pin.version, pin.file, pin.notices


# --------------------------------------------------------------------------- Elixir on PATH


_ELIXIR_BANNER = re.compile(r"^Elixir (\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)", re.MULTILINE)


async def elixir_on_path() -> tuple[str, str] | None:
    """(version, executable) from `elixir --version`, or None if absent, slow or unclear.

    Run as every probe is (`probe_run.run_probe`): outside the project, no crash dump,
    never outliving hexlocal.
    """
    exe = shutil.which("elixir")
    if exe is None:
        return None
    run = await run_probe([exe, "--version"], timeout_s=ELIXIR_VERSION_TIMEOUT_S)
    if run.problem is not None:
        log.info("ignoring %s --version: %s", exe, run.problem)
        return None
    m = _ELIXIR_BANNER.search(run.stdout)
    return (m.group(1), exe) if m else None
