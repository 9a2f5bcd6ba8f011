"""What changed in a package's API between two versions (upgrade work): the values and
the pure functions `diff_versions` (`usecases/version_differ.py`, which reads the two
versions) and `upgrade_impact` share. Nothing here reads, embeds or writes.

The diff itself is a pure function over two lists of items (`api_entries`, `diff_entries`):
an *entry* is one documented thing as hexdocs.pm links it (a module page, a function,
callback, type or macro, a guide page) with the text of its heading sub-items folded in,
so `c:transaction/2-options` changes `c:transaction/2`'s docs rather than adding an item.
Each changed entry is listed under one kind, the most telling first (removed and added,
then deprecated, signature changed, docs changed); `also` names the other kinds it has.
A module added or removed whole is one entry whose `members` counts what it holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any, Protocol

from attrs import asdict, evolve, frozen

from hexlocal_core.bounds import DEFAULT_DIFF_LIMIT, MAX_DIFF_LIMIT, MAX_DIFF_OFFSET
from hexlocal_core.errors import UserInputError
from hexlocal_core.ingest.exdoc_search import parse_ref
from hexlocal_core.model import DocItem, Notice, sha256_text
from hexlocal_core.notice_codes import NoticeCode

GUIDES = "guides"  # the group of extras pages (README, guides, changelog)


class ChangeKind(StrEnum):
    ADDED = "added"
    REMOVED = "removed"
    DEPRECATED = "deprecated"  # deprecated in `to`, not in `from`
    SIGNATURE_CHANGED = "signature_changed"
    DOCS_CHANGED = "docs_changed"  # the text differs (sha256 of the entry's markdown)


KINDS: tuple[ChangeKind, ...] = tuple(ChangeKind)
_WHOLE = (ChangeKind.ADDED, ChangeKind.REMOVED)  # kinds a whole module can have


@frozen
class ApiEntry:
    """One documented thing of one version, summarised for comparison."""

    key: str  # page#anchor of the item, sub-sections folded in: "Ecto.Repo.html#c:transact/2"
    group: str  # the module, or GUIDES
    name: str  # within the group: "c:transact/2", "generate/1", "Ecto.Repo", a guide's title
    doc_type: str
    signature: str | None
    deprecated: str | None
    doc_hash: str
    hexdocs_url: str
    documented: bool = True  # it has text of its own, not only a spec

    @property
    def is_module(self) -> bool:
        return self.group != GUIDES and self.name == self.group


@frozen
class Change:
    kind: ChangeKind
    module: str  # the group: a module name, or "guides"
    name: str
    doc_type: str
    from_url: str | None
    to_url: str | None
    from_signature: str | None = None
    to_signature: str | None = None
    deprecated: str | None = None  # the deprecation message in `to` (or `from`, if removed)
    also: tuple[str, ...] = ()  # other kinds this entry has (a deprecation that changed docs)
    members: int = 0  # a module added or removed whole: the entries folded into it

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["kind"] = str(self.kind)
        out["also"] = list(self.also)
        return out


@frozen
class DiffSide:
    version: str
    source: str  # why this version: "mix.lock", "hex latest stable", "explicit", "indexed"
    hexdocs_url: str  # where the version's docs start


@frozen
class VersionDiff:
    """One page of a diff: the counts of every kind, then at most `limit` changes of each
    kind (or of `kind` only) from `offset`, grouped by module."""

    package: str
    from_side: DiffSide
    to_side: DiffSide
    counts: Mapping[str, int]
    changes: tuple[Change, ...]
    kind: str | None = None
    limit: int = DEFAULT_DIFF_LIMIT
    offset: int = 0
    notices: tuple[Notice, ...] = ()

    def shown(self, kind: str) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.kind == kind)

    def next_offset(self, kind: str) -> int | None:
        """The offset of the next page of `kind`, or None when this page shows the rest."""
        end = self.offset + len(self.shown(kind))
        return end if end < self.counts.get(kind, 0) else None

    def to_dict(self) -> dict[str, Any]:
        kinds = [self.kind] if self.kind else [str(k) for k in KINDS]
        return {
            "package": self.package,
            "from": asdict(self.from_side),
            "to": asdict(self.to_side),
            "summary": dict(self.counts),
            "changes": {k: [c.to_dict() for c in self.shown(k)] for k in kinds},
            "paging": {
                "kind": self.kind,
                "offset": self.offset,
                "limit": self.limit,
                "next_offset": {k: self.next_offset(k) for k in kinds},
            },
            "notices": [n.to_dict() for n in self.notices],
        }


# -- the pure part ------------------------------------------------------------------------


def _entry_key(item: DocItem) -> tuple[str, str, str, bool]:
    """(key, group, name, is the item itself rather than a heading sub-item)."""
    if item.module is None:  # a guide: its sections are one entry per page
        return item.page, GUIDES, item.page, "#" not in item.ref
    ref = parse_ref(item.ref)
    if ref.name is None or ref.detail_id is None:  # the module page or one of its sections
        return ref.page, item.module, item.module, ref.anchor is None
    name = f"{ref.kind}:{ref.name}" if ref.kind else ref.name
    return f"{ref.page}#{ref.detail_id}", item.module, f"{name}/{ref.arity}", ref.section is None


def api_entries(items: Iterable[DocItem]) -> tuple[ApiEntry, ...]:
    """The entries of one version's items, each with its sub-items' text folded in."""
    groups: dict[str, list[tuple[DocItem, bool]]] = {}
    where: dict[str, tuple[str, str]] = {}
    for item in items:
        key, group, name, own = _entry_key(item)
        groups.setdefault(key, []).append((item, own))
        where.setdefault(key, (group, name))
    entries = []
    for key, members in groups.items():
        main = next((i for i, own in members if own), members[0][0])
        group, name = where[key]
        if group == GUIDES:
            name = main.title.split(" - ")[-1] if main.title else name
        text = "\n\x00".join(_comparable(i.markdown) for i, _ in members)
        documented = any(_without_specs(i.markdown).strip() for i, _ in members)
        entries.append(
            ApiEntry(
                key=key,
                group=group,
                name=name,
                doc_type=str(main.doc_type),
                signature=main.signature,
                deprecated=main.deprecated,
                doc_hash=sha256_text(text),
                hexdocs_url=main.hexdocs_url.split("#")[0] if group == GUIDES else main.hexdocs_url,
                documented=documented,
            )
        )
    return tuple(entries)


# ExDoc's HTML puts an item's spec first, as an Erlang code block; OTP's beams hold none.
_SPEC_BLOCK = re.compile(
    r"\A\s*```erlang\n\s*-(?:spec|type|opaque|nominal|callback)\b.*?\n```[ \t]*\n?", re.S
)


def _without_specs(markdown: str) -> str:
    while (found := _SPEC_BLOCK.match(markdown)) is not None:
        markdown = markdown[found.end() :]
    return markdown


def _comparable(markdown: str) -> str:
    """The text as compared: spacing is not a change. (ExDoc >= 0.40's .md page footer,
    which once made every undocumented item a change, is dropped by the parser.)"""
    return " ".join(markdown.split())


def _same_signature(a: str | None, b: str | None) -> bool:
    return " ".join((a or "").split()) == " ".join((b or "").split())


def _changed(old: ApiEntry, new: ApiEntry) -> Change | None:
    kinds: list[ChangeKind] = []
    if new.deprecated and not old.deprecated:
        kinds.append(ChangeKind.DEPRECATED)
    if not _same_signature(old.signature, new.signature):
        kinds.append(ChangeKind.SIGNATURE_CHANGED)
    if old.doc_hash != new.doc_hash:
        kinds.append(ChangeKind.DOCS_CHANGED)
    if not kinds:
        return None
    return Change(
        kind=kinds[0],
        module=new.group,
        name=new.name,
        doc_type=new.doc_type,
        from_url=old.hexdocs_url,
        to_url=new.hexdocs_url,
        from_signature=old.signature,
        to_signature=new.signature,
        deprecated=new.deprecated,
        also=tuple(str(k) for k in kinds[1:]),
    )


def _one_side(entry: ApiEntry, kind: ChangeKind) -> Change:
    added = kind is ChangeKind.ADDED
    return Change(
        kind=kind,
        module=entry.group,
        name=entry.name,
        doc_type=entry.doc_type,
        from_url=None if added else entry.hexdocs_url,
        to_url=entry.hexdocs_url if added else None,
        from_signature=None if added else entry.signature,
        to_signature=entry.signature if added else None,
        deprecated=entry.deprecated,
    )


def _fold_whole_modules(changes: list[Change]) -> list[Change]:
    """A module added (or removed) whole is one entry; its members are counted in it."""
    whole = {
        (c.kind, c.module)
        for c in changes
        if c.kind in _WHOLE and c.name == c.module and c.module != GUIDES
    }
    members: dict[tuple[ChangeKind, str], int] = {}
    kept: list[Change] = []
    for c in changes:
        if (c.kind, c.module) in whole and c.name != c.module:
            members[(c.kind, c.module)] = members.get((c.kind, c.module), 0) + 1
        else:
            kept.append(c)
    return [
        evolve(c, members=members[(c.kind, c.module)]) if (c.kind, c.module) in members else c
        for c in kept
    ]


def _order(change: Change) -> tuple[int, bool, str, str]:
    # Kinds in KINDS order, modules alphabetically with the guides last, then names.
    return (KINDS.index(change.kind), change.module == GUIDES, change.module, change.name)


def diff_entries(old: Sequence[ApiEntry], new: Sequence[ApiEntry]) -> tuple[Change, ...]:
    """Every change from `old` to `new`, each entry once, in reading order."""
    before = {e.key: e for e in old}
    after = {e.key: e for e in new}
    changes = [_one_side(e, ChangeKind.REMOVED) for k, e in before.items() if k not in after]
    changes += [_one_side(e, ChangeKind.ADDED) for k, e in after.items() if k not in before]
    for key, entry in after.items():
        if key in before:
            found = _changed(before[key], entry)
            if found is not None:
                changes.append(found)
    return tuple(sorted(_fold_whole_modules(changes), key=_order))


class ReadEntries(Protocol):
    """One version as a comparison reads it: its entries and where they were read from."""

    @property
    def entries(self) -> tuple[ApiEntry, ...]: ...

    @property
    def reader(self) -> str: ...


def compared_changes(
    name: str, old: tuple[str, ReadEntries], new: tuple[str, ReadEntries]
) -> tuple[tuple[Change, ...], tuple[Notice, ...]]:
    """The changes from one (version, read) to the other, and what the answer must say
    about them: `diff_entries`, or, when the two were read from different sources (an OTP
    install's beams against a release's doc tarball), what both readers can agree on, with
    a notice saying so.

    The readers render the same docs differently (the tarball's HTML has specs on top,
    links as URLs, guides, and entries for undocumented types; the beams have none of
    these), so across readers docs text and guides are not compared, and only entries
    with docs of their own count as added or removed.
    """
    (old_version, before), (new_version, after) = old, new
    if before.reader == after.reader:
        return diff_entries(before.entries, after.entries), ()
    changes = diff_entries(_api_documented(before.entries), _api_documented(after.entries))
    notice = Notice(
        NoticeCode.READERS_DIFFER,
        f"{name} {old_version} was read from {before.reader} and {new_version} from "
        f"{after.reader}: their texts differ in form, so only the API is compared (entries "
        "with docs added, removed, deprecated or re-signed), not docs text or guides",
    )
    kept = tuple(k for c in changes if (k := _without_docs_kind(c)) is not None)
    return kept, (notice,)


def _api_documented(entries: Sequence[ApiEntry]) -> list[ApiEntry]:
    return [e for e in entries if e.group != GUIDES and e.documented]


def _without_docs_kind(change: Change) -> Change | None:
    """The change without its docs part; None when that was all of it (docs changed is
    the last kind `_changed` picks, so such a change has nothing in `also`)."""
    if change.kind is ChangeKind.DOCS_CHANGED:
        return None
    also = tuple(k for k in change.also if k != ChangeKind.DOCS_CHANGED)
    return evolve(change, also=also)


def count_kinds(changes: Iterable[Change]) -> dict[str, int]:
    counts = {str(k): 0 for k in KINDS}
    for c in changes:
        counts[str(c.kind)] += 1
    return counts


def page_changes(
    changes: Sequence[Change], *, kind: str | None, limit: int, offset: int
) -> tuple[Change, ...]:
    """At most `limit` changes of each kind (or of `kind`), from `offset` within each."""
    out: list[Change] = []
    for k in [kind] if kind else [str(k) for k in KINDS]:
        of_kind = [c for c in changes if c.kind == k]
        out.extend(of_kind[offset : offset + limit])
    return tuple(out)


def check_paging(kind: str | None, limit: Any, offset: Any) -> tuple[str | None, int, int]:
    """The paging arguments, checked: a kind of KINDS (or None), 1..MAX limit, offset >= 0."""
    if kind is not None and kind not in KINDS:
        raise UserInputError(f"kind must be one of {', '.join(KINDS)}, not {str(kind)[:40]!r}")
    for value, what, low, high in (
        (limit, "limit", 1, MAX_DIFF_LIMIT),
        (offset, "offset", 0, MAX_DIFF_OFFSET),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise UserInputError(f"{what} must be a whole number from {low} to {high}")
    return kind, limit, offset
