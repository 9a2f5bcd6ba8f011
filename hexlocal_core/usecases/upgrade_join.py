"""The pure half of `upgrade_impact`: which of a package's changes the project's calls meet.

Inputs are values: the diff's changes (`diff.diff_entries`), both versions' entries, and
the project's uses (each a `Use`: a module, a function or callback name, an arity and a
site). Output is what breaks or changes for this project, each with every call site, and
what looks like a break but is not (a default argument keeps the old arity alive).

Arity is matched the way the BEAM resolves it: `def cast(data, params, permitted, opts
\\\\ [])` documents `cast/4` but also defines `cast/3`, so a call of `cast/3` uses the
`cast/4` entry. Each default (`\\\\`) in an entry's signature widens its arity range by one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum

from attrs import frozen

from hexlocal_core.usecases.diff import GUIDES, ApiEntry, Change, ChangeKind

MAX_SENTENCE_CHARS = 160
MAX_SENTENCES = 2  # each way: a glimpse of what changed, the link has the rest
_NAME = re.compile(r"^(?:(?P<prefix>[ct]):)?(?P<name>.+)/(?P<arity>\d+)$")
Texts = Mapping[tuple[str, str], str]  # (module, entry name) -> the entry's markdown
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\[(*])|\n\s*\n")


class Impact(StrEnum):
    REMOVED = "removed"  # the call will fail
    DEPRECATED = "deprecated"  # it works, with a warning and a named replacement
    SIGNATURE_CHANGED = "signature_changed"
    DOCS_CHANGED = "docs_changed"


IMPACTS: tuple[Impact, ...] = tuple(Impact)


@frozen
class Site:
    file: str | None
    line: int | None
    caller: str | None  # "place/2"
    via: str | None = None  # how the use was found when not a plain call: see `Use`

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"file": self.file, "line": self.line, "caller": self.caller}
        if self.via:
            out["via"] = self.via
        return out


@frozen
class Use:
    """One use of the package: `module` is the package's (for a behaviour, the behaviour),
    `callback` marks a call that reaches a callback through a module implementing it."""

    module: str
    name: str
    arity: int
    site: Site
    callback: bool = False


@frozen
class Affected:
    identifier: str  # "c:Ecto.Repo.transaction/2", "Decimal.cast/1", "Ecto.Query" (whole)
    change: Impact
    detail: str
    call_sites: tuple[Site, ...]
    url: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "identifier": self.identifier,
            "change": str(self.change),
            "detail": self.detail,
            "call_sites": [s.to_dict() for s in self.call_sites],
            "url": self.url,
        }


@frozen
class NotAffected:
    identifier: str
    why: str
    call_sites: tuple[Site, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "identifier": self.identifier,
            "why": self.why,
            "call_sites": [s.to_dict() for s in self.call_sites],
        }


@frozen
class _Name:
    prefix: str  # "", "c" (callback) or "t" (type)
    name: str
    arity: int


def parse_name(name: str) -> _Name | None:
    """`c:transaction/2` -> ("c", "transaction", 2); a module or guide name -> None."""
    found = _NAME.match(name)
    if found is None:
        return None
    return _Name(found.group("prefix") or "", found.group("name"), int(found.group("arity")))


def defaults(signature: str | None) -> int:
    """How many arguments of `signature` have a default (`opts \\\\ []`)."""
    return (signature or "").count("\\\\")


def covers(entry_arity: int, signature: str | None, arity: int) -> bool:
    return entry_arity - defaults(signature) <= arity <= entry_arity


def identifier(change_module: str, name: str) -> str:
    parsed = parse_name(name)
    if parsed is None:
        return change_module
    prefix = f"{parsed.prefix}:" if parsed.prefix else ""
    return f"{prefix}{change_module}.{parsed.name}/{parsed.arity}"


def join(
    changes: Sequence[Change],
    before: Sequence[ApiEntry],
    after: Sequence[ApiEntry],
    uses: Sequence[Use],
    *,
    texts: tuple[Texts, Texts] = ({}, {}),
    from_version: str = "",
) -> tuple[tuple[Affected, ...], tuple[NotAffected, ...]]:
    """Each change the project's uses meet, with their sites; a removal that a default
    argument of a remaining entry covers is `NotAffected` with the reason."""
    by_module: dict[str, list[Use]] = {}
    for use in uses:
        by_module.setdefault(use.module, []).append(use)
    old = {(e.group, e.name): e for e in before}
    new_by_name = _by_name(after)
    affected: list[Affected] = []
    spared: list[NotAffected] = []
    for change in changes:
        if change.module == GUIDES or change.kind is ChangeKind.ADDED:
            continue
        users = by_module.get(change.module, [])
        if not users:
            continue
        if change.name == change.module:  # the module itself
            found = _module_change(change, users)
            affected.extend([found] if found else [])
            continue
        parsed = parse_name(change.name)
        if parsed is None or parsed.prefix == "t":
            continue
        hit = [u for u in users if _uses(u, parsed, change.from_signature or change.to_signature)]
        if not hit:
            continue
        if change.kind is ChangeKind.REMOVED:
            kept, saved = _still_defined(change, parsed, hit, new_by_name)
            spared.extend(saved)
            hit = kept
            if not hit:
                continue
        old_entry = old.get((change.module, change.name))
        affected.append(_affected(change, hit, old_entry, texts, from_version))
    order = {k: i for i, k in enumerate(IMPACTS)}
    affected.sort(key=lambda a: (order[a.change], a.identifier))
    return tuple(affected), tuple(sorted(spared, key=lambda n: n.identifier))


def _by_name(entries: Iterable[ApiEntry]) -> dict[tuple[str, str, str], list[ApiEntry]]:
    out: dict[tuple[str, str, str], list[ApiEntry]] = {}
    for entry in entries:
        parsed = parse_name(entry.name) if entry.group != GUIDES else None
        if parsed is not None:
            out.setdefault((entry.group, parsed.prefix, parsed.name), []).append(entry)
    return out


def _uses(use: Use, name: _Name, signature: str | None) -> bool:
    if use.name != name.name or use.callback != (name.prefix == "c"):
        return False
    return covers(name.arity, signature, use.arity)


def _still_defined(
    change: Change,
    parsed: _Name,
    hit: list[Use],
    new_by_name: Mapping[tuple[str, str, str], list[ApiEntry]],
) -> tuple[list[Use], list[NotAffected]]:
    """Uses of a removed entry that another entry of the target still defines."""
    kept: list[Use] = []
    saved: dict[str, tuple[str, list[Site]]] = {}
    for use in hit:
        cover = next(
            (
                e
                for e in new_by_name.get((change.module, parsed.prefix, parsed.name), [])
                if (p := parse_name(e.name)) and covers(p.arity, e.signature, use.arity)
            ),
            None,
        )
        if cover is None:
            kept.append(use)
            continue
        what = identifier(change.module, change.name)
        why = (
            f"{what} is gone, but {identifier(change.module, cover.name)} "
            f"(`{cover.signature}`) has a default argument, so "
            f"{_prefixed(parsed)}{parsed.name}/{use.arity} still exists: not a break"
        )
        saved.setdefault(what, (why, []))[1].append(use.site)
    spared = [NotAffected(k, why, _sites(sites)) for k, (why, sites) in saved.items()]
    return kept, spared


def _prefixed(name: _Name) -> str:
    return f"{name.prefix}:" if name.prefix else ""


def _module_change(change: Change, users: list[Use]) -> Affected | None:
    if change.kind is ChangeKind.REMOVED:
        detail = f"the whole module is gone ({change.members} entries); calls into it will fail"
        return Affected(change.module, Impact.REMOVED, detail, _sites(u.site for u in users))
    if change.kind is ChangeKind.DEPRECATED and change.deprecated:
        return Affected(
            change.module,
            Impact.DEPRECATED,
            change.deprecated,
            _sites(u.site for u in users),
            change.to_url,
        )
    return None


def _affected(
    change: Change,
    hit: list[Use],
    old_entry: ApiEntry | None,
    texts: tuple[Texts, Texts],
    from_version: str,
) -> Affected:
    ident = identifier(change.module, change.name)
    sites = _sites(u.site for u in hit)
    url = change.to_url or change.from_url
    if change.kind is ChangeKind.REMOVED:
        was = f" (it was deprecated: {change.deprecated})" if change.deprecated else ""
        detail = f"removed; the call will fail{was}"
        return Affected(ident, Impact.REMOVED, detail, sites, change.from_url)
    if change.deprecated:
        already = old_entry is not None and old_entry.deprecated
        since = f" (already deprecated in {from_version})" if already and from_version else ""
        return Affected(ident, Impact.DEPRECATED, change.deprecated + since, sites, url)
    if change.kind is ChangeKind.SIGNATURE_CHANGED:
        detail = f"{change.from_signature} -> {change.to_signature}"
        return Affected(ident, Impact.SIGNATURE_CHANGED, detail, sites, url)
    key = (change.module, change.name)
    detail = changed_sentences(texts[0].get(key, ""), texts[1].get(key, ""))
    return Affected(ident, Impact.DOCS_CHANGED, detail, sites, url)


def _sites(sites: Iterable[Site]) -> tuple[Site, ...]:
    unique = dict.fromkeys(sites)
    return tuple(
        sorted(unique, key=lambda s: (s.file or "\uffff", s.line or 0, s.caller or "", s.via or ""))
    )


def sentences(text: str) -> list[str]:
    """The text's sentences, code dropped (fenced and indented blocks, iex sessions),
    spacing collapsed."""
    fenced = re.sub(r"```.*?```", " ", text, flags=re.S)
    prose = "\n\n".join(p for p in re.split(r"\n\s*\n", fenced) if not _is_code(p))
    parts = (" ".join(p.split()) for p in _SENTENCE_END.split(prose))
    return [p for p in parts if len(p) > 2]


def _is_code(paragraph: str) -> bool:
    lines = [line for line in paragraph.split("\n") if line.strip()]
    first = lines[0].strip() if lines else ""
    indented = all(line.startswith("    ") for line in lines) and first[:1] not in "*-"
    return indented or first.startswith(("iex>", "...>"))


def changed_sentences(old: str, new: str) -> str:
    """A brief of what the docs say differently: up to two added (+) and removed (-)
    sentences, each clipped."""
    before, after = sentences(old), sentences(new)
    old_set, new_set = set(before), set(after)
    added = [s for s in after if s not in old_set][:MAX_SENTENCES]
    removed = [s for s in before if s not in new_set][:MAX_SENTENCES]
    lines = [f"+ {_clip(s)}" for s in added] + [f"- {_clip(s)}" for s in removed]
    return "\n".join(lines) if lines else "the docs changed (wording or examples)"


def _clip(text: str) -> str:
    if len(text) <= MAX_SENTENCE_CHARS:
        return text
    return text[: MAX_SENTENCE_CHARS - 1].rstrip() + "…"
