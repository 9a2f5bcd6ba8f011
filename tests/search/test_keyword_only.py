"""Offline with no embedding model: a search answers by keyword and says that is all it will
get (no "vectors are on their way"), with a fix that works for how hexlocal was installed.

The embedder is the real local one, with no offline source for its model and a hub that
refuses connections (a closed loopback port): what a laptop with no network meets."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from hexlocal_core import install
from hexlocal_core.adapters import model_sources
from hexlocal_core.adapters.hub import HubConfig
from hexlocal_core.adapters.local_embedder import build_local_embedder
from hexlocal_core.model import SearchResult
from hexlocal_core.service import Hexlocal, build
from tests.fakes.fake_hex import FakeHex, client_for, settings_for
from tests.support.waiting import eventually


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port  # nothing listens there now: connections are refused at once


@pytest.fixture
async def offline_service(
    fake_hex: FakeHex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Hexlocal:
    monkeypatch.setattr(model_sources, "pypi_model_dir", lambda: None)
    settings = settings_for(fake_hex, tmp_path, answer_while_embedding=True)
    hub = HubConfig(
        cache_dir=tmp_path / "empty-hub-cache",
        endpoint=f"http://127.0.0.1:{closed_port()}",
        offline=False,
        request_timeout_s=2.0,
    )
    return build(
        settings,
        embedder=build_local_embedder(settings, hub=hub),
        reranker=None,
        registry=client_for(settings),
        load_models=False,
    )


async def settled(service: Hexlocal) -> SearchResult:
    """A search after the first one's job has stopped on the missing model."""
    first = await service.search_docs("jason", "decode keys as atoms", version="1.4.4")
    assert first.hits
    status = await eventually(
        lambda: next((s for s in service.ingestion_status("jason") if s.state != "running"), None),
        what="the job stops on the missing model",
    )
    assert status.state == "failed"
    return await service.search_docs("jason", "decode keys as atoms", version="1.4.4")


async def test_the_notice_says_keyword_only_and_how_to_get_the_model(
    offline_service: Hexlocal,
) -> None:
    try:
        result = await settled(offline_service)
        assert result.hits and result.hits[0].fts_rank is not None
        (notice,) = [n for n in result.notices if n.code == "keyword_only"]
        assert not any(n.code == "embedding_in_progress" for n in result.notices)
        message = notice.message
        assert message.startswith("jason 1.4.4 answers by keyword only")
        assert "cannot reach http://127.0.0.1:" in message
        assert "improves as they arrive" not in message
        assert install.detect().model_fix() in message  # this checkout: make setup or pip
        assert "HEXLOCAL_EMBED_MODEL_DIR" in message  # the fix that needs no network
    finally:
        await offline_service.aclose()


async def test_under_uvx_the_fix_is_no_pip_install(
    offline_service: Hexlocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = "/home/me/dist/hexlocal-0.1.0-py3-none-any.whl"
    uvx = install.detect(
        "/home/me/.cache/uv/archive-v0/abc",
        "/home/me/.cache/uv/archive-v0/abc/bin/python",
        f'{{"url": "file://{wheel}", "archive_info": {{}}}}',
    )
    monkeypatch.setattr(install, "detect", lambda: uvx)
    try:
        result = await settled(offline_service)
        (notice,) = [n for n in result.notices if n.code == "keyword_only"]
        assert f"`uvx --from {wheel} hexlocal models pull`" in notice.message
        assert "pip install" not in notice.message and "make setup" not in notice.message
    finally:
        await offline_service.aclose()
