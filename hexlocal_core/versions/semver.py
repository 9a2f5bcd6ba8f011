"""Hex versions: SemVer 2.0 parsing and precedence, and choosing among a package's releases.

Pure functions over text; nothing here reads a file or the network.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Any

from attrs import frozen

from hexlocal_core.errors import UserInputError, VersionNotFound
from hexlocal_core.model import HexPackageInfo, Notice
from hexlocal_core.notice_codes import NoticeCode

__all__ = [
    "MAX_VERSION_LENGTH",
    "SemVer",
    "is_stable",
    "nearest_versions",
    "parse_version",
    "pick_latest",
    "try_parse_version",
]

MAX_VERSION_LENGTH = 128

# SemVer 2.0's own grammar: no leading zeros, dot-separated pre-release and build parts.
_NUM = r"0|[1-9]\d*"
_PRE_ID = r"(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)"
_SEMVER = re.compile(
    rf"^(?P<major>{_NUM})\.(?P<minor>{_NUM})\.(?P<patch>{_NUM})"
    rf"(?:-(?P<pre>{_PRE_ID}(?:\.{_PRE_ID})*))?"
    r"(?:\+(?P<build>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)


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
    """The version, or None when `text` is not a valid Hex (SemVer 2.0) version.

    Surrounding whitespace is ignored; callers that pass the text on (into a URL, a
    database row) must use `str(result)` or the stripped text, never `text` itself.
    """
    # The length check comes first: it bounds the digits int() converts below.
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
    elif re.match(r"\s*(~>|[<>=!]=?)", text):
        hint = " nor a requirement (an operator and a version, like '~> 1.4' or '>= 2.0.0')"
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
        return info.latest_stable_version.strip(), ()  # remote text: never used unstripped
    releases = sorted(_valid(r.version for r in info.releases), reverse=True)
    stable = [v for v in releases if v.is_stable]
    if stable:
        return str(stable[0]), ()
    if releases:
        newest = str(releases[0])
        notice = Notice(
            NoticeCode.PRERELEASE_ONLY,
            f"{info.name} has only pre-releases on hex.pm; using the newest, {newest}. "
            "Pass a version to choose another.",
        )
        return newest, (notice,)
    raise VersionNotFound(f"hex.pm lists no releases for {info.name}, so it has no docs to read")
