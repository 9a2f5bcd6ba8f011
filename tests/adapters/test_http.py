"""The shared HTTP layer's pure parts: Retry-After, the retry policy, URL joining, and the
request loop itself against a loopback server (attempts counted, waits recorded)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from hexlocal_core.adapters.github import GitHubIssues
from hexlocal_core.adapters.hex import HexClient
from hexlocal_core.adapters.http import Failure, HttpClient, Retry, join_url
from hexlocal_core.adapters.http_policy import RetryPolicy, parse_retry_after, reset_at
from hexlocal_core.adapters.openai_api import OpenAIChat, OpenAIEmbedder
from hexlocal_core.config import Settings
from hexlocal_core.errors import RateLimited, RemoteError
from hexlocal_core.ports import Resource
from tests.fakes.loopback import root_url, serve

NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("0", 0.0),
        ("7", 7.0),
        (" 12 ", 12.0),
        ("0.5", 0.5),  # not RFC 9110, but servers send it
        ("soon", None),
        ("", None),
        (None, None),
        ("-3", None),  # delta-seconds has no sign: garbage, not "now"
        ("nan", None),
        ("inf", None),
        ("1e400", None),  # overflows to infinity
        ("9" * 5000, None),  # no valid header is that long
        ("99999999999", 86_400.0),  # huge: a day at most
        ("Wed, 01 Jan 2025 12:00:30 GMT", 30.0),
        ("Wed, 01 Jan 2025 11:00:00 GMT", 0.0),  # in the past: retry now
        ("Fri, 31 Dec 9999 23:59:59 GMT", 86_400.0),
        ("Fri, 99 Foo 2025 99:99:99 GMT", None),
    ],
)
def test_parse_retry_after(header: str | None, seconds: float | None) -> None:
    assert parse_retry_after(header, now=NOW) == seconds


def test_parse_retry_after_defaults_to_the_clock() -> None:
    soon = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    seconds = parse_retry_after(soon)
    assert seconds is not None and 25 <= seconds <= 31


def test_reset_at_is_iso_utc() -> None:
    assert reset_at(90, now=NOW) == "2025-01-01T12:01:30Z"
    assert reset_at(None, now=NOW) is None
    assert reset_at(1e30, now=NOW) == "2025-01-02T12:00:00Z"  # bounded: no OverflowError


def test_backoff_doubles_and_is_capped() -> None:
    policy = RetryPolicy(base_s=1.0, cap_s=5.0, max_retry_after_s=20.0)
    assert [policy.wait_s(attempt, None) for attempt in range(1, 6)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert policy.wait_s(1, 2.5) == 2.5  # Retry-After wins over the backoff
    assert policy.wait_s(1, 20.0) == 20.0
    assert policy.wait_s(1, 20.5) is None  # longer than honoured: give up now


def test_policy_statuses() -> None:
    policy = RetryPolicy()
    assert all(policy.retries(s) for s in (429, 500, 502, 503, 504))
    assert not any(policy.retries(s) for s in (400, 401, 403, 404, 422, 501))
    assert RetryPolicy(statuses=frozenset({418})).retries(418)
    with pytest.raises(ValueError):
        RetryPolicy(attempts=0)


@pytest.mark.parametrize(
    ("base", "path", "joined"),
    [
        ("https://repo.hex.pm", "/docs/a.tar.gz", "https://repo.hex.pm/docs/a.tar.gz"),
        ("https://h/repo/", "/docs/a", "https://h/repo/docs/a"),
        ("https://u:p@h/repo?token=t", "/docs/a", "https://u:p@h/repo/docs/a?token=t"),
        ("https://h/v1?api_key=k#frag", "/embeddings", "https://h/v1/embeddings?api_key=k"),
        ("http://[::1/x", "/y", "http://[::1/x/y"),  # unparsable: appended as it is
    ],
)
def test_join_url(base: str, path: str, joined: str) -> None:
    assert join_url(base, path) == joined


# -- the request loop against a loopback server -------------------------------------------


class Waits:
    def __init__(self) -> None:
        self.seconds: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[int], list[int]]]:
    """Answers /flaky with the statuses queued in `plan` (then 200), counting requests."""
    plan: list[int] = []
    seen: list[int] = []

    async def flaky(request: web.Request) -> web.Response:
        seen.append(len(seen) + 1)
        status = plan.pop(0) if plan else 200
        headers = {"Retry-After": "3"} if status == 429 else {}
        return web.Response(status=status, text=f"answer {len(seen)}", headers=headers)

    app = web.Application()
    app.router.add_get("/flaky", flaky)
    runner = await serve(app)
    try:
        yield f"{root_url(runner, 'server')}/flaky", plan, seen
    finally:
        await runner.cleanup()


async def _get(http: HttpClient, url: str, policy: RetryPolicy) -> str:
    async def handle(response: aiohttp.ClientResponse) -> str:
        if response.status == 200:
            return await response.text()
        after = (
            float(response.headers["Retry-After"]) if "Retry-After" in response.headers else None
        )
        if response.status == 429:
            raise Retry(RateLimited("limited", reset_at="x"), after)
        if policy.retries(response.status):
            raise Retry(RemoteError(f"answered {response.status}"))
        raise RemoteError(f"final {response.status}")

    def on_failure(failure: Failure) -> Exception:
        return RemoteError(f"{failure.kind}: {failure.url}")

    return await http.request("GET", url, policy=policy, handle=handle, on_failure=on_failure)


async def test_request_retries_until_an_answer(server: tuple[str, list[int], list[int]]) -> None:
    url, plan, seen = server
    waits = Waits()
    policy = RetryPolicy(attempts=4, base_s=0.25, sleep=waits)
    plan += [503, 429, 500]
    http = HttpClient(timeout_s=5)
    try:
        assert await _get(http, url, policy) == "answer 4"
    finally:
        await http.aclose()
    assert len(seen) == 4
    assert waits.seconds == [0.25, 3.0, 1.0]  # backoff, Retry-After, backoff (third attempt)


async def test_request_gives_up_after_the_attempts(
    server: tuple[str, list[int], list[int]],
) -> None:
    url, plan, seen = server
    waits = Waits()
    plan += [503] * 5
    http = HttpClient(timeout_s=5)
    try:
        with pytest.raises(RemoteError) as caught:
            await _get(http, url, RetryPolicy(attempts=3, base_s=0.1, sleep=waits))
    finally:
        await http.aclose()
    assert str(caught.value) == "answered 503; gave up after 3 attempts"
    assert len(seen) == 3 and waits.seconds == [0.1, 0.2]


async def test_a_long_retry_after_gives_up_at_once_keeping_the_error(
    server: tuple[str, list[int], list[int]],
) -> None:
    url, plan, seen = server
    waits = Waits()
    plan += [429]
    http = HttpClient(timeout_s=5)
    try:
        with pytest.raises(RateLimited) as caught:
            await _get(http, url, RetryPolicy(max_retry_after_s=2.0, sleep=waits))
    finally:
        await http.aclose()
    assert (str(caught.value), caught.value.reset_at) == ("limited", "x")
    assert len(seen) == 1 and waits.seconds == []


async def test_a_final_error_is_not_retried(server: tuple[str, list[int], list[int]]) -> None:
    url, plan, seen = server
    plan += [404]
    http = HttpClient(timeout_s=5)
    try:
        with pytest.raises(RemoteError, match="^final 404$"):
            await _get(http, url, RetryPolicy(sleep=Waits()))
    finally:
        await http.aclose()
    assert len(seen) == 1


async def test_transport_failure_names_the_redacted_url() -> None:
    http = HttpClient(timeout_s=1)
    url = "http://user:hunter22@127.0.0.1:9/x?token=tok3n"  # port 9 (discard): refused
    try:
        with pytest.raises(RemoteError) as caught:
            await _get(http, url, RetryPolicy(attempts=1))
    finally:
        await http.aclose()
    message = str(caught.value)
    assert message == "connect: http://****@127.0.0.1:9/x?token=****"
    assert caught.value.__cause__ is None and caught.value.__context__ is None


async def test_session_lifecycle() -> None:
    http = HttpClient(timeout_s=1)
    await http.aclose()  # before any session: nothing to do
    assert not http.open
    session = http.session()
    assert http.open and http.session() is session  # one session, reused
    await http.aclose()
    await http.aclose()
    assert session.closed and not http.open
    assert http.session() is not session  # a request after aclose opens a new one
    await http.aclose()


async def test_every_remote_adapter_is_a_resource(tmp_path: Path) -> None:
    settings = Settings.from_env({"PROJECT_ROOT": str(tmp_path)})
    # Typed as the port: mypy checks the lifecycle the composition root relies on.
    adapters: list[Resource] = [
        HexClient(settings),
        OpenAIEmbedder(settings),
        OpenAIChat(settings),
        GitHubIssues(settings),
    ]
    for adapter in adapters:
        await adapter.warm_up()  # remote: nothing to load
        await adapter.aclose()  # never opened: nothing to close
        await adapter.aclose()
