"""Every bound on a caller's argument, and the checks that enforce them, in one place.

The service checks arguments with these functions; the MCP tool schemas (`Field(le=...,
max_length=...)`) and the CLI options (`click.IntRange`) read the same constants, so a
client learns the bound from the schema and the three faces can never disagree. Each
error is a `UserInputError` whose message says what to send instead.
"""

from __future__ import annotations

from typing import Any

from hexlocal_core.errors import UserInputError
from hexlocal_core.model import SearchMode

# -- queries and result counts --------------------------------------------------------------
MAX_QUERY_CHARS = 4_000  # a question, an identifier or an error message; never a document
MAX_LIMIT = 20  # search_docs / search_project_docs hits
MAX_SEARCH_PACKAGES = 200  # packages named in one project-wide search_docs call
MAX_PACKAGE_CHARS = 100  # one package name as a tool argument (names.py has the real rule)
MAX_RECALL_LIMIT = 50  # recall memories
MAX_ISSUE_LIMIT = 50  # search_github_issues results (GitHub's page size caps it anyway)
DEFAULT_DIFF_LIMIT = 20  # diff_versions entries per kind: a screen, not a changelog
MAX_DIFF_LIMIT = 200
MAX_DIFF_OFFSET = 100_000

# -- remember ---------------------------------------------------------------------------------
MAX_TEXTS = 100  # texts in one remember call
MAX_TEXT_CHARS = 8_000  # one remembered fact
MAX_TAGS = 20
MAX_TAG_CHARS = 50
MAX_REQUEST_IDS = 1_000  # ids in one remember_status call
MAX_REQUEST_ID_CHARS = 64

# -- dates --------------------------------------------------------------------------------------
DAY_CHARS = 10  # YYYY-MM-DD


def has_control(text: str) -> bool:
    """True for C0 control characters other than tab and newlines (NUL, ESC, BEL ...)."""
    return any(ord(c) < 32 and c not in "\t\n\r" for c in text)


def has_surrogate(text: str) -> bool:
    """True for an unpaired UTF-16 surrogate: what a client sends when it cuts an emoji.

    Such a string cannot be encoded as UTF-8, so it would fail later (in SQLite, the
    tokenizer or the JSON reply) with an error that names nothing the caller can fix.
    """
    return any("\ud800" <= c <= "\udfff" for c in text)


def check_text(
    text: Any,
    *,
    what: str,
    empty_hint: str,
    max_chars: int,
    advice: str = "Ask about one thing at a time.",
) -> str:
    """One free-text argument: non-empty, at most `max_chars`, plain valid Unicode."""
    if not isinstance(text, str) or not text.strip():
        raise UserInputError(f"{what} is empty; {empty_hint}")
    if len(text) > max_chars:
        raise UserInputError(
            f"{what} is {len(text):,} characters long; the limit is {max_chars:,}. {advice}"
        )
    if has_control(text):
        raise UserInputError(f"{what} contains control characters; pass plain text")
    if has_surrogate(text):
        raise UserInputError(
            f"{what} contains an unpaired UTF-16 surrogate (a character cut in half); "
            "send valid Unicode text"
        )
    return text.strip()


def check_query(
    query: Any, *, empty_hint: str = "pass the words or identifier to search for"
) -> str:
    """A search or recall query, stripped."""
    return check_text(query, what="the query", empty_hint=empty_hint, max_chars=MAX_QUERY_CHARS)


def check_limit(limit: Any, *, maximum: int = MAX_LIMIT) -> int:
    """A result count from 1 to `maximum` (a bool is a caller bug, not 1)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= maximum:
        raise UserInputError(
            f"limit must be a whole number from 1 to {maximum}, not {short_repr(limit)}"
        )
    return limit


def check_mode(mode: Any) -> SearchMode:
    """A search mode, as the enum or its name (`"rrf"`)."""
    if isinstance(mode, SearchMode):
        return mode
    try:
        return SearchMode.parse(mode if isinstance(mode, str) else short_repr(mode))
    except ValueError as exc:
        raise UserInputError(str(exc)) from None


def short_repr(value: object, limit: int = 80) -> str:
    """`repr(value)` cut to `limit` characters, safe for any value a client can send.

    `repr` of an int over 4,300 digits raises ValueError (CPython's int/str limit), and a
    1 MB string must not come back whole in an error message.
    """
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        digits = int(value.bit_length() * 0.30103) + 1
        return f"an integer of about {digits:,} digits"
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a value whose repr fails is still described
        return f"a {type(value).__name__}"
    return text if len(text) <= limit else text[: limit - 3] + "..."
