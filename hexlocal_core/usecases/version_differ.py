"""`diff_versions`, the use case: resolves both versions, reads each one's items
(`usecases.version_read`, as `upgrade_impact` reads them; each version's summary is kept,
so paging through one diff downloads each tarball once per process), diffs them with the
pure functions of `usecases.diff` and pages the answer.
"""

from __future__ import annotations

from pathlib import Path

from attrs import field, frozen

from hexlocal_core.errors import PackageNotFound, RemoteError, UserInputError
from hexlocal_core.index.seam import DocsStore
from hexlocal_core.ingest.otp_source import OtpSource
from hexlocal_core.lru import Lru
from hexlocal_core.model import Notice, ResolvedVersion, VersionSource
from hexlocal_core.notice_codes import NoticeCode
from hexlocal_core.ports import HexRegistry
from hexlocal_core.screening import screen_values
from hexlocal_core.threads import in_worker
from hexlocal_core.usecases.diff import (
    ApiEntry,
    DiffSide,
    VersionDiff,
    api_entries,
    check_paging,
    compared_changes,
    count_kinds,
    page_changes,
)
from hexlocal_core.usecases.locate import one_otp_app
from hexlocal_core.usecases.version_read import VersionRead, VersionReader
from hexlocal_core.versions import (
    ELIXIR_APPS,
    LATEST,
    try_parse_version,
    validate_package_name,
)

CACHE_VERSIONS = 8  # parsed versions kept per process (a summary is ~0.3 MB for ecto)
# Versions the project runs: a default `from` taken from these needs no indexed copy.
_PROJECT_SOURCES = (
    VersionSource.MIX_LOCK,
    VersionSource.BUILD,
    VersionSource.TOOL_VERSIONS,
    VersionSource.ELIXIR_ON_PATH,
    VersionSource.OTP,  # an OTP application, at the project's OTP release
)


@frozen
class _Parsed:
    entries: tuple[ApiEntry, ...]
    base_url: str
    reader: str  # where the docs were read from (see compared_changes)

    @classmethod
    def of(cls, read: VersionRead) -> _Parsed:
        return cls(api_entries(read.items), read.base_url, read.reader)


@frozen
class _Side:
    resolved: ResolvedVersion
    notices: tuple[Notice, ...] = field(factory=tuple)


class VersionDiffer:
    """Resolves both versions, reads each one's items (cached), diffs and pages."""

    def __init__(
        self,
        store: DocsStore,
        registry: HexRegistry,
        *,
        project_root: Path,
        max_docs_bytes: int,
        cache_size: int = CACHE_VERSIONS,
        otp: OtpSource | None = None,
    ) -> None:
        self._store = store
        self._registry = registry
        self._versions = VersionReader(registry, project_root, max_docs_bytes, otp)
        self._cache: Lru[tuple[str, str], _Parsed] = Lru(cache_size)

    async def diff(
        self,
        package: str,
        from_version: str | None,
        to_version: str | None,
        *,
        kind: str | None,
        limit: int,
        offset: int,
    ) -> VersionDiff:
        kind, limit, offset = check_paging(kind, limit, offset)
        name = validate_package_name(
            one_otp_app(package, "hexlocal diff stdlib OTP-27.3.4.1 OTP-28.0")
        )
        old = await self._from_side(name, _given(from_version))
        new = await self._to_side(name, _given(to_version))
        notices = (*old.resolved.notices, *new.resolved.notices)
        docs_url = await self._docs_html_url(name)
        before = await self._parsed(old.resolved, docs_url)
        same = _same_version(old.resolved.version, new.resolved.version)
        after = before if same else await self._parsed(new.resolved, docs_url)
        if same:
            notices += (
                Notice(
                    NoticeCode.SAME_VERSION,
                    f"both sides are {name} {old.resolved.version}; pass the versions to "
                    "compare (FROM TO)",
                ),
            )
        changes, said = (
            ((), ())
            if same
            else compared_changes(
                name, (old.resolved.version, before), (new.resolved.version, after)
            )
        )
        notices += said
        page, flagged = screen_values(
            page_changes(changes, kind=kind, limit=limit, offset=offset),
            ("name", "from_signature", "to_signature", "deprecated"),
            lambda c: f"The entry {c.module} {c.name} ({c.to_url or c.from_url})",
            "the package's docs",
        )
        return VersionDiff(
            package=name,
            from_side=_side(old.resolved, before.base_url),
            to_side=_side(new.resolved, after.base_url),
            counts=count_kinds(changes),
            changes=tuple(page),
            kind=kind,
            limit=limit,
            offset=offset,
            notices=notices + tuple(flagged),
        )

    async def _from_side(self, name: str, wanted: str | None) -> _Side:
        """`wanted`, else the version the project runs, else the indexed one."""
        if wanted is not None:
            return _Side(await self._resolve(name, wanted))
        try:
            resolved = await self._resolve(name, None)
        except (UserInputError, RemoteError):
            resolved = None
        if resolved is not None and resolved.source in _PROJECT_SOURCES:
            return _Side(resolved)
        indexed = self._store.package(name)
        if indexed is not None:
            return _Side(ResolvedVersion(name, indexed.version, VersionSource.INDEXED))
        raise UserInputError(
            f"nothing pins {name} here (no mix.lock entry, nothing compiled, nothing indexed), "
            f"so there is no version to diff from; pass one: `hexlocal diff {name} FROM [TO]`"
        )

    async def _to_side(self, name: str, wanted: str | None) -> _Side:
        if wanted is None and name in ELIXIR_APPS:
            raise UserInputError(
                f"{name} ships with Elixir, so hex.pm lists no latest release of it; pass "
                "the version to compare with, like 1.18.4"
            )
        if wanted is None and self._versions.reads_otp(name):
            raise UserInputError(
                f"{name} is an OTP application: pass the OTP release to compare with, like "
                "OTP-27.3.4.1 (its docs come from that release's doc tarball when it is not "
                "installed)"
            )
        return _Side(await self._resolve(name, wanted or LATEST))

    async def _resolve(self, name: str, wanted: str | None) -> ResolvedVersion:
        return await self._versions.resolve(name, wanted)

    async def _docs_html_url(self, name: str) -> str | None:
        if name in ELIXIR_APPS or self._versions.reads_otp(name):
            return None
        try:
            return (await self._registry.package_info(name)).docs_html_url
        except (RemoteError, PackageNotFound):
            return None

    async def _parsed(self, resolved: ResolvedVersion, docs_html_url: str | None) -> _Parsed:
        key = (resolved.name, resolved.version)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        read = await self._versions.read(resolved, docs_html_url)
        return self._cache.put(key, await in_worker(lambda: _Parsed.of(read)))


def _given(version: str | None) -> str | None:
    return version.strip() if version and version.strip() else None


def _same_version(a: str, b: str) -> bool:
    pa, pb = try_parse_version(a), try_parse_version(b)
    return a == b if pa is None or pb is None else pa == pb


def _side(resolved: ResolvedVersion, base_url: str) -> DiffSide:
    return DiffSide(resolved.version, resolved.source.value, base_url)
