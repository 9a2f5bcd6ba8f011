"""search_docs end to end through the service: fake hex.pm serving real tarballs, real
parser, real SQLite. The embedder is the deterministic HashingEmbedder (these tests are
about ingestion, versions and atomicity; search quality is measured with the real model)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hexlocal_core.config import Settings
from hexlocal_core.errors import IngestError, ModelMismatch, RemoteError, VersionNotFound
from hexlocal_core.index.db import scalar
from hexlocal_core.service import Hexlocal, build
from tests.fakes.fake_hex import FakeHex
from tests.helpers import HashingEmbedder
from tests.hex_fixtures import client_for, settings_for

JASON_LOCK = '%{{\n  "jason": {{:hex, :jason, "{v}", "abc", [:mix], [], "hexpm", "def"}},\n}}\n'


def snapshot(service: Hexlocal) -> tuple[object, ...]:
    conn = service.store.conn
    return tuple(
        scalar(conn, sql)
        for sql in (
            "SELECT count(*) FROM packages",
            "SELECT count(*) FROM chunks",
            "SELECT count(*) FROM embed_cache",
            "SELECT group_concat(name || '@' || version) FROM packages",
        )
    )


async def make_service(settings: Settings, embedder: HashingEmbedder | None = None) -> Hexlocal:
    return build(
        settings,
        embedder=embedder or HashingEmbedder(),
        reranker=None,
        registry=client_for(settings),
        load_models=False,
    )


@pytest.fixture
async def svc(fake_hex: FakeHex, tmp_path: Path) -> AsyncIterator[Hexlocal]:
    service = await make_service(settings_for(fake_hex, tmp_path, ai_rerank_model="off"))
    yield service
    await service.aclose()


async def test_unindexed_package_is_downloaded_once_and_searched(
    svc: Hexlocal, fake_hex: FakeHex
) -> None:
    result = await svc.search_docs("jason", "Jason.decode/2", version="1.4.4")
    assert result.version == "1.4.4" and result.version_source == "explicit"
    top = result.hits[0]
    assert top.ref == "Jason.html#decode/2" and top.exact
    assert top.hexdocs_url.endswith("1.4.4/Jason.html#decode/2")
    assert len(fake_hex.requests_to("/repo/docs/jason-1.4.4.tar.gz")) == 1
    again = await svc.search_docs("jason", "encode a map", version="1.4.4")
    assert again.hits and len(fake_hex.requests_to("/repo/docs/*")) == 1  # served from the index


async def test_unpinned_package_uses_latest_stable(svc: Hexlocal) -> None:
    result = await svc.search_docs("jason", "decode")
    assert (result.version, result.version_source) == ("1.4.5", "hex latest stable")


async def test_lock_downgrade_replaces_version_with_notice(svc: Hexlocal) -> None:
    await svc.search_docs("jason", "decode")  # 1.4.5, latest stable
    lock = svc.settings.project_root / "mix.lock"
    lock.write_text(JASON_LOCK.format(v="1.2.2"))
    result = await svc.search_docs("jason", "decode")
    assert (result.version, result.version_source) == ("1.2.2", "mix.lock")
    replaced = [n for n in result.notices if n.code == "version_replaced"]
    assert replaced, result.notices
    assert "v1.4.5" in replaced[0].message and "v1.2.2" in replaced[0].message
    assert str(lock) in replaced[0].message and "DATABASE_PATH" in replaced[0].message
    assert [p.version for p in svc.list_packages()] == ["1.2.2"]


async def test_indexed_version_is_not_silently_replaced_by_latest(svc: Hexlocal) -> None:
    await svc.search_docs("jason", "decode", version="1.4.4")
    result = await svc.search_docs("jason", "decode")
    assert (result.version, result.version_source) == ("1.4.4", "indexed")
    assert any(n.code == "indexed_version_differs" and "1.4.5" in n.message for n in result.notices)


async def test_version_switch_reuses_vectors_by_content_hash(
    fake_hex: FakeHex, tmp_path: Path
) -> None:
    embedder = HashingEmbedder()
    service = await make_service(settings_for(fake_hex, tmp_path), embedder)
    try:
        first, _ = await service.ingest("jason", "1.4.4")
        second, _ = await service.ingest("jason", "1.4.5")
    finally:
        await service.aclose()
    assert first is not None and second is not None
    assert first.embedded == first.chunks - first.reused and first.embedded > 0
    assert second.reused > 0.8 * second.chunks, second
    assert second.embedded < 0.2 * first.embedded
    assert sum(len(b) for b in embedder.batches) == first.embedded + second.embedded


async def test_model_guard_refuses_before_any_request(fake_hex: FakeHex, tmp_path: Path) -> None:
    settings = settings_for(fake_hex, tmp_path)
    service = await make_service(settings, HashingEmbedder(model_id="test:model-a"))
    await service.ingest("nimble_pool", "1.1.0")
    await service.aclose()
    fake_hex.reset()
    other = await make_service(settings, HashingEmbedder(model_id="test:model-b"))
    try:
        with pytest.raises(ModelMismatch, match="hexlocal reindex"):
            await other.search_docs("jason", "decode", version="1.4.4")
        assert fake_hex.requests == []
        # The indexed package still answers, from the keyword arm, with a notice.
        result = await other.search_docs("nimble_pool", "checkout", version="1.1.0")
        assert result.hits
        assert any(n.code == "embedding_model_mismatch" for n in result.notices)
    finally:
        await other.aclose()


async def test_unknown_package_and_version_are_clear(svc: Hexlocal) -> None:
    with pytest.raises(Exception, match="no_such_pkg") as info:
        await svc.search_docs("no_such_pkg", "anything")
    assert "hex.pm" in str(info.value)
    with pytest.raises(VersionNotFound, match=r"1\.4\.4"):
        await svc.search_docs("jason", "decode", version="1.4.99")


async def test_latest_stable_without_tarball_is_a_clear_error(svc: Hexlocal) -> None:
    with pytest.raises(VersionNotFound, match="telemetry"):
        await svc.search_docs("telemetry", "attach a handler")
    assert snapshot(svc)[0] == 0


@pytest.mark.parametrize("stage", ["download", "parse", "embed", "write"])
async def test_failure_at_any_stage_leaves_database_unchanged(
    stage: str, fake_hex: FakeHex, tmp_path: Path
) -> None:
    embedder = HashingEmbedder()
    service = await make_service(settings_for(fake_hex, tmp_path), embedder)
    try:
        await service.ingest("nimble_pool", "1.1.0")
        before = snapshot(service)
        if stage == "download":
            fake_hex.fail("/repo/docs/jason-*", status=500)
        elif stage == "parse":
            fake_hex.add_docs("jason", "1.4.4", b"\x1f\x8b\x08\x00garbage-not-a-tarball")
        elif stage == "embed":

            async def broken(texts: object) -> object:
                raise RemoteError("injected embedding failure")

            embedder.embed = broken  # type: ignore[method-assign]
        else:
            service.store.conn.execute(
                "CREATE TRIGGER injected BEFORE INSERT ON chunks WHEN new.package = 'jason'"
                " AND (SELECT count(*) FROM chunks WHERE package = 'jason') >= 5"
                " BEGIN SELECT RAISE(ABORT, 'injected write failure'); END"
            )
        with pytest.raises((RemoteError, IngestError, Exception)):
            await service.ingest("jason", "1.4.4")
        assert snapshot(service) == before
        assert scalar(service.store.conn, "PRAGMA integrity_check") == "ok"
    finally:
        await service.aclose()


async def test_slow_ingest_answers_with_progress_then_collects(
    fake_hex: FakeHex, tmp_path: Path
) -> None:
    settings = settings_for(fake_hex, tmp_path, ingest_timeout_ms=50)
    fake_hex.fail("/repo/docs/jason-1.4.4.tar.gz", delay=0.5)
    service = await make_service(settings)
    try:
        first, second = await asyncio.gather(
            service.search_docs("jason", "decode", version="1.4.4"),
            service.search_docs("jason", "encode", version="1.4.4"),
        )
        for waiting in (first, second):
            assert not waiting.hits and waiting.ingestion is not None
            assert any(n.code == "ingestion_in_progress" for n in waiting.notices)
        job = service.jobs.get("jason")
        assert job is not None
        await asyncio.wait_for(asyncio.shield(job.task), 10)
        done = await service.search_docs("jason", "decode", version="1.4.4")
        assert done.hits
        assert len(fake_hex.requests_to("/repo/docs/jason-1.4.4.tar.gz")) == 1  # one job, not two
    finally:
        await service.aclose()


async def test_offline_after_ingestion_still_answers(fake_hex: FakeHex, tmp_path: Path) -> None:
    settings = settings_for(fake_hex, tmp_path)
    service = await make_service(settings)
    await service.search_docs("jason", "decode")
    await service.aclose()
    await fake_hex.stop()
    offline = await make_service(settings)
    try:
        result = await offline.search_docs("jason", "decode")
        assert result.hits and result.version == "1.4.5"
        assert any(n.code == "registry_unreachable" for n in result.notices)
    finally:
        await offline.aclose()


async def test_get_docs_returns_the_item_or_names_what_is_documented_near_it(svc: Hexlocal) -> None:
    found = await svc.get_docs("jason", "Jason.decode/2", version="1.4.4")
    refs = [h.ref for h in found.hits]
    assert refs[0] == "Jason.html#decode/2" and all(h.exact for h in found.hits)
    assert "Jason.html#decode/2-options" in refs  # its heading sub-items follow
    missing = await svc.get_docs("jason", "Jason.decode/7", version="1.4.4")
    assert missing.hits == ()
    (notice,) = missing.notices
    assert notice.code == "not_found" and "Jason.decode/2" in notice.message
