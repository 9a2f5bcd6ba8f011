"""Erlang/OTP applications as packages, through the service: real OTP installs from the
shared corpus (27: docs in the beams; 25: `.chunk` files), the release's real doc tarball
served by a loopback stand-in for erlang/otp's GitHub releases, real SQLite and parsers."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

import pytest

from hexlocal_core.config import Settings
from hexlocal_core.errors import NotFound, UserInputError
from hexlocal_core.ingest.otp_source import installed_items
from hexlocal_core.service import Hexlocal, build
from hexlocal_core.usecases.diff import Change, api_entries, diff_entries
from hexlocal_mcp import formatting
from tests.fakes.fake_otp import FakeOtpReleases
from tests.support.elixir import compile_app
from tests.support.helpers import HashingEmbedder
from tests.support.otp_corpus import OTP25, OTP27, OTP29, install

CLOSED = "http://127.0.0.1:9"  # nothing listens: hex.pm is never needed here


def settings(tmp_path: Path, otp_root: Path | None, mirror: str = CLOSED, **env: str) -> Settings:
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    values = {
        "PROJECT_ROOT": str(project),
        "DATABASE_PATH": str(tmp_path / "hexlocal.db"),
        "HEX_API_URL": CLOSED,
        "HEX_MIRROR": CLOSED,
        "OTP_DOCS_MIRROR": mirror,
        "HEXLOCAL_HTTP_TIMEOUT_S": "5",
        "HEXLOCAL_ANSWER_WHILE_EMBEDDING": "false",
        **env,
    }
    if otp_root is not None:
        values["HEXLOCAL_OTP_ROOT"] = str(otp_root)
    return Settings.from_env(values)


def service(s: Settings) -> Hexlocal:
    return build(s, embedder=HashingEmbedder(), reranker=None, load_models=False)


@pytest.fixture(scope="module")
def otp27(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install(tmp_path_factory, OTP27)


@pytest.fixture(scope="module")
def otp25(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install(tmp_path_factory, OTP25)


@pytest.fixture(scope="module")
def otp29(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install(tmp_path_factory, OTP29)


@pytest.fixture
async def releases() -> AsyncIterator[FakeOtpReleases]:
    async with FakeOtpReleases() as fake:
        yield fake


@pytest.fixture
async def svc29(tmp_path: Path, otp29: Path, releases: FakeOtpReleases) -> AsyncIterator[Hexlocal]:
    """OTP 29 installed; other releases' docs from the stand-in for erlang/otp's releases."""
    s = service(settings(tmp_path, otp29, mirror=releases.mirror_url))
    yield s
    await s.aclose()


@pytest.fixture
async def svc27(tmp_path: Path, otp27: Path) -> AsyncIterator[Hexlocal]:
    s = service(settings(tmp_path, otp27))
    yield s
    await s.aclose()


@pytest.mark.parametrize(
    ("identifier", "package", "version", "ref"),
    [
        (":ets.new/2", "stdlib", "6.2.2.1", "ets.html#new/2"),
        ("ets:lookup/2", "stdlib", "6.2.2.1", "ets.html#lookup/2"),
        (":gen_tcp.connect/4", "kernel", "10.2.7.1", "gen_tcp.html#connect/4"),
        ("logger:add_handler/3", "kernel", "10.2.7.1", "logger.html#add_handler/3"),
        ("erlang:monotonic_time/1", "erts", "15.2.7", "erlang.html#monotonic_time/1"),
        ("c:gen_server:handle_call/3", "stdlib", "6.2.2.1", "gen_server.html#c:handle_call/3"),
        ("t:ets:tid/0", "stdlib", "6.2.2.1", "ets.html#t:tid/0"),
        # a function and a type share name and arity: the call spelling means the function
        (":maps.iterator/2", "stdlib", "6.2.2.1", "maps.html#iterator/2"),
        ("t:maps:iterator/2", "stdlib", "6.2.2.1", "maps.html#t:iterator/2"),
        (":ets", "stdlib", "6.2.2.1", "ets.html"),
    ],
)
async def test_an_erlang_identifier_finds_its_app_without_a_package(
    svc27: Hexlocal, identifier: str, package: str, version: str, ref: str
) -> None:
    result = await svc27.get_docs(None, identifier)
    assert (result.package, result.version) == (package, version)
    assert result.hits and result.hits[0].ref == ref
    major_url = f"https://www.erlang.org/docs/27/apps/{package}/{ref}"
    assert result.hits[0].hexdocs_url == major_url
    assert any(n.code == "package_located" for n in result.notices)


async def test_an_entry_with_no_text_of_its_own_says_what_it_is_equivalent_to(
    svc27: Hexlocal,
) -> None:
    result = await svc27.get_docs("erlang", "erlang:send_after/3")
    assert result.package == "erts"
    assert "Equivalent to" in result.hits[0].content and "send_after" in result.hits[0].content


async def test_the_apps_are_packages_at_their_version_in_the_release(svc27: Hexlocal) -> None:
    result = await svc27.get_docs("stdlib", "lists.map/2")
    assert (result.package, result.version) == ("stdlib", "6.2.2.1")
    assert result.hits[0].source == "beam"  # the install's beams: no download
    search = await svc27.search_docs("erlang", "a fast shared counter many processes bump")
    assert search.hits and {h.package for h in search.hits} <= {"erts", "kernel", "stdlib"}


async def test_logger_the_package_stays_elixir_s(svc27: Hexlocal) -> None:
    with pytest.raises(NotFound, match="no package found"):
        await svc27.get_docs("erlang", "Logger.info/2")  # no OTP app holds Elixir's Logger


async def test_otp_25_reads_the_chunk_files(tmp_path: Path, otp25: Path) -> None:
    s = service(settings(tmp_path, otp25))
    try:
        result = await s.get_docs(None, ":ets.new/2")
        assert (result.package, result.version) == ("stdlib", "4.2")
        hit = result.hits[0]
        assert hit.ref == "ets.html#new/2" and "table" in hit.content
        assert hit.hexdocs_url.startswith("https://www.erlang.org/docs/25/man/ets.html")
    finally:
        await s.aclose()


async def test_otp_25_without_its_docs_names_the_command_that_installs_them(
    tmp_path: Path, otp25: Path
) -> None:
    bare = tmp_path / "otp-bare"
    shutil.copytree(otp25, bare, ignore=shutil.ignore_patterns("doc"))
    s = service(settings(tmp_path, bare))
    try:
        with pytest.raises(NotFound, match="erlang-doc") as caught:
            await s.get_docs("stdlib", ":ets.new/2")
        assert "KERL_BUILD_DOCS=yes" in str(caught.value)
    finally:
        await s.aclose()


async def test_a_pinned_release_that_is_not_installed_reads_its_doc_tarball(
    svc29: Hexlocal, tmp_path: Path, releases: FakeOtpReleases
) -> None:
    (tmp_path / "project" / ".tool-versions").write_text("erlang 27.3.4.1\n")
    result = await svc29.get_docs(None, ":ets.new/2")
    assert (result.package, result.version) == ("stdlib", "6.2.2.1")
    codes = [n.code for n in result.notices]
    assert "otp_pin_not_installed" in codes and "docs_from_otp_tarball" in codes
    assert result.hits[0].hexdocs_url.endswith("/docs/27/apps/stdlib/ets.html#new/2")
    again = await svc29.get_docs("kernel", ":gen_tcp.connect/4")
    assert again.version == "10.2.7.1"
    downloads = [r for r in releases.requests if "/releases/download/" in r.path]
    assert len(downloads) == 1  # one download serves every app of the release


async def test_an_explicit_release_other_than_the_installed_one(svc29: Hexlocal) -> None:
    installed = await svc29.get_docs("stdlib", "lists.map/2")
    assert installed.version == "8.1.1"
    older = await svc29.get_docs("stdlib", "lists.map/2", version="OTP-27.3.4.1")
    assert older.version == "6.2.2.1" and older.hits


async def test_no_otp_anywhere_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no erl: the machine's own OTP stays out
    monkeypatch.setenv("HOME", str(tmp_path))
    s = service(settings(tmp_path, None))
    try:
        with pytest.raises(NotFound, match="no Erlang/OTP found"):
            await s.get_docs("stdlib", "lists.map/2")
    finally:
        await s.aclose()


async def test_sync_indexes_the_project_s_otp_apps_and_project_search_covers_them(
    tmp_path: Path, otp27: Path
) -> None:
    s = service(settings(tmp_path, otp27, HEXLOCAL_SYNC_OTP="true", HEXLOCAL_SYNC_ELIXIR="false"))
    try:
        (tmp_path / "project" / "mix.exs").write_text(
            "defmodule A.MixProject do\n  def application, do: [extra_applications: [:logger]]"
            "\nend\n"
        )
        report = await s.sync(wait=True)
        states = {p.name: p for p in report.packages}
        assert {"erts", "kernel", "stdlib"} <= set(states), states
        assert states["stdlib"].indexed_version == "6.2.2.1"
        assert "logger" not in states  # Elixir's logger app is not an OTP application
        result = await s.search_project_deps(":ets.new/2", mode="fts")
        assert result.hits and result.hits[0].package == "stdlib"
    finally:
        await s.aclose()


CACHE_EX = """defmodule Up.Cache do
  def start, do: :ets.new(:up_cache, [:named_table, :public])
  def find(list, key), do: :lists.keyfind(key, 1, list)
  def later(pid), do: :erlang.send_after(1000, pid, :tick)
  def grow(array), do: :array.append(:tick, array)
end
"""


@pytest.mark.elixir
async def test_upgrade_impact_of_an_otp_application_reads_both_releases(
    svc29: Hexlocal, tmp_path: Path
) -> None:
    root = tmp_path / "project"
    (root / "mix.exs").write_text("defmodule Up.MixProject do\nend\n")
    compile_app(root, "up", {"lib/cache.ex": CACHE_EX})
    with pytest.raises(UserInputError, match="OTP release to move to"):
        await svc29.upgrade_impact("stdlib")
    report = (await svc29.upgrade_impact("stdlib", "OTP-27.3.4.1")).to_dict()
    assert (report["from"], report["to"]) == ("8.1.1", "6.2.2.1")
    # OTP 29 from its install's beams, OTP 27 from its doc tarball: two renderings of the
    # docs, so only the API is compared; the calls whose API did not change are spared
    affected = {a["identifier"]: a for a in report["affected"]}
    # (ets.new/2 and lists.keyfind/3 kept their API; erlang.send_after/3 is erts's)
    assert set(affected) == {"array.append/2"}, affected  # added in OTP 29: gone in 27
    assert affected["array.append/2"]["change"] == "removed"
    assert [c["file"] for c in affected["array.append/2"]["call_sites"]] == ["lib/cache.ex"]
    assert "readers_differ" in [n["code"] for n in report["notices"]]


def _api(changes: Iterable[Change]) -> set[tuple[str, str, str]]:
    return {(str(c.kind), c.module, c.name) for c in changes if c.kind != "docs_changed"}


async def test_diff_of_an_otp_application_compares_two_releases_as_one_reader_would(
    svc29: Hexlocal, otp27: Path, otp29: Path
) -> None:
    with pytest.raises(UserInputError, match="OTP release to compare with"):
        await svc29.diff_versions("stdlib", "OTP-27.3.4.1", None)
    diff = await svc29.diff_versions("stdlib", "OTP-27.3.4.1", "OTP-29.1.2", limit=200)
    assert (diff.from_side.version, diff.to_side.version) == ("6.2.2.1", "8.1.1")
    assert diff.from_side.hexdocs_url == "https://www.erlang.org/docs/27/apps/stdlib/"
    assert "readers_differ" in [n.code for n in diff.notices]
    assert diff.counts["docs_changed"] == 0  # the renderings differ, not the docs
    # The truth: both releases read by one reader, their installs' beams
    old, new = (
        installed_items(root / "lib" / f"stdlib-{vsn}", "stdlib", vsn, lambda ref: ref).items
        for root, vsn in ((otp27, "6.2.2.1"), (otp29, "8.1.1"))
    )
    truth = _api(diff_entries(api_entries(old), api_entries(new)))
    found = _api(diff.changes)
    assert ("added", "array", "append/2") in truth and truth <= found
    # what only the tarball documents (a module with no beam in the install's ebin)
    documented = {item.module for item in old}
    assert all(kind == "removed" and mod not in documented for kind, mod, _ in found - truth)


MONOTONIC_EX = """
defmodule Hexlocal.Clock do
  @moduledoc "A clock for tests."

  @doc "Measures elapsed durations with a steady stopwatch that wall-clock jumps never disturb."
  def monotonic_time, do: :erlang.monotonic_time()
end
"""


async def test_elixirs_words_for_an_otp_function_find_it_and_name_the_wrapper(
    tmp_path: Path, otp27: Path
) -> None:
    compile_app(tmp_path / "elixir", "elixir", {"lib/clock.ex": MONOTONIC_EX}, vsn="1.18.4")
    home = tmp_path / "elixir" / "_build" / "dev"  # lib/elixir/ebin, as an install has
    s = service(settings(tmp_path, otp27, ELIXIR_HOME=str(home)))
    try:
        # The keyword arm alone: the test's embedder hashes text, it does not read it.
        query = "steady stopwatch wall-clock jumps never disturb"
        found = await s.search_docs("erts", query, mode="fts")
        top = found.hits[0]
        assert top.ref == "erlang.html#monotonic_time/0"
        link = "https://hexdocs.pm/elixir/1.18.4/Hexlocal.Clock.html#monotonic_time/0"
        assert f"## In Elixir: [`Hexlocal.Clock.monotonic_time/0`]({link})" in top.content
        docs = await s.get_docs("erts", "erlang:monotonic_time/0")
        text = "".join(h.content for h in docs.hits)
        assert text.index("Erlang monotonic time") < text.index("## In Elixir")  # its own first
    finally:
        await s.aclose()


async def test_without_an_elixir_install_the_otp_docs_are_only_otps(
    tmp_path: Path, otp27: Path
) -> None:
    s = service(settings(tmp_path, otp27, ELIXIR_HOME=str(tmp_path / "no-elixir")))
    try:
        docs = await s.get_docs("erts", "erlang:monotonic_time/0")
        assert docs.hits and all("In Elixir" not in h.content for h in docs.hits)
    finally:
        await s.aclose()


@pytest.mark.parametrize("alias", ["erlang", "OTP"])
async def test_a_version_comparison_of_all_the_otp_apps_asks_for_one(
    svc27: Hexlocal, alias: str
) -> None:
    # each app has its own versions: the alias that searches them all cannot be compared
    with pytest.raises(UserInputError, match="name one .*stdlib"):
        await svc27.diff_versions(alias, "OTP-27.3.4.1", "OTP-28.0")
    with pytest.raises(UserInputError, match="name one .*upgrade-impact stdlib"):
        await svc27.upgrade_impact(alias, "OTP-28.0")


async def test_get_docs_text_gives_an_item_once_and_whole(svc27: Hexlocal) -> None:
    # the lookup returns the item's chunks in order; an agent reads the text form
    data = (await svc27.get_docs(None, ":gen_event.send_request/3")).to_dict()
    parts = [h["content"].strip() for h in data["results"]]
    assert len(parts) > 1 and {h["ref"] for h in data["results"]} == {
        "gen_event.html#send_request/3"
    }
    text = formatting.search_result(data, whole=True)
    assert text.count("gen_event.send_request/3 (function") == 1 and "\n2. " not in text
    shown = "\n".join(line.removeprefix("   ") for line in text.splitlines())  # unindented
    assert all(part in shown for part in parts)  # every chunk, none cut to an excerpt
    assert "…" not in text
