"""How two cuts of a package into chunks differ: used by drift and by project docs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from attrs import frozen

ChunkKey = tuple[str, int, str]  # (ref, ordinal, content hash)


@frozen
class ChunkDiff:
    unchanged: int
    added: int
    removed: int
    changed: int


def _keyed(chunks: Sequence[ChunkKey]) -> dict[tuple[str, int, int], str]:
    """Chunks keyed by (ref, ordinal, occurrence).

    Refs are not unique: a changelog has one `#bug-fixes` section per release, so the
    n-th chunk with the same (ref, ordinal) is matched with the n-th one on the other side.
    """
    seen: Counter[tuple[str, int]] = Counter()
    out: dict[tuple[str, int, int], str] = {}
    for ref, ordinal, digest in chunks:
        out[(ref, ordinal, seen[(ref, ordinal)])] = digest
        seen[(ref, ordinal)] += 1
    return out


def compare(stored: Sequence[ChunkKey], current: Sequence[ChunkKey]) -> ChunkDiff:
    """Counts of unchanged / added / removed / changed chunks, each chunk counted once."""
    old = _keyed(stored)
    new = _keyed(current)
    both = old.keys() & new.keys()
    changed = sum(1 for k in both if old[k] != new[k])
    return ChunkDiff(
        unchanged=len(both) - changed,
        added=len(new.keys() - old.keys()),
        removed=len(old.keys() - new.keys()),
        changed=changed,
    )
