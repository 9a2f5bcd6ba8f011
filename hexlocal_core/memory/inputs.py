"""Argument checks for remember / recall / remember_status; each error names the fix.

The bounds themselves live in `hexlocal_core.bounds`, shared with the MCP schemas and the
CLI options; this module applies them to the memory calls' arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from attrs import frozen

from hexlocal_core import bounds
from hexlocal_core.bounds import (
    MAX_REQUEST_ID_CHARS,
    MAX_REQUEST_IDS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    MAX_TEXT_CHARS,
    MAX_TEXTS,
    has_control,
    has_surrogate,
)
from hexlocal_core.errors import UserInputError
from hexlocal_core.steering import inspect
from hexlocal_core.versions import parse_version, validate_package_name


@frozen
class Submission:
    """One checked text to remember, with what it is tied to."""

    text: str
    package: str | None
    version: str | None
    tags: tuple[str, ...]


def check_texts(texts: Any) -> list[str]:
    if isinstance(texts, str) or not isinstance(texts, Sequence) or not texts:
        raise UserInputError("texts must be a non-empty list of strings, one fact per string")
    if len(texts) > MAX_TEXTS:
        raise UserInputError(
            f"{len(texts)} texts at once; the limit is {MAX_TEXTS}. Split them into batches."
        )
    checked = [
        bounds.check_text(
            text,
            what=f"text {i}",
            empty_hint="state the fact to remember",
            max_chars=MAX_TEXT_CHARS,
            advice="Remember one fact at a time.",
        )
        for i, text in enumerate(texts, start=1)
    ]
    for i, text in enumerate(checked, start=1):
        check_not_steering(text, f"text {i}")
    return checked


def check_not_steering(text: str, what: str) -> None:
    """Refuses a lesson written to steer an agent, before it is queued.

    Refused rather than stored flagged: a lesson is recalled into later sessions and, in a
    team database, into other people's agents, and an agent that read an injection is the
    likeliest author of one; a refusal keeps it out for everyone, and the agent that
    meant a real lesson can restate it as a fact.
    """
    finding = inspect(text)
    if finding is not None:
        raise UserInputError(
            f"{what} reads as written to steer an AI agent ({finding.reason}). Lessons are "
            "recalled into later sessions and, with a shared database, into other people's "
            "agents, so hexlocal does not store orders to an agent, hidden characters or "
            "hidden markup. State the lesson as a fact about the code (what happens, in "
            "which version) and remember that instead."
        )


def check_tags(tags: Any) -> tuple[str, ...]:
    if tags is None:
        return ()
    if isinstance(tags, str) or not isinstance(tags, Sequence):
        raise UserInputError("tags must be a list of short strings, like ['stdio', 'bug']")
    if len(tags) > MAX_TAGS:
        raise UserInputError(f"{len(tags)} tags; at most {MAX_TAGS}")
    out: dict[str, None] = {}
    for tag in tags:
        if not isinstance(tag, str) or not tag.strip():
            raise UserInputError("every tag must be a non-empty string")
        if len(tag) > MAX_TAG_CHARS or has_control(tag) or has_surrogate(tag) or "\n" in tag:
            raise UserInputError(
                f"tag {bounds.short_repr(tag, 22)} is not a short one-line string "
                f"(at most {MAX_TAG_CHARS} chars)"
            )
        out.setdefault(tag.strip(), None)
    return tuple(out)


def check_package(package: Any) -> str | None:
    return None if package is None else validate_package_name(package)


def check_version(version: Any, package: str | None) -> str | None:
    if version is None:
        return None
    if package is None:
        raise UserInputError("a version needs its package: pass package too (e.g. 'jason')")
    if not isinstance(version, str):
        raise UserInputError("version must be a string like '1.4.0'")
    parse_version(version)  # raises UserInputError with what a valid version looks like
    return version.strip()


def submissions(texts: Any, package: Any, version: Any, tags: Any) -> list[Submission]:
    name = check_package(package)
    vsn = check_version(version, name)
    tag_tuple = check_tags(tags)
    return [Submission(t, name, vsn, tag_tuple) for t in check_texts(texts)]


def check_query(query: Any) -> str:
    return bounds.check_query(query, empty_hint="pass the words to recall memories by")


def check_limit(limit: Any) -> int:
    return bounds.check_limit(limit, maximum=bounds.MAX_RECALL_LIMIT)


def check_request_ids(request_ids: Any) -> list[str]:
    if isinstance(request_ids, str) or not isinstance(request_ids, Sequence) or not request_ids:
        raise UserInputError("request_ids must be a non-empty list of ids returned by remember")
    if len(request_ids) > MAX_REQUEST_IDS:
        raise UserInputError(f"at most {MAX_REQUEST_IDS} request ids at once")
    if not all(isinstance(r, str) and 0 < len(r) <= MAX_REQUEST_ID_CHARS for r in request_ids):
        raise UserInputError("every request id must be a string returned by remember")
    return list(request_ids)
