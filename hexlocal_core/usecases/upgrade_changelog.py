"""The changelog lines between two versions, and the dependency requirements that change.

Pure functions over values. A changelog is the package's changelog page as the docs
parser gives it: sections in page order, each a (title, markdown). A section whose title
starts with a version (`v3.14.0 (2026-05-19)`, `1.4.4 (26.07.2024)`) opens that version;
the bullets of the sections after it, up to the next version, are its lines.

Requirement changes come from two places: hex.pm's release data (each release's
`requirements`), and changelog lines that state one ("[mix.exs] Require decimal v3").
Each is checked against what the project's mix.lock pins.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from attrs import frozen

from hexlocal_core.versions import SemVer, try_parse_version
from hexlocal_core.versions.requirement import parse_requirement

MAX_LINES_PER_VERSION = 40
MAX_LINE_CHARS = 300
_VERSION_TITLE = re.compile(r"^\s*v?(\d+\.\d+(?:\.\d+)?(?:-[0-9A-Za-z.]+)?)(?=\s|$|\()")
_BULLET = re.compile(r"^\s*[*-]\s+(.*)$")
_REQUIRE = re.compile(
    r"\b(?:requires?|depends? on|bump(?:s|ed)?)\s+:?([a-z][a-z0-9_]*)\s+"
    r"(?:to\s+)?(?:v|~>\s*|>=\s*)?(\d+(?:\.\d+){0,2})\b",
    re.IGNORECASE,
)


@frozen
class ChangelogVersion:
    version: str
    lines: tuple[str, ...]
    omitted: int = 0  # lines past MAX_LINES_PER_VERSION

    def to_dict(self) -> dict[str, object]:
        return {"version": self.version, "lines": list(self.lines), "omitted": self.omitted}


@frozen
class RequirementChange:
    """What the target needs of another package, and whether the lock's pin meets it."""

    package: str
    requirement: str  # as stated: "~> 3.0", or "v3" from a changelog line
    locked: str | None  # the version mix.lock pins, None when the project does not lock it
    satisfied: bool | None  # None when it cannot be told (an unparsable requirement)
    source: str  # "hex.pm" or "changelog 3.14.0"
    previous: str | None = None  # the requirement of the version the project locks

    def to_dict(self) -> dict[str, object]:
        return {
            "package": self.package,
            "requirement": self.requirement,
            "previous": self.previous,
            "locked": self.locked,
            "satisfied": self.satisfied,
            "source": self.source,
        }


def _version(text: str) -> SemVer | None:
    parts = text.split("-", 1)
    numbers = parts[0].split(".")
    while len(numbers) < 3:
        numbers.append("0")
    return try_parse_version(".".join(numbers) + (f"-{parts[1]}" if len(parts) > 1 else ""))


def changelog_versions(sections: Iterable[tuple[str, str]]) -> list[ChangelogVersion]:
    """Every version the page lists, with its bullet lines, in page order (all lines)."""
    out: list[tuple[str, list[str]]] = []
    for title, markdown in sections:
        head = title.split(" - ")[0]
        found = _VERSION_TITLE.match(head)
        if found:
            out.append((found.group(1), []))
        if out:
            out[-1][1].extend(_bullets(markdown))
    return [ChangelogVersion(v, tuple(lines)) for v, lines in out if lines]


def _bullets(markdown: str) -> list[str]:
    lines: list[str] = []
    for raw in markdown.splitlines():
        found = _BULLET.match(raw)
        if found:
            lines.append(found.group(1).strip())
        elif lines and raw.startswith("    ") and raw.strip():
            lines[-1] = f"{lines[-1]} {raw.strip()}"  # a bullet's wrapped continuation
    return [
        line if len(line) <= MAX_LINE_CHARS else line[: MAX_LINE_CHARS - 1] + "…" for line in lines
    ]


def between(
    versions: Sequence[ChangelogVersion], old: str, new: str, used_modules: Iterable[str]
) -> tuple[ChangelogVersion, ...]:
    """The versions after `old` up to `new` (newest first, as changelogs are written),
    each version's lines naming a used module first, at most MAX_LINES_PER_VERSION."""
    low, high = _version(old), _version(new)
    if low is None or high is None:
        return ()
    used = sorted(set(used_modules), key=len, reverse=True)
    picked = []
    for entry in versions:
        parsed = _version(entry.version)
        if parsed is None or not low < parsed <= high:
            continue
        lines = sorted(entry.lines, key=lambda line: not _names_any(line, used))
        kept = tuple(lines[:MAX_LINES_PER_VERSION])
        picked.append(ChangelogVersion(entry.version, kept, len(lines) - len(kept)))
    return tuple(sorted(picked, key=lambda v: _version(v.version) or low, reverse=True))


def _names_any(line: str, modules: Sequence[str]) -> bool:
    return any(re.search(rf"(?<![\w.]){re.escape(m)}(?![\w])", line) for m in modules)


def from_changelog(
    versions: Iterable[ChangelogVersion], locked: Mapping[str, str], package: str
) -> list[RequirementChange]:
    """Requirements the lines state ("Require decimal v3") for packages the project locks."""
    out: dict[str, RequirementChange] = {}
    for entry in versions:
        for line in entry.lines:
            for found in _REQUIRE.finditer(line):
                dep, minimum = found.group(1).lower(), found.group(2)
                if dep == package or dep not in locked or dep in out:
                    continue
                floor, pin = _version(minimum), try_parse_version(locked[dep])
                satisfied = None if floor is None or pin is None else pin >= floor
                out[dep] = RequirementChange(
                    dep, f">= {floor}" if floor else minimum, locked[dep], satisfied,
                    f"changelog {entry.version}: {line}",
                )  # fmt: skip
    return list(out.values())


def from_releases(
    before: Mapping[str, str] | None, after: Mapping[str, str], locked: Mapping[str, str]
) -> list[RequirementChange]:
    """Each dependency whose requirement differs between the two releases (or, without
    the old release's data, each one the lock's pin does not meet)."""
    out = []
    for dep, requirement in sorted(after.items()):
        previous = before.get(dep) if before is not None else None
        if before is not None and previous == requirement:
            continue
        parsed = parse_requirement(requirement)
        pin = try_parse_version(locked[dep]) if dep in locked else None
        satisfied = parsed.matches(pin) if parsed is not None and pin is not None else None
        if before is None and satisfied is not False:
            continue
        out.append(
            RequirementChange(dep, requirement, locked.get(dep), satisfied, "hex.pm", previous)
        )
    return out
