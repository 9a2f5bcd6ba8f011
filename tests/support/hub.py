"""Pointing huggingface_hub at a loopback stand-in for the hub, for one test."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from hexlocal_core.adapters.hub import HubConfig


def use_hub(monkeypatch: pytest.MonkeyPatch, url: str, home: Path) -> HubConfig:
    """The network allowed, HF_ENDPOINT at `url`, HF_HOME (so the hub cache, and hf_xet's
    cache and logs) under `home`. huggingface_hub read HF_HUB_OFFLINE at import, so its
    constant is switched too; telemetry off, because its agent detection would ask the
    import-time endpoint (not the fake) for a registry."""
    import huggingface_hub.constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_TELEMETRY", True)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")  # hf_xet reads it itself
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setenv("HF_HOME", str(home))
    config = HubConfig.from_env()
    assert config.cache_dir == home / "hub" and config.endpoint == url
    return config


def join_downloads(timeout: float) -> list[str]:
    """Waits for the download threads; the names of those still running."""
    threads = [t for t in threading.enumerate() if t.name.startswith("hub-download")]
    for thread in threads:
        thread.join(timeout)
    return [t.name for t in threads if t.is_alive()]


def leftovers(cache: Path) -> list[Path]:
    """Temporary files of a download (huggingface_hub's `<etag>.<id>.incomplete`)."""
    return [p for p in cache.rglob("*") if p.name.endswith(".incomplete")]
