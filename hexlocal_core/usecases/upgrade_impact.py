"""`upgrade_impact`: what changes for this project's code when it moves one dependency.

Joins two halves hexlocal already has: the diff of two versions' docs (both tarballs
parsed in memory, as `diff_versions` does; nothing is indexed) and the project's uses of
the package (`upgrade_usage`: compiled calls, plus the source scan for macros). The
pure join is `upgrade_join`; changelog lines and requirement changes are
`upgrade_changelog`; the text form is `upgrade_text`.

What differs per kind of package is in `KIND_RULES`, one place: a Hex package is pinned
by mix.lock, has a latest stable release and release data on hex.pm; Elixir's own apps
are pinned by the Elixir the project runs and need the target named. OTP apps, once
they are packages, get a row here.

A second call with the same arguments and an unchanged project is answered from a small
cache of reports (keyed by the versions and every read file's size and mtime); the
parsed versions are cached as well, so a changed project costs only its own re-read.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

from attrs import frozen

from hexlocal_core.errors import PackageNotFound, RemoteError, UserInputError, VersionNotFound
from hexlocal_core.ingest.otp_source import OtpSource, is_otp_app
from hexlocal_core.lru import Lru
from hexlocal_core.model import DocItem, Notice, ResolvedVersion, VersionSource
from hexlocal_core.notice_codes import NoticeCode
from hexlocal_core.ports import HexRegistry, ReleaseRequirements
from hexlocal_core.threads import in_worker
from hexlocal_core.usecases.diff import (
    ApiEntry,
    ChangeKind,
    _entry_key,
    api_entries,
    compared_changes,
)
from hexlocal_core.usecases.locate import one_otp_app
from hexlocal_core.usecases.upgrade_changelog import (
    ChangelogVersion,
    RequirementChange,
    between,
    changelog_versions,
    from_changelog,
    from_releases,
)
from hexlocal_core.usecases.upgrade_join import Affected, NotAffected, Texts, join
from hexlocal_core.usecases.upgrade_usage import BeamReader, ProjectUses, project_uses
from hexlocal_core.usecases.version_read import VersionReader
from hexlocal_core.versions import (
    ELIXIR_APPS,
    LATEST,
    LockEntry,
    find_lock,
    find_mix_root,
    load_lock,
    try_parse_version,
    validate_package_name,
)
from hexlocal_core.versions.terms import MalformedLock

DOCS_CACHE = 4  # parsed versions (a pair per question; ecto's texts are ~0.6 MB)
REPORT_CACHE = 16


class PackageKind(StrEnum):
    HEX = "hex"
    ELIXIR = "elixir"  # an app that ships with Elixir: elixir, eex, ex_unit, iex, logger, mix
    OTP = "otp"  # an Erlang/OTP application: its version is the project's OTP release's


@frozen
class KindRules:
    locked: bool  # mix.lock pins it: a project that does not lock it cannot call it
    latest_on_hex: bool  # the default target is hex.pm's latest stable release
    release_data: bool  # hex.pm states each release's requirements
    project_sources: tuple[VersionSource, ...]  # where "the version the project runs" comes from


KIND_RULES = {
    PackageKind.HEX: KindRules(True, True, True, (VersionSource.MIX_LOCK, VersionSource.BUILD)),
    PackageKind.ELIXIR: KindRules(
        False, False, False, (VersionSource.TOOL_VERSIONS, VersionSource.ELIXIR_ON_PATH)
    ),
    PackageKind.OTP: KindRules(False, False, False, (VersionSource.OTP,)),
}
# What a kind without a default target asks for.
TARGET_EXAMPLE = {
    PackageKind.ELIXIR: "ships with Elixir, so hex.pm lists no latest release of it; pass the "
    "version to move to, like 1.18.4",
    PackageKind.OTP: "is an OTP application: pass the OTP release to move to, like OTP-28.0 "
    "(its docs come from that release's doc tarball when it is not installed)",
}


def package_kind(name: str) -> PackageKind:
    if name in ELIXIR_APPS:
        return PackageKind.ELIXIR
    return PackageKind.OTP if is_otp_app(name) else PackageKind.HEX


@frozen
class UpgradeReport:
    package: str
    from_version: str
    to_version: str
    from_source: str
    to_source: str
    affected: tuple[Affected, ...]
    not_affected: tuple[NotAffected, ...]
    changelog: tuple[ChangelogVersion, ...]
    requirements: tuple[RequirementChange, ...]
    notices: tuple[Notice, ...]
    diff_counts: dict[str, int]
    beam_sites: int
    source_sites: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "package": self.package,
            "from": self.from_version,
            "to": self.to_version,
            "from_source": self.from_source,
            "to_source": self.to_source,
            "affected": [a.to_dict() for a in self.affected],
            "not_affected": [n.to_dict() for n in self.not_affected],
            "changelog": [c.to_dict() for c in self.changelog],
            "requirements": [r.to_dict() for r in self.requirements],
            "notices": [n.to_dict() for n in self.notices],
            "diff": dict(self.diff_counts),
            "call_sites": {"beams": self.beam_sites, "source": self.source_sites},
        }


@frozen
class VersionDocs:
    """One version's docs as the join needs them."""

    entries: tuple[ApiEntry, ...]
    texts: Texts
    changelog: tuple[ChangelogVersion, ...]
    reader: str  # where the docs were read from (diff.compared_changes)


def read_version_docs(items: Sequence[DocItem], reader: str) -> VersionDocs:
    texts: dict[tuple[str, str], list[str]] = {}
    sections: list[tuple[str, str]] = []
    for item in items:
        _, group, name, _own = _entry_key(item)
        texts.setdefault((group, name), []).append(item.markdown)
        if item.module is None and "changelog" in item.page.lower():
            sections.append((item.title, item.markdown))
    return VersionDocs(
        api_entries(items),
        {key: "\n\n".join(parts) for key, parts in texts.items()},
        tuple(changelog_versions(sections)),
        reader,
    )


class UpgradeImpact:
    def __init__(
        self,
        registry: HexRegistry,
        project_root: Path,
        max_docs_bytes: int,
        *,
        otp: OtpSource | None = None,
    ) -> None:
        self._versions = VersionReader(registry, project_root, max_docs_bytes, otp)
        # hex.pm's release data, when the registry serves it (a mirror or a fake may not)
        self._releases = registry if isinstance(registry, ReleaseRequirements) else None
        self._project_root = project_root
        self._docs: Lru[tuple[str, str], VersionDocs] = Lru(DOCS_CACHE)
        self._reports: Lru[tuple[Any, ...], UpgradeReport] = Lru(REPORT_CACHE)
        self._beams = BeamReader()

    async def impact(
        self, package: str, to_version: str | None = None, *, from_version: str | None = None
    ) -> UpgradeReport:
        name = validate_package_name(
            one_otp_app(package, "hexlocal upgrade-impact stdlib OTP-28.0")
        )
        rules = KIND_RULES[package_kind(name)]
        mix_root = find_mix_root(self._project_root) or self._project_root
        lock = await in_worker(lambda: _lock_entries(self._project_root))
        old, notices = await self._from(name, rules, lock, _given(from_version))
        new = await self._to(name, rules, _given(to_version))
        notices += (*old.notices, *new.notices)
        locked = {k: e.version for k, e in lock.items() if e.kind == "hex" and e.version}
        before = await self._version_docs(old)
        after = await self._version_docs(new)
        usage = await in_worker(
            lambda: project_uses(mix_root, before.entries, after.entries, self._beams)
        )
        key = (name, old.version, new.version, usage.fingerprint)
        cached = self._reports.get(key)
        if cached is not None:
            return cached
        report = await self._report(name, old, new, before, after, usage, locked, notices)
        return self._reports.put(key, report)

    async def _report(
        self,
        name: str,
        old: ResolvedVersion,
        new: ResolvedVersion,
        before: VersionDocs,
        after: VersionDocs,
        usage: ProjectUses,
        locked: dict[str, str],
        notices: tuple[Notice, ...],
    ) -> UpgradeReport:
        same = _same(old.version, new.version)
        changes, said = (
            ((), ())
            if same
            else compared_changes(name, (old.version, before), (new.version, after))
        )
        notices += said
        affected, spared = join(
            changes,
            before.entries,
            after.entries,
            usage.uses,
            texts=(before.texts, after.texts),
            from_version=old.version,
        )
        used = {u.module for u in usage.uses}
        changelog = between(after.changelog, old.version, new.version, used)
        requirements = from_changelog(changelog, locked, name)
        if self._releases is not None and KIND_RULES[package_kind(name)].release_data:
            found, more = await self._release_requirements(name, old.version, new.version, locked)
            seen = {r.package for r in found}
            requirements = [*found, *(r for r in requirements if r.package not in seen)]
            notices += more
        notices += usage.notices
        if same:
            notices += (Notice(NoticeCode.SAME_VERSION, f"{name} is already at {new.version}"),)
        if not after.changelog:
            notices += (
                Notice(
                    NoticeCode.NO_CHANGELOG, f"{name} {new.version}'s docs have no changelog page"
                ),
            )
        counts = {str(kind): 0 for kind in ChangeKind}
        for change in changes:
            counts[str(change.kind)] += 1
        return UpgradeReport(
            package=name,
            from_version=old.version,
            to_version=new.version,
            from_source=old.source.value,
            to_source=new.source.value,
            affected=affected,
            not_affected=spared,
            changelog=changelog,
            requirements=tuple(requirements),
            notices=notices,
            diff_counts=counts,
            beam_sites=usage.beam_sites,
            source_sites=usage.source_sites,
        )

    async def _from(
        self, name: str, rules: KindRules, lock: dict[str, LockEntry], wanted: str | None
    ) -> tuple[ResolvedVersion, tuple[Notice, ...]]:
        """The version the project runs; a package it does not lock needs `from_version`."""
        in_lock = name in lock or any(e.package == name for e in lock.values())
        notices: tuple[Notice, ...] = ()
        if rules.locked and not in_lock:
            notices = (
                Notice(
                    NoticeCode.NOT_LOCKED,
                    f"the project's mix.lock does not pin {name}, so no code of the project "
                    f"can be calling it: this is the diff only (diff_versions lists every "
                    f"change)",
                ),
            )
        if wanted is not None:
            return await self._resolve(name, wanted), notices
        resolved = await self._resolve(name, None)
        if resolved.source not in rules.project_sources:
            raise UserInputError(
                f"the project does not lock or compile {name}, so there is no version to "
                f"move from; pass the version to compare from (from_version / --from), or "
                f"use `hexlocal diff {name} FROM TO`"
            )
        return resolved, notices

    async def _to(self, name: str, rules: KindRules, wanted: str | None) -> ResolvedVersion:
        if wanted is None and not rules.latest_on_hex:
            raise UserInputError(f"{name} {TARGET_EXAMPLE[package_kind(name)]}")
        return await self._resolve(name, wanted or LATEST)

    async def _resolve(self, name: str, wanted: str | None) -> ResolvedVersion:
        return await self._versions.resolve(name, wanted)

    async def _version_docs(self, resolved: ResolvedVersion) -> VersionDocs:
        key = (resolved.name, resolved.version)
        cached = self._docs.get(key)
        if cached is not None:
            return cached
        read = await self._versions.read(resolved)
        docs = await in_worker(lambda: read_version_docs(read.items, read.reader))
        return self._docs.put(key, docs)

    async def _release_requirements(
        self, name: str, old: str, new: str, locked: dict[str, str]
    ) -> tuple[list[RequirementChange], tuple[Notice, ...]]:
        assert self._releases is not None
        try:
            after = await self._releases.release_requirements(name, new)
        except (VersionNotFound, PackageNotFound):
            return [], ()
        except RemoteError as exc:
            return [], (
                Notice(NoticeCode.RELEASE_DATA_UNAVAILABLE, f"hex.pm's release data: {exc}"),
            )
        try:
            before: dict[str, str] | None = dict(
                await self._releases.release_requirements(name, old)
            )
        except (VersionNotFound, PackageNotFound, RemoteError):
            before = None
        return from_releases(before, after, locked), ()


def _lock_entries(project_root: Path) -> dict[str, LockEntry]:
    path = find_lock(project_root)
    if path is None:
        return {}
    try:
        return dict(load_lock(path).entries)
    except (MalformedLock, OSError):
        return {}  # resolution reports a broken lock in its own notices


def _given(version: str | None) -> str | None:
    return version.strip() if version and version.strip() else None


def _same(a: str, b: str) -> bool:
    pa, pb = try_parse_version(a), try_parse_version(b)
    return a == b if pa is None or pb is None else pa == pb
