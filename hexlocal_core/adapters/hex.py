"""HexClient: the `HexRegistry` port over HTTP (aiohttp).

    GET {HEX_API_URL}/packages/{name}          -> HexPackageInfo   (JSON, cached briefly)
    GET {HEX_MIRROR}/docs/{name}-{version}.tar.gz -> bytes          (in memory, size-capped)

Failures map to core errors, most specific first: 404 -> PackageNotFound / VersionNotFound;
429 -> wait for Retry-After when short, else RateLimited; 5xx, timeouts, dropped
connections and truncated bodies are retried with exponential backoff, then RemoteError.
Every message names the package and the URL tried. aiohttp is imported when a session is
first needed, so importing this module (say for `repo_from_links`) stays cheap.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import zlib
from collections.abc import AsyncIterable, Awaitable, Callable, Mapping
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlparse

from attrs import frozen

from hexlocal_core.config import Settings
from hexlocal_core.errors import PackageNotFound, RateLimited, RemoteError, VersionNotFound
from hexlocal_core.model import HexPackageInfo, HexRelease

if TYPE_CHECKING:
    import aiohttp

__all__ = ["HexClient", "parse_package_info", "read_capped", "repo_from_links"]

log = logging.getLogger("hexlocal.hex")

USER_AGENT = "hexlocal/0.1 (+aiohttp)"
MAX_ATTEMPTS = 3
BACKOFF_BASE_S = 0.5  # 0.5 s, then 1 s: transient Hex hiccups clear within seconds
MAX_RETRY_AFTER_S = 20.0  # longer waits than this fail fast with RateLimited instead
PACKAGE_INFO_TTL_S = 300.0  # versions appear rarely; five minutes saves a call per query
MAX_API_BYTES = 16 * 1024 * 1024  # the largest package JSON is well under 1 MB
CHUNK_BYTES = 64 * 1024


class TooLarge(Exception):
    """A body outgrew its cap (internal: turned into RemoteError with the URL)."""

    def __init__(self, size: int | None) -> None:
        super().__init__(size)
        self.size = size  # the announced size, or None when the stream went past the cap


class _Truncated(Exception):
    """Fewer bytes arrived than Content-Length announced."""


class _Retryable(Exception):
    """An attempt failed in a way the next attempt may not; `delay` overrides backoff."""

    def __init__(self, error: RemoteError, delay: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.delay = delay


@frozen
class _Request:
    """What one GET is for: how to name it in messages and how to read the body."""

    url: str
    what: str  # "jason" or "jason 1.4.5": the subject of every message
    cap: int
    json: bool
    not_found: Callable[[int], Exception]  # status -> the error for a missing resource


async def read_capped(
    chunks: AsyncIterable[bytes], cap: int, announced: int | None = None
) -> bytes:
    """Collects a streamed body, refusing before it holds more than `cap` bytes.

    Raises TooLarge as soon as the announced length or the running total exceeds the cap,
    so an oversized download is abandoned after at most one chunk past the limit.
    """
    if announced is not None and announced > cap:
        raise TooLarge(announced)
    body = bytearray()
    async for chunk in chunks:
        body += chunk
        if len(body) > cap:
            raise TooLarge(None)
    if announced is not None and len(body) != announced:
        raise _Truncated(f"{len(body)} of {announced} bytes")
    return bytes(body)


class HexClient:
    """Talks to the Hex API and docs mirror named in Settings. One lazy session; close it.

    Use as `async with HexClient(settings) as hex: ...`, or call `close()`.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        max_attempts: int = MAX_ATTEMPTS,
        backoff_base_s: float = BACKOFF_BASE_S,
        max_retry_after_s: float = MAX_RETRY_AFTER_S,
        info_ttl_s: float = PACKAGE_INFO_TTL_S,
        trust_env: bool = False,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.api_url = settings.hex_api_url.rstrip("/")
        self.mirror_url = settings.hex_mirror.rstrip("/")
        self.max_docs_bytes = settings.max_docs_bytes
        self.timeout_s = settings.http_timeout_s
        self.max_attempts = max(1, max_attempts)
        self.backoff_base_s = backoff_base_s
        self.max_retry_after_s = max_retry_after_s
        self.info_ttl_s = info_ttl_s
        self._trust_env = trust_env  # proxies from the environment, like Mix's HTTP_PROXY
        self._clock = clock
        self._sleep = sleep  # injectable so tests can see the waits without taking them
        self._session: aiohttp.ClientSession | None = None
        # Per-process cache of package metadata: name -> (fetched at, info).
        self._info_cache: dict[str, tuple[float, HexPackageInfo]] = {}

    async def __aenter__(self) -> HexClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()

    def forget(self, name: str | None = None) -> None:
        """Drops cached package metadata (one package, or all)."""
        if name is None:
            self._info_cache.clear()
        else:
            self._info_cache.pop(name, None)

    # ----------------------------------------------------------------------- the port

    async def package_info(self, name: str) -> HexPackageInfo:
        cached = self._info_cache.get(name)
        if cached is not None and self._clock() - cached[0] < self.info_ttl_s:
            return cached[1]
        url = f"{self.api_url}/packages/{quote(name, safe='')}"

        def not_found(status: int) -> Exception:
            return PackageNotFound(
                f"hex.pm has no package '{name}' (GET {url} returned {status}). Check the "
                "spelling (the OTP app name, like 'phoenix_live_view'); a private or mirrored "
                "package needs HEX_API_URL pointing at its registry."
            )

        body = await self._get(_Request(url, name, MAX_API_BYTES, True, not_found))
        try:
            data = json.loads(body)
        except ValueError as exc:
            raise RemoteError(f"{name}: GET {url} returned malformed JSON ({exc})") from exc
        info = parse_package_info(name, data, url)
        self._info_cache[name] = (self._clock(), info)
        return info

    async def fetch_docs(self, name: str, version: str) -> bytes:
        filename = quote(f"{name}-{version}.tar.gz", safe="")
        url = f"{self.mirror_url}/docs/{filename}"

        def not_found(status: int) -> Exception:
            return VersionNotFound(
                f"{name} {version}: this version has no docs on hex.pm (GET {url} returned "
                f"{status}). It may never have published docs; try another version."
            )

        return await self._get(
            _Request(url, f"{name} {version}", self.max_docs_bytes, False, not_found)
        )

    # ----------------------------------------------------------------------- HTTP

    def _session_now(self) -> aiohttp.ClientSession:
        import aiohttp

        if self._session is None or self._session.closed:
            # auto_decompress off: a docs tarball must arrive byte for byte as published,
            # even from a mirror that adds Content-Encoding.
            self._session = aiohttp.ClientSession(
                headers={"User-Agent": USER_AGENT, "Accept-Encoding": "identity"},
                auto_decompress=False,
                trust_env=self._trust_env,
            )
        return self._session

    async def _get(self, request: _Request) -> bytes:
        for attempt in range(1, self.max_attempts + 1):
            try:
                return await self._attempt(request)
            except _Retryable as retry:
                too_long = retry.delay is not None and retry.delay > self.max_retry_after_s
                if attempt == self.max_attempts or too_long:
                    raise retry.error from None
                delay = retry.delay if retry.delay is not None else self._backoff(attempt)
                log.info(
                    "%s; attempt %d of %d in %.2fs",
                    retry.error,
                    attempt + 1,
                    self.max_attempts,
                    delay,
                )
                await self._sleep(delay)
        raise AssertionError("unreachable: the loop returns or raises")

    def _backoff(self, attempt: int) -> float:
        return float(self.backoff_base_s * 2 ** (attempt - 1))

    async def _attempt(self, request: _Request) -> bytes:
        import aiohttp

        session = self._session_now()
        timeout = aiohttp.ClientTimeout(
            total=self.timeout_s if request.json else None,  # tarballs may be slow but steady
            sock_connect=self.timeout_s,
            sock_read=self.timeout_s,
        )
        accept = "application/json" if request.json else "application/octet-stream, */*"
        subject, url = request.what, request.url
        try:
            async with session.get(url, headers={"Accept": accept}, timeout=timeout) as resp:
                if resp.status != 200:
                    raise self._status_error(request, resp)
                if request.json:
                    _check_json_type(request, resp.headers.get("Content-Type", ""))
                else:
                    _check_not_html(request, resp.headers.get("Content-Type", ""))
                body = await read_capped(
                    resp.content.iter_chunked(CHUNK_BYTES), request.cap, resp.content_length
                )
                return _decode(request, resp.headers.get("Content-Encoding", ""), body)
        except TooLarge as exc:
            size = f"{exc.size} bytes" if exc.size is not None else "more than that"
            raise RemoteError(
                f"{subject}: GET {url} is larger than the {request.cap}-byte limit ({size}); "
                "raise HEXLOCAL_MAX_DOCS_BYTES to allow it"
            ) from None
        except _Truncated as exc:
            raise _Retryable(RemoteError(f"{subject}: GET {url} was cut short ({exc})")) from None
        except TimeoutError:
            raise _Retryable(
                RemoteError(f"{subject}: GET {url} timed out after {self.timeout_s:g}s")
            ) from None
        except aiohttp.ClientPayloadError as exc:
            raise _Retryable(RemoteError(f"{subject}: GET {url} was cut short ({exc})")) from None
        except aiohttp.ClientConnectionError as exc:
            raise _Retryable(
                RemoteError(f"{subject}: GET {url} failed: {exc or type(exc).__name__}")
            ) from None
        except aiohttp.ClientError as exc:
            raise RemoteError(f"{subject}: GET {url} failed: {exc or type(exc).__name__}") from exc

    def _status_error(self, request: _Request, resp: aiohttp.ClientResponse) -> Exception:
        status, url, subject = resp.status, request.url, request.what
        # Storage-backed mirrors answer 403 for a missing object, so docs treat it as 404.
        if status == 404 or (status == 403 and not request.json):
            return request.not_found(status)
        if status == 429:
            delay = _retry_after(resp.headers.get("Retry-After"))
            reset_at = _reset_at(delay)
            error = RateLimited(
                f"{subject}: hex.pm rate-limited GET {url} (429)"
                + (f"; retry after {delay:g}s" if delay is not None else "; retry in a minute"),
                reset_at=reset_at,
            )
            return _Retryable(error, delay)
        if status >= 500:
            return _Retryable(RemoteError(f"{subject}: GET {url} returned {status}"))
        return RemoteError(f"{subject}: GET {url} returned {status} {resp.reason or ''}".rstrip())


def _check_json_type(request: _Request, content_type: str) -> None:
    mime = content_type.split(";", 1)[0].strip().lower()
    if "json" not in mime:
        raise RemoteError(
            f"{request.what}: GET {request.url} returned {mime or 'no content type'} instead of "
            "JSON; HEX_API_URL should point at the Hex API (ending in /api), not a web page "
            "or a login portal"
        )


def _check_not_html(request: _Request, content_type: str) -> None:
    # A captive portal or a wrong HEX_MIRROR answers 200 with a web page; named here, with
    # the URL, instead of later as "not gzip-compressed" with neither.
    mime = content_type.split(";", 1)[0].strip().lower()
    if mime == "text/html":
        raise RemoteError(
            f"{request.what}: GET {request.url} returned a web page (text/html) instead of a "
            "docs tarball; HEX_MIRROR should point at a Hex repository (like "
            "https://repo.hex.pm), not a web page or a login portal"
        )


def _decode(request: _Request, encoding: str, body: bytes) -> bytes:
    """Undoes a Content-Encoding on API JSON (docs stay as published), within the cap."""
    encoding = encoding.strip().lower()
    if not request.json or encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "deflate"):
        raise RemoteError(f"{request.what}: GET {request.url} used unsupported encoding {encoding}")
    inflater = zlib.decompressobj(wbits=47)  # 47 = 32 + 15: gzip or zlib header, auto-detected
    try:
        out = inflater.decompress(body, request.cap + 1)
    except zlib.error as exc:
        raise RemoteError(f"{request.what}: GET {request.url} sent a corrupt body ({exc})") from exc
    if len(out) > request.cap:
        raise RemoteError(f"{request.what}: GET {request.url} inflates past {request.cap} bytes")
    return out


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _reset_at(delay: float | None) -> str | None:
    if delay is None:
        return None
    return (datetime.now(UTC) + timedelta(seconds=delay)).isoformat(timespec="seconds")


# --------------------------------------------------------------------------- parsing


def parse_package_info(name: str, data: Any, url: str) -> HexPackageInfo:
    """HexPackageInfo from the API's JSON. Raises RemoteError when the shape is wrong."""
    if not isinstance(data, dict) or not isinstance(data.get("releases"), list):
        raise RemoteError(
            f"{name}: GET {url} returned JSON without a release list; is HEX_API_URL the Hex API?"
        )
    releases = tuple(
        HexRelease(version=r["version"], has_docs=bool(r.get("has_docs", True)))
        for r in data["releases"]
        if isinstance(r, dict) and isinstance(r.get("version"), str)
    )
    meta = data.get("meta") if isinstance(data.get("meta"), dict) else {}
    raw_links = meta.get("links") if isinstance(meta, dict) else None
    links = (
        {str(k): v for k, v in (raw_links or {}).items() if isinstance(v, str)}
        if isinstance(raw_links, dict)
        else {}
    )
    return HexPackageInfo(
        name=data["name"] if isinstance(data.get("name"), str) else name,
        releases=releases,
        latest_version=_opt_str(data.get("latest_version")),
        latest_stable_version=_opt_str(data.get("latest_stable_version")),
        docs_html_url=_opt_str(data.get("docs_html_url")),
        links=links,
    )


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


# Link labels packages use for their source repository, most telling first.
_SOURCE_LABELS = ("github", "source", "source code", "repository", "repo", "code")
_GITHUB_HOSTS = ("github.com", "www.github.com")
_NOT_OWNERS = frozenset(
    {"sponsors", "orgs", "settings", "marketplace", "features", "topics", "apps"}
)
_OWNER = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$")
_REPO = re.compile(r"^[A-Za-z0-9._-]{1,100}$")


def repo_from_links(links: Mapping[str, str]) -> str | None:
    """'owner/name' of the GitHub repository among a package's links, or None.

    Links labelled like a source link are tried first, then any other GitHub link.
    """
    ranked = sorted(
        links.items(),
        key=lambda kv: (
            _SOURCE_LABELS.index(kv[0].strip().lower())
            if kv[0].strip().lower() in _SOURCE_LABELS
            else len(_SOURCE_LABELS)
        ),
    )
    for _, url in ranked:
        repo = _github_repo(url) if isinstance(url, str) else None
        if repo is not None:
            return repo
    return None


def _github_repo(url: str) -> str | None:
    text = url.strip()
    ssh = re.match(r"^git@github\.com:(.+)$", text)
    if ssh:
        path = ssh.group(1)
    else:
        parsed = urlparse(text if "://" in text else f"https://{text}")
        if parsed.scheme not in ("http", "https", "git") or parsed.hostname not in _GITHUB_HOSTS:
            return None
        path = parsed.path
    parts = [p for p in path.split("/") if p]
    if len(parts) < 2:
        return None
    owner, repo = parts[0], parts[1].removesuffix(".git")
    if owner.lower() in _NOT_OWNERS or not _OWNER.match(owner) or not _REPO.match(repo):
        return None
    return f"{owner}/{repo}"
