"""Which hosts a client could not reach, and when to look again.

    HostWatch   per scheme, host and port: down since when and why, the next check's time
    host_key    the key: scheme://host:port, credentials and path dropped

Nothing here does I/O: `adapters/http.HttpClient` marks hosts up or down from what its
requests meet and runs the checks in the background; `clock` (monotonic seconds) decides
when one is due, so tests step it instead of sleeping.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from urllib.parse import urlsplit, urlunsplit

from attrs import frozen

from hexlocal_core.model import Reachability
from hexlocal_core.redact import redact_url
from hexlocal_core.untrusted import clip

__all__ = ["HostWatch", "host_key"]

log = logging.getLogger("hexlocal.http")


@frozen
class Down:
    reason: str  # the last failure that found the host unreachable, scrubbed
    since: str  # ISO UTC, for messages
    check_at: float  # the watch's clock: when a background check is next due


class HostWatch:
    """The hosts one client found unreachable."""

    def __init__(
        self, *, recheck_s: float = 30.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.recheck_s = recheck_s
        self._clock = clock
        self._down: dict[str, Down] = {}

    def down(self, url: str) -> Down | None:
        return self._down.get(host_key(url))

    def due(self, url: str) -> bool:
        """Whether the host is down and the time for a check of it has come."""
        down = self.down(url)
        return down is not None and self._clock() >= down.check_at

    def mark_down(self, url: str, reason: str) -> None:
        """`reason` must be scrubbed already: it is shown in notices and logs."""
        key = host_key(url)
        was = self._down.get(key)
        if was is None:
            log.warning(
                "%s is unreachable (%s); not asked again until a check every %gs gets an answer",
                _base(url),
                reason,
                self.recheck_s,
            )
        since = was.since if was is not None else _utc_now()
        self._down[key] = Down(reason, since, self._clock() + self.recheck_s)

    def mark_up(self, url: str) -> None:
        if self._down.pop(host_key(url), None) is not None:
            log.info("%s answers again", _base(url))

    def reachability(self, url: str, setting: str) -> Reachability:
        """What is known of `url`'s host, for a use case or a notice."""
        shown = clip(redact_url(url), 500)
        down = self.down(url)
        if down is None:
            return Reachability(setting, shown)
        return Reachability(
            setting,
            shown,
            reachable=False,
            since=down.since,
            reason=down.reason,
            recheck_s=self.recheck_s,
        )


def host_key(url: str) -> str:
    """scheme://host:port of `url`, without credentials: what reachability is kept by."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return url
    scheme = parts.scheme.lower()
    if port is None:
        port = {"http": 80, "https": 443}.get(scheme)
    return f"{scheme}://{(parts.hostname or '').lower()}:{port}"


def _base(url: str) -> str:
    """scheme://host[:port] of `url`, credentials masked, for log lines."""
    try:
        parts = urlsplit(redact_url(url))
    except ValueError:
        return clip(redact_url(url), 200)
    return urlunsplit((parts.scheme, parts.netloc, "", "", ""))


def _utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
