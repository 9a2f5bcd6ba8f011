"""OtpDocsClient: the `OtpDocsSource` port over HTTP (aiohttp, through `adapters.http`).

    GET {OTP_DOCS_MIRROR}/OTP-{vsn}/otp_doc_html_{vsn}.tar.gz -> bytes (in memory, size-capped)

The default mirror is erlang/otp's GitHub releases, which answer with a 302 to their object
storage: redirects are followed, at most MAX_REDIRECTS per attempt (a loop fails at once).
Statuses: 404 (and a storage mirror's 403) -> VersionNotFound; 429 -> RateLimited, waited
for when Retry-After is short; 5xx, timeouts, dropped connections and truncated bodies are
retried with backoff, then RemoteError. A 200 that is a web page or not gzip is refused
with a message naming OTP_DOCS_MIRROR. Every URL shown is redacted (a redirect's signed
query included).

One tarball holds every application of its release, so the bytes of the most recent
releases are kept in process (at most `cache_bytes` together, least recently used dropped
first), and concurrent calls for one release share one download: indexing erts, kernel
and stdlib of OTP 27 costs one request.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import OrderedDict
from types import TracebackType
from typing import TYPE_CHECKING

from attrs import frozen

from hexlocal_core.adapters.http import Failure, HttpClient, Retry, join_url
from hexlocal_core.adapters.http_body import TooLarge, Truncated, read_capped
from hexlocal_core.adapters.http_policy import RetryPolicy, parse_retry_after, reset_at
from hexlocal_core.config import DEFAULT_OTP_DOCS_MIRROR, Settings
from hexlocal_core.errors import RateLimited, RemoteError, UserInputError, VersionNotFound
from hexlocal_core.ports import NoLifecycle
from hexlocal_core.redact import redact_url, url_secrets
from hexlocal_core.untrusted import clip

if TYPE_CHECKING:
    import aiohttp

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "DEFAULT_RETRY",
    "FIRST_EXDOC_MAJOR",
    "MAX_REDIRECTS",
    "OtpDocsClient",
]

log = logging.getLogger("hexlocal.otp_docs")

USER_AGENT = "hexlocal/0.1 (+aiohttp)"
DEFAULT_RETRY = RetryPolicy(attempts=3, base_s=0.5, cap_s=10.0, max_retry_after_s=20.0)
# GitHub needs one hop (release -> object storage); a mirror behind a CDN maybe two more.
MAX_REDIRECTS = 5
# OTP 27.3.4.1's tarball of all applications is about 30 MB: this keeps the two most recent
# releases a project moves between, and never holds more however many are asked for.
DEFAULT_CACHE_BYTES = 96 * 1024 * 1024
# The first release whose doc tarball is ExDoc output; earlier ones are erl_docgen HTML.
FIRST_EXDOC_MAJOR = 27
CHUNK_BYTES = 64 * 1024

_RELEASE = re.compile(
    r"^(?:OTP-)?(?P<vsn>(?P<major>[0-9]{1,3})(?:\.[0-9]{1,6}){0,5}(?:-rc[0-9]{1,3})?)$"
)


def _release(release: str) -> tuple[str, int]:
    """("27.3.4.1", 27) from "27.3.4.1" or "OTP-27.3.4.1"; UserInputError otherwise."""
    match = _RELEASE.match(release.strip())
    if match is None:
        raise UserInputError(
            f"{clip(release, 80)!r} is not an OTP release; give one like 27.3.4.1 or "
            "OTP-27.3.4.1 (the contents of <otp root>/releases/<major>/OTP_VERSION)"
        )
    return match["vsn"], int(match["major"])


class _RecentTarballs:
    """The bytes of the most recently used releases, at most `bound` bytes together."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self._items: OrderedDict[str, bytes] = OrderedDict()

    @property
    def size(self) -> int:
        return sum(len(data) for data in self._items.values())

    def get(self, vsn: str) -> bytes | None:
        data = self._items.get(vsn)
        if data is not None:
            self._items.move_to_end(vsn)
        return data

    def put(self, vsn: str, data: bytes) -> None:
        if len(data) > self.bound:
            return  # keeping it would push out everything else and still break the bound
        self._items[vsn] = data
        self._items.move_to_end(vsn)
        while self.size > self.bound:
            self._items.popitem(last=False)

    def forget(self, vsn: str | None) -> None:
        if vsn is None:
            self._items.clear()
        else:
            self._items.pop(vsn, None)


class OtpDocsClient(NoLifecycle):
    """Downloads OTP doc tarballs from OTP_DOCS_MIRROR. One lazy session.

    Use as `async with OtpDocsClient(settings) as otp: ...`, or call `aclose()`.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        retry: RetryPolicy = DEFAULT_RETRY,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        trust_env: bool = False,
    ) -> None:
        self.mirror_url = settings.otp_docs_mirror.rstrip("/")
        self.max_docs_bytes = settings.max_docs_bytes
        self.retry = retry
        # auto_decompress off: the tarball must arrive byte for byte as published, even
        # from a mirror that adds Content-Encoding.
        self.http = HttpClient(
            timeout_s=settings.http_timeout_s,
            headers={"User-Agent": USER_AGENT, "Accept-Encoding": "identity"},
            secrets=url_secrets(self.mirror_url),
            trust_env=trust_env,
            auto_decompress=False,
            max_redirects=MAX_REDIRECTS,
        )
        self._recent = _RecentTarballs(cache_bytes)
        self._locks: dict[str, asyncio.Lock] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"OtpDocsClient(mirror={redact_url(self.mirror_url)!r})"

    async def __aenter__(self) -> OtpDocsClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

    @property
    def cached_bytes(self) -> int:
        """What the kept tarballs weigh now (never more than `cache_bytes`)."""
        return self._recent.size

    def forget(self, release: str | None = None) -> None:
        """Drops the kept tarball of `release`, or all of them."""
        self._recent.forget(None if release is None else _release(release)[0])

    # ----------------------------------------------------------------------- the port

    async def fetch_release_docs(self, release: str) -> bytes:
        vsn, major = _release(release)
        if major < FIRST_EXDOC_MAJOR:
            raise VersionNotFound(
                f"OTP {vsn}: releases before OTP {FIRST_EXDOC_MAJOR} publish no ExDoc doc "
                "tarball; read the docs of a local install instead (Debian: apt-get install "
                "erlang-doc; kerl, asdf or mise: KERL_BUILD_DOCS=yes when installing OTP)"
            )
        kept = self._recent.get(vsn)
        if kept is not None:
            return kept
        async with self._lock(vsn):
            kept = self._recent.get(vsn)  # a concurrent call may have fetched it meanwhile
            if kept is not None:
                return kept
            data = await self._download(vsn)
            self._recent.put(vsn, data)
            return data

    def _lock(self, vsn: str) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a lock cannot be awaited from another event loop
            self._locks.clear()
            self._loop = loop
        return self._locks.setdefault(vsn, asyncio.Lock())

    # ----------------------------------------------------------------------- HTTP

    async def _download(self, vsn: str) -> bytes:
        url = join_url(self.mirror_url, f"/OTP-{vsn}/otp_doc_html_{vsn}.tar.gz")
        request = _Request(url, f"OTP {vsn} docs", self.max_docs_bytes)

        async def handle(response: aiohttp.ClientResponse) -> bytes:
            return await self._read(request, response)

        def on_failure(failure: Failure) -> Exception:
            return _failure_error(request, failure, self.http.timeout_s)

        data = await self.http.request(
            "GET",
            url,
            policy=self.retry,
            handle=handle,
            on_failure=on_failure,
            headers={"Accept": "application/octet-stream, */*"},
            streaming=True,  # tens of MB: slow but steady is fine, a stall is not
        )
        log.info("%s: %d bytes from %s", request.what, len(data), request.shown)
        return data

    async def _read(self, request: _Request, response: aiohttp.ClientResponse) -> bytes:
        if response.status != 200:
            raise self._status_error(request, response)
        mime = response.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
        if mime == "text/html":
            raise RemoteError(
                f"{request.what}: GET {request.shown} returned a web page "
                f"(text/html) instead of a tarball; {_MIRROR_HINT}"
            )
        try:
            body = await read_capped(
                response.content.iter_chunked(CHUNK_BYTES), request.cap, response.content_length
            )
        except TooLarge as exc:
            size = f"{exc.size} bytes" if exc.size is not None else "more than that"
            raise RemoteError(
                f"{request.what}: GET {request.shown} is larger than the {request.cap}-byte "
                f"limit ({size}); raise HEXLOCAL_MAX_DOCS_BYTES to allow it"
            ) from None
        except Truncated as exc:
            cut = RemoteError(f"{request.what}: GET {request.shown} was cut short ({exc})")
            raise Retry(cut) from None
        if not body.startswith(b"\x1f\x8b"):
            raise RemoteError(
                f"{request.what}: GET {request.shown} returned {len(body)} bytes that are not "
                f"a gzip tarball (first bytes {body[:4]!r}); {_MIRROR_HINT}"
            )
        return body

    def _status_error(self, request: _Request, response: aiohttp.ClientResponse) -> Exception:
        status, what, url = response.status, request.what, request.shown
        # Storage-backed mirrors answer 403 for a missing object, as for hex.pm's docs.
        if status in (403, 404):
            return VersionNotFound(
                f"{what}: there is no doc tarball for this release (GET {url} returned "
                f"{status}); check the version (a tag OTP-<version> of erlang/otp, like "
                "OTP-27.3.4.1) or, with OTP_DOCS_MIRROR set, that the mirror holds it"
            )
        if status == 429:
            after = parse_retry_after(response.headers.get("Retry-After"))
            wait = f"; retry after {after:g}s" if after is not None else "; retry in a minute"
            limited = RateLimited(
                f"{what}: GET {url} was rate-limited (429){wait}", reset_at=reset_at(after)
            )
            return Retry(limited, after) if self.retry.retries(429) else limited
        if self.retry.retries(status):
            return Retry(RemoteError(f"{what}: GET {url} returned {status}"))
        reason = clip(response.reason or "", 80)
        return RemoteError(f"{what}: GET {url} returned {status} {reason}".rstrip())


# A machine that cannot reach the releases (offline, a firewall) has two ways out.
_OFFLINE_HINT = (
    "without access to it, install that OTP release (its docs are then read from the "
    "install) or set OTP_DOCS_MIRROR to a reachable copy of the releases' download folder"
)
_MIRROR_HINT = (
    "OTP_DOCS_MIRROR should point at a copy of the releases' download folder "
    f"(laid out as {DEFAULT_OTP_DOCS_MIRROR}/OTP-<vsn>/otp_doc_html_<vsn>.tar.gz), "
    "not a web page or a login portal"
)


@frozen
class _Request:
    """One tarball GET: the URL as requested, the subject of its messages, its size cap."""

    url: str  # may hold credentials
    what: str
    cap: int

    @property
    def shown(self) -> str:
        """The URL as messages show it."""
        return clip(redact_url(self.url), 500)


def _failure_error(request: _Request, failure: Failure, timeout_s: float) -> Exception:
    """Transport failures are worth another attempt, except a redirect loop or a URL
    aiohttp refuses (the next attempt would meet the same)."""
    what, url = request.what, failure.url
    if failure.kind == "timeout":
        return Retry(RemoteError(f"{what}: GET {url} stalled for {timeout_s:g}s"))
    if failure.kind == "cut_short":
        return Retry(RemoteError(f"{what}: GET {url} was cut short ({failure.detail})"))
    if failure.kind == "connect":
        return Retry(RemoteError(f"{what}: GET {url} failed: {failure.detail}; {_OFFLINE_HINT}"))
    if failure.kind == "redirects":
        return RemoteError(
            f"{what}: GET {url} was {failure.detail} without reaching the tarball "
            "(a redirect loop?); check OTP_DOCS_MIRROR"
        )
    return RemoteError(f"{what}: GET {url} failed: {failure.detail}")
