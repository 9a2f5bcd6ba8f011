"""Erlang/OTP applications as packages: which OTP the project runs, an application's
version in it, and where its docs are read from.

An OTP application (erts, kernel, stdlib, crypto, ...) is a package named by the app, at
the app's own version (stdlib 6.2.2.1 in OTP 27.3.4.1). The release comes from an explicit
version (an app version or an OTP release), else the project's pin (`.tool-versions`,
`mise.toml`), else the OTP installed (`versions/otp_probe.find_otp`). Its docs come from the
first source that has them:

1. the install's beams: OTP >= 27 compiles `-moduledoc`/`-doc` into each beam (no download);
2. the install's `lib/<app>-<vsn>/doc/chunks/*.chunk` (OTP 23-26, and EDoc-documented
   modules of later releases), erlang+html turned into markdown;
3. the release's doc tarball, `otp_doc_html_<vsn>.tar.gz` (OTP >= 27, one download for
   every app of the release), from OTP_DOCS_MIRROR;
4. otherwise a clear error naming what is missing and the command that installs it.

Refs are ExDoc's whichever source answered (`ets.html#new/2`), links go to erlang.org.
Each function that Elixir wraps (`:erlang.monitor/2`, by `Process.monitor/1`) gains its
wrapper's doc as a last section, read from the installed Elixir (`elixir_wrappers.py`).
What the machine says is read again at most every PROBE_TTL_S (finding an OTP may start
`erl`), and at once when the project's pin changes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from attrs import evolve, frozen

from hexlocal_core.config import Settings
from hexlocal_core.errors import NotFound, UserInputError, VersionNotFound
from hexlocal_core.ingest.beam import BeamItems, items_from_beam_dir, items_from_chunk_dir
from hexlocal_core.ingest.beam_file import MAX_BEAM_BYTES, BeamSkipped, chunks_of, read_capped
from hexlocal_core.ingest.beam_sources import find_elixir_lib
from hexlocal_core.ingest.elixir_wrappers import WRAPPER_APPS, Wrappers, with_wrappers, wrappers_in
from hexlocal_core.ingest.otp_links import otp_link
from hexlocal_core.ingest.pipeline import IngestRequest
from hexlocal_core.model import Notice, ResolvedVersion, SourceKind, VersionSource
from hexlocal_core.notice_codes import NoticeCode
from hexlocal_core.ports import OtpDocsSource
from hexlocal_core.threads import in_worker
from hexlocal_core.untrusted import clip
from hexlocal_core.versions.otp import (
    OTP_APPS,
    OtpInstall,
    otp_version_for,
    parse_otp_release,
    release_matches,
)
from hexlocal_core.versions.otp_apps import ModuleOwners, module_apps, project_otp_apps
from hexlocal_core.versions.otp_probe import OtpFound, find_otp, pinned_otp

log = logging.getLogger("hexlocal.ingest.otp")

PROBE_TTL_S = 30.0
FIRST_TARBALL_MAJOR = 27  # the first release whose doc tarball is ExDoc output
INSTALL_DOCS = (
    "install them: `apt-get install erlang-doc` (Debian, Ubuntu), or build OTP with its docs "
    "(`KERL_BUILD_DOCS=yes asdf install erlang <vsn>`, `make docs install-docs` from source)"
)


@frozen
class OtpPaths:
    """Where to look for the project's OTP (settings, read once by `build()`)."""

    project_root: Path
    otp_root: Path | None  # HEXLOCAL_OTP_ROOT
    path: str | None  # the PATH `erl` is looked for on (None: the process's)
    home: Path | None  # for asdf's and mise's installs
    elixir_home: Path | None = None  # ELIXIR_HOME (else the `elixir` on `path`)


def otp_paths(settings: Settings) -> OtpPaths:
    return OtpPaths(
        settings.project_root,
        settings.otp_root,
        path=None,
        home=_home(),
        elixir_home=settings.elixir_home,
    )


def _home() -> Path | None:
    try:
        return Path.home()
    except (KeyError, RuntimeError):  # no HOME and no passwd entry
        return None


def is_otp_app(name: str) -> bool:
    return name in OTP_APPS


class OtpSource:
    """The project's OTP for the use cases: resolution, reading, module owners."""

    def __init__(
        self,
        docs: OtpDocsSource | None,
        paths: OtpPaths,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._docs = docs
        self._paths = paths
        self._clock = clock
        self._found: tuple[float, str | None, OtpFound] | None = None
        self._owners: tuple[Path, ModuleOwners] | None = None
        self._release_apps: dict[str, Mapping[str, str]] = {}
        self._wrappers: tuple[tuple[Path, ...], str, Wrappers] | None = None

    async def found(self) -> OtpFound:
        """The project's OTP as the machine says now (cached PROBE_TTL_S, per pin)."""
        root = self._paths.project_root
        pinned, _, _ = await in_worker(lambda: pinned_otp(root))
        now = self._clock()
        if self._found is not None:
            at, pin, found = self._found
            if pin == pinned and now - at < PROBE_TTL_S:
                return found
        p = self._paths
        found = await find_otp(root, otp_root=p.otp_root, path=p.path, home=p.home)
        self._found = (now, pinned, found)
        return found

    # -- resolution -----------------------------------------------------------------------

    async def resolve(self, app: str, wanted: str | None) -> ResolvedVersion:
        """`app` at the version the project's OTP (or `wanted`) means.

        Raises NotFound (no OTP to go on, or the app is not part of the release),
        UserInputError (a version that is neither an app version nor a release),
        VersionNotFound and RemoteError (the doc tarball was needed and is not there).
        """
        found = await self.found()
        install = found.install
        notices = tuple(found.notices)
        if wanted is not None:
            version = otp_version_for(app, wanted, install)
            if version.release is None:
                raise NotFound(
                    f"{app} {clip(wanted, 40)} is not the installed {app}"
                    + (f" ({install.apps.get(app)}, OTP {install.release})" if install else "")
                    + "; ask for an OTP release instead (like OTP-27.3.4.1), whose docs "
                    "hexlocal can read from its doc tarball"
                )
            release = version.release
            if install is not None and release_matches(install.release, release):
                return self._installed(app, install, found, notices)
            return await self._from_tarball(app, release, "explicit", notices)
        if install is not None and found.pin_installed:
            return self._installed(app, install, found, notices)
        if found.pinned is not None:  # pinned, not installed: its doc tarball, if any
            return await self._from_tarball(app, found.pinned, "pinned", notices)
        raise NotFound(
            "no Erlang/OTP found for this project: install Erlang (its `erl` on PATH), pin "
            "it (`erlang 27.3.4.1` in .tool-versions), or set HEXLOCAL_OTP_ROOT to an "
            "install's root"
        )

    def _installed(
        self, app: str, install: OtpInstall, found: OtpFound, notices: tuple[Notice, ...]
    ) -> ResolvedVersion:
        vsn = install.apps.get(app)
        if vsn is None:
            raise NotFound(f"{app} is not an application of OTP {install.release} ({install.root})")
        how = f" ({found.how})" if found.how else ""
        return ResolvedVersion(
            app,
            vsn,
            VersionSource.OTP,
            detail=f"OTP {install.release} at {install.root}{how}",
            otp_release=install.release,
            notices=notices,
        )

    async def _from_tarball(
        self, app: str, release: str, why: str, notices: tuple[Notice, ...]
    ) -> ResolvedVersion:
        full = parse_otp_release(release) or release
        apps = await self._apps_of_release(full)
        vsn = apps.get(app)
        if vsn is None:
            raise NotFound(f"{app} is not an application of OTP {full}")
        return ResolvedVersion(
            app,
            vsn,
            VersionSource.OTP,
            detail=f"OTP {full} ({why}; not installed: docs from its doc tarball)",
            otp_release=full,
            notices=notices,
        )

    async def _apps_of_release(self, release: str) -> Mapping[str, str]:
        if release in self._release_apps:
            return self._release_apps[release]
        data = await self._tarball(release)
        from hexlocal_core.ingest.otp_tarball import release_apps

        apps = await in_worker(lambda: release_apps(data))
        self._release_apps[release] = apps
        return apps

    async def _tarball(self, release: str) -> bytes:
        major = _major(release)
        if major < FIRST_TARBALL_MAJOR:
            raise VersionNotFound(
                f"OTP {release} is not installed here and publishes no doc tarball hexlocal "
                f"reads (only OTP {FIRST_TARBALL_MAJOR} and later do); {INSTALL_DOCS}"
            )
        if "." not in release:
            raise UserInputError(
                f"OTP {release} names a major release only; its doc tarball needs the full "
                "version (like 27.3.4.1): pin it in .tool-versions, or pass it as the version"
            )
        if self._docs is None:
            raise VersionNotFound(f"OTP {release} is not installed and no doc source is set")
        return await self._docs.fetch_release_docs(release)

    # -- reading --------------------------------------------------------------------------

    async def read(self, resolved: ResolvedVersion) -> IngestRequest:
        """The items of `resolved` (an OTP app), from the first source that has them."""
        app, vsn, release = resolved.name, resolved.version, resolved.otp_release or ""
        major = _major(release)
        found = await self.found()
        install = found.install
        lib = install.lib_dirs.get(app) if install is not None else None
        if install is not None and lib is not None and install.apps.get(app) == vsn:
            link = otp_link(app, major)
            items = await in_worker(lambda: installed_items(lib, app, vsn, link))
            if items.items:
                return await self._with_wrappers(_request(app, vsn, items, release, str(lib)))
            log.info("%s %s: no docs in %s (skipped %s)", app, vsn, lib, items.skipped)
        if major >= FIRST_TARBALL_MAJOR and self._docs is not None:
            data = await self._tarball(release)
            from hexlocal_core.ingest.otp_tarball import app_items

            parsed = await in_worker(lambda: app_items(data, app, version=vsn, otp_major=major))
            notice = Notice(
                NoticeCode.DOCS_FROM_OTP_TARBALL,
                f"{app} {vsn}: the docs of OTP {release} are not installed here; they were read "
                "from the release's doc tarball.",
            )
            request = IngestRequest(
                package=app,
                version=vsn,
                source=SourceKind.HEXDOCS.value,
                items=parsed.items,
                meta={"otp_release": release, "from": "otp_doc_html"},
                notices=(notice,),
            )
            return await self._with_wrappers(request)
        where = f" in {lib}" if lib is not None else ""
        raise NotFound(
            f"the docs of {app} {vsn} (OTP {release}) are not installed{where}; {INSTALL_DOCS}"
        )

    async def _with_wrappers(self, request: IngestRequest) -> IngestRequest:
        """The request's functions with the docs of the Elixir functions wrapping them,
        when an Elixir is installed (its version recorded in the request's meta)."""
        elixir, wrappers = await self.elixir_wrappers()
        if not wrappers:
            return request
        items = await in_worker(lambda: with_wrappers(request.items, wrappers))
        meta = {**(request.meta or {}), "elixir_wrappers": elixir}
        return evolve(request, items=items, meta=meta)

    async def elixir_wrappers(self) -> tuple[str, Wrappers]:
        """(Elixir's version, the OTP functions its apps wrap), read once per install;
        ("", {}) when no Elixir is found."""
        p = self._paths
        libs = [find_elixir_lib(app, p.elixir_home, path=p.path) for app in WRAPPER_APPS]
        found = [lib for lib in libs if lib is not None]
        if not found:
            return "", {}
        ebins = tuple(lib.ebin for lib in found)
        if self._wrappers is None or self._wrappers[0] != ebins:
            wrappers = await in_worker(lambda: wrappers_in(found))
            self._wrappers = (ebins, found[0].version, wrappers)
        return self._wrappers[1], self._wrappers[2]

    # -- what the project's OTP holds -----------------------------------------------------

    async def owners(self) -> ModuleOwners | None:
        """Which OTP app owns each module, from the install's `.app` files (cached per
        install)."""
        install = (await self.found()).install
        if install is None:
            return None
        if self._owners is None or self._owners[0] != install.root:
            owners = await in_worker(lambda: module_apps(install))
            self._owners = (install.root, owners)
        return self._owners[1]

    async def project_apps(self) -> tuple[tuple[str, str | None], ...]:
        """(app, version) of each OTP app the project uses; version None when it is not
        known without a download (a pinned release that is not installed)."""
        found = await self.found()
        install = found.install if found.pin_installed else None
        root = self._paths.project_root
        apps = await in_worker(lambda: project_otp_apps(root, install))
        return tuple((app, install.apps.get(app) if install else None) for app in apps)


def installed_docs(install: OtpInstall) -> str | None:
    """Where the install keeps its docs, told by stdlib's `lists` (`doctor`): "in the beams"
    (OTP >= 27), "in doc/chunks" (OTP 23-26 with the docs installed), else None."""
    lib = install.lib_dirs.get("stdlib")
    if lib is None:
        return None
    try:
        if "Docs" in chunks_of(read_capped(lib / "ebin" / "lists.beam", MAX_BEAM_BYTES)):
            return "in the beams"
    except BeamSkipped:
        pass
    return "in doc/chunks" if (lib / "doc" / "chunks" / "lists.chunk").is_file() else None


def installed_items(lib: Path, app: str, vsn: str, link: Callable[[str], str]) -> BeamItems:
    """The app's docs in its install folder: its beams' Docs chunks, then `doc/chunks`
    files for the modules the beams leave undocumented."""
    beams = items_from_beam_dir(lib / "ebin", package=app, version=vsn, link=link)
    chunks_dir = lib / "doc" / "chunks"
    if not chunks_dir.is_dir():
        return beams
    from_chunks = items_from_chunk_dir(chunks_dir, package=app, version=vsn, link=link)
    have = {item.module for item in beams.items}
    extra = tuple(i for i in from_chunks.items if i.module not in have)
    skipped = dict(beams.skipped)
    if beams.items:  # the beams carry docs: a module they lack is not "undocumented"
        skipped.pop("no_docs_chunk", None)
    modules = beams.modules + len({i.module for i in extra})
    return BeamItems(beams.items + extra, skipped, modules)


def _request(app: str, vsn: str, items: BeamItems, release: str, lib: str) -> IngestRequest:
    return IngestRequest(
        package=app,
        version=vsn,
        source=SourceKind.BEAM.value,
        items=items.items,
        meta={"otp_release": release, "lib": lib},
        skipped=dict(items.skipped),
    )


def _major(release: str) -> int:
    head = (parse_otp_release(release) or release).split(".", 1)[0].split("-", 1)[0]
    return int(head) if head.isdigit() else 0


def otp_reader(request: IngestRequest) -> str:
    """Where an OTP app's items were read from, in words (two readers render the same
    docs differently: `usecases.diff.compared_changes`)."""
    meta = request.meta or {}
    if request.source == SourceKind.BEAM.value:
        return f"the install ({meta.get('lib', 'its beams')})"
    release = meta.get("otp_release")
    return f"OTP {release}'s doc tarball" if release else "the release's doc tarball"


def docs_base(app: str, release: str) -> str:
    """Where `app`'s docs of OTP `release` start on erlang.org (its links' common base)."""
    return otp_link(app, _major(release))("")
