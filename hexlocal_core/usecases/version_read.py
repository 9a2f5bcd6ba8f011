"""One package version's doc items, for the use cases that compare two versions
(`diff_versions`, `upgrade_impact`): which version a request means, and its items.

An OTP application's versions are OTP releases, read by `OtpSource` (the install's beams
or `.chunk` files, else the release's doc tarball); any other package's come from its
HexDocs tarball, parsed in memory. Nothing is embedded or written. Each use case keeps its
own summary of the items (`lru.Lru`), never the items themselves.
"""

from __future__ import annotations

import logging
from pathlib import Path

from attrs import frozen

from hexlocal_core.errors import VersionNotFound
from hexlocal_core.ingest.otp_source import OtpSource, docs_base, is_otp_app, otp_reader
from hexlocal_core.model import DocItem, ResolvedVersion, VersionSource
from hexlocal_core.ports import HexRegistry
from hexlocal_core.threads import in_worker
from hexlocal_core.versions import explain_missing_docs, resolve_version

log = logging.getLogger("hexlocal.versions")

HEXDOCS_READER = "its HexDocs tarball"  # where a Hex package's versions are read from


@frozen
class VersionRead:
    items: tuple[DocItem, ...]
    reader: str  # where they were read from, in words (`diff.compared_changes`)
    base_url: str  # where the version's docs start


class VersionReader:
    def __init__(
        self,
        registry: HexRegistry,
        project_root: Path,
        max_docs_bytes: int,
        otp: OtpSource | None = None,
    ) -> None:
        self._registry = registry
        self._project_root = project_root
        self._max_bytes = max_docs_bytes
        self._otp = otp

    def reads_otp(self, name: str) -> bool:
        return self._otp is not None and is_otp_app(name)

    async def resolve(self, name: str, wanted: str | None) -> ResolvedVersion:
        if self._otp is not None and is_otp_app(name):
            return await self._otp.resolve(name, wanted)
        return await resolve_version(
            name, wanted, project_root=self._project_root, registry=self._registry
        )

    async def read(
        self, resolved: ResolvedVersion, docs_html_url: str | None = None
    ) -> VersionRead:
        name, version = resolved.name, resolved.version
        if resolved.source is VersionSource.OTP and self._otp is not None:
            request = await self._otp.read(resolved)  # the install's beams, or the tarball
            base = docs_base(name, resolved.otp_release or "")
            return VersionRead(tuple(request.items), otp_reader(request), base)
        try:
            data = await self._registry.fetch_docs(name, version)
        except VersionNotFound as exc:
            raise await explain_missing_docs(self._registry, name, version, exc) from None
        max_bytes = self._max_bytes
        return await in_worker(lambda: _parse(data, name, version, max_bytes, docs_html_url))


def _parse(
    data: bytes, name: str, version: str, max_bytes: int, docs_html_url: str | None
) -> VersionRead:
    from hexlocal_core.ingest.hexdocs import hexdocs_base_url, parse_hexdocs
    from hexlocal_core.ingest.tarball import read_docs_tarball

    files = read_docs_tarball(data, max_bytes=max_bytes, package=name)
    parsed = parse_hexdocs(files, package=name, version=version, docs_html_url=docs_html_url)
    log.info("read %s %s for a comparison (%d items)", name, version, len(parsed.items))
    base = hexdocs_base_url(name, version, docs_html_url)
    return VersionRead(parsed.items, HEXDOCS_READER, base)
