"""HexClient: the `HexRegistry` port over HTTP (aiohttp, through `adapters.http`).

    GET {HEX_API_URL}/packages/{name}             -> HexPackageInfo (JSON, cached briefly)
    GET {HEX_MIRROR}/docs/{name}-{version}.tar.gz -> bytes          (in memory, size-capped)
    GET {HEX_API_URL}/packages/{name}/releases/{version} -> its requirements (ReleaseRequirements)

This module says only what is Hex's own: 404 (and a mirror's 403) -> PackageNotFound /
VersionNotFound; 429 -> RateLimited, waited for when Retry-After is short; 5xx, timeouts,
dropped connections and truncated bodies are retried with backoff, then RemoteError. Every
message names the package and the URL tried, with any credentials in HEX_API_URL or
HEX_MIRROR masked (`redact_url`).

A host that could not be reached at all (`adapters.reachability.HostWatch`) is not asked
again until a check in the background, every RECHECK_S, gets an answer from it: meanwhile
its calls raise RemoteError at once, so an offline laptop answers from its index without
waiting. `reachable()` says what is known of HEX_API_URL and HEX_MIRROR.
"""

from __future__ import annotations

import json
import re
import time
import zlib
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from attrs import frozen

from hexlocal_core.adapters.http import Failure, HttpClient, Retry, join_url
from hexlocal_core.adapters.http_body import TooLarge, Truncated, read_capped
from hexlocal_core.adapters.http_policy import RetryPolicy, parse_retry_after, reset_at
from hexlocal_core.adapters.reachability import HostWatch
from hexlocal_core.config import Settings
from hexlocal_core.errors import PackageNotFound, RateLimited, RemoteError, VersionNotFound
from hexlocal_core.model import HexPackageInfo, HexRelease, Reachability
from hexlocal_core.ports import NoLifecycle
from hexlocal_core.redact import redact_url, url_secrets
from hexlocal_core.untrusted import clip

if TYPE_CHECKING:
    import aiohttp

__all__ = ["DEFAULT_RETRY", "HexClient", "parse_package_info", "parse_requirements"]

USER_AGENT = "hexlocal/0.1 (+aiohttp)"
# 0.5 s, then 1 s: transient Hex hiccups clear within seconds; a Retry-After past 20 s fails
# fast with RateLimited instead of holding the caller.
DEFAULT_RETRY = RetryPolicy(attempts=3, base_s=0.5, cap_s=10.0, max_retry_after_s=20.0)
PACKAGE_INFO_TTL_S = 300.0  # versions appear rarely; five minutes saves a call per query
# A check is a HEAD in the background, so it costs no call anything: often enough that a
# network back after a tunnel is used within half a minute.
RECHECK_S = 30.0
MAX_API_BYTES = 16 * 1024 * 1024  # the largest package JSON is well under 1 MB
CHUNK_BYTES = 64 * 1024


@frozen
class _Request:
    """What one GET is for: how to name it in messages and how to read the body."""

    url: str  # as requested (may hold credentials)
    what: str  # "jason" or "jason 1.4.5": the subject of every message, clipped
    cap: int
    json: bool
    not_found: Callable[[int], Exception]  # status -> the error for a missing resource

    @property
    def shown(self) -> str:
        """The URL as messages show it."""
        return clip(redact_url(self.url), 500)


class HexClient(NoLifecycle):
    """Talks to the Hex API and docs mirror named in Settings. One lazy session.

    Use as `async with HexClient(settings) as hex: ...`, or call `aclose()`.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        retry: RetryPolicy = DEFAULT_RETRY,
        info_ttl_s: float = PACKAGE_INFO_TTL_S,
        trust_env: bool = False,
        clock: Callable[[], float] = time.monotonic,
        recheck_s: float = RECHECK_S,
    ) -> None:
        self.api_url = settings.hex_api_url.rstrip("/")
        self.mirror_url = settings.hex_mirror.rstrip("/")
        self.max_docs_bytes = settings.max_docs_bytes
        self.retry = retry
        self.info_ttl_s = info_ttl_s
        self._clock = clock
        # auto_decompress off: a docs tarball must arrive byte for byte as published, even
        # from a mirror that adds Content-Encoding.
        self.http = HttpClient(
            timeout_s=settings.http_timeout_s,
            headers={"User-Agent": USER_AGENT, "Accept-Encoding": "identity"},
            secrets=url_secrets(self.api_url) + url_secrets(self.mirror_url),
            trust_env=trust_env,
            auto_decompress=False,
            watch=HostWatch(recheck_s=recheck_s, clock=clock),
        )
        # Per-process cache of package metadata: name -> (fetched at, info).
        self._info_cache: dict[str, tuple[float, HexPackageInfo]] = {}

    def __repr__(self) -> str:
        return (
            f"HexClient(api={redact_url(self.api_url)!r}, mirror={redact_url(self.mirror_url)!r})"
        )

    async def __aenter__(self) -> HexClient:
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

    def forget(self, name: str | None = None) -> None:
        """Drops cached package metadata (one package, or all)."""
        if name is None:
            self._info_cache.clear()
        else:
            self._info_cache.pop(name, None)

    # ----------------------------------------------------------------------- the port

    def reachable(self) -> tuple[Reachability, ...]:
        watch = self.http.watch
        assert watch is not None  # made in __init__
        return (
            watch.reachability(self.api_url, "HEX_API_URL"),
            watch.reachability(self.mirror_url, "HEX_MIRROR"),
        )

    async def package_info(self, name: str) -> HexPackageInfo:
        cached = self._info_cache.get(name)
        if cached is not None and self._clock() - cached[0] < self.info_ttl_s:
            return cached[1]
        url = join_url(self.api_url, f"/packages/{quote(name, safe='')}")
        subject = clip(name)

        def not_found(status: int) -> Exception:
            return PackageNotFound(
                f"hex.pm has no package '{subject}' (GET {request.shown} returned {status}). "
                "Check the spelling (the OTP app name, like 'phoenix_live_view'); a private "
                "or mirrored package needs HEX_API_URL pointing at its registry."
            )

        request = _Request(url, subject, MAX_API_BYTES, True, not_found)
        body = await self._get(request)
        try:
            data = json.loads(body)
        except ValueError as exc:
            raise RemoteError(
                f"{subject}: GET {request.shown} returned malformed JSON ({clip(str(exc))})"
            ) from None
        info = parse_package_info(name, data, request.shown)
        self._info_cache[name] = (self._clock(), info)
        return info

    async def fetch_docs(self, name: str, version: str) -> bytes:
        url = join_url(self.mirror_url, f"/docs/{quote(f'{name}-{version}.tar.gz', safe='')}")
        subject = f"{clip(name)} {clip(version, 100)}"

        def not_found(status: int) -> Exception:
            return VersionNotFound(
                f"{subject}: there is no docs tarball for this version (GET {request.shown} "
                f"returned {status})."
            )

        request = _Request(url, subject, self.max_docs_bytes, False, not_found)
        return await self._get(request)

    async def release_requirements(self, name: str, version: str) -> dict[str, str]:
        path = f"/packages/{quote(name, safe='')}/releases/{quote(version, safe='')}"
        url = join_url(self.api_url, path)
        subject = f"{clip(name)} {clip(version, 100)}"

        def not_found(status: int) -> Exception:
            return VersionNotFound(
                f"{subject}: hex.pm has no release data (GET {request.shown} returned {status})"
            )

        request = _Request(url, subject, MAX_API_BYTES, True, not_found)
        body = await self._get(request)
        try:
            data = json.loads(body)
        except ValueError as exc:
            raise RemoteError(
                f"{subject}: GET {request.shown} returned malformed JSON ({clip(str(exc))})"
            ) from None
        return parse_requirements(data)

    # ----------------------------------------------------------------------- HTTP

    async def _get(self, request: _Request) -> bytes:
        accept = "application/json" if request.json else "application/octet-stream, */*"

        async def handle(response: aiohttp.ClientResponse) -> bytes:
            return await self._read(request, response)

        def on_failure(failure: Failure) -> Exception:
            return _failure_error(request, failure, self.http.timeout_s)

        return await self.http.request(
            "GET",
            request.url,
            policy=self.retry,
            handle=handle,
            on_failure=on_failure,
            headers={"Accept": accept},
            streaming=not request.json,  # tarballs may be slow but steady
        )

    async def _read(self, request: _Request, response: aiohttp.ClientResponse) -> bytes:
        if response.status != 200:
            raise self._status_error(request, response)
        content_type = response.headers.get("Content-Type", "")
        if request.json:
            _check_json_type(request, content_type)
        else:
            _check_not_html(request, content_type)
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
        return _decode(request, response.headers.get("Content-Encoding", ""), body)

    def _status_error(self, request: _Request, response: aiohttp.ClientResponse) -> Exception:
        status, url, subject = response.status, request.shown, request.what
        # Storage-backed mirrors answer 403 for a missing object, so docs treat it as 404.
        if status == 404 or (status == 403 and not request.json):
            return request.not_found(status)
        if status == 429:
            after = parse_retry_after(response.headers.get("Retry-After"))
            wait = f"; retry after {after:g}s" if after is not None else "; retry in a minute"
            limited = RateLimited(
                f"{subject}: hex.pm rate-limited GET {url} (429){wait}", reset_at=reset_at(after)
            )
            return Retry(limited, after) if self.retry.retries(429) else limited
        if self.retry.retries(status):
            return Retry(RemoteError(f"{subject}: GET {url} returned {status}"))
        reason = clip(response.reason or "", 80)
        return RemoteError(f"{subject}: GET {url} returned {status} {reason}".rstrip())


def _failure_error(request: _Request, failure: Failure, timeout_s: float) -> Exception:
    """Every transport failure is worth another attempt, except a URL aiohttp refuses and a
    host known to be down (not tried at all)."""
    subject, url = request.what, failure.url
    if failure.kind == "timeout":
        return Retry(RemoteError(f"{subject}: GET {url} timed out after {timeout_s:g}s"))
    if failure.kind == "cut_short":
        return Retry(RemoteError(f"{subject}: GET {url} was cut short ({failure.detail})"))
    if failure.kind == "connect":
        return Retry(RemoteError(f"{subject}: GET {url} failed: {failure.detail}"))
    if failure.kind == "down":
        return RemoteError(f"{subject}: GET {url} not sent: the host is {failure.detail}")
    return RemoteError(f"{subject}: GET {url} failed: {failure.detail}")


def _check_json_type(request: _Request, content_type: str) -> None:
    mime = clip(content_type.split(";", 1)[0].strip().lower(), 80)
    if "json" not in mime:
        raise RemoteError(
            f"{request.what}: GET {request.shown} returned {mime or 'no content type'} instead "
            "of JSON; HEX_API_URL should point at the Hex API (ending in /api), not a web page "
            "or a login portal"
        )


def _check_not_html(request: _Request, content_type: str) -> None:
    # A captive portal or a wrong HEX_MIRROR answers 200 with a web page; named here, with
    # the URL, instead of later as "not gzip-compressed" with neither.
    mime = content_type.split(";", 1)[0].strip().lower()
    if mime == "text/html":
        raise RemoteError(
            f"{request.what}: GET {request.shown} returned a web page (text/html) instead of a "
            "docs tarball; HEX_MIRROR should point at a Hex repository (like "
            "https://repo.hex.pm), not a web page or a login portal"
        )


def _decode(request: _Request, encoding: str, body: bytes) -> bytes:
    """Undoes a Content-Encoding on API JSON (docs stay as published), within the cap."""
    encoding = encoding.strip().lower()
    if not request.json or encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "deflate"):
        raise RemoteError(
            f"{request.what}: GET {request.shown} used unsupported encoding {clip(encoding, 40)}"
        )
    inflater = zlib.decompressobj(wbits=47)  # 47 = 32 + 15: gzip or zlib header, auto-detected
    try:
        out = inflater.decompress(body, request.cap + 1)
    except zlib.error as exc:
        raise RemoteError(
            f"{request.what}: GET {request.shown} sent a corrupt body ({exc})"
        ) from None
    if len(out) > request.cap:
        raise RemoteError(f"{request.what}: GET {request.shown} inflates past {request.cap} bytes")
    return out


# --------------------------------------------------------------------------- parsing


# What a server-supplied name or version may look like before it is kept: anything else
# (a 2 MB "version", a name with a newline) is dropped rather than echoed or stored.
_SERVER_NAME = re.compile(r"^[a-z][a-z0-9_]{0,199}$")
_SERVER_VERSION = re.compile(r"^[0-9A-Za-z.+-]{1,100}$")
_MAX_LINK_CHARS = 2048
_MAX_LINKS = 50  # real packages list a handful; messages may quote them all


def parse_package_info(name: str, data: Any, url: str) -> HexPackageInfo:
    """HexPackageInfo from the API's JSON (`url` as shown in messages). Raises RemoteError
    when the shape is wrong; drops release versions and strings no real package has."""
    if not isinstance(data, dict) or not isinstance(data.get("releases"), list):
        raise RemoteError(
            f"{clip(name)}: GET {url} returned JSON without a release list; is HEX_API_URL "
            "the Hex API?"
        )
    releases = tuple(
        HexRelease(version=r["version"], has_docs=bool(r.get("has_docs", True)))
        for r in data["releases"]
        if isinstance(r, dict) and _is_version(r.get("version"))
    )
    meta = data.get("meta") if isinstance(data.get("meta"), dict) else {}
    raw_links = meta.get("links") if isinstance(meta, dict) else None
    links = (
        {
            clip(str(k), 100): v
            for k, v in list((raw_links or {}).items())[:_MAX_LINKS]
            if isinstance(v, str) and len(v) <= _MAX_LINK_CHARS
        }
        if isinstance(raw_links, dict)
        else {}
    )
    server_name = data.get("name")
    return HexPackageInfo(
        name=server_name
        if isinstance(server_name, str) and _SERVER_NAME.match(server_name)
        else name,
        releases=releases,
        latest_version=_opt_version(data.get("latest_version")),
        latest_stable_version=_opt_version(data.get("latest_stable_version")),
        docs_html_url=_opt_link(data.get("docs_html_url")),
        links=links,
    )


def parse_requirements(data: Any) -> dict[str, str]:
    """`{"requirements": {"decimal": {"requirement": "~> 2.0", ...}}}` -> {"decimal": "~> 2.0"};
    entries of another shape, or names and requirements no real package has, are dropped."""
    raw = data.get("requirements") if isinstance(data, dict) else None
    out: dict[str, str] = {}
    for dep, spec in list(raw.items())[: _MAX_LINKS * 10] if isinstance(raw, dict) else []:
        requirement = spec.get("requirement") if isinstance(spec, dict) else None
        if (
            isinstance(dep, str)
            and _SERVER_NAME.match(dep)
            and isinstance(requirement, str)
            and 0 < len(requirement) <= 256
        ):
            out[dep] = requirement
    return out


def _is_version(value: Any) -> bool:
    return isinstance(value, str) and bool(_SERVER_VERSION.match(value))


def _opt_version(value: Any) -> str | None:
    return value if _is_version(value) else None


def _opt_link(value: Any) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= _MAX_LINK_CHARS else None
