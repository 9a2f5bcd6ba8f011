"""Which repo, at which commit: the default models under their current names, pinned to a
commit that both the download and the cache lookup honour; renamed repos followed through
the hub's 307; a redirect loop and a rename without a redirect answered in seconds."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import attrs
import pytest

from hexlocal_core.adapters import hub, model_fetch, model_sources
from hexlocal_core.adapters.hub import HubConfig, RepoPlan
from hexlocal_core.adapters.model_sources import Presence, Which
from hexlocal_core.config import DEFAULT_RERANK_MODEL
from hexlocal_core.errors import ModelError, ModelUnavailable
from tests.fakes.fake_hub import FakeHub, folder_repo
from tests.support.hub import use_hub
from tests.support.model_fixtures import model_settings

pytestmark = pytest.mark.integration

RERANK_REPO = "cross-encoder/ms-marco-MiniLM-L6-v2"
FORMER = "cross-encoder/ms-marco-MiniLM-L-6-v2"
PIN = model_sources.PINNED_REVISIONS[RERANK_REPO]
OTHER = "deadbeef" * 5  # another commit of the same repo
FILES = ("model.safetensors", "config.json", "tokenizer.json")
SMALL = (RepoPlan(required=("config.json", "tokenizer.json")),)


@pytest.fixture
def reranker_files(stand_in_reranker_dir: Path) -> dict[str, Path]:
    return folder_repo(stand_in_reranker_dir, FILES)


def offline(config: HubConfig) -> HubConfig:
    return attrs.evolve(config, offline=True)


def reranker_status(config: HubConfig, **env: str) -> model_sources.ModelStatus:
    rows = model_sources.model_status(model_settings(**env), hub=config)
    return next(s for s in rows if s.which is Which.RERANKER)


def test_defaults_have_their_current_names_and_are_pinned() -> None:
    settings = model_settings()
    assert DEFAULT_RERANK_MODEL == RERANK_REPO
    for which in Which:
        repo = model_sources.repo_id(settings, which)
        assert re.fullmatch(r"[0-9a-f]{40}", model_sources.revision_of(repo)), repo
    # The former name is the same model: read under the new name, at the same pin.
    assert model_sources.repo_id(model_settings(AI_RERANK_MODEL=FORMER), Which.RERANKER) == (
        RERANK_REPO
    )
    assert model_sources.revision_of("someone/else") == "main"


async def test_the_cache_is_read_at_the_pinned_commit(
    reranker_files: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A cache holding another commit of the default repo is not the pinned model: the
    model is missing until the pinned commit arrives, and then it is read from there."""
    async with FakeHub({RERANK_REPO: reranker_files}, commit=OTHER) as moved_on:
        config = use_hub(monkeypatch, moved_on.url, tmp_path / "hf")
        await asyncio.to_thread(hub.download, RERANK_REPO, SMALL, config, revision="main")
    cached = config.cache_dir / "models--cross-encoder--ms-marco-MiniLM-L6-v2"
    assert (cached / "refs" / "main").read_text() == OTHER
    assert reranker_status(offline(config)).presence is Presence.MISSING

    async with FakeHub({RERANK_REPO: reranker_files}, commit=PIN) as pinned:
        at_pin = attrs.evolve(config, endpoint=pinned.url)
        files = await asyncio.to_thread(
            model_fetch.pull, model_settings(), Which.RERANKER, hub=at_pin
        )
        assert pinned.files_of("GET", "/revision/") == [f"/api/models/{RERANK_REPO}/revision/{PIN}"]
    assert files.tokenizer_path.parent == cached / "snapshots" / PIN
    status = reranker_status(offline(config))
    assert status.presence is Presence.PRESENT and PIN[:12] in status.detail


async def test_a_hub_without_the_pinned_commit_says_so(
    reranker_files: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    async with FakeHub({RERANK_REPO: reranker_files}, commit=OTHER) as fake:
        config = use_hub(monkeypatch, fake.url, tmp_path / "hf")
        with pytest.raises(ModelError) as info:
            await asyncio.to_thread(model_fetch.pull, model_settings(), Which.RERANKER, hub=config)
        message = str(info.value)
        assert f"has no revision {PIN!r} of {RERANK_REPO}" in message and fake.url in message


async def test_a_renamed_repo_is_followed_and_cached_under_the_name_asked(
    reranker_files: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings = model_settings(AI_RERANK_MODEL="someone/old-name")
    renamed = {"someone/old-name": "someone/new-name"}
    async with FakeHub({"someone/new-name": reranker_files}, renamed=renamed) as fake:
        config = use_hub(monkeypatch, fake.url, tmp_path / "hf")
        files = await asyncio.to_thread(model_fetch.pull, settings, Which.RERANKER, hub=config)
        heads = fake.files_of("HEAD")
    assert "/someone/old-name/resolve/main/config.json" in heads
    assert "/someone/new-name/resolve/main/config.json" in heads  # after the 307
    assert files.tokenizer_path.is_relative_to(config.cache_dir / "models--someone--old-name")
    found = model_sources.resolve(settings, Which.RERANKER, hub=offline(config))
    assert found.source == "hugging face cache"


async def test_the_default_cached_under_its_former_name_still_serves_offline(
    reranker_files: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A cache filled before the rename (under the old name, at the pinned commit) keeps
    the reranker working offline: no second download of the same files."""
    async with FakeHub(
        {RERANK_REPO: reranker_files}, commit=PIN, renamed={FORMER: RERANK_REPO}
    ) as fake:
        config = use_hub(monkeypatch, fake.url, tmp_path / "hf")
        plan = (RepoPlan(required=FILES),)
        await asyncio.to_thread(hub.download, FORMER, plan, config, revision=PIN)
    files = model_sources.resolve(model_settings(), Which.RERANKER, hub=offline(config))
    assert files.source == "hugging face cache" and FORMER in files.detail
    assert files.tokenizer_path.is_relative_to(
        config.cache_dir / "models--cross-encoder--ms-marco-MiniLM-L-6-v2" / "snapshots" / PIN
    )


async def test_a_redirect_loop_is_a_clear_error_in_seconds(
    reranker_files: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    loop = {"someone/a": "someone/b", "someone/b": "someone/a"}
    async with FakeHub({"someone/c": reranker_files}, renamed=loop) as fake:
        config = use_hub(monkeypatch, fake.url, tmp_path / "hf")
        fetcher = model_fetch.Fetcher(
            model_settings(AI_RERANK_MODEL="someone/a"), Which.RERANKER, config
        )
        started = time.monotonic()
        with pytest.raises(ModelUnavailable) as info:
            await asyncio.to_thread(fetcher.locate)
    assert time.monotonic() - started < 10
    message = str(info.value)
    assert "someone/a" in message and "in a loop" in message and "HF_ENDPOINT" in message
    assert not list(config.cache_dir.rglob("*.json"))


async def test_a_renamed_repo_without_a_redirect_names_the_fix(
    reranker_files: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    async with FakeHub({"someone/new-name": reranker_files}) as fake:
        config = use_hub(monkeypatch, fake.url, tmp_path / "hf")
        settings = model_settings(AI_RERANK_MODEL="someone/old-name")
        with pytest.raises(ModelError) as info:
            await asyncio.to_thread(model_fetch.pull, settings, Which.RERANKER, hub=config)
    message = str(info.value)
    assert "has no model repository someone/old-name (HTTP 404" in message
    assert "renamed" in message
