"""HexClient against the loopback fake serving the real corpus."""

from __future__ import annotations

import base64
import gzip
import json
import logging
import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest

from hexlocal_core.adapters import hex as hexmod
from hexlocal_core.adapters.hex import HexClient, parse_package_info
from hexlocal_core.adapters.http_body import TooLarge, read_capped
from hexlocal_core.config import Settings
from hexlocal_core.errors import PackageNotFound, RateLimited, RemoteError, VersionNotFound
from hexlocal_core.issues import repo_from_links
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
    assert "there is no docs tarball for this version" in message
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


async def test_a_non_retryable_server_error_is_final(
    client: HexClient, fake_hex: FakeHex, sleeps: SleepLog
) -> None:
    fake_hex.fail("/api/packages/jason", status=501)

    with pytest.raises(RemoteError, match="returned 501"):
        await client.package_info("jason")

    assert len(fake_hex.requests) == 1 and sleeps.waits == []


async def test_persistent_server_errors_give_up_after_three_attempts(
    client: HexClient, fake_hex: FakeHex
) -> None:
    fake_hex.fail("/repo/docs/*", status=503)

    with pytest.raises(RemoteError) as caught:
        await client.fetch_docs("jason", "1.4.5")

    assert f"GET {fake_hex.mirror_url}/docs/jason-1.4.5.tar.gz returned 503" in str(caught.value)
    assert "jason 1.4.5" in str(caught.value)
    assert str(caught.value).endswith("; gave up after 3 attempts")
    assert len(fake_hex.requests) == 3


async def test_429_waits_for_retry_after(
    client: HexClient, fake_hex: FakeHex, sleeps: SleepLog
) -> None:
    fake_hex.fail("/api/packages/mime", status=429, retry_after=1, times=1)

    info = await client.package_info("mime")

    assert info.latest_stable_version == "2.0.7"
    assert sleeps.waits == [1.0]
    assert len(fake_hex.requests) == 2


async def test_429_with_an_http_date_waits_until_then(
    client: HexClient, fake_hex: FakeHex, sleeps: SleepLog
) -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=2), usegmt=True)
    fake_hex.fail("/api/packages/mime", status=429, retry_after=when, times=1)

    await client.package_info("mime")

    # The date has one-second resolution and time passes: within (0, 2], not the backoff.
    [wait] = sleeps.waits
    assert 0.0 < wait <= 2.0 and wait != 0.001
    assert len(fake_hex.requests) == 2


@pytest.mark.parametrize("garbage", ["soon", "-5", "9" * 5000, "Fri, 99 Foo 2025 99:99:99 GMT"])
async def test_429_with_a_garbage_retry_after_uses_backoff(
    client: HexClient, fake_hex: FakeHex, sleeps: SleepLog, garbage: str
) -> None:
    fake_hex.fail("/api/packages/mime", status=429, retry_after=garbage, times=2)

    await client.package_info("mime")

    assert sleeps.waits == [0.001, 0.002]
    assert len(fake_hex.requests) == 3


async def test_429_with_a_long_retry_after_fails_fast(
    client: HexClient, fake_hex: FakeHex, sleeps: SleepLog
) -> None:
    fake_hex.fail("/api/packages/mime", status=429, retry_after=3600)

    with pytest.raises(RateLimited) as caught:
        await client.package_info("mime")

    assert caught.value.reset_at is not None
    reset = datetime.strptime(caught.value.reset_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert timedelta(minutes=59) < reset - datetime.now(UTC) <= timedelta(hours=1)
    message = str(caught.value)
    assert "mime" in message and fake_hex.api_url in message
    assert "retry after 3600s" in message and "gave up" not in message  # one attempt only
    assert sleeps.waits == []
    assert len(fake_hex.requests) == 1


async def test_429_without_retry_after_uses_backoff_then_rate_limited(
    client: HexClient, fake_hex: FakeHex, sleeps: SleepLog
) -> None:
    fake_hex.fail("/api/packages/mime", status=429)

    with pytest.raises(RateLimited) as caught:
        await client.package_info("mime")

    assert sleeps.waits == [0.001, 0.002]
    assert len(fake_hex.requests) == 3
    assert str(caught.value).endswith("(429); retry in a minute; gave up after 3 attempts")


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
    assert len(fake_hex.requests) == 2  # the slow one, then the retry


async def test_truncated_body_is_a_remote_error(client: HexClient, fake_hex: FakeHex) -> None:
    fake_hex.fail("/repo/docs/*", truncate=True)

    with pytest.raises(RemoteError) as caught:
        await client.fetch_docs("jason", "1.4.5")

    assert "cut short" in str(caught.value)
    assert f"{fake_hex.mirror_url}/docs/jason-1.4.5.tar.gz" in str(caught.value)


async def test_one_truncated_body_is_retried(
    client: HexClient, fake_hex: FakeHex, corpus: Path, sleeps: SleepLog
) -> None:
    fake_hex.fail("/repo/docs/*", truncate=True, times=1)

    body = await client.fetch_docs("jason", "1.4.4")

    assert body == (corpus / "hexdocs" / "jason-1.4.4.tar.gz").read_bytes()
    assert len(fake_hex.requests) == 2 and sleeps.waits == [0.001]


async def test_connection_reset_is_a_remote_error(client: HexClient, fake_hex: FakeHex) -> None:
    fake_hex.fail("/api/packages/*", reset=True)

    with pytest.raises(RemoteError) as caught:
        await client.package_info("jason")

    assert f"GET {fake_hex.api_url}/packages/jason failed" in str(caught.value)


async def test_one_connection_reset_is_retried(
    client: HexClient, fake_hex: FakeHex, sleeps: SleepLog
) -> None:
    # aiohttp itself resends an idempotent request once after a dropped connection
    # (RFC 9112 9.3.1); two resets make sure the client's own retry runs too.
    fake_hex.fail("/api/packages/*", reset=True, times=2)
    assert (await client.package_info("plug")).latest_stable_version == "1.19.2"
    assert len(fake_hex.requests) == 3 and sleeps.waits[:1] == [0.001]


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


# --------------------------------------------------------------------------- credentials

URL_SECRETS = ("apipass1", "apitoken1", "mirrorpass1", "mirrorkey1")


async def test_credentials_in_the_urls_are_used_but_never_shown(
    fake_hex: FakeHex, tmp_path: Path, sleeps: SleepLog, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    host = fake_hex.base_url.removeprefix("http://")
    settings = settings_for(
        fake_hex,
        tmp_path,
        hex_api_url=f"http://hexuser:apipass1@{host}/api?token=apitoken1",
        hex_mirror=f"http://mirroruser:mirrorpass1@{host}/repo?api_key=mirrorkey1",
    )
    errors: list[BaseException] = []
    async with client_for(settings, sleep=sleeps) as client:
        await client.package_info("jason")
        await client.fetch_docs("jason", "1.4.5")
        for fault in ({"status": 500}, {"reset": True}, {"html": True}, {"status": 418}):
            fake_hex.fail("/repo/docs/*", **fault)  # type: ignore[arg-type]
            with pytest.raises(RemoteError) as caught:
                await client.fetch_docs("jason", "1.4.4")
            errors.append(caught.value)
            fake_hex.faults.clear()
        with pytest.raises(PackageNotFound) as unknown:
            await client.package_info("no_such_pkg")
        with pytest.raises(VersionNotFound) as missing:
            await client.fetch_docs("jason", "9.9.9")
        errors += [unknown.value, missing.value]

    # Used: the query stays a query (the path joins before it), the userinfo is Basic auth.
    api, docs = fake_hex.requests[:2]
    assert (api.path, api.query) == ("/api/packages/jason", "token=apitoken1")
    assert (docs.path, docs.query) == ("/repo/docs/jason-1.4.5.tar.gz", "api_key=mirrorkey1")
    assert api.headers["Authorization"] == "Basic " + base64.b64encode(b"hexuser:apipass1").decode()
    # Never shown: messages name the redacted URL.
    assert f"GET http://****@{host}/repo/docs/jason-1.4.4.tar.gz?api_key=**** returned 500" in str(
        errors[0]
    )
    assert f"http://****@{host}/api/packages/no_such_pkg?token=****" in str(errors[-2])
    texts = [str(e) for e in errors] + [repr(e) for e in errors] + [repr(client), caplog.text]
    for secret in URL_SECRETS:
        assert not [t for t in texts if secret in t], secret


async def test_echoed_names_are_capped(client: HexClient, fake_hex: FakeHex) -> None:
    name = "a" * 5000
    with pytest.raises(PackageNotFound) as caught:
        await client.package_info(name)
    assert len(str(caught.value)) < 1500
    assert f"'{'a' * 199}…'" in str(caught.value)


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


def test_parse_package_info_drops_hostile_strings() -> None:
    data: dict[str, Any] = {
        "name": "evil\nname" + "x" * 5000,
        "releases": [{"version": "1." * 1_000_000}, {"version": "1.0.0"}, {"version": "1 0"}],
        "latest_version": "9" * 500,
        "docs_html_url": "https://x/" + "y" * 5000,
        "meta": {"links": {f"GitHub{i}": "https://github.com/a/b" for i in range(500)}},
    }
    info = parse_package_info("pkg", data, "http://x/api/packages/pkg")
    assert info.name == "pkg"  # the requested name, not the server's
    assert [r.version for r in info.releases] == ["1.0.0"]
    assert info.latest_version is None and info.docs_html_url is None
    assert len(info.links) == 50


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
    await client.aclose()  # never opened: nothing to do
    assert not client.http.open
    await client.package_info("mint")
    session = client.http.session()
    assert client.http.open and not session.closed
    await client.aclose()
    assert session.closed and not client.http.open
    await client.aclose()  # twice is fine
    client.forget()
    await client.package_info("mint")  # a closed client opens a new session when used again
    assert client.http.open and client.http.session() is not session
    await client.aclose()


async def test_context_manager_closes_the_session(hex_settings: Settings) -> None:
    async with HexClient(hex_settings) as client:
        await client.fetch_docs("mime", "1.3.1")
        session = client.http.session()
    assert session.closed and not client.http.open


# --------------------------------------------------------------------------- helpers


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
