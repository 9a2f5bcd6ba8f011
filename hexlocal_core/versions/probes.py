"""What the project says about versions outside mix.lock: `_build`, pin files, Elixir on PATH.

Each probe answers None (or a notice) when its source is absent, odd or slow; none
raises for a file the project holds. Files are read through `read_regular` (no FIFO,
no device, a size cap) and parsed with bounded cost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import shutil
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hexlocal_core.model import Notice
from hexlocal_core.untrusted import NotReadable, read_regular
from hexlocal_core.versions.location import find_lock, find_mix_root, project_dirs
from hexlocal_core.versions.semver import try_parse_version

__all__ = [
    "ELIXIR_VERSION_TIMEOUT_S",
    "build_version",
    "elixir_on_path",
    "pinned_elixir",
    "read_app_vsn",
]

log = logging.getLogger("hexlocal.versions")

ELIXIR_VERSION_TIMEOUT_S = 10.0  # a cold BEAM start takes ~0.5 s; this only guards a hang
MAX_APP_FILE_BYTES = 1024 * 1024  # .app files are a few KB; Elixir's lists ~250 modules
MAX_PIN_FILE_BYTES = 64 * 1024  # .tool-versions and mise.toml are a few hundred bytes
# tomllib is quadratic in the depth of a dotted key (40k parts: 37 s). The dots in a
# file bound every key's depth; a real mise.toml has a few dozen (versions included).
MAX_MISE_DOTS = 2048
MAX_TOML_DIGITS = 1000  # a run of digits this long is no version, date or port
_LONG_NUMBER = re.compile(rf"\d{{{MAX_TOML_DIGITS + 1}}}")

# The value is bounded so a file of many unclosed `{vsn,"` cannot make the search quadratic.
_APP_VSN = re.compile(r"""\{\s*vsn\s*,\s*(?:"([^"]{0,128})"|'([^']{0,128})')\s*\}""")


# --------------------------------------------------------------------------- _build


def _build_roots(project_root: Path) -> list[Path]:
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


def read_app_vsn(app_file: Path) -> str | None:
    """The `{vsn, "1.2.3"}` of an Erlang .app file (a string or a charlist), or None."""
    try:
        data = read_regular(app_file, MAX_APP_FILE_BYTES)
    except NotReadable as exc:
        log.debug("ignoring %s: %s", app_file, exc)
        return None
    m = _APP_VSN.search(data.decode("utf-8", errors="replace"))
    return (m.group(1) if m.group(1) is not None else m.group(2)) if m else None


def build_version(app: str, project_root: Path) -> tuple[str, Path] | None:
    """The compiled version of `app` in the project's `_build` (dev preferred)."""
    for root in _build_roots(project_root):
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


def _read_pin_file(path: Path, errors: str = "strict") -> str:
    """The text of a pin file. Raises ValueError (bad UTF-8, too large, not a file)."""
    try:
        return read_regular(path, MAX_PIN_FILE_BYTES).decode("utf-8", errors=errors)
    except NotReadable as exc:
        raise ValueError(f"it {exc}") from exc


def _tool_versions_pin(path: Path) -> tuple[str | None, bool]:
    """(version, mentioned): mentioned is True when elixir is listed even if unusable."""
    # asdf reads bytes: a stray Latin-1 byte in a comment must not hide the pin.
    for line in _read_pin_file(path, errors="replace").splitlines():
        fields = line.split("#", 1)[0].split()
        if fields[:1] == ["elixir"]:
            pins = (_elixir_pin(f) for f in fields[1:])
            return next((p for p in pins if p), None), True
    return None, False


def _load_toml(text: str) -> dict[str, Any]:
    """tomllib.loads with its two unbounded costs bounded. Raises ValueError."""
    comment_free = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))
    if comment_free.count(".") > MAX_MISE_DOTS:
        raise ValueError(f"it has more than {MAX_MISE_DOTS} dots, far more than a mise.toml")
    if _LONG_NUMBER.search(text):  # tomllib's int() would refuse it with a Python hint
        raise ValueError(f"it holds a number over {MAX_TOML_DIGITS} digits long")
    try:
        return tomllib.loads(text)
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise ValueError("it nests arrays or tables too deeply to read") from None


def _mise_pin(path: Path) -> tuple[str | None, bool]:
    tools = _load_toml(_read_pin_file(path)).get("tools", {})
    value = tools.get("elixir") if isinstance(tools, dict) else None
    if value is None:
        return None, False
    if isinstance(value, dict):
        value = value.get("version")
    candidates = value if isinstance(value, list) else [value]
    pins = (_elixir_pin(c) for c in candidates if isinstance(c, str))
    return next((p for p in pins if p), None), True


_PIN_FILES: tuple[tuple[str, Callable[[Path], tuple[str | None, bool]]], ...] = (
    (".tool-versions", _tool_versions_pin),
    ("mise.toml", _mise_pin),
    (".mise.toml", _mise_pin),
)


def pinned_elixir(project_root: Path) -> tuple[str | None, Path | None, tuple[Notice, ...]]:
    """The Elixir version the project pins, the file pinning it, and notices for bad pins.

    Looks in the project and its parents (nearest first), like asdf and mise do.
    """
    notices: list[Notice] = []
    for directory in project_dirs(project_root):
        for filename, reader in _PIN_FILES:
            path = directory / filename
            if not path.exists():
                continue
            try:
                version, mentioned = reader(path)
            except ValueError as exc:  # tomllib.TOMLDecodeError is a ValueError too
                notices.append(Notice("elixir_pin_unreadable", f"could not read {path}: {exc}"))
                continue
            if version:
                return version, path, tuple(notices)
            if mentioned:
                notices.append(
                    Notice(
                        "elixir_pin_unusable",
                        f"{path} pins elixir without a full version (like 1.18.4); ignoring it",
                    )
                )
    return None, None, tuple(notices)


# --------------------------------------------------------------------------- Elixir on PATH


def _kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


_ELIXIR_BANNER = re.compile(r"^Elixir (\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)", re.MULTILINE)


async def elixir_on_path() -> tuple[str, str] | None:
    """(version, executable) from `elixir --version`, or None if absent, slow or unclear."""
    exe = shutil.which("elixir")
    if exe is None:
        return None
    try:
        proc = await asyncio.create_subprocess_exec(
            exe,
            "--version",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
    except OSError as exc:
        log.info("could not run %s --version: %s", exe, exc)
        return None
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), ELIXIR_VERSION_TIMEOUT_S)
    except TimeoutError:
        _kill(proc)
        await proc.wait()
        log.info("%s --version took longer than %ss; ignoring it", exe, ELIXIR_VERSION_TIMEOUT_S)
        return None
    except asyncio.CancelledError:
        _kill(proc)  # never leave a BEAM behind when the caller gives up
        raise
    m = _ELIXIR_BANNER.search(out.decode("utf-8", errors="replace"))
    return (m.group(1), exe) if m else None
