"""An OTP release's doc tarball (`otp_doc_html_<vsn>.tar.gz`) -> one application's items.

From OTP 27 the tarball is ExDoc output per application, guides included:

    ./erts-15.2.7/doc/html/...          erts sits at the top
    ./lib/stdlib-6.2.2.1/doc/html/...   every other application under lib/
    ./doc/...                           the system documentation (no application)

    release_apps(data)                                 {app: version}, from the folder names
    app_items(data, app, version=..., otp_major=...)   that application's ParsedDocs
    app_docs_url(app, otp_major)                       where erlang.org publishes its pages

Each call reads the tarball through `read_docs_tarball` (its bounds refuse traversal,
links and bombs) keeping only what it needs: nothing but the names, or one application's
parser input with its folder prefix stripped. The items are then the HexDocs parser's over
that sub-tree, so their refs are ExDoc's own (`ets.html#new/2`, title `ets.new/2`): a hit
is the same whichever source answered. Links into another application or the system
docs (`../../../../lib/stdlib-6.2.2.1/doc/html/escript.html`) name a place only the
tarball has; they become erlang.org's
(`https://www.erlang.org/docs/27/apps/stdlib/escript.html`). Links within the application
stay relative, as in every HexDocs item.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping

from attrs import evolve

from hexlocal_core.errors import IngestError, UserInputError, VersionNotFound
from hexlocal_core.ingest.hexdocs import ParsedDocs, parse_hexdocs
from hexlocal_core.ingest.tarball import is_parser_input, read_docs_tarball
from hexlocal_core.untrusted import clip_repr

__all__ = ["ERLANG_DOCS_URL", "MAX_RELEASE_BYTES", "app_docs_url", "app_items", "release_apps"]

log = logging.getLogger("hexlocal.ingest.otp_tarball")

ERLANG_DOCS_URL = "https://www.erlang.org/docs"
# The whole release's uncompressed tar stream. OTP 27.3.4.1's, every application, is 98 MB
# in 2,285 entries (read_docs_tarball's MAX_MEMBERS allows 100,000): this leaves 2.6x for
# growth. Only one application's pages are ever held; the rest is decompressed and skipped.
MAX_RELEASE_BYTES = 256 * 1024 * 1024

_APP_NAME = r"[a-z][a-z0-9_]{0,63}"
_APP_VSN = r"[0-9]{1,6}(?:\.[0-9]{1,6}){0,7}"
_APP = re.compile(rf"^{_APP_NAME}$")
_VERSION = re.compile(rf"^{_APP_VSN}$")
# `erts-15.2.7/` or `lib/stdlib-6.2.2.1/`: an application's folder.
_FOLDER = re.compile(rf"^(?:(?P<erts>erts)|lib/(?P<app>{_APP_NAME}))-(?P<vsn>{_APP_VSN})/")
# A markdown link out of the application's folder, into another's or the system docs:
# `](../../../../lib/stdlib-6.2.2.1/doc/html/escript.html)`, `](../../../../doc/system/x.html)`.
_OUTWARD_LINK = re.compile(
    rf"\]\((?:\.\./)+(?:(?:(?P<erts>erts)|lib/(?P<app>{_APP_NAME}))-{_APP_VSN}/doc/html/"
    r"|(?P<doc>doc/))(?P<rest>[^)\s]*)\)"
)


def app_docs_url(app: str, otp_major: int) -> str:
    """The URL prefix of `app`'s pages on erlang.org; an item's link is this + its ref."""
    return f"{ERLANG_DOCS_URL}/{otp_major}/apps/{app}/"


def _folder(path: str) -> tuple[str, str] | None:
    """(app, version) of the application folder `path` lies in, or None."""
    match = _FOLDER.match(path)
    if match is None:
        return None
    return match["erts"] or match["app"], match["vsn"]


class _Folders:
    """The application folders a pass over the tarball met: app -> versions."""

    def __init__(self) -> None:
        self.seen: dict[str, set[str]] = {}

    def note(self, path: str) -> None:
        found = _folder(path)
        if found is not None:
            self.seen.setdefault(found[0], set()).add(found[1])


def release_apps(data: bytes, *, max_bytes: int = MAX_RELEASE_BYTES) -> Mapping[str, str]:
    """Each application of the release with its version, from the folder names
    (`erts-15.2.7/`, `lib/stdlib-6.2.2.1/`), sorted by name.

    Raises IngestError for a tarball that is not an OTP doc tarball or lists an
    application at two versions, UnsafeArchive for a hostile one.
    """
    folders = _Folders()

    def note_only(path: str) -> bool:
        folders.note(path)
        return False

    read_docs_tarball(data, max_bytes=max_bytes, package="OTP", keep=note_only)
    if not folders.seen:
        raise IngestError(
            "the OTP doc tarball holds no application folder (erts-<vsn>/ or "
            "lib/<app>-<vsn>/); is it an otp_doc_html_<vsn>.tar.gz of OTP 27 or later?"
        )
    twice = sorted(app for app, versions in folders.seen.items() if len(versions) > 1)
    if twice:
        shown = ", ".join(f"{app} ({' and '.join(sorted(folders.seen[app]))})" for app in twice)
        raise IngestError(f"the OTP doc tarball holds applications at two versions: {shown}")
    return {app: next(iter(versions)) for app, versions in sorted(folders.seen.items())}


def app_items(
    data: bytes,
    app: str,
    *,
    version: str,
    otp_major: int,
    max_bytes: int = MAX_RELEASE_BYTES,
) -> ParsedDocs:
    """The items of `app` at `version` in the doc tarball of OTP `otp_major`, linked to
    `https://www.erlang.org/docs/<otp_major>/apps/<app>/<ref>`.

    Raises UserInputError for a malformed app or version, VersionNotFound when the
    tarball has no such application folder, IngestError when it has no ExDoc docs for it,
    UnsafeArchive for a hostile tarball.
    """
    if not _APP.match(app):
        raise UserInputError(f"{clip_repr(app, 80)} is not an OTP application name")
    if not _VERSION.match(version):
        raise UserInputError(f"{clip_repr(version, 80)} is not an OTP application version")
    if otp_major < 1:
        raise UserInputError(f"{otp_major} is not an OTP major release")
    folder = f"erts-{version}/" if app == "erts" else f"lib/{app}-{version}/"
    prefix = f"{folder}doc/html/"
    folders = _Folders()

    def keep(path: str) -> bool:
        folders.note(path)
        return path.startswith(prefix) and is_parser_input(path[len(prefix) :])

    files = read_docs_tarball(data, max_bytes=max_bytes, package=f"OTP {otp_major}", keep=keep)
    if not files:
        raise _missing(app, version, otp_major, folders.seen, prefix)
    pages = {path[len(prefix) :]: body for path, body in files.items()}
    log.debug("OTP %d doc tarball: %d files of %s %s", otp_major, len(pages), app, version)
    docs = parse_hexdocs(pages, package=app, version=version, base_url=app_docs_url(app, otp_major))
    items = tuple(
        evolve(item, markdown=_erlang_org_links(item.markdown, otp_major)) for item in docs.items
    )
    return evolve(docs, items=items)


def _erlang_org_links(markdown: str, otp_major: int) -> str:
    def absolute(match: re.Match[str]) -> str:
        if match["doc"]:
            return f"]({ERLANG_DOCS_URL}/{otp_major}/{match['rest']})"
        return f"]({app_docs_url(match['app'] or match['erts'], otp_major)}{match['rest']})"

    return _OUTWARD_LINK.sub(absolute, markdown) if "](../" in markdown else markdown


def _missing(
    app: str, version: str, otp_major: int, seen: Mapping[str, set[str]], prefix: str
) -> Exception:
    tarball = f"the OTP {otp_major} doc tarball"
    versions = seen.get(app)
    if versions is None:
        apps = ", ".join(sorted(seen)) or "none"
        return VersionNotFound(f"{tarball} holds no application {app} (it holds: {apps})")
    if version not in versions:
        held = ", ".join(sorted(versions))
        return VersionNotFound(
            f"{tarball} holds {app} {held}, not {version}: another OTP release ships "
            f"{app} {version}"
        )
    return IngestError(f"{tarball} holds no HTML docs of {app} {version} (nothing under {prefix})")
