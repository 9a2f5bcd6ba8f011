"""Argument checks for remember / recall / remember_status; each error names the fix."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from attrs import frozen

from hexlocal_core.errors import UserInputError
from hexlocal_core.versions import parse_version, validate_package_name

MAX_TEXTS = 100
MAX_TEXT_CHARS = 8_000
MAX_TAGS = 20
MAX_TAG_CHARS = 50
MAX_QUERY_CHARS = 4_000
MAX_RECALL_LIMIT = 50
MAX_REQUEST_IDS = 1_000


@frozen
class Submission:
    """One checked text to remember, with what it is tied to."""

    text: str
    package: str | None
    version: str | None
    tags: tuple[str, ...]


def _has_control(text: str) -> bool:
    return any(ord(c) < 32 and c not in "\t\n\r" for c in text)


def check_texts(texts: Any) -> list[str]:
    if isinstance(texts, str) or not isinstance(texts, Sequence) or not texts:
        raise UserInputError("texts must be a non-empty list of strings, one fact per string")
    if len(texts) > MAX_TEXTS:
        raise UserInputError(
            f"{len(texts)} texts at once; the limit is {MAX_TEXTS}. Split them into batches."
        )
    out = []
    for i, text in enumerate(texts, start=1):
        if not isinstance(text, str) or not text.strip():
            raise UserInputError(f"text {i} is empty; state the fact to remember")
        if len(text) > MAX_TEXT_CHARS:
            raise UserInputError(
                f"text {i} has {len(text):,} characters; the limit is {MAX_TEXT_CHARS:,}. "
                "Remember one fact at a time."
            )
        if _has_control(text):
            raise UserInputError(f"text {i} contains control characters; pass plain text")
        out.append(text.strip())
    return out


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
        if len(tag) > MAX_TAG_CHARS or _has_control(tag) or "\n" in tag:
            raise UserInputError(
                f"tag {tag[:20]!r} is not a short one-line string (at most {MAX_TAG_CHARS} chars)"
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
    if not isinstance(query, str) or not query.strip():
        raise UserInputError("the query is empty; pass the words to recall memories by")
    if len(query) > MAX_QUERY_CHARS:
        raise UserInputError(
            f"the query has {len(query):,} characters; the limit is {MAX_QUERY_CHARS:,}"
        )
    if _has_control(query):
        raise UserInputError("the query contains control characters; pass plain text")
    return query.strip()


def check_limit(limit: Any) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_RECALL_LIMIT:
        raise UserInputError(
            f"limit must be a whole number from 1 to {MAX_RECALL_LIMIT}, not {limit!r}"
        )
    return limit


def check_request_ids(request_ids: Any) -> list[str]:
    if isinstance(request_ids, str) or not isinstance(request_ids, Sequence) or not request_ids:
        raise UserInputError("request_ids must be a non-empty list of ids returned by remember")
    if len(request_ids) > MAX_REQUEST_IDS:
        raise UserInputError(f"at most {MAX_REQUEST_IDS} request ids at once")
    if not all(isinstance(r, str) and 0 < len(r) <= 64 for r in request_ids):
        raise UserInputError("every request id must be a string returned by remember")
    return list(request_ids)
