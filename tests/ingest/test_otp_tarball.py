"""OTP's release doc tarball: the parser on the real (trimmed) OTP 27 tarball, and the
adapter against a loopback fake of erlang/otp's GitHub release downloads."""

from __future__ import annotations

import asyncio
import gzip
import io
import json
import re
import tarfile
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from hexlocal_core.adapters.otp_docs import MAX_REDIRECTS, OtpDocsClient
from hexlocal_core.config import DEFAULT_OTP_DOCS_MIRROR, Settings
from hexlocal_core.errors import (
    IngestError,
    RemoteError,
    UnsafeArchive,
    UserInputError,
    VersionNotFound,
)
from hexlocal_core.ingest.otp_tarball import app_items, release_apps
from hexlocal_core.model import DocItem
from hexlocal_core.ports import OtpDocsSource
from hexlocal_core.service import build
from tests.fakes.fake_otp import SIGNATURE, FakeOtpReleases, otp_client_for, otp_settings_for
from tests.support.paths import CORPUS, shared

RELEASE = "27.3.4.1"
TARBALL = CORPUS / "otp" / f"otp_doc_html_{RELEASE}.tar.gz"
APPS = {"erts": "15.2.7", "kernel": "10.2.7.1", "stdlib": "6.2.2.1"}
FOLDERS = {
    "erts": "erts-15.2.7/doc/html/",
    "kernel": "lib/kernel-10.2.7.1/doc/html/",
    "stdlib": "lib/stdlib-6.2.2.1/doc/html/",
}


@pytest.fixture(scope="module")
def otp_tarball() -> bytes:
    return shared(TARBALL, "the OTP doc tarball").read_bytes()


@pytest.fixture(scope="module")
def parsed(otp_tarball: bytes) -> dict[str, Any]:
    return {
        app: app_items(otp_tarball, app, version=vsn, otp_major=27) for app, vsn in APPS.items()
    }


def _members(data: bytes) -> dict[str, bytes]:
    """Every file of the tarball by path without `./`, read by the standard library alone."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tf:
        return {
            m.name.removeprefix("./"): tf.extractfile(m).read()  # type: ignore[union-attr]
            for m in tf
            if m.isfile()
        }


@pytest.fixture(scope="module")
def members(otp_tarball: bytes) -> dict[str, bytes]:
    return _members(otp_tarball)


def _search_data(members: Mapping[str, bytes], app: str) -> list[dict[str, str]]:
    folder = FOLDERS[app]
    [js] = [p for p in members if re.fullmatch(re.escape(folder) + r"dist/search_data-\w+\.js", p)]
    text = members[js].decode()
    items: list[dict[str, str]] = json.loads(text[text.index("=") + 1 :])["items"]
    return items


def _detail_html(members: Mapping[str, bytes], app: str, ref: str) -> str:
    page, _, anchor = ref.partition("#")
    html = members[FOLDERS[app] + page].decode()
    found = re.search(
        rf'<section class="detail" id="{re.escape(anchor)}">(.*?)(?=<section class="detail"|\Z)',
        html,
        re.S,
    )
    return found.group(1) if found else ""


def _tar_gz(entries: Mapping[str, bytes], *, level: int = 6) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tf:
        for name, body in entries.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tf.addfile(info, io.BytesIO(body))
    return gzip.compress(buffer.getvalue(), compresslevel=level)


# --------------------------------------------------------------------------- the parser


def test_release_apps_are_the_application_folders(otp_tarball: bytes) -> None:
    assert dict(release_apps(otp_tarball)) == APPS


@pytest.mark.parametrize("app", sorted(APPS))
def test_items_are_the_exdoc_search_data_of_each_app(
    app: str, parsed: dict[str, Any], members: dict[str, bytes]
) -> None:
    docs = parsed[app]
    raw = _search_data(members, app)
    raw_types = Counter(entry["type"] for entry in raw)
    item_types = Counter(item.doc_type.value for item in docs.items)
    dropped = docs.counts["dropped_navigation"]
    assert {t: n for t, n in item_types.items() if t != "extras"} == {
        t: n for t, n in raw_types.items() if t != "extras"
    }
    assert item_types["extras"] + dropped == raw_types["extras"]
    assert dropped < 5  # only API-reference style pages, never real content
    api = {(e["ref"], e["title"]) for e in raw if e["type"] != "extras"}
    assert {(i.ref, i.title) for i in docs.items if i.doc_type.value != "extras"} == api
    assert {(i.package, i.version) for i in docs.items} == {(app, APPS[app])}
    assert all(i.markdown.strip() for i in docs.items if i.doc_type.value != "extras")


@pytest.mark.parametrize(
    ("app", "ref", "title", "module"),
    [
        ("stdlib", "ets.html#new/2", "ets.new/2", "ets"),
        ("stdlib", "gen_statem.html#call/2", "gen_statem.call/2", "gen_statem"),
        ("kernel", "gen_tcp.html#connect/3", "gen_tcp.connect/3", "gen_tcp"),
        ("erts", "erlang.html#send_after/3", "erlang.send_after/3", "erlang"),
    ],
)
def test_refs_and_links_are_exdocs_on_erlang_org(
    app: str, ref: str, title: str, module: str, parsed: dict[str, Any]
) -> None:
    [item] = [i for i in parsed[app].items if i.ref == ref]
    assert (item.title, item.module) == (title, module)
    assert item.hexdocs_url == f"https://www.erlang.org/docs/27/apps/{app}/{ref}"
    assert item.source_url.startswith("https://github.com/erlang/otp/blob/")


def test_links_out_of_the_application_go_to_erlang_org(parsed: dict[str, Any]) -> None:
    by_ref = {i.ref: i for app in APPS for i in parsed[app].items}
    loading = by_ref["code.html#module-loading-of-code-from-archive-files"].markdown
    assert "(https://www.erlang.org/docs/27/apps/stdlib/escript.html)" in loading
    on_load = by_ref["code.html#atomic_load/1"].markdown
    assert "(https://www.erlang.org/docs/27/system/code_loading.html#on_load)" in on_load
    leaked = [
        i.ref
        for app in APPS
        for i in parsed[app].items
        if re.search(r"\]\((\.\./)+(lib|doc|erts-)", i.markdown)
    ]
    assert leaked == []  # no link names the tarball's folders
    assert "(code.html#error_reasons)" in by_ref["code.html#ensure_loaded/1"].markdown


def test_guides_are_items_too(parsed: dict[str, Any]) -> None:
    guides = [i for i in parsed["stdlib"].items if i.doc_type.value == "extras"]
    assert any(i.ref.startswith("unicode_usage.html") for i in guides)
    assert all(
        i.hexdocs_url.startswith("https://www.erlang.org/docs/27/apps/stdlib/") for i in guides
    )


@pytest.mark.parametrize("app", sorted(APPS))
def test_equivalent_to_entries_keep_their_text(
    app: str, parsed: dict[str, Any], members: dict[str, bytes]
) -> None:
    by_ref: dict[str, DocItem] = {i.ref: i for i in parsed[app].items}
    equivalent = [
        e["ref"]
        for e in _search_data(members, app)
        if e["type"] != "extras"
        and "#" in e["ref"]
        and "Equivalent to" in _detail_html(members, app, e["ref"])
    ]
    assert len(equivalent) > 10

    def text(ref: str) -> str:
        # A function's text under its own headings (gen_tcp:connect/3 "With arguments
        # Address and Port") is the heading sub-items', as ExDoc's search lists them.
        own = [i.markdown for r, i in by_ref.items() if r == ref or r.startswith(f"{ref}-")]
        return "\n".join(own)

    lost = [ref for ref in equivalent if "Equivalent to" not in text(ref)]
    assert lost == []
    call = by_ref.get("gen_statem.html#call/2")
    if app == "stdlib":
        assert call is not None and "Equivalent to" in call.markdown


def test_an_app_the_release_lacks_is_named_with_what_it_holds(otp_tarball: bytes) -> None:
    with pytest.raises(VersionNotFound, match=r"no application crypto \(it holds: erts, kernel"):
        app_items(otp_tarball, "crypto", version="5.5.3", otp_major=27)


def test_an_app_at_another_version_names_the_version_held(otp_tarball: bytes) -> None:
    with pytest.raises(VersionNotFound, match=r"holds stdlib 6\.2\.2\.1, not 6\.2"):
        app_items(otp_tarball, "stdlib", version="6.2", otp_major=27)


@pytest.mark.parametrize(
    ("app", "version", "major"),
    [
        ("Stdlib", "6.2.2.1", 27),
        ("../x", "6.2.2.1", 27),
        ("stdlib", "6.2/..", 27),
        ("stdlib", "6.2", 0),
    ],
)
def test_malformed_arguments_are_refused(
    otp_tarball: bytes, app: str, version: str, major: int
) -> None:
    with pytest.raises(UserInputError):
        app_items(otp_tarball, app, version=version, otp_major=major)


def test_a_corrupt_tarball_is_an_ingest_error(otp_tarball: bytes) -> None:
    middle = len(otp_tarball) // 2
    corrupt = otp_tarball[:middle] + bytes(b ^ 0xFF for b in otp_tarball[middle : middle + 64])
    corrupt += otp_tarball[middle + 64 :]
    with pytest.raises(IngestError):
        release_apps(corrupt)
    with pytest.raises(IngestError):
        app_items(corrupt, "stdlib", version=APPS["stdlib"], otp_major=27)


def test_a_truncated_tarball_is_an_ingest_error(otp_tarball: bytes) -> None:
    with pytest.raises(IngestError, match="truncated|unexpected end of data"):
        release_apps(otp_tarball[: len(otp_tarball) * 2 // 3])
    # Cut after erts's files: what was read is not taken as the whole.
    with pytest.raises(IngestError, match="truncated|unexpected end of data"):
        app_items(otp_tarball[:-100], "erts", version=APPS["erts"], otp_major=27)


def test_bytes_that_are_not_gzip_are_an_ingest_error() -> None:
    page = b"<!DOCTYPE html><html><body>Not Found</body></html>"
    with pytest.raises(IngestError, match="not gzip"):
        release_apps(page)
    with pytest.raises(IngestError, match="not gzip"):
        app_items(page, "stdlib", version="6.2.2.1", otp_major=27)


def test_a_decompression_bomb_is_refused_within_the_bound() -> None:
    # 64 MiB of zeros in one page, compressed to about 64 KiB.
    bomb = _tar_gz({"./lib/stdlib-6.2.2.1/doc/html/ets.html": bytes(64 * 1024 * 1024)}, level=1)
    assert len(bomb) < 1024 * 1024
    with pytest.raises(UnsafeArchive, match="expands beyond"):
        app_items(bomb, "stdlib", version="6.2.2.1", otp_major=27, max_bytes=8 * 1024 * 1024)
    with pytest.raises(UnsafeArchive, match="expands beyond"):
        release_apps(bomb, max_bytes=8 * 1024 * 1024)


def test_a_release_bigger_than_the_bound_is_refused(otp_tarball: bytes) -> None:
    with pytest.raises(UnsafeArchive):
        app_items(otp_tarball, "stdlib", version=APPS["stdlib"], otp_major=27, max_bytes=1 << 20)


def test_a_path_escaping_the_archive_refuses_it() -> None:
    hostile = _tar_gz({"./lib/stdlib-6.2.2.1/doc/html/../../../../../etc/passwd": b"x"})
    with pytest.raises(UnsafeArchive, match="escaping"):
        app_items(hostile, "stdlib", version="6.2.2.1", otp_major=27)


def test_a_tarball_without_application_folders_is_not_an_otp_doc_tarball() -> None:
    jason = (CORPUS / "hexdocs" / "jason-1.4.4.tar.gz").read_bytes()
    with pytest.raises(IngestError, match="no application folder"):
        release_apps(jason)


def test_an_application_at_two_versions_is_refused() -> None:
    twice = _tar_gz(
        {
            "./lib/stdlib-6.2/doc/html/ets.html": b"<html></html>",
            "./lib/stdlib-6.2.2.1/doc/html/ets.html": b"<html></html>",
        }
    )
    with pytest.raises(IngestError, match=r"stdlib \(6\.2 and 6\.2\.2\.1\)"):
        release_apps(twice)


def test_an_application_without_exdoc_output_says_so() -> None:
    old_style = _tar_gz(
        {
            "./lib/stdlib-4.2/doc/html/ets.html": b"<html><body>erl_docgen</body></html>",
            "./lib/stdlib-4.2/doc/pdf/stdlib-4.2.pdf": b"%PDF",
        }
    )
    with pytest.raises(IngestError, match="no ExDoc index"):
        app_items(old_style, "stdlib", version="4.2", otp_major=25)
    only_pdf = _tar_gz({"./lib/stdlib-4.2/doc/pdf/stdlib-4.2.pdf": b"%PDF"})
    with pytest.raises(IngestError, match="no HTML docs of stdlib 4.2"):
        app_items(only_pdf, "stdlib", version="4.2", otp_major=25)


# --------------------------------------------------------------------------- the adapter


class SleepLog:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture
async def fake_otp(corpus: Path) -> AsyncIterator[FakeOtpReleases]:
    async with FakeOtpReleases(corpus=corpus) as fake:
        yield fake


@pytest.fixture
def otp_settings(fake_otp: FakeOtpReleases, tmp_path: Path) -> Settings:
    return otp_settings_for(fake_otp, tmp_path)


@pytest.fixture
async def otp(otp_settings: Settings) -> AsyncIterator[OtpDocsClient]:
    async with otp_client_for(otp_settings) as client:
        yield client


def test_the_mirror_defaults_to_github_and_is_read_from_the_environment() -> None:
    assert Settings.from_env({}).otp_docs_mirror == DEFAULT_OTP_DOCS_MIRROR
    assert DEFAULT_OTP_DOCS_MIRROR == "https://github.com/erlang/otp/releases/download"
    mirror = "https://mirror.example.com/otp"
    assert Settings.from_env({"OTP_DOCS_MIRROR": mirror}).otp_docs_mirror == mirror
    bad = Settings.from_env({"OTP_DOCS_MIRROR": "mirror.example.com"})
    assert bad.otp_docs_mirror == DEFAULT_OTP_DOCS_MIRROR
    assert any("OTP_DOCS_MIRROR" in w for w in bad.warnings)


async def test_the_download_follows_githubs_redirect(
    otp: OtpDocsClient, fake_otp: FakeOtpReleases, otp_tarball: bytes
) -> None:
    assert isinstance(otp, OtpDocsSource)
    data = await otp.fetch_release_docs(f"OTP-{RELEASE}")
    assert data == otp_tarball
    assert [r.path for r in fake_otp.requests] == [
        fake_otp.asset_path(RELEASE),
        fake_otp.object_path(RELEASE),
    ]
    assert fake_otp.requests[0].headers["Accept-Encoding"] == "identity"


async def test_three_apps_of_a_release_cost_one_download(
    otp: OtpDocsClient, fake_otp: FakeOtpReleases
) -> None:
    async def items(app: str) -> int:
        data = await otp.fetch_release_docs(RELEASE)
        docs = await asyncio.to_thread(app_items, data, app, version=APPS[app], otp_major=27)
        return len(docs.items)

    counts = await asyncio.gather(*(items(app) for app in APPS))  # as concurrent jobs would
    assert all(n > 1000 for n in counts)
    assert len(await otp.fetch_release_docs(RELEASE)) > 0  # a later call: still no request
    assert len(fake_otp.requests_to(fake_otp.asset_path(RELEASE))) == 1
    assert otp.cached_bytes == TARBALL.stat().st_size


async def test_the_kept_tarballs_stay_within_their_bound(
    otp_settings: Settings, fake_otp: FakeOtpReleases, otp_tarball: bytes
) -> None:
    fake_otp.tarballs["27.3.4"] = otp_tarball
    bound = len(otp_tarball) + 1024  # room for one release
    async with otp_client_for(otp_settings, cache_bytes=bound) as otp:
        await otp.fetch_release_docs(RELEASE)
        await otp.fetch_release_docs("27.3.4")
        assert otp.cached_bytes <= bound
        await otp.fetch_release_docs("27.3.4")  # the most recent one is kept
        await otp.fetch_release_docs(RELEASE)  # the older one was let go
        assert len(fake_otp.requests_to(fake_otp.asset_path(RELEASE))) == 2
        assert len(fake_otp.requests_to(fake_otp.asset_path("27.3.4"))) == 1
        otp.forget()
        assert otp.cached_bytes == 0
    async with otp_client_for(otp_settings, cache_bytes=1024) as otp:
        await otp.fetch_release_docs(RELEASE)
        assert otp.cached_bytes == 0  # larger than the bound: never kept


async def test_an_unknown_release_is_version_not_found_at_once(
    otp: OtpDocsClient, fake_otp: FakeOtpReleases
) -> None:
    with pytest.raises(VersionNotFound, match=r"OTP 27\.9\.9 docs: there is no doc tarball"):
        await otp.fetch_release_docs("27.9.9")
    assert len(fake_otp.requests) == 1  # a 404 is not retried


async def test_a_release_before_exdoc_is_refused_without_a_request(
    otp: OtpDocsClient, fake_otp: FakeOtpReleases
) -> None:
    with pytest.raises(VersionNotFound, match=r"before OTP 27.*erlang-doc.*KERL_BUILD_DOCS"):
        await otp.fetch_release_docs("OTP-26.2.5")
    assert fake_otp.requests == []


@pytest.mark.parametrize("release", ["", "27.x", "OTP27", "27.3.4.1/../../x", "otp-27.0"])
async def test_a_malformed_release_is_refused_without_a_request(
    otp: OtpDocsClient, fake_otp: FakeOtpReleases, release: str
) -> None:
    with pytest.raises(UserInputError, match="is not an OTP release"):
        await otp.fetch_release_docs(release)
    assert fake_otp.requests == []


async def test_a_server_error_is_retried_then_succeeds(
    otp_settings: Settings, fake_otp: FakeOtpReleases, otp_tarball: bytes
) -> None:
    sleeps = SleepLog()
    fake_otp.fail(fake_otp.asset_path(RELEASE), status=502, times=1)
    async with otp_client_for(otp_settings, sleep=sleeps) as otp:
        assert await otp.fetch_release_docs(RELEASE) == otp_tarball
    assert len(fake_otp.requests_to(fake_otp.asset_path(RELEASE))) == 2
    assert len(sleeps.waits) == 1


async def test_a_failure_is_not_kept(otp: OtpDocsClient, fake_otp: FakeOtpReleases) -> None:
    fake_otp.fail(fake_otp.asset_path(RELEASE), status=503)
    with pytest.raises(RemoteError, match=r"returned 503; gave up after 3 attempts"):
        await otp.fetch_release_docs(RELEASE)
    fake_otp.faults.clear()
    assert len(await otp.fetch_release_docs(RELEASE)) == TARBALL.stat().st_size


async def test_a_slow_but_steady_download_succeeds(
    fake_otp: FakeOtpReleases, tmp_path: Path, otp_tarball: bytes
) -> None:
    settings = otp_settings_for(fake_otp, tmp_path, HEXLOCAL_HTTP_TIMEOUT_S="0.5")
    fake_otp.fail("/objects/*", slow=0.02)  # ~60 pieces: longer in all than the timeout
    async with otp_client_for(settings) as otp:
        assert await otp.fetch_release_docs(RELEASE) == otp_tarball
    assert len(fake_otp.requests_to("/objects/*")) == 1


async def test_a_stalled_download_fails_in_bounded_time(
    fake_otp: FakeOtpReleases, tmp_path: Path
) -> None:
    settings = otp_settings_for(fake_otp, tmp_path, HEXLOCAL_HTTP_TIMEOUT_S="0.3")
    fake_otp.fail("/objects/*", stall=30.0)
    async with otp_client_for(settings, attempts=2) as otp:
        with pytest.raises(RemoteError, match=r"stalled for 0.3s; gave up after 2 attempts") as e:
            await asyncio.wait_for(otp.fetch_release_docs(RELEASE), timeout=10)
    assert SIGNATURE not in str(e.value)  # the redirect's signed URL is never shown
    assert otp.cached_bytes == 0


async def test_an_unreachable_mirror_says_how_to_do_without_it(tmp_path: Path) -> None:
    closed = "http://127.0.0.1:9"  # nothing listens there
    settings = Settings.from_env(
        {"OTP_DOCS_MIRROR": closed, "PROJECT_ROOT": str(tmp_path), "HEXLOCAL_HTTP_TIMEOUT_S": "5"}
    )
    async with otp_client_for(settings, attempts=2) as otp:
        with pytest.raises(RemoteError, match=r"install that OTP release.*OTP_DOCS_MIRROR") as e:
            await asyncio.wait_for(otp.fetch_release_docs(RELEASE), timeout=30)
    assert "gave up after 2 attempts" in str(e.value)


async def test_a_body_cut_short_is_retried(otp: OtpDocsClient, fake_otp: FakeOtpReleases) -> None:
    fake_otp.fail("/objects/*", truncate=True)
    with pytest.raises(RemoteError, match="gave up after 3 attempts"):
        await otp.fetch_release_docs(RELEASE)
    assert len(fake_otp.requests_to("/objects/*")) == 3


async def test_a_redirect_loop_stops_at_the_bound(
    otp: OtpDocsClient, fake_otp: FakeOtpReleases
) -> None:
    fake_otp.fail(fake_otp.asset_path(RELEASE), loop=True)
    with pytest.raises(RemoteError, match=r"was redirected 5 times.*loop.*OTP_DOCS_MIRROR"):
        await otp.fetch_release_docs(RELEASE)
    assert len(fake_otp.requests) == MAX_REDIRECTS  # one attempt: a loop stays a loop


async def test_a_web_page_served_with_200_names_the_mirror_setting(
    otp: OtpDocsClient, fake_otp: FakeOtpReleases
) -> None:
    fake_otp.fail("/objects/*", html=True)
    with pytest.raises(RemoteError, match=r"web page \(text/html\).*OTP_DOCS_MIRROR"):
        await otp.fetch_release_docs(RELEASE)
    assert len(fake_otp.requests_to("/objects/*")) == 1


async def test_bytes_that_are_not_a_tarball_name_the_mirror_setting(
    otp: OtpDocsClient, fake_otp: FakeOtpReleases
) -> None:
    fake_otp.tarballs[RELEASE] = b"Sign in to continue"
    with pytest.raises(RemoteError, match=r"not a gzip tarball.*OTP_DOCS_MIRROR"):
        await otp.fetch_release_docs(RELEASE)
    assert otp.cached_bytes == 0


async def test_a_download_past_the_size_cap_is_refused(
    fake_otp: FakeOtpReleases, tmp_path: Path
) -> None:
    settings = otp_settings_for(fake_otp, tmp_path, HEXLOCAL_MAX_DOCS_BYTES="1048576")
    async with otp_client_for(settings) as otp:
        with pytest.raises(RemoteError, match="HEXLOCAL_MAX_DOCS_BYTES"):
            await otp.fetch_release_docs(RELEASE)


async def test_credentials_in_the_mirror_url_are_never_shown(
    fake_otp: FakeOtpReleases, tmp_path: Path
) -> None:
    secret = "hunter2-mirror-password"
    mirror = fake_otp.mirror_url.replace("http://", f"http://ci:{secret}@")
    settings = otp_settings_for(fake_otp, tmp_path, OTP_DOCS_MIRROR=mirror)
    async with otp_client_for(settings) as otp:
        with pytest.raises(VersionNotFound) as e:
            await otp.fetch_release_docs("28.0")
        assert secret not in str(e.value) + repr(otp)
    assert fake_otp.requests[0].headers["Authorization"].startswith("Basic ")


async def test_build_wires_the_source_and_the_facade_closes_it(tmp_path: Path) -> None:
    class Recorder:
        closed = False

        async def warm_up(self) -> None:
            return None

        async def aclose(self) -> None:
            self.closed = True

        async def fetch_release_docs(self, release: str) -> bytes:
            raise AssertionError("not called")

    settings = Settings.from_env(
        {"PROJECT_ROOT": str(tmp_path), "DATABASE_PATH": str(tmp_path / "x.db")},
        sync_on_start=False,
    )
    recorder = Recorder()
    async with build(settings, otp_docs=recorder, load_models=False):
        pass
    assert recorder.closed
