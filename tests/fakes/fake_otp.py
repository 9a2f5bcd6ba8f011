"""A fake of erlang/otp's GitHub release downloads on 127.0.0.1, serving the shared corpus.

    GET /erlang/otp/releases/download/OTP-{vsn}/otp_doc_html_{vsn}.tar.gz
        302 -> /objects/otp_doc_html_{vsn}.tar.gz?X-Amz-...&X-Amz-Signature=...
    GET /objects/otp_doc_html_{vsn}.tar.gz
        corpus/otp/otp_doc_html_{vsn}.tar.gz, or bytes a test added

As GitHub does: a release asset answers with a redirect to signed object storage, and
anything unknown answers 404 "Not Found" as text. Every request is recorded. Faults apply
per path pattern (fnmatch), optionally to the first N matching requests only: a status,
a delay before answering, a stall after half the body, a slow body (small pieces with
pauses), a body cut short, a web page with 200, a redirect to itself.
"""

from __future__ import annotations

import asyncio
import fnmatch
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from aiohttp import web
from attrs import define, field

from tests.fakes.fake_hex import DEFAULT_CORPUS, FAST_BACKOFF_S
from tests.fakes.loopback import (
    AsyncServerContext,
    RecordedRequest,
    requests_matching,
    root_url,
    serve,
)

if TYPE_CHECKING:
    from hexlocal_core.adapters.otp_docs import OtpDocsClient
    from hexlocal_core.config import Settings

RELEASES = "/erlang/otp/releases/download"
# What the redirect's signed query carries: it must never appear in a message.
SIGNATURE = "c2lnbmVkLXVybC1zZWNyZXQtdmFsdWU"
_VSN = r"[0-9][0-9A-Za-z.-]{0,40}"
_ASSET = re.compile(rf"^otp_doc_html_(?P<vsn>{_VSN})\.tar\.gz$")
_TAG = re.compile(rf"^OTP-(?P<vsn>{_VSN})$")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@define
class OtpFault:
    """What to do to requests whose path matches `pattern` (the first `times`, or all)."""

    pattern: str
    status: int | None = None
    delay: float = 0.0  # before answering at all
    stall: float = 0.0  # after sending half the body
    slow: float = 0.0  # pause between 64 KiB pieces of the body
    truncate: bool = False
    html: bool = False
    loop: bool = False
    times: int | None = None
    hits: int = 0

    def matches(self, path: str) -> bool:
        return fnmatch.fnmatchcase(path, self.pattern) and (
            self.times is None or self.hits < self.times
        )


@define
class FakeOtpReleases(AsyncServerContext):
    """The fake host. `await start()` (or `async with`), then aim OTP_DOCS_MIRROR at
    `mirror_url`."""

    corpus: Path = DEFAULT_CORPUS
    requests: list[RecordedRequest] = field(factory=list)
    faults: list[OtpFault] = field(factory=list)
    tarballs: dict[str, bytes] = field(factory=dict)  # extra assets by release version
    _runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        return root_url(self._runner, "FakeOtpReleases")

    @property
    def mirror_url(self) -> str:
        return f"{self.base_url}{RELEASES}"

    def asset_path(self, vsn: str) -> str:
        return f"{RELEASES}/OTP-{vsn}/otp_doc_html_{vsn}.tar.gz"

    def object_path(self, vsn: str) -> str:
        return f"/objects/otp_doc_html_{vsn}.tar.gz"

    async def start(self) -> FakeOtpReleases:
        app = web.Application(middlewares=[self._middleware])
        app.router.add_get(RELEASES + "/{tag}/{asset}", self._release_asset)
        app.router.add_get("/objects/{asset}", self._object)
        self._runner = await serve(app, handler_cancellation=True)
        return self

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    # ------------------------------------------------------------------ test controls

    def fail(self, pattern: str, **what: Any) -> OtpFault:
        """Adds a fault (see OtpFault's fields) for paths matching `pattern`."""
        fault = OtpFault(pattern=pattern, **what)
        self.faults.append(fault)
        return fault

    def requests_to(self, pattern: str) -> list[RecordedRequest]:
        return requests_matching(self.requests, pattern)

    # ------------------------------------------------------------------ serving

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        self.requests.append(RecordedRequest.of(request))
        fault = next((f for f in self.faults if f.matches(request.path)), None)
        if fault is None:
            return await handler(request)
        fault.hits += 1
        if fault.delay:
            await asyncio.sleep(fault.delay)
        if fault.status is not None:
            return web.Response(status=fault.status, text="injected fault")
        if fault.html:
            page = "<!DOCTYPE html><html><body><h1>Sign in to continue</h1></body></html>"
            return web.Response(text=page, content_type="text/html")
        if fault.loop:
            raise web.HTTPFound(request.path)
        response = await handler(request)
        if not isinstance(response, web.Response) or response.status != 200:
            return response
        body = response.body if isinstance(response.body, bytes) else b""
        return await _paced(request, body, fault)

    async def _release_asset(self, request: web.Request) -> web.StreamResponse:
        tag = _TAG.match(request.match_info["tag"])
        asset = _ASSET.match(request.match_info["asset"])
        if tag is None or asset is None or tag["vsn"] != asset["vsn"]:
            return _not_found()
        if self._asset(asset["vsn"]) is None:
            return _not_found()
        signed = f"X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature={SIGNATURE}"
        raise web.HTTPFound(f"{self.object_path(asset['vsn'])}?{signed}")

    async def _object(self, request: web.Request) -> web.StreamResponse:
        asset = _ASSET.match(request.match_info["asset"])
        body = self._asset(asset["vsn"]) if asset is not None else None
        if body is None or SIGNATURE not in request.query_string:
            return _not_found()
        return web.Response(body=body, content_type="application/octet-stream")

    def _asset(self, vsn: str) -> bytes | None:
        if vsn in self.tarballs:
            return self.tarballs[vsn]
        path = self.corpus / "otp" / f"otp_doc_html_{vsn}.tar.gz"
        return path.read_bytes() if path.is_file() else None


def _not_found() -> web.Response:
    return web.Response(status=404, text="Not Found")


async def _paced(request: web.Request, body: bytes, fault: OtpFault) -> web.StreamResponse:
    """The body announced in full, then sent slowly, stalled half way, or cut short."""
    response = web.StreamResponse(status=200)
    response.content_type = "application/octet-stream"
    response.content_length = len(body)
    await response.prepare(request)
    half = len(body) // 2
    if fault.truncate or fault.stall:
        await response.write(body[:half])
        if fault.stall:
            await asyncio.sleep(fault.stall)
        if request.transport is not None:
            request.transport.close()
        return response
    piece = 64 * 1024
    for start in range(0, len(body), piece):
        await response.write(body[start : start + piece])
        await asyncio.sleep(fault.slow)
    await response.write_eof()
    return response


# ---------------------------------------------------------------------- test helpers


def otp_settings_for(fake: FakeOtpReleases, tmp_path: Path, **env: str) -> Settings:
    """Settings with OTP_DOCS_MIRROR at `fake`, the project and database under `tmp_path`."""
    from hexlocal_core.config import Settings

    project = tmp_path / "project"
    project.mkdir(parents=True, exist_ok=True)
    values = {
        "OTP_DOCS_MIRROR": fake.mirror_url,
        "PROJECT_ROOT": str(project),
        "DATABASE_PATH": str(tmp_path / "hexlocal.db"),
        "HEXLOCAL_HTTP_TIMEOUT_S": "5",
    }
    return Settings.from_env({**values, **env})


def otp_client_for(
    settings: Settings,
    *,
    attempts: int = 3,
    sleep: Callable[[float], Awaitable[None]] | None = None,
    **options: Any,
) -> OtpDocsClient:
    """An OtpDocsClient with millisecond backoff (and `sleep` recording the waits)."""
    from hexlocal_core.adapters.http_policy import RetryPolicy
    from hexlocal_core.adapters.otp_docs import OtpDocsClient

    policy = RetryPolicy(attempts=attempts, base_s=FAST_BACKOFF_S, max_retry_after_s=2.0)
    if sleep is not None:
        policy = attrs.evolve(policy, sleep=sleep)
    options.setdefault("retry", policy)
    return OtpDocsClient(settings, **options)
