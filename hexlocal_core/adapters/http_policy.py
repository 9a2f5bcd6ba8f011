"""When a remote call is tried again, and for how long a server may ask us to wait.

    RetryPolicy         attempts, backoff, which statuses are worth another try, and the
                        longest Retry-After honoured (a longer one gives up at once)
    parse_retry_after   the one Retry-After reader: delta-seconds or an HTTP date, bounded
    reset_at            when such a wait ends, as the ISO time a RateLimited error names

Apart from `adapters/http.py`'s request loop because the policy changes for other reasons
than the transport does: an adapter tunes its attempts and statuses, a server's way of
saying "not now" changes, and none of that touches sessions or sockets. Pure: no I/O, no
aiohttp, so an adapter's error handling and its tests read it without a session.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime

from attrs import field, frozen, validators

__all__ = [
    "DEFAULT_RETRY_STATUSES",
    "RETRY_AFTER_BOUND_S",
    "RetryPolicy",
    "parse_retry_after",
    "reset_at",
]

# Statuses that say "not now" rather than "no": timeouts, rate limits, overloaded servers.
DEFAULT_RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
RETRY_AFTER_BOUND_S = 86_400.0  # a Retry-After past a day is read as a day (no overflow)


@frozen
class RetryPolicy:
    """How one adapter retries. Tests inject a tiny base and a recording `sleep`."""

    attempts: int = field(default=3, validator=validators.ge(1))  # tries, the first included
    base_s: float = field(default=0.5, validator=validators.ge(0))  # first backoff; doubles
    cap_s: float = field(default=30.0, validator=validators.ge(0))  # longest backoff
    # A server asking for a longer wait than this is not waited for: the call fails at once
    # with the time it named, instead of sleeping through a user's request.
    max_retry_after_s: float = field(default=20.0, validator=validators.ge(0))
    statuses: frozenset[int] = DEFAULT_RETRY_STATUSES
    sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep, repr=False, eq=False)

    def retries(self, status: int) -> bool:
        """Whether an answer with `status` is worth another attempt."""
        return status in self.statuses

    def wait_s(self, attempt: int, after_s: float | None) -> float | None:
        """Seconds to wait after failed attempt number `attempt` (1-based), given the
        server's Retry-After (`after_s`), or None when it asks for too long a wait."""
        if after_s is not None:
            return after_s if after_s <= self.max_retry_after_s else None
        return float(min(self.cap_s, self.base_s * 2.0 ** (attempt - 1)))


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds from `now` that a `Retry-After` header asks for, or None when it says nothing.

    Delta-seconds ("120", leniently "0.5") or an HTTP date; a date in the past is 0. Garbage,
    negative or non-finite values are None; anything past a day is a day.
    """
    if value is None:
        return None
    text = value.strip()
    if not text or len(text) > 64:  # no valid header is longer; a 5000-digit one is garbage
        return None
    if text[0].isdigit():
        try:
            seconds = float(text)
        except ValueError:
            return None
    else:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if not math.isfinite(seconds):
        return None
    return min(max(0.0, seconds), RETRY_AFTER_BOUND_S)


def reset_at(after_s: float | None, *, now: datetime | None = None) -> str | None:
    """When a wait of `after_s` seconds ends, as ISO UTC ("2025-01-31T12:00:00Z")."""
    if after_s is None:
        return None
    when = (now or datetime.now(UTC)) + timedelta(seconds=min(after_s, RETRY_AFTER_BOUND_S))
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")
