"""Elixir version requirements (`~> 1.4`, `>= 2.0.0 and < 3.0.0`), as mix.exs writes them.

An agent reading `{:jason, "~> 1.4"}` in mix.exs passes the requirement as the version; it
is matched against the lock's pin or hex.pm's releases instead of refused. The grammar is
Elixir's `Version.Requirement`: clauses `OP VERSION` joined by `and` / `or` (`and` binds
tighter), OP one of `== != > >= < <= ~>`; `~>` takes MAJOR.MINOR or a full version.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from attrs import frozen

from hexlocal_core.versions.semver import SemVer, try_parse_version

__all__ = ["Requirement", "best_match", "parse_requirement"]

_CLAUSE = re.compile(r"^(?P<op>==|!=|>=|<=|~>|>|<)?\s*(?P<version>\S+)$")
_MAJOR_MINOR = re.compile(r"^(0|[1-9]\d{0,8})\.(0|[1-9]\d{0,8})$")
MAX_REQUIREMENT_LENGTH = 256


@frozen
class _Clause:
    op: str
    version: SemVer
    parts: int  # how many numbers `~>` was given (2 or 3)

    def matches(self, v: SemVer) -> bool:
        if self.op == "~>":
            return self.version <= v < self._ceiling()
        return {
            "==": v == self.version,
            "!=": v != self.version,
            ">": v > self.version,
            ">=": v >= self.version,
            "<": v < self.version,
            "<=": v <= self.version,
        }[self.op]

    def _ceiling(self) -> SemVer:
        # `~> 1.4` allows below 2.0.0-0, `~> 1.4.2` below 1.5.0-0: the next version's
        # pre-releases (2.0.0-rc.1) stay out, as Elixir's `Version` rules them.
        v = self.version
        top = SemVer(v.major + 1, 0, 0) if self.parts == 2 else SemVer(v.major, v.minor + 1, 0)
        return SemVer(top.major, top.minor, 0, (0,))


@frozen
class Requirement:
    """Alternatives (`or`) of conjunctions (`and`) of clauses."""

    text: str
    alternatives: tuple[tuple[_Clause, ...], ...]

    def matches(self, v: SemVer) -> bool:
        return any(all(c.matches(v) for c in both) for both in self.alternatives)

    @property
    def names_pre_release(self) -> bool:
        return any(c.version.pre for both in self.alternatives for c in both)


def parse_requirement(text: str) -> Requirement | None:
    """The requirement `text` states, or None when it is not one (a plain version included:
    that is an exact version, not a requirement)."""
    if not isinstance(text, str) or len(text) > MAX_REQUIREMENT_LENGTH:
        return None
    stripped = text.strip()
    if not stripped or try_parse_version(stripped) is not None:
        return None
    alternatives = []
    for alternative in re.split(r"\s+or\s+", stripped):
        clauses = [_clause(part) for part in re.split(r"\s+and\s+", alternative)]
        if any(c is None for c in clauses):
            return None
        alternatives.append(tuple(c for c in clauses if c is not None))
    return Requirement(stripped, tuple(alternatives))


def _clause(text: str) -> _Clause | None:
    m = _CLAUSE.match(text.strip())
    if m is None or m["op"] is None:
        return None  # a bare word, or a bare version among clauses: not Elixir's grammar
    op, raw = m["op"], m["version"]
    short = _MAJOR_MINOR.match(raw) if op == "~>" else None
    if short:
        return _Clause(op, SemVer(int(short[1]), int(short[2]), 0), 2)
    version = try_parse_version(raw)
    return None if version is None else _Clause(op, version, 3)


def best_match(requirement: Requirement, versions: Iterable[str]) -> str | None:
    """The newest version the requirement allows: a stable one when any matches, a
    pre-release only when none does or the requirement names one."""
    matching = sorted(
        (v, text.strip())
        for text in versions
        if (v := try_parse_version(text)) is not None and requirement.matches(v)
    )
    stable = [text for v, text in matching if v.is_stable]
    if stable and not requirement.names_pre_release:
        return stable[-1]
    return matching[-1][1] if matching else None
