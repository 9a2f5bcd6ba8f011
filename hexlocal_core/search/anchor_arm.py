"""The anchor arm's port: items ranked by what other docs say about them.

Anchor text (`ingest/anchors.py`) is someone else's description of an item, in the words
a reader uses, not the item's own. An implementation ranks items by their anchors twice,
by keyword (BM25 over the anchor sentences) and by meaning (the query vector against each
anchor's vector), and returns each ranking as chunk ids: the first chunk of each item.
The engine can fuse both rankings with the arms' (`SearchTuning.anchor_weights`), and
can ask what the anchors say about each candidate of the learned ranking (`describe`).
"""

from __future__ import annotations

import re
from typing import Protocol

from attrs import frozen

from hexlocal_core.ports import Vectors

# A function's heading section: `Mod.html#fun/2-options` belongs to `Mod.html#fun/2`.
_SECTION_OF_MEMBER = re.compile(r"^(?P<item>[^#]*#(?:[ct]:)?[^#]+?/\d+)-.+$")


def item_of(ref: str) -> str:
    """The item a heading section belongs to (its anchors describe the section too); a
    module or page doc's sections and every other ref are their own item."""
    m = _SECTION_OF_MEMBER.match(ref)
    return m["item"] if m else ref


@frozen
class AnchorRanking:
    keyword: tuple[int, ...] = ()
    vector: tuple[int, ...] = ()


@frozen
class AnchorEvidence:
    """What the anchors of one candidate's item say: their words, and the best cosine of
    the query vector to one anchor sentence's vector (None: no vector to compare)."""

    text: str
    cosine: float | None


class AnchorArm(Protocol):
    def rank(
        self, package: str, phrases: tuple[str, ...], vector: Vectors | None, depth: int
    ) -> AnchorRanking: ...

    def describe(
        self, package: str, refs: tuple[str, ...], vector: Vectors | None
    ) -> dict[str, AnchorEvidence]:
        """The evidence for each ref that has anchors (a heading sub-item reads its item's)."""
        ...
