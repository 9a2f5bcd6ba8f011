"""Curation decisions as pure functions: what to do with a submission given its neighbours.

The thresholds (`Settings.memory_*`) mean:

    nearest similarity <  create_below   -> create at once, uncurated (no model call)
    nearest similarity >= create_below   -> a chat model chooses; without one, a rule does
    discard honoured only at >= discard_above (the model is told; below it the text is kept)
    similarity >= duplicate_at           -> a near-exact duplicate (see `is_duplicate`)

Similarities are rounded to 4 decimals: float32 cosine carries ~1e-7 of noise, which must
not flip a decision sitting exactly on a threshold.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from enum import StrEnum

from attrs import evolve, frozen

from hexlocal_core.config import Settings
from hexlocal_core.model import sha256_text

SIMILARITY_DIGITS = 4
MAX_MEMORY_CHARS = 16_000  # two full submissions appended; bounds the curation prompt too
NO_CHAT = "no chat model: set AI_API_KEY for curated merges"


class Action(StrEnum):
    CREATE = "create"
    APPEND = "append"
    MERGE = "merge"
    REPLACE = "replace"
    DEPRECATE = "deprecate"
    DISCARD = "discard"


# Actions that rewrite or retire an existing memory, so they must name one.
TARGETED = frozenset({Action.APPEND, Action.MERGE, Action.REPLACE, Action.DEPRECATE})


@frozen
class Thresholds:
    create_below: float
    discard_above: float
    duplicate_at: float

    @classmethod
    def from_settings(cls, settings: Settings) -> Thresholds:
        return cls(
            settings.memory_create_below,
            settings.memory_discard_above,
            settings.memory_duplicate_at,
        )


@frozen
class Neighbour:
    """A stored, non-deprecated memory near the submission."""

    id: int
    text: str
    similarity: float
    same_text: bool  # equal to the submission once normalised
    package: str | None = None
    version: str | None = None


@frozen
class Decision:
    """What becomes of one submission, with the reason logged for it."""

    action: Action
    reason: str
    curated: bool  # True when a chat model made this decision
    target_id: int | None = None
    text: str | None = None  # the rewritten memory (merge only)
    model: str | None = None


def similarity(distance: float) -> float:
    """Cosine similarity from sqlite-vec's cosine distance, rounded (see the module doc)."""
    return round(1.0 - distance, SIMILARITY_DIGITS)


def fmt(value: float) -> str:
    """0.62 stays "0.62"; 0.7999 is not shown as a misleading "0.80"."""
    return f"{value:.2f}" if round(value, 2) == value else f"{value:.4f}"


def normalise(text: str) -> str:
    """Casefolded, whitespace collapsed, punctuation stripped at both ends."""
    return _strip_edges(re.sub(r"\s+", " ", text.casefold()))


def _is_edge(ch: str) -> bool:
    return ch.isspace() or unicodedata.category(ch).startswith("P")


def norm_hash(text: str) -> str:
    return sha256_text(normalise(text))


def _terms(text: str) -> set[str]:
    # Whole words, so "1.14.0" and "roots/list" stay one term each: a changed version
    # number is exactly the new fact a near-duplicate may carry.
    return {t for t in (_strip_edges(w.casefold()) for w in text.split()) if t}


def _strip_edges(text: str) -> str:
    start, end = 0, len(text)
    while start < end and _is_edge(text[start]):
        start += 1
    while end > start and _is_edge(text[end - 1]):
        end -= 1
    return text[start:end]


def new_terms(text: str, existing: str) -> set[str]:
    """Words of `text` that `existing` does not contain."""
    return _terms(text) - _terms(existing)


def is_duplicate(text: str, neighbour: Neighbour, th: Thresholds) -> bool:
    """Same text once normalised, or so similar that it adds not a single word.

    The word check matters: with all-MiniLM-L6-v2, "... in anubis_mcp 1.15.0; fixed in
    1.16" scores 0.985 against "... in anubis_mcp 1.14.0", above duplicate_at, yet it is
    a new fact.
    """
    if neighbour.same_text:
        return True
    return neighbour.similarity >= th.duplicate_at and not new_terms(text, neighbour.text)


def nearest(neighbours: Sequence[Neighbour]) -> Neighbour | None:
    return max(neighbours, key=lambda n: n.similarity, default=None)


def candidates(neighbours: Sequence[Neighbour], th: Thresholds) -> list[Neighbour]:
    """The neighbours a model may act on: those at or above the create floor."""
    return [n for n in neighbours if n.similarity >= th.create_below]


def below_floor(neighbours: Sequence[Neighbour], th: Thresholds) -> Decision | None:
    """Create without asking anyone when nothing stored is close; None when curation is due."""
    top = nearest(neighbours)
    if top is None:
        return Decision(Action.CREATE, "no similar memory stored", curated=False)
    if top.similarity < th.create_below:
        return Decision(
            Action.CREATE,
            f"nearest similarity {fmt(top.similarity)} < {fmt(th.create_below)}",
            curated=False,
        )
    return None


def decide_without_model(text: str, neighbours: Sequence[Neighbour], th: Thresholds) -> Decision:
    """The deterministic policy: drop exact or near-exact duplicates, keep the rest."""
    for n in sorted(neighbours, key=lambda n: -n.similarity):
        if is_duplicate(text, n, th):
            why = (
                "the same text" if n.same_text else f"similarity {fmt(n.similarity)}, no new words"
            )
            return Decision(
                Action.DISCARD,
                f"duplicate of memory {n.id} ({why}); {NO_CHAT}",
                curated=False,
                target_id=n.id,
            )
    top = nearest(neighbours)
    shown = fmt(top.similarity) if top else "-"
    return Decision(
        Action.CREATE,
        f"nearest similarity {shown}, not a duplicate; kept uncurated ({NO_CHAT})",
        curated=False,
    )


def enforce(
    decision: Decision, text: str, neighbours: Sequence[Neighbour], th: Thresholds
) -> Decision:
    """Hold a (validated) model decision to the rules the prompt states."""
    by_id = {n.id: n for n in neighbours}
    if decision.action is Action.CREATE:
        dup = next((n for n in neighbours if n.same_text and n.similarity >= th.duplicate_at), None)
        if dup is not None:
            return Decision(
                Action.DISCARD,
                f"model chose create, but memory {dup.id} holds the same text "
                f"(similarity {fmt(dup.similarity)})",
                curated=False,
                target_id=dup.id,
                model=decision.model,
            )
    if decision.action is Action.APPEND:
        target = by_id[decision.target_id or -1]
        if len(target.text) + 1 + len(text) > MAX_MEMORY_CHARS:
            return Decision(
                Action.CREATE,
                f"model chose append to memory {target.id}, but the result would pass "
                f"{MAX_MEMORY_CHARS:,} characters: kept as a new memory",
                curated=False,
                model=decision.model,
            )
    if decision.action is Action.DISCARD:
        kept = by_id.get(decision.target_id or -1) or nearest(neighbours)
        if kept is None or kept.similarity < th.discard_above:
            shown = fmt(kept.similarity) if kept else "-"
            return Decision(
                Action.CREATE,
                f"model chose discard ({decision.reason}), but similarity {shown} < "
                f"{fmt(th.discard_above)}: kept",
                curated=False,
                model=decision.model,
            )
        return evolve(decision, target_id=kept.id)
    return decision


@frozen
class Change:
    """The rows a decision writes, known before the transaction so embedding runs outside it."""

    new_text: str | None = None  # a memory to create
    target_id: int | None = None
    target_text: str | None = None  # the target's text after the change
    target_was: str | None = None  # its text when decided; checked again in the transaction
    deprecate: bool = False
    submission_wins: bool = False  # replace: the submission's package and version win


def plan(decision: Decision, text: str, neighbours: Sequence[Neighbour]) -> Change:
    """What `decision` (validated and enforced) writes for submission `text`."""
    action = decision.action
    if action is Action.CREATE:
        return Change(new_text=text)
    if action is Action.DISCARD:
        return Change(target_id=decision.target_id)
    target = next(n for n in neighbours if n.id == decision.target_id)
    if action is Action.DEPRECATE:
        return Change(new_text=text, target_id=target.id, target_was=target.text, deprecate=True)
    new_text = {
        Action.APPEND: f"{target.text.rstrip()}\n{text}",
        Action.MERGE: decision.text or "",
        Action.REPLACE: text,
    }[action]
    return Change(
        target_id=target.id,
        target_text=new_text,
        target_was=target.text,
        submission_wins=action is Action.REPLACE,
    )
