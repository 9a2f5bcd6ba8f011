"""HexClient against the loopback fake serving the real corpus."""

from __future__ import annotations

import gzip
import json
import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest

from hexlocal_core.adapters import hex as hexmod
from hexlocal_core.adapters.hex import (
    HexClient,
    TooLarge,
    parse_package_info,
    read_capped,
    repo_from_links,
)
from hexlocal_core.config import Settings
from hexlocal_core.errors import PackageNotFound, RateLimited, RemoteError, VersionNotFound
from hexlocal_core.ports import HexRegistry
from tests.fakes.fake_hex import FakeHex, client_for, settings_for


class SleepLog:
    """Stands in for asyncio.sleep: records each wait and returns at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture
def sleeps() -> SleepLog:
    return SleepLog()


@pytest.fixture
async def client(hex_settings: Settings, sleeps: SleepLog) -> AsyncIterator[HexClient]:
    async with client_for(hex_settings, sleep=sleeps) as c:
        yield c


# --------------------------------------------------------------------------- happy paths


async def test_client_implements_the_port(client: HexClient) -> None:
    assert isinstance(client, HexRegistry)


async def test_package_info_parses_the_real_json(client: HexClient, fake_hex: FakeHex) -> None:
    info = await client.package_info("jason")

    assert info.name == "jason"
    assert len(info.releases) == 20
    assert [r.version for r in info.releases[:3]] == ["1.5.0-alpha.2", "1.5.0-alpha.1", "1.4.5"]
    assert all(r.has_docs for r in info.releases)
    assert info.latest_version == "1.5.0-alpha.2"
    assert info.latest_stable_version == "1.4.5"
    assert info.docs_html_url == "https://jason.hexdocs.pm/"
    assert info.links == {"GitHub": "https://github.com/michalmuskala/jason"}
    [request] = fake_hex.requests
    assert request.path == "/api/packages/jason"
    assert request.headers["Accept"] == "application/json"
    assert request.headers["User-Agent"].startswith("hexlocal/")


async def test_package_info_is_cached_for_a_short_ttl(
    hex_settings: Settings, fake_hex: FakeHex
) -> None:
    now = [1000.0]
    async with client_for(hex_settings, clock=lambda: now[0], info_ttl_s=300) as client:
        first = await client.package_info("decimal")
        now[0] += 299
        assert await client.package_info("decimal") is first
        assert len(fake_hex.requests) == 1
        now[0] += 2
        await client.package_info("decimal")
        assert len(fake_hex.requests) == 2
        client.forget("decimal")
        await client.package_info("decimal")
        assert len(fake_hex.requests) == 3


async def test_fetch_docs_returns_the_exact_bytes(
    client: HexClient, fake_hex: FakeHex, corpus: Path
) -> None:
    body = await client.fetch_docs("jason", "1.4.5")

    assert body == (corpus / "hexdocs" / "jason-1.4.5.tar.gz").read_bytes()
    [request] = fake_hex.requests
    assert request.path == "/repo/docs/jason-1.4.5.tar.gz"
    # Byte-exact: the client must not negotiate a compressed transfer.
    assert request.headers["Accept-Encoding"] == "identity"


async def test_fetch_docs_of_a_prerelease(client: HexClient, corpus: Path) -> None:
    body = await client.fetch_docs("jason", "1.5.0-alpha.2")
    assert body == (corpus / "hexdocs" / "jason-1.5.0-alpha.2.tar.gz").read_bytes()


async def test_streamed_docs_without_content_length(
    client: HexClient, fake_hex: FakeHex, corpus: Path
) -> None:
    fake_hex.fail("/repo/docs/*", chunked=True)
    body = await client.fetch_docs("decimal", "2.0.0")
    assert body == (corpus / "hexdocs" / "decimal-2.0.0.tar.gz").read_bytes()


# --------------------------------------------------------------------------- not found


async def test_unknown_package_names_the_package_and_url(
    client: HexClient, fake_hex: FakeHex
) -> None:
    with pytest.raises(PackageNotFound) as caught:
        await client.package_info("no_such_pkg")

    message = str(caught.value)
    assert "'no_such_pkg'" in message
    assert f"GET {fake_hex.api_url}/packages/no_such_pkg returned 404" in message
    assert len(fake_hex.requests) == 1  # a 404 is an answer, not a hiccup: no retry


async def test_missing_docs_name_the_version_and_url(client: HexClient, fake_hex: FakeHex) -> None:
    with pytest.raises(VersionNotFound) as caught:
        await client.fetch_docs("jason", "9.9.9")

    message = str(caught.value)
    assert "jason 9.9.9" in message
    assert "this version has no docs on hex.pm" in message
    assert f"{fake_hex.mirror_url}/docs/jason-9.9.9.tar.gz" in message


async def test_telemetry_latest_stable_has_no_tarball(client: HexClient) -> None:
    info = await client.package_info("telemetry")
    assert info.latest_stable_version == "1.4.1"

    with pytest.raises(VersionNotFound, match="telemetry 1.4.1"):
        await client.fetch_docs("telemetry", info.latest_stable_version)


# --------------------------------------------------------------------------- retries


async def test_server_errors_are_retried_with_backoff(
    client: HexClient, fake_hex: FakeHex, sleeps: SleepLog
) -> None:
    fake_hex.fail("/api/packages/jason", status=500, times=2)

    info = await client.package_info("jason")

    assert info.latest_stable_version == "1.4.5"
    assert len(fake_hex.requests) == 3
    assert sleeps.waits == [0.001, 0.002]  # exponential


async def test_persistent_server_errors_give_up_after_three_attempts(
    client: HexClient, fake_hex: FakeHex
) -> None:
    fake_hex.fail("/repo/docs/*", status=503)

    with pytest.raises(RemoteError) as caught:
        await client.fetch_docs("jason", "1.4.5")

    assert f"GET {fake_hex.mirror_url}/docs/jason-1.4.5.tar.gz returned 503" in str(caught.value)
    assert "jason 1.4.5" in str(caught.value)
    assert len(fake_hex.requests) == 3


async def test_429_waits_for_retry_after(
    client: HexClient, fake_hex: FakeHex, sleeps: SleepLog
) -> None:
    fake_hex.fail("/api/packages/mime", status=429, retry_after=1, times=1)

    info = await client.package_info("mime")

    assert info.latest_stable_version == "2.0.7"
    assert sleeps.waits == [1.0]
    assert len(fake_hex.requests) == 2


async def test_429_with_a_long_retry_after_fails_fast(
    client: HexClient, fake_hex: FakeHex, sleeps: SleepLog
) -> None:
    fake_hex.fail("/api/packages/mime", status=429, retry_after=3600)

    with pytest.raises(RateLimited) as caught:
        await client.package_info("mime")

    assert caught.value.reset_at is not None
    assert "mime" in str(caught.value) and fake_hex.api_url in str(caught.value)
    assert sleeps.waits == []
    assert len(fake_hex.requests) == 1


async def test_429_without_retry_after_uses_backoff_then_rate_limited(
    client: HexClient, fake_hex: FakeHex, sleeps: SleepLog
) -> None:
    fake_hex.fail("/api/packages/mime", status=429)

    with pytest.raises(RateLimited):
        await client.package_info("mime")

    assert sleeps.waits == [0.001, 0.002]
    assert len(fake_hex.requests) == 3


async def test_timeout_is_a_remote_error(fake_hex: FakeHex, tmp_path: Path) -> None:
    settings = settings_for(fake_hex, tmp_path, http_timeout_s=0.2)
    fake_hex.fail("/api/packages/jason", delay=2.0)

    async with client_for(settings) as client:
        with pytest.raises(RemoteError) as caught:
            await client.package_info("jason")

    assert "timed out after 0.2s" in str(caught.value)
    assert f"{fake_hex.api_url}/packages/jason" in str(caught.value)
    assert len(fake_hex.requests) == 3


async def test_one_slow_answer_then_success(fake_hex: FakeHex, tmp_path: Path) -> None:
    settings = settings_for(fake_hex, tmp_path, http_timeout_s=0.2)
    fake_hex.fail("/repo/docs/*", delay=2.0, times=1)

    async with client_for(settings) as client:
        body = await client.fetch_docs("mime", "2.0.7")

    assert body.startswith(b"\x1f\x8b")  # gzip magic: a real tarball


async def test_truncated_body_is_a_remote_error(client: HexClient, fake_hex: FakeHex) -> None:
    fake_hex.fail("/repo/docs/*", truncate=True)

    with pytest.raises(RemoteError) as caught:
        await client.fetch_docs("jason", "1.4.5")

    assert "cut short" in str(caught.value)
    assert f"{fake_hex.mirror_url}/docs/jason-1.4.5.tar.gz" in str(caught.value)


async def test_one_truncated_body_is_retried(
    client: HexClient, fake_hex: FakeHex, corpus: Path
) -> None:
    fake_hex.fail("/repo/docs/*", truncate=True, times=1)

    body = await client.fetch_docs("jason", "1.4.4")

    assert body == (corpus / "hexdocs" / "jason-1.4.4.tar.gz").read_bytes()


async def test_connection_reset_is_a_remote_error(client: HexClient, fake_hex: FakeHex) -> None:
    fake_hex.fail("/api/packages/*", reset=True)

    with pytest.raises(RemoteError) as caught:
        await client.package_info("jason")

    assert f"GET {fake_hex.api_url}/packages/jason failed" in str(caught.value)


async def test_one_connection_reset_is_retried(client: HexClient, fake_hex: FakeHex) -> None:
    fake_hex.fail("/api/packages/*", reset=True, times=1)
    assert (await client.package_info("plug")).latest_stable_version == "1.19.2"


async def test_unreachable_host_names_the_url(tmp_path: Path, sleeps: SleepLog) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings = Settings.from_env(
        {"HEX_API_URL": f"http://127.0.0.1:{port}/api", "PROJECT_ROOT": str(tmp_path)}
    )
    async with client_for(settings, sleep=sleeps) as client:
        with pytest.raises(RemoteError, match=rf"GET http://127.0.0.1:{port}/api/packages/jason"):
            await client.package_info("jason")
    assert len(sleeps.waits) == 2


# --------------------------------------------------------------------------- bad bodies


async def test_html_instead_of_json_is_a_clear_remote_error(
    client: HexClient, fake_hex: FakeHex
) -> None:
    fake_hex.fail("/api/packages/jason", html=True)

    with pytest.raises(RemoteError) as caught:
        await client.package_info("jason")

    message = str(caught.value)
    assert "text/html instead of JSON" in message
    assert "HEX_API_URL" in message and f"{fake_hex.api_url}/packages/jason" in message
    assert len(fake_hex.requests) == 1  # a wrong URL does not fix itself


async def test_malformed_json_is_a_remote_error(client: HexClient, fake_hex: FakeHex) -> None:
    fake_hex.packages["broken"] = b'{"name": "broken", "releases": ['
    with pytest.raises(RemoteError, match="broken: GET .* returned malformed JSON"):
        await client.package_info("broken")


async def test_json_without_releases_is_a_remote_error(
    client: HexClient, fake_hex: FakeHex
) -> None:
    fake_hex.add_package("odd", {"status": 200, "message": "hello"})
    with pytest.raises(RemoteError, match="without a release list"):
        await client.package_info("odd")


def test_parse_package_info_tolerates_missing_optional_fields() -> None:
    data: dict[str, Any] = {
        "releases": [
            {"version": "0.1.0"},
            {"nope": 1},
            "junk",
            {"version": "0.2.0", "has_docs": False},
        ],
        "latest_stable_version": None,
        "meta": {"links": {"Source": "https://github.com/a/b", "Bad": 3}},
    }
    info = parse_package_info("pkg", data, "http://x/api/packages/pkg")
    assert info.name == "pkg"
    assert [(r.version, r.has_docs) for r in info.releases] == [("0.1.0", True), ("0.2.0", False)]
    assert info.latest_stable_version is None and info.latest_version is None
    assert info.links == {"Source": "https://github.com/a/b"}


# --------------------------------------------------------------------------- size cap


async def test_size_cap_refuses_on_content_length(fake_hex: FakeHex, tmp_path: Path) -> None:
    settings = settings_for(fake_hex, tmp_path, max_docs_bytes=1024)
    async with client_for(settings) as client:
        with pytest.raises(RemoteError) as caught:
            await client.fetch_docs("jason", "1.4.5")

    message = str(caught.value)
    assert "1024-byte limit" in message and "HEXLOCAL_MAX_DOCS_BYTES" in message
    assert "jason 1.4.5" in message and fake_hex.mirror_url in message
    assert len(fake_hex.requests) == 1  # refusing is final


async def test_size_cap_refuses_a_streamed_body(fake_hex: FakeHex, tmp_path: Path) -> None:
    settings = settings_for(fake_hex, tmp_path, max_docs_bytes=1024)
    fake_hex.fail("/repo/docs/*", chunked=True)
    async with client_for(settings) as client:
        with pytest.raises(RemoteError, match="1024-byte limit"):
            await client.fetch_docs("jason", "1.4.5")


async def test_read_capped_stops_reading_past_the_cap() -> None:
    pulled = 0

    async def chunks() -> AsyncIterator[bytes]:
        nonlocal pulled
        for _ in range(1000):
            pulled += 1
            yield b"x" * 100

    with pytest.raises(TooLarge):
        await read_capped(chunks(), cap=1000)
    assert pulled == 11  # the chunk that crossed the cap, and not one more


async def test_read_capped_refuses_an_announced_size_before_reading() -> None:
    pulled = 0

    async def chunks() -> AsyncIterator[bytes]:
        nonlocal pulled
        pulled += 1
        yield b"x"

    with pytest.raises(TooLarge) as caught:
        await read_capped(chunks(), cap=10, announced=11)
    assert caught.value.size == 11 and pulled == 0


def test_gzip_encoded_api_json_is_decoded() -> None:
    request = hexmod._Request("u", "pkg", 1000, True, lambda status: RemoteError(str(status)))
    body = json.dumps({"releases": []}).encode()
    assert hexmod._decode(request, "gzip", gzip.compress(body)) == body
    with pytest.raises(RemoteError, match="inflates past"):
        hexmod._decode(request, "gzip", gzip.compress(b" " * 5000))


# --------------------------------------------------------------------------- lifecycle


async def test_session_is_lazy_closed_and_recreated(hex_settings: Settings) -> None:
    client = HexClient(hex_settings)
    assert client._session is None
    await client.package_info("mint")
    session = client._session
    assert session is not None and not session.closed
    await client.close()
    assert session.closed and client._session is None
    await client.close()  # twice is fine
    client.forget()
    await client.package_info("mint")  # a closed client opens a new session when used again
    await client.close()


async def test_context_manager_closes_the_session(hex_settings: Settings) -> None:
    async with HexClient(hex_settings) as client:
        await client.fetch_docs("mime", "1.3.1")
        session = client._session
    assert session is not None and session.closed


# --------------------------------------------------------------------------- helpers


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("0", 0.0),
        ("7", 7.0),
        (" 12 ", 12.0),
        ("soon", None),
        ("", None),
        (None, None),
        ("-3", None),
    ],
)
def test_retry_after_seconds(value: str | None, seconds: float | None) -> None:
    assert hexmod._retry_after(value) == seconds


def test_retry_after_http_date() -> None:
    when = datetime.now(UTC) + timedelta(seconds=30)
    seconds = hexmod._retry_after(format_datetime(when, usegmt=True))
    assert seconds is not None and 25 <= seconds <= 31
    past = format_datetime(datetime.now(UTC) - timedelta(hours=1), usegmt=True)
    assert hexmod._retry_after(past) == 0.0


@pytest.mark.parametrize(
    ("links", "repo"),
    [
        ({"GitHub": "https://github.com/michalmuskala/jason"}, "michalmuskala/jason"),
        ({"GitHub": "https://github.com/zoedsoupe/anubis-mcp/"}, "zoedsoupe/anubis-mcp"),
        ({"Source": "https://github.com/elixir-ecto/ecto.git"}, "elixir-ecto/ecto"),
        ({"github": "http://www.github.com/a/b/tree/main/lib"}, "a/b"),
        ({"Repository": "git@github.com:owner/name.git"}, "owner/name"),
        ({"GitHub": "github.com/owner/name"}, "owner/name"),
        (
            {
                "Changelog": "https://github.com/elixir-plug/plug/blob/main/CHANGELOG.md",
                "GitHub": "https://github.com/elixir-plug/other",
            },
            "elixir-plug/other",  # a labelled source link beats an incidental GitHub link
        ),
        (
            {"Changelog": "https://github.com/elixir-sqlite/exqlite/blob/main/CHANGELOG.md"},
            "elixir-sqlite/exqlite",
        ),
        ({"Docs": "https://docs.example.org/anubis_mcp"}, None),
        ({"GitHub": "https://gitlab.com/a/b"}, None),
        ({"GitHub": "https://github.com/sponsors/someone"}, None),
        ({"GitHub": "https://github.com/onlyowner"}, None),
        ({"GitHub": "https://github.evil.com/a/b"}, None),
        ({}, None),
    ],
)
def test_repo_from_links(links: dict[str, str], repo: str | None) -> None:
    assert repo_from_links(links) == repo


def test_repo_from_links_on_every_corpus_package(corpus: Path) -> None:
    for path in sorted((corpus / "hexapi").glob("*.json")):
        data = json.loads(path.read_text())
        repo = repo_from_links(data["meta"]["links"])
        assert repo is not None and repo.count("/") == 1, path.name
