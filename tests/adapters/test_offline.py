"""Offline: a hex.pm that cannot be reached is remembered, never waited on again, checked
in the background, and used again once it answers. A stepped clock stands in for time."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hexlocal_core.adapters.hex import RECHECK_S, HexClient
from hexlocal_core.adapters.reachability import host_key
from hexlocal_core.config import Settings
from hexlocal_core.errors import PackageNotFound, RateLimited, RemoteError
from hexlocal_core.model import SearchResult
from hexlocal_core.service import Hexlocal, build
from tests.fakes.fake_hex import FakeHex, client_for, settings_for
from tests.support.helpers import HashingEmbedder

JASON_LOCK = '%{\n  "jason": {:hex, :jason, "1.4.4", "abc", [:mix], [], "hexpm", "def"},\n}\n'
API = "/api/packages/*"


class Clock:
    """Monotonic seconds that move only when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def step(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


def fast_settings(fake: FakeHex, tmp_path: Path, **overrides: Any) -> Settings:
    # A silent host costs its timeout per attempt: a fifth of a second, three attempts.
    return settings_for(fake, tmp_path, http_timeout_s=0.2, ai_rerank_model="off", **overrides)


def watched_client(settings: Settings, clock: Clock) -> HexClient:
    # No metadata cache: every resolution asks hex.pm, as one past the five minutes does.
    return client_for(settings, clock=clock, info_ttl_s=0.0)


@pytest.fixture
async def client(fake_hex: FakeHex, tmp_path: Path, clock: Clock) -> AsyncIterator[HexClient]:
    async with watched_client(fast_settings(fake_hex, tmp_path), clock) as c:
        yield c


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --------------------------------------------------------------------------- the adapter


async def test_a_refused_host_is_not_asked_again_until_a_check_finds_it_back(
    client: HexClient, fake_hex: FakeHex, clock: Clock
) -> None:
    await fake_hex.refuse()
    with pytest.raises(RemoteError, match="gave up after 3 attempts"):
        await client.package_info("jason")
    api, _ = client.reachable()
    assert not api.reachable and api.setting == "HEX_API_URL" and api.since is not None
    assert api.recheck_s == RECHECK_S

    await fake_hex.listen()  # back, but the client does not know it yet
    with pytest.raises(RemoteError, match="not sent: the host is unreachable since") as caught:
        await client.package_info("jason")
    assert "gave up" not in str(caught.value)  # no attempt was made, let alone three
    assert fake_hex.requests == []  # nothing reached the service

    clock.step(RECHECK_S - 1)
    with pytest.raises(RemoteError, match="not sent"):
        await client.package_info("jason")
    await client.http.checks_done()
    assert fake_hex.requests == []  # a check is not due yet

    clock.step(1)
    with pytest.raises(RemoteError, match="not sent"):  # this call does not wait for it
        await client.package_info("jason")
    await client.http.checks_done()
    assert [(r.method, r.path) for r in fake_hex.requests] == [("HEAD", "/api/packages/jason")]
    assert all(r.reachable for r in client.reachable())
    assert (await client.package_info("jason")).latest_stable_version == "1.4.5"


async def test_a_silent_host_costs_one_timeout_then_is_not_waited_on(
    client: HexClient, fake_hex: FakeHex, clock: Clock
) -> None:
    fake_hex.fail("/api/*", hang=True)  # accepts, reads, never answers
    with pytest.raises(RemoteError, match="timed out"):
        await client.package_info("jason")
    assert len(fake_hex.requests) == 3  # the policy's attempts, once
    api, _ = client.reachable()
    assert not api.reachable and "timed out after 0.2s" in api.reason
    for _ in range(5):
        with pytest.raises(RemoteError, match="not sent"):
            await client.package_info("jason")
    assert len(fake_hex.requests) == 3

    clock.step(RECHECK_S)
    with pytest.raises(RemoteError, match="not sent"):
        await client.package_info("plug")
    await client.http.checks_done()  # the check is read and left silent too: still down
    assert [r.method for r in fake_hex.requests] == ["GET"] * 3 + ["HEAD"]
    assert not client.reachable()[0].reachable
    with pytest.raises(RemoteError, match="not sent"):  # the next check is an interval away
        await client.package_info("jason")
    await client.http.checks_done()
    assert len(fake_hex.requests) == 4

    fake_hex.faults.clear()
    clock.step(RECHECK_S)
    with pytest.raises(RemoteError, match="not sent"):
        await client.package_info("jason")
    await client.http.checks_done()
    assert (await client.package_info("jason")).name == "jason"


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        ({"status": 404}, PackageNotFound),
        ({"status": 429, "retry_after": 60}, RateLimited),  # past the longest wait: at once
        ({"status": 503}, RemoteError),
        ({"reset": True}, RemoteError),  # accepted, then dropped: the host is there
        ({"truncate": True}, RemoteError),
    ],
)
async def test_an_answer_is_never_taken_for_a_host_that_is_down(
    fake_hex: FakeHex,
    tmp_path: Path,
    clock: Clock,
    fault: dict[str, Any],
    error: type[Exception],
) -> None:
    # Every fault here is an answer: a timeout of seconds, not the silent-host tests' fifth
    # of one, so a busy machine's slow answer is not retried and counted twice.
    settings = settings_for(fake_hex, tmp_path, http_timeout_s=5.0, ai_rerank_model="off")
    async with watched_client(settings, clock) as client:
        fake_hex.fail("/api/*", **fault)
        for _ in range(2):
            with pytest.raises(error):
                await client.package_info("jason")
        assert all(r.reachable for r in client.reachable())
        sent = len(fake_hex.requests)
        fake_hex.faults.clear()
        assert (await client.package_info("jason")).name == "jason"
        assert len(fake_hex.requests) == sent + 1


async def test_the_api_and_the_mirror_are_watched_apart(
    fake_hex: FakeHex, tmp_path: Path, clock: Clock
) -> None:
    mirror = f"http://127.0.0.1:{free_port()}/repo"  # nothing listens there
    settings = fast_settings(fake_hex, tmp_path, hex_mirror=mirror)
    async with watched_client(settings, clock) as client:
        with pytest.raises(RemoteError, match="gave up"):
            await client.fetch_docs("jason", "1.4.5")
        with pytest.raises(RemoteError, match="not sent"):
            await client.fetch_docs("jason", "1.4.4")
        api, docs = client.reachable()
        assert api.reachable and not docs.reachable and docs.setting == "HEX_MIRROR"
        assert (await client.package_info("jason")).name == "jason"  # the API is still asked
        assert [r.path for r in fake_hex.requests] == ["/api/packages/jason"]


async def test_a_host_that_answers_again_is_used_by_the_next_request(
    client: HexClient, fake_hex: FakeHex
) -> None:
    fake_hex.fail("/api/*", hang=True, times=2)  # two silent attempts, then answers
    assert (await client.package_info("jason")).name == "jason"
    assert all(r.reachable for r in client.reachable())


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("https://hex.pm/api", "https://HEX.pm:443/api/packages/x?t=1", True),
        ("https://u:secret@repo.hex.pm/", "https://repo.hex.pm/docs/a.tar.gz", True),
        ("http://127.0.0.1:4000/api", "http://127.0.0.1:4001/api", False),
        ("https://hex.pm/api", "https://repo.hex.pm", False),
        ("http://hex.pm/api", "https://hex.pm/api", False),
    ],
)
def test_reachability_is_kept_by_scheme_host_and_port(a: str, b: str, same: bool) -> None:
    assert (host_key(a) == host_key(b)) is same
    assert "secret" not in host_key(a)


# --------------------------------------------------------------------------- the service


async def make_service(settings: Settings, clock: Clock) -> tuple[Hexlocal, HexClient]:
    registry = watched_client(settings, clock)
    service = build(
        settings, embedder=HashingEmbedder(), reranker=None, registry=registry, load_models=False
    )
    return service, registry


def registry_notices(result: SearchResult) -> list[str]:
    return [n.message for n in result.notices if n.code == "registry_unreachable"]


async def go_down(fake: FakeHex, how: str) -> None:
    if how == "refused":
        await fake.refuse()
    else:
        fake.fail("*", hang=True)


@pytest.mark.parametrize("how", ["refused", "silent"])
async def test_an_unpinned_indexed_package_answers_offline_with_one_notice(
    fake_hex: FakeHex, tmp_path: Path, clock: Clock, how: str
) -> None:
    service, registry = await make_service(fast_settings(fake_hex, tmp_path), clock)
    try:
        online = await service.search_docs("jason", "decode")
        assert online.version == "1.4.5" and not online.notices
        await go_down(fake_hex, how)

        first = await service.search_docs("jason", "decode")
        assert first.hits and first.version == "1.4.5" and first.version_source == "indexed"
        (notice,) = first.notices  # one notice: which version, and why
        assert notice.code == "registry_unreachable"
        message = notice.message
        assert message.startswith("answering from the indexed jason 1.4.5")
        assert "HEX_API_URL" in message and "unreachable since" in message
        assert "checked again in the background" in message

        await fake_hex.listen()  # back (or answering again), unknown to the service yet
        fake_hex.faults.clear()
        sent = len(fake_hex.requests)
        second = await service.search_docs("jason", "encode a map")
        assert second.hits and [n.message for n in second.notices] == [message]
        assert len(fake_hex.requests) == sent  # the service known to be down was not asked

        clock.step(RECHECK_S)
        third = await service.search_docs("jason", "decode")
        assert third.hits and registry_notices(third) == [message]  # the check runs apart
        await registry.http.checks_done()
        fourth = await service.search_docs("jason", "decode")
        assert fourth.version == "1.4.5" and not fourth.notices
        assert [r.path for r in fake_hex.requests[sent:]] == ["/api/packages/jason"] * 2
        assert [r.method for r in fake_hex.requests[sent:]] == ["HEAD", "GET"]
    finally:
        await service.aclose()


async def test_a_pinned_package_never_asks_hex_pm(
    fake_hex: FakeHex, tmp_path: Path, clock: Clock
) -> None:
    settings = fast_settings(fake_hex, tmp_path)
    (settings.project_root / "mix.lock").write_text(JASON_LOCK)
    service, _ = await make_service(settings, clock)
    try:
        await service.search_docs("jason", "decode")
        await fake_hex.refuse()
        for query in ("decode", "encode a map"):
            result = await service.search_docs("jason", query)
            assert result.hits and result.version == "1.4.4" and not result.notices
            assert result.version_source == "mix.lock"
    finally:
        await service.aclose()


async def test_a_package_not_indexed_fails_at_once_naming_the_offline_fix(
    fake_hex: FakeHex, tmp_path: Path, clock: Clock
) -> None:
    service, _ = await make_service(fast_settings(fake_hex, tmp_path), clock)
    try:
        await service.search_docs("jason", "decode")
        await fake_hex.refuse()
        await service.search_docs("jason", "decode")  # finds hex.pm down
        with pytest.raises(RemoteError) as caught:
            await service.search_docs("plug", "conn")
        message = str(caught.value)
        assert "cannot choose a version of plug" in message and "not sent" in message
        assert "pin it in mix.lock, to work offline" in message
    finally:
        await service.aclose()
