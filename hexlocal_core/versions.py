"""Which version's docs to use: Hex SemVer, project probes and the resolution chain.

The chain, first match wins (`resolve_version`):

    explicit -> mix.lock -> _build/<env>/lib/<app>/ebin/<app>.app -> Hex latest stable

Elixir's own doc sets (elixir, eex, ex_unit, iex, logger, mix) are not Hex packages; their
chain is: explicit argument -> the project's pinned Elixir (.tool-versions, mise.toml) ->
`elixir --version` on PATH -> an error asking for a version.

Every lookup reads the project's files again: a lock edited by `mix deps.update` while a
server runs must change the answer at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
import shutil
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from attrs import frozen

from hexlocal_core.errors import RemoteError, UserInputError, VersionNotFound
from hexlocal_core.mixlock import LockEntry, MalformedLock, find_lock, project_dirs, read_lock
from hexlocal_core.model import HexPackageInfo, Notice, ResolvedVersion, VersionSource
from hexlocal_core.ports import HexRegistry

__all__ = [
    "ELIXIR_APPS",
    "LockEntry",
    "SemVer",
    "build_version",
    "elixir_on_path",
    "is_stable",
    "nearest_versions",
    "parse_version",
    "pick_latest",
    "pinned_elixir",
    "resolve_version",
    "try_parse_version",
    "validate_package_name",
]

log = logging.getLogger("hexlocal.versions")

ELIXIR_APPS = frozenset({"elixir", "eex", "ex_unit", "iex", "logger", "mix"})
PACKAGE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
MAX_NAME_LENGTH = 64
MAX_VERSION_LENGTH = 128
ELIXIR_VERSION_TIMEOUT_S = 10.0  # a cold BEAM start takes ~0.5 s; this only guards a hang
LATEST = "latest"

# SemVer 2.0's own grammar: no leading zeros, dot-separated pre-release and build parts.
_NUM = r"0|[1-9]\d*"
_PRE_ID = r"(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)"
_SEMVER = re.compile(
    rf"^(?P<major>{_NUM})\.(?P<minor>{_NUM})\.(?P<patch>{_NUM})"
    rf"(?:-(?P<pre>{_PRE_ID}(?:\.{_PRE_ID})*))?"
    r"(?:\+(?P<build>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)


# --------------------------------------------------------------------------- SemVer


@functools.total_ordering
@frozen(eq=False)
class SemVer:
    """A Hex version. Ordering and equality follow SemVer precedence: build is ignored."""

    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...] = ()
    build: str = ""

    @property
    def is_stable(self) -> bool:
        return not self.pre

    def _key(self) -> tuple[Any, ...]:
        # A release sorts after its pre-releases; numeric identifiers sort before
        # alphanumeric ones; a shorter identifier list sorts first when it is a prefix.
        pre = tuple((0, p, "") if isinstance(p, int) else (1, 0, p) for p in self.pre)
        return (self.major, self.minor, self.patch, not self.pre, pre)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SemVer) and self._key() == other._key()

    def __lt__(self, other: SemVer) -> bool:
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            text += "-" + ".".join(str(p) for p in self.pre)
        return f"{text}+{self.build}" if self.build else text


def try_parse_version(text: str) -> SemVer | None:
    """The version, or None when `text` is not a valid Hex (SemVer 2.0) version."""
    if not isinstance(text, str) or len(text) > MAX_VERSION_LENGTH:
        return None
    m = _SEMVER.match(text.strip())
    if m is None:
        return None
    pre = tuple(int(p) if p.isdigit() else p for p in (m["pre"] or "").split(".") if p)
    return SemVer(int(m["major"]), int(m["minor"]), int(m["patch"]), pre, m["build"] or "")


def parse_version(text: str) -> SemVer:
    """Parses a Hex version. Raises UserInputError saying what a valid one looks like."""
    parsed = try_parse_version(text)
    if parsed is not None:
        return parsed
    shown = text if len(text) <= 40 else text[:40] + "..."
    hint = ""
    if text.strip()[:1] in ("v", "V"):
        hint = " (drop the leading 'v')"
    elif re.fullmatch(r"\d+(\.\d+)?", text.strip()):
        hint = " (Hex versions have three parts)"
    raise UserInputError(
        f"{shown!r} is not a valid version{hint}: expected MAJOR.MINOR.PATCH with an "
        "optional -pre-release and +build, like 1.4.5 or 1.5.0-alpha.2"
    )


def is_stable(version: str | SemVer) -> bool:
    """True for a release without a pre-release part; False for pre-releases and junk."""
    parsed = version if isinstance(version, SemVer) else try_parse_version(version)
    return parsed is not None and parsed.is_stable


def _valid(versions: Iterable[str]) -> list[SemVer]:
    return [v for v in map(try_parse_version, versions) if v is not None]


def nearest_versions(target: str | SemVer, available: Iterable[str], n: int = 5) -> list[str]:
    """Up to `n` versions from `available` closest to `target`, newest first.

    Closeness prefers the same major, then the same minor, then stable releases for a
    stable target (pre-releases only fill up the list), then the distance in release
    order. Unparseable entries are skipped.
    """
    wanted = target if isinstance(target, SemVer) else try_parse_version(target)
    pool = sorted(set(_valid(available)))
    if not pool or n <= 0:
        return []
    if wanted is None:
        return [str(v) for v in sorted(pool, reverse=True)[:n]]
    # Index at which the target would be inserted: neighbours on both sides are close.
    slot = sum(1 for v in pool if v < wanted)

    def distance(item: tuple[int, SemVer]) -> tuple[Any, ...]:
        index, v = item
        rank = index - slot if index >= slot else slot - index - 1
        return (
            v.major != wanted.major,
            v.minor != wanted.minor,
            wanted.is_stable and not v.is_stable,
            rank,
            -index,  # on a tie, the newer one
        )

    chosen = sorted(enumerate(pool), key=distance)[:n]
    return [str(v) for _, v in sorted(chosen, key=lambda item: item[1], reverse=True)]


def pick_latest(info: HexPackageInfo) -> tuple[str, tuple[Notice, ...]]:
    """The version Hex would install by default: latest stable, else the newest release.

    Raises VersionNotFound when the package lists no releases at all.
    """
    if info.latest_stable_version and try_parse_version(info.latest_stable_version):
        return info.latest_stable_version, ()
    releases = sorted(_valid(r.version for r in info.releases), reverse=True)
    stable = [v for v in releases if v.is_stable]
    if stable:
        return str(stable[0]), ()
    if releases:
        newest = str(releases[0])
        notice = Notice(
            "prerelease_only",
            f"{info.name} has only pre-releases on hex.pm; using the newest, {newest}. "
            "Pass a version to choose another.",
        )
        return newest, (notice,)
    raise VersionNotFound(f"hex.pm lists no releases for {info.name}, so it has no docs to read")


def validate_package_name(name: str) -> str:
    """Returns the name if it is a valid Hex package name; raises UserInputError otherwise."""
    if not isinstance(name, str) or not name.strip():
        raise UserInputError("a package name is required, like 'jason' or 'phoenix_live_view'")
    clean = name.strip()
    if len(clean) > MAX_NAME_LENGTH:
        raise UserInputError(f"package names are at most {MAX_NAME_LENGTH} characters long")
    if not PACKAGE_NAME.match(clean):
        suggestion = re.sub(r"[^a-z0-9_]+", "_", clean.lower()).strip("_")
        hint = f"; did you mean {suggestion!r}?" if PACKAGE_NAME.match(suggestion) else ""
        raise UserInputError(
            f"{clean[:40]!r} is not a Hex package name: use lowercase letters, digits and "
            f"underscores, starting with a letter (the OTP app name, not the module){hint}"
        )
    return clean


# --------------------------------------------------------------------------- probes

MAX_APP_FILE_BYTES = 1024 * 1024  # .app files are a few KB; Elixir's lists ~250 modules
_APP_VSN = re.compile(r"""\{\s*vsn\s*,\s*(?:"([^"]*)"|'([^']*)')\s*\}""")


def _build_roots(project_root: Path) -> list[Path]:
    """Where `_build` may live: the project, and an umbrella root holding its lock."""
    roots = [project_root.resolve()]
    lock = find_lock(project_root)
    if lock is not None and lock.parent not in roots:
        roots.append(lock.parent)
    return roots


def _app_files(root: Path, app: str) -> list[Path]:
    """`_build/<env>/lib/<app>/ebin/<app>.app` for every env, dev first."""
    build = root / "_build"
    if not build.is_dir():
        return []
    envs = sorted((p.name for p in build.iterdir() if p.is_dir()), key=lambda e: (e != "dev", e))
    files = (build / env / "lib" / app / "ebin" / f"{app}.app" for env in envs)
    return [f for f in files if f.is_file()]


def read_app_vsn(app_file: Path) -> str | None:
    """The `{vsn, "1.2.3"}` of an Erlang .app file (a string or a charlist), or None."""
    try:
        with app_file.open("rb") as fh:
            text = fh.read(MAX_APP_FILE_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None
    m = _APP_VSN.search(text)
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


def _elixir_pin(text: str) -> str | None:
    """A full version from an asdf/mise value: '1.18.4-otp-27' -> '1.18.4'."""
    value = re.sub(r"-otp-\d+$", "", text.strip())
    return value if try_parse_version(value) is not None else None


def _tool_versions_pin(path: Path) -> tuple[str | None, bool]:
    """(version, mentioned): mentioned is True when elixir is listed even if unusable."""
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        fields = line.split("#", 1)[0].split()
        if fields[:1] == ["elixir"]:
            pins = (_elixir_pin(f) for f in fields[1:])
            return next((p for p in pins if p), None), True
    return None, False


def _mise_pin(path: Path) -> tuple[str | None, bool]:
    tools = tomllib.loads(path.read_text(encoding="utf-8")).get("tools", {})
    value = tools.get("elixir") if isinstance(tools, dict) else None
    if value is None:
        return None, False
    if isinstance(value, dict):
        value = value.get("version")
    candidates = value if isinstance(value, list) else [value]
    pins = (_elixir_pin(c) for c in candidates if isinstance(c, str))
    return next((p for p in pins if p), None), True


_PIN_FILES = (
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
            if not path.is_file():
                continue
            try:
                version, mentioned = reader(path)
            except (OSError, ValueError) as exc:  # tomllib.TOMLDecodeError is a ValueError
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


# --------------------------------------------------------------------------- the chain


async def resolve_version(
    name: str,
    explicit: str | None,
    *,
    project_root: Path,
    registry: HexRegistry | None,
) -> ResolvedVersion:
    """Chooses the version of `name` whose docs to read, and says why.

    Raises UserInputError (bad name or version, or nothing to go on), PackageNotFound,
    VersionNotFound (an explicit version Hex does not list), RemoteError (Hex needed and
    unreachable).
    """
    name = validate_package_name(name)
    wanted = explicit.strip() if explicit and explicit.strip() else None
    if name in ELIXIR_APPS:
        return await _resolve_elixir_app(name, wanted, project_root)
    if wanted is not None and wanted.lower() == LATEST:
        return await _from_hex(name, registry, project_root, (), None, asked_latest=True)
    if wanted is not None:
        return await _resolve_explicit(name, wanted, registry)
    return await _resolve_from_project(name, project_root, registry)


async def _resolve_explicit(
    name: str, wanted: str, registry: HexRegistry | None
) -> ResolvedVersion:
    version = parse_version(wanted)
    if registry is None:
        notice = Notice("version_unverified", f"{name} {version} was not checked against hex.pm")
        return ResolvedVersion(name, str(version), VersionSource.EXPLICIT, notices=(notice,))
    try:
        info = await registry.package_info(name)
    except RemoteError as exc:
        notice = Notice(
            "registry_unreachable",
            f"could not check {name} {version} against hex.pm ({exc}); using it as given",
        )
        return ResolvedVersion(name, str(version), VersionSource.EXPLICIT, notices=(notice,))
    listed = [r.version for r in info.releases]
    for candidate in listed:
        if try_parse_version(candidate) == version:
            return ResolvedVersion(name, candidate, VersionSource.EXPLICIT)
    near = nearest_versions(version, listed)
    suggestion = f"the nearest that exist: {', '.join(near)}" if near else "it lists no releases"
    raise VersionNotFound(
        f"hex.pm has no version {version} of {name}; {suggestion}. "
        f"Pass one of them, or '{LATEST}' for the newest stable."
    )


async def _resolve_from_project(
    name: str, project_root: Path, registry: HexRegistry | None
) -> ResolvedVersion:
    notices: list[Notice] = []
    lock_path = find_lock(project_root)
    entry = _lock_entry(name, lock_path, notices)
    if entry is not None and lock_path is not None and entry.kind == "hex":
        return ResolvedVersion(
            name,
            entry.version or "",
            VersionSource.MIX_LOCK,
            detail=str(lock_path),
            lock_entry=entry,
            notices=tuple(notices),
        )
    app = entry.name if entry is not None else name
    built = build_version(app, project_root)
    if entry is not None:
        notices.append(_not_hex_notice(name, entry, lock_path, compiled=built is not None))
    if built is not None:
        version, app_file = built
        return ResolvedVersion(
            name,
            version,
            VersionSource.BUILD,
            detail=str(app_file),
            lock_entry=entry,
            notices=tuple(notices),
        )
    return await _from_hex(name, registry, project_root, tuple(notices), entry)


def _lock_entry(name: str, lock_path: Path | None, notices: list[Notice]) -> LockEntry | None:
    """The lock's entry for `name` (by app name, else by Hex package name), if usable."""
    if lock_path is None:
        return None
    try:
        entries = read_lock(lock_path)
    except MalformedLock as exc:
        notices.append(Notice("mixlock_unreadable", f"ignoring mix.lock: {exc}"))
        return None
    entry = entries.get(name) or next((e for e in entries.values() if e.package == name), None)
    if entry is not None and entry.kind == "hex" and try_parse_version(entry.version or "") is None:
        notices.append(
            Notice(
                "mixlock_bad_version",
                f"{lock_path} pins {name} to {entry.version!r}, which is not a version; "
                "ignoring it",
            )
        )
        return None
    return entry


def _not_hex_notice(name: str, entry: LockEntry, lock: Path | None, *, compiled: bool) -> Notice:
    where = f"a :{entry.kind} dependency in {lock}"
    origin = entry.repo or entry.path or "its source"
    if compiled:
        text = (
            f"{name} is {where} ({origin}), not a Hex release; its version comes from _build, "
            "and the docs are hex.pm's for that version, which may differ from your checkout"
        )
    else:
        text = (
            f"{name} is {where} ({origin}) and is not compiled yet; using hex.pm's latest "
            "stable, which may differ from your checkout. Run `mix compile` for its version"
        )
    return Notice("not_hex_dependency", text)


async def _from_hex(
    name: str,
    registry: HexRegistry | None,
    project_root: Path,
    notices: tuple[Notice, ...],
    entry: LockEntry | None,
    *,
    asked_latest: bool = False,
) -> ResolvedVersion:
    if registry is None:
        if asked_latest:
            raise UserInputError(
                f"'{LATEST}' needs hex.pm, which is not available here; pass a version of {name}"
            )
        raise UserInputError(
            f"cannot tell which version of {name} to use: it is not pinned in a mix.lock or "
            f"compiled in _build under {project_root}, and hex.pm is not available. "
            "Pass a version, like 1.4.5."
        )
    info = await registry.package_info(name)
    version, more = pick_latest(info)
    detail = f"'{LATEST}' requested" if asked_latest else "newest stable release on hex.pm"
    return ResolvedVersion(
        name,
        version,
        VersionSource.HEX_LATEST,
        detail=detail,
        lock_entry=entry,
        notices=notices + more,
    )


async def _resolve_elixir_app(name: str, wanted: str | None, project_root: Path) -> ResolvedVersion:
    notices: list[Notice] = []
    if wanted is not None and wanted.lower() != LATEST:
        return ResolvedVersion(name, str(parse_version(wanted)), VersionSource.EXPLICIT)
    if wanted is not None:
        notices.append(
            Notice(
                "elixir_latest",
                f"{name} ships with Elixir and has no 'latest' on hex.pm; "
                "using the project's Elixir",
            )
        )
    version, pin_file, pin_notices = pinned_elixir(project_root)
    notices.extend(pin_notices)
    if version is not None:
        return ResolvedVersion(
            name, version, VersionSource.TOOL_VERSIONS, detail=str(pin_file), notices=tuple(notices)
        )
    found = await elixir_on_path()
    if found is not None:
        version, exe = found
        detail = f"{exe} --version"
        return ResolvedVersion(
            name, version, VersionSource.ELIXIR_ON_PATH, detail=detail, notices=tuple(notices)
        )
    raise UserInputError(
        f"which Elixir version's docs for {name}? {name} ships with Elixir rather than Hex, "
        "so its version comes from the project's .tool-versions or mise.toml, or from "
        f"`elixir --version`, and none was found under {project_root}. "
        "Pass a version, like 1.18.4."
    )
