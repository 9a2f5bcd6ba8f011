"""The resolution chain: which version's docs to use, and why.

First match wins (`resolve_version`):

    explicit -> mix.lock -> _build/<env>/lib/<app>/ebin/<app>.app -> Hex latest stable

Elixir's own doc sets (elixir, eex, ex_unit, iex, logger, mix) are not Hex packages; their
chain is: explicit argument -> the project's pinned Elixir (.tool-versions, mise.toml) ->
`elixir --version` on PATH -> an error asking for a version.

Every lookup checks the project's files again (the lock parse is cached only while the
file is unchanged): a lock edited by `mix deps.update` while a server runs must change
the answer at once. An unusable source is a notice and the chain goes on.
"""

from __future__ import annotations

import asyncio
import difflib
from pathlib import Path

from hexlocal_core.errors import (
    NotFound,
    PackageNotFound,
    RemoteError,
    UserInputError,
    VersionNotFound,
)
from hexlocal_core.model import HexPackageInfo, LockEntry, Notice, ResolvedVersion, VersionSource
from hexlocal_core.notice_codes import NoticeCode
from hexlocal_core.ports import HexRegistry
from hexlocal_core.untrusted import shown
from hexlocal_core.versions.location import find_lock
from hexlocal_core.versions.lockfile import load_lock
from hexlocal_core.versions.names import ELIXIR_APPS, validate_package_name
from hexlocal_core.versions.probes import build_version, elixir_on_path, pinned_elixir
from hexlocal_core.versions.requirement import Requirement, best_match, parse_requirement
from hexlocal_core.versions.semver import (
    is_stable,
    nearest_versions,
    parse_version,
    pick_latest,
    try_parse_version,
)
from hexlocal_core.versions.terms import LockTooLarge, MalformedLock

__all__ = ["LATEST", "explain_missing_docs", "resolve_version", "why_no_docs"]

LATEST = "latest"


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
    try:
        return await _resolve(name, wanted, project_root, registry)
    except PackageNotFound as exc:
        raise PackageNotFound(f"{exc}{await _lock_names_like(name, project_root)}") from None


async def _resolve(
    name: str, wanted: str | None, project_root: Path, registry: HexRegistry | None
) -> ResolvedVersion:
    if name in ELIXIR_APPS:
        return await _resolve_elixir_app(name, wanted, project_root)
    if wanted is not None and wanted.lower() == LATEST:
        return await _from_hex(name, registry, project_root, (), None, asked_latest=True)
    requirement = parse_requirement(wanted) if wanted is not None else None
    if requirement is not None:
        return await _resolve_requirement(name, requirement, project_root, registry)
    if wanted is not None:
        return await _resolve_explicit(name, wanted, registry)
    return await _resolve_from_project(name, project_root, registry)


async def _resolve_requirement(
    name: str, requirement: Requirement, project_root: Path, registry: HexRegistry | None
) -> ResolvedVersion:
    """A requirement (`~> 1.4`, from mix.exs): the lock's pin when it satisfies it, else
    the newest release hex.pm lists that does."""
    said = f"'{requirement.text}'"
    notices: list[Notice] = []
    lock_path = find_lock(project_root)
    entry = await _lock_entry(name, lock_path, notices)
    pinned = try_parse_version(entry.version or "") if entry and entry.kind == "hex" else None
    if pinned is not None and requirement.matches(pinned) and lock_path is not None:
        notice = Notice(
            NoticeCode.REQUIREMENT_MATCHED, f"{said} is met by {pinned}, mix.lock's pin"
        )
        return ResolvedVersion(
            name,
            str(pinned),
            VersionSource.MIX_LOCK,
            detail=str(lock_path),
            lock_entry=entry,
            notices=(*notices, notice),
        )
    if registry is None:
        raise UserInputError(
            f"{said} needs hex.pm's release list to choose from, which is not available "
            f"here; pass an exact version of {name}, like 1.4.5"
        )
    listed = [r.version for r in (await registry.package_info(name)).releases]
    version = best_match(requirement, listed)
    if version is None:
        parsed = sorted(filter(None, map(try_parse_version, listed)), reverse=True)
        newest = ", ".join(str(v) for v in parsed[:3])
        raise VersionNotFound(
            f"no release of {name} on hex.pm meets {said}"
            + (f"; the newest: {newest}" if newest else "")
        )
    notice = Notice(
        NoticeCode.REQUIREMENT_MATCHED, f"{said} is met by {version}, the newest such release"
    )
    return ResolvedVersion(name, version, VersionSource.EXPLICIT, notices=(*notices, notice))


async def _resolve_explicit(
    name: str, wanted: str, registry: HexRegistry | None
) -> ResolvedVersion:
    version = parse_version(wanted)
    if registry is None:
        notice = Notice(
            NoticeCode.VERSION_UNVERIFIED, f"{name} {version} was not checked against hex.pm"
        )
        return ResolvedVersion(name, str(version), VersionSource.EXPLICIT, notices=(notice,))
    try:
        info = await registry.package_info(name)
    except RemoteError as exc:
        notice = Notice(
            NoticeCode.REGISTRY_UNREACHABLE,
            f"could not check {name} {version} against hex.pm ({exc}); using it as given",
        )
        return ResolvedVersion(name, str(version), VersionSource.EXPLICIT, notices=(notice,))
    listed = [r.version for r in info.releases]
    for candidate in listed:
        if try_parse_version(candidate) == version:
            return ResolvedVersion(name, candidate.strip(), VersionSource.EXPLICIT)
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
    entry = await _lock_entry(name, lock_path, notices)
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


async def _lock_names_like(name: str, project_root: Path) -> str:
    """` In the project's mix.lock: phoenix_live_view.` for a misspelt name, else ''."""
    lock_path = find_lock(project_root)
    if lock_path is None:
        return ""
    try:
        lock = await asyncio.to_thread(load_lock, lock_path)
    except (LockTooLarge, MalformedLock):
        return ""
    near = difflib.get_close_matches(name, [*lock.entries, *sorted(ELIXIR_APPS)], n=3, cutoff=0.75)
    return f" In the project's mix.lock: {', '.join(near)}." if near else ""


async def _lock_entry(name: str, lock_path: Path | None, notices: list[Notice]) -> LockEntry | None:
    """The lock's entry for `name` (by app name, else by Hex package name), if usable."""
    if lock_path is None:
        return None
    try:
        # A worker thread: a first parse of a large lock must not stall the event loop.
        lock = await asyncio.to_thread(load_lock, lock_path)
    except LockTooLarge as exc:  # too many bytes, or too many tokens
        notices.append(Notice(NoticeCode.MIXLOCK_TOO_LARGE, str(exc)))
        return None
    except MalformedLock as exc:
        notices.append(Notice(NoticeCode.MIXLOCK_UNREADABLE, f"ignoring mix.lock: {exc}"))
        return None
    entries = lock.entries
    entry = entries.get(name) or next((e for e in entries.values() if e.package == name), None)
    if entry is None and name in lock.problems:
        notices.append(
            Notice(
                NoticeCode.MIXLOCK_BAD_ENTRY,
                f"ignoring the lock's entry for {name}: {lock.problems[name]}",
            )
        )
        return None
    if entry is not None and entry.kind == "hex" and try_parse_version(entry.version or "") is None:
        notices.append(
            Notice(
                NoticeCode.MIXLOCK_BAD_VERSION,
                f"{lock_path} pins {name} to {shown(entry.version)}, which is not a version; "
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
    return Notice(NoticeCode.NOT_HEX_DEPENDENCY, text)


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
                NoticeCode.ELIXIR_LATEST,
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


async def explain_missing_docs(
    registry: HexRegistry, name: str, version: str, missing: VersionNotFound
) -> VersionNotFound:
    """`missing` (a docs tarball that is not there) after what hex.pm lists about the
    version: the pin is unknown, was published without docs, or the mirror lags.
    The client caches package info, so this is rarely a request of its own."""
    try:
        info = await registry.package_info(name)
    except (RemoteError, NotFound):
        return VersionNotFound(f"{missing} It may never have published docs; try another version.")
    # The reason first: a table cell (sync, list) shows only the start of the message.
    return VersionNotFound(f"{why_no_docs(info, version)} ({missing})")


def why_no_docs(info: HexPackageInfo, version: str) -> str:
    """Why there are no docs for `version`, read from the package's release list."""
    wanted = try_parse_version(version)
    listed = next(
        (r for r in info.releases if wanted and try_parse_version(r.version) == wanted), None
    )
    with_docs = [r.version for r in info.releases if r.has_docs and r.version != version]
    if wanted is not None and wanted.is_stable:
        # A stable pin is not helped by a pre-release of the next minor, close as it sorts.
        with_docs = [v for v in with_docs if is_stable(v)] or with_docs
    near = nearest_versions(version, with_docs, n=3)
    if listed is None:
        why = f"{info.name} {version} is not among the releases hex.pm lists"
    elif not listed.has_docs:
        why = f"{info.name} {version} was published without docs"
    else:
        why = f"hex.pm lists docs for {info.name} {version}, so the docs mirror may lag behind it"
    if not near:
        return f"{why}, and no other version of {info.name} has docs there."
    return (
        f"{why}; the nearest versions with docs: {', '.join(near)}. Ask for version {near[0]}"
        " to read those."
    )
