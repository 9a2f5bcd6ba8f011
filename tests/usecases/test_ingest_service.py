"""search_docs end to end through the service: fake hex.pm serving real tarballs, real
parser, real SQLite. The embedder is the deterministic HashingEmbedder (these tests are
about ingestion, versions and atomicity; search quality is measured with the real model)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import pytest

from hexlocal_core.cancel import IngestCancelled
from hexlocal_core.config import Settings
from hexlocal_core.errors import (
    IngestError,
    ModelMismatch,
    NotFound,
    RemoteError,
    VersionNotFound,
)
from hexlocal_core.index.sqlite.db import connect, scalar
from hexlocal_core.ingest.planner import plan_ingest
from hexlocal_core.model import (
    IngestProgress,
    JobStatus,
    LockEntry,
    ResolvedVersion,
    SourceKind,
    VersionSource,
)
from hexlocal_core.ports import Vectors
from hexlocal_core.service import Hexlocal, build
from tests.fakes.fake_hex import FakeHex
from tests.support.elixir import compile_sample
from tests.support.helpers import HashingEmbedder, db, project_root
from tests.support.hex_fixtures import client_for, settings_for
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

SAMPLE_LOCK = '%{\n  "sample": {:hex, :sample, "0.3.0", "abc", [:mix], [], "hexpm", "def"},\n}\n'
JASON_LOCK = '%{{\n  "jason": {{:hex, :jason, "{v}", "abc", [:mix], [], "hexpm", "def"}},\n}}\n'


def snapshot(service: Hexlocal) -> tuple[object, ...]:
    conn = db(service)
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


async def job_ended(service: Hexlocal, package: str) -> JobStatus:
    """The package's job once it is no longer running (whatever the outcome)."""

    def ended() -> JobStatus | None:
        (status,) = service.ingestion_status(package)
        return status if status.state != "running" else None

    return await eventually(ended, what=f"{package}'s ingestion job ending")


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
    lock = project_root(svc) / "mix.lock"
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
    with pytest.raises(VersionNotFound, match="telemetry") as caught:
        await svc.search_docs("telemetry", "attach a handler")
    assert snapshot(svc)[0] == 0
    # hex.pm lists docs for 1.4.1; the mirror has none yet.
    assert "the docs mirror may lag behind it" in str(caught.value)
    assert "the nearest versions with docs: 1.4.0" in str(caught.value)


async def test_a_lock_pin_hex_does_not_list_names_the_nearest_versions_with_docs(
    svc: Hexlocal, fake_hex: FakeHex
) -> None:
    # A lock newer than the registry it is read against (a mirror lagging behind hex.pm).
    (project_root(svc) / "mix.lock").write_text(JASON_LOCK.format(v="1.5.0"))
    with pytest.raises(VersionNotFound) as caught:
        await svc.search_docs("jason", "decode")
    message = str(caught.value)
    assert "jason 1.5.0 is not among the releases hex.pm lists" in message
    assert "the nearest versions with docs: 1.4.5, 1.4.4, 1.4.3" in message
    assert "Ask for version 1.4.5" in message
    assert snapshot(svc)[0] == 0
    # The explanation reads the package info the client already holds: no second request.
    assert len(fake_hex.requests_to("/api/packages/jason")) == 1


async def test_a_release_published_without_docs_says_so(svc: Hexlocal, fake_hex: FakeHex) -> None:
    releases = [
        {"version": "2.1.0", "has_docs": False},
        {"version": "2.0.0", "has_docs": True},
        {"version": "1.0.0", "has_docs": True},
    ]
    fake_hex.add_package(
        "quiet_pkg",
        {"name": "quiet_pkg", "releases": releases, "latest_stable_version": "2.1.0"},
    )
    with pytest.raises(VersionNotFound) as caught:
        await svc.search_docs("quiet_pkg", "anything", version="2.1.0")
    message = str(caught.value)
    assert "quiet_pkg 2.1.0 was published without docs" in message
    assert "the nearest versions with docs: 2.0.0, 1.0.0" in message


async def test_missing_docs_with_hex_unreachable_keep_the_plain_message(
    svc: Hexlocal, fake_hex: FakeHex
) -> None:
    (project_root(svc) / "mix.lock").write_text(JASON_LOCK.format(v="1.5.0"))
    fake_hex.fail("/api/packages/*", status=503)
    with pytest.raises(VersionNotFound) as caught:
        await svc.search_docs("jason", "decode")
    message = str(caught.value)
    assert "jason-1.5.0.tar.gz returned 404" in message
    assert "It may never have published docs; try another version." in message


@pytest.mark.elixir
async def test_hex_unreachable_reads_the_compiled_dependency_or_says_to_compile(
    svc: Hexlocal, fake_hex: FakeHex
) -> None:
    root = project_root(svc)
    (root / "mix.lock").write_text(SAMPLE_LOCK)
    fake_hex.fail("/repo/docs/sample-*", status=503)
    with pytest.raises(RemoteError) as caught:
        await svc.search_docs("sample", "greet someone")
    assert "compile the project (`mix compile`) so _build holds sample 0.3.0" in str(caught.value)

    compile_sample(root)
    result = await svc.search_docs("sample", "greet someone")
    assert result.hits and result.hits[0].package == "sample"
    assert "Hexlocal.Sample.html#greet/2" in [h.ref for h in result.hits]
    assert any(n.code == "docs_from_beam" for n in result.notices), result.notices


@pytest.mark.parametrize("stage", ["download", "parse", "write"])
async def test_failure_before_the_chunks_are_written_leaves_database_unchanged(
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
        else:
            db(service).execute(
                "CREATE TRIGGER injected BEFORE INSERT ON chunks WHEN new.package = 'jason'"
                " AND (SELECT count(*) FROM chunks WHERE package = 'jason') >= 5"
                " BEGIN SELECT RAISE(ABORT, 'injected write failure'); END"
            )
        with pytest.raises((RemoteError, IngestError, Exception)):
            await service.ingest("jason", "1.4.4")
        assert snapshot(service) == before
        assert scalar(db(service), "PRAGMA integrity_check") == "ok"
    finally:
        await service.aclose()


def fail_second_slice(embedder: HashingEmbedder) -> Callable[[], None]:
    """Makes the embedder's second call fail (the first slice's vectors are written, the
    rest are not); returns what puts the embedder back."""
    original = embedder.embed
    calls: list[int] = []

    async def fails_second_slice(texts: Sequence[str]) -> Vectors:
        calls.append(len(texts))
        if len(calls) == 2:
            raise RemoteError("injected embedding failure")
        return await original(texts)

    def restore() -> None:
        embedder.embed = original  # type: ignore[method-assign]

    embedder.embed = fails_second_slice  # type: ignore[method-assign]
    return restore


async def test_an_embedding_cut_short_keeps_the_chunks_and_the_next_job_embeds_the_rest(
    fake_hex: FakeHex, tmp_path: Path
) -> None:
    # The chunks are written first (keyword search answers), then the vectors slice by
    # slice: a failure in the second slice keeps the chunks and the first slice's vectors,
    # and the job the next call starts embeds only what is missing, from the stored chunks
    # (the docs are not downloaded again).
    embedder = HashingEmbedder()
    service = await make_service(settings_for(fake_hex, tmp_path, embed_batch_size=20), embedder)
    try:
        restore = fail_second_slice(embedder)
        with pytest.raises(RemoteError, match="injected"):
            await service.ingest("jason", "1.4.4")
        (pkg,) = service.list_packages()
        assert (pkg.version, pkg.status) == ("1.4.4", "partial")
        total = pkg.chunk_count
        assert scalar(db(service), "SELECT count(*) FROM embed_cache") == 20
        restore()
        fake_hex.reset()
        report, _ = await service.ingest("jason", "1.4.4")
        assert report is not None and (report.embedded, report.reused) == (total - 20, 20)
        assert report.chunks == total and report.source == pkg.source
        assert fake_hex.requests_to("/repo/docs/*") == []
        (pkg,) = service.list_packages()
        assert pkg.status == "complete"
        assert scalar(db(service), "PRAGMA integrity_check") == "ok"
        again = await service.search_docs("jason", "decode keys as atoms", version="1.4.4")
        assert any(h.vec_rank is not None for h in again.hits)
    finally:
        await service.aclose()


async def _cut_short(fake_hex: FakeHex, tmp_path: Path) -> tuple[Settings, int]:
    """jason 1.4.4 indexed up to its first slice of 20 vectors; its settings, chunk count."""
    embedder = HashingEmbedder()
    settings = settings_for(fake_hex, tmp_path, embed_batch_size=20)
    service = await make_service(settings, embedder)
    fail_second_slice(embedder)
    try:
        with pytest.raises(RemoteError, match="injected"):
            await service.ingest("jason", "1.4.4")
        (pkg,) = service.list_packages()
        return settings, pkg.chunk_count
    finally:
        await service.aclose()


async def test_a_package_cut_short_is_finished_offline_from_its_stored_chunks(
    fake_hex: FakeHex, tmp_path: Path
) -> None:
    # The network went away after the chunks were written: the vectors need no download.
    settings, total = await _cut_short(fake_hex, tmp_path)
    await fake_hex.stop()
    service = await make_service(settings)
    try:
        report, _ = await service.ingest("jason", "1.4.4")
        assert report is not None and (report.embedded, report.reused) == (total - 20, 20)
        (pkg,) = service.list_packages()
        assert (pkg.version, pkg.status) == ("1.4.4", "complete")
        result = await service.search_docs("jason", "decode keys as atoms", version="1.4.4")
        assert result.hits and any(h.vec_rank is not None for h in result.hits)
    finally:
        await service.aclose()


async def test_a_refresh_of_a_package_cut_short_reads_its_docs_again(
    fake_hex: FakeHex, tmp_path: Path
) -> None:
    settings, total = await _cut_short(fake_hex, tmp_path)
    fake_hex.reset()
    service = await make_service(settings)
    try:
        report, _ = await service.ingest("jason", "1.4.4", refresh=True)
        assert report is not None and report.chunks == total
        assert len(fake_hex.requests_to("/repo/docs/jason-1.4.4.tar.gz")) == 1
        assert [p.status for p in service.list_packages()] == ["complete"]
    finally:
        await service.aclose()


async def test_a_search_answers_by_keyword_while_the_vectors_are_made(
    fake_hex: FakeHex, tmp_path: Path
) -> None:
    # The budget (INGEST_TIMEOUT_MS) is far longer than the chunking: the answer must not
    # wait for the embedder, which here takes 0.5 s a slice of 20 (jason: 5 slices).
    settings = settings_for(fake_hex, tmp_path, embed_batch_size=20, answer_while_embedding=True)
    service = await make_service(settings, PacedEmbedder(0.5))
    try:
        first = await service.search_docs("jason", "decode keys as atoms", version="1.4.4")
        assert first.hits and first.ingestion is None
        (notice,) = [n for n in first.notices if n.code == "embedding_in_progress"]
        assert "jason 1.4.4" in notice.message and "chunks embedded" in notice.message
        assert first.hits[0].fts_rank is not None  # the keyword arm answered
        exact = await service.get_docs("jason", "Jason.decode/2", version="1.4.4")
        assert exact.hits[0].ref == "Jason.html#decode/2"
        # an exact lookup reads no vectors: nothing in its answer is waiting for them
        assert not any(n.code == "embedding_in_progress" for n in exact.notices)
        (status,) = service.ingestion_status("jason")
        assert status.state == "running" and status.phase == "embedding"
        report, _ = await service.ingest("jason", "1.4.4")  # joins the running job
        assert report is not None and report.chunks == status.chunks_total
        last = await service.search_docs("jason", "decode keys as atoms", version="1.4.4")
        assert not any(n.code == "embedding_in_progress" for n in last.notices)
        assert any(h.vec_rank is not None for h in last.hits)
    finally:
        await service.aclose()


async def test_a_failing_embedder_still_answers_by_keyword_and_says_why(
    fake_hex: FakeHex, tmp_path: Path
) -> None:
    embedder = HashingEmbedder()

    async def broken(texts: Sequence[str]) -> Vectors:
        raise RemoteError("injected embedding failure")

    embedder.embed = broken  # type: ignore[method-assign]
    settings = settings_for(fake_hex, tmp_path, answer_while_embedding=True)
    service = await make_service(settings, embedder)
    try:
        first = await service.search_docs("jason", "decode keys as atoms", version="1.4.4")
        assert first.hits and any(n.code == "embedding_in_progress" for n in first.notices)
        # The job fails in the background, on its first slice.
        status = await job_ended(service, "jason")
        assert status.state == "failed" and "injected" in (status.error or "")
        again = await service.search_docs("jason", "decode keys as atoms", version="1.4.4")
        assert again.hits
        (notice,) = [n for n in again.notices if n.code == "embedding_in_progress"]
        assert "The last attempt stopped: injected embedding failure" in notice.message
        # A failure moments ago is not retried on every call: no second download.
        assert len(fake_hex.requests_to("/repo/docs/jason-1.4.4.tar.gz")) == 1
        (status,) = service.ingestion_status("jason")
        assert status.state == "failed"
    finally:
        await service.aclose()


async def test_a_failed_partial_ingestion_is_retried_once_its_pause_is_over(
    fake_hex: FakeHex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hexlocal_core.usecases import ingest as ingest_module

    monkeypatch.setattr(ingest_module, "RETRY_FAILED_AFTER_S", 0.0)
    embedder = HashingEmbedder()
    original = embedder.embed
    failures = [RemoteError("injected embedding failure")]

    async def fails_once(texts: Sequence[str]) -> Vectors:
        if failures:
            raise failures.pop()
        return await original(texts)

    embedder.embed = fails_once  # type: ignore[method-assign]
    settings = settings_for(fake_hex, tmp_path, answer_while_embedding=True)
    service = await make_service(settings, embedder)
    try:
        await service.search_docs("jason", "decode keys as atoms", version="1.4.4")
        assert (await job_ended(service, "jason")).state == "failed"
        await service.search_docs("jason", "decode keys as atoms", version="1.4.4")  # retries
        await eventually(
            lambda: [p.status for p in service.list_packages()] == ["complete"],
            what="the retried ingestion completing jason",
            detail=service.list_packages,
        )
        # The retry embeds the stored chunks: the docs were downloaded once.
        assert len(fake_hex.requests_to("/repo/docs/jason-1.4.4.tar.gz")) == 1
    finally:
        await service.aclose()


async def test_waiting_for_the_vectors_can_be_asked_for(fake_hex: FakeHex, tmp_path: Path) -> None:
    settings = settings_for(fake_hex, tmp_path, answer_while_embedding=False)
    service = await make_service(settings, HashingEmbedder())
    try:
        result = await service.search_docs("jason", "decode keys as atoms", version="1.4.4")
        assert not any(n.code == "embedding_in_progress" for n in result.notices)
        assert [p.status for p in service.list_packages()] == ["complete"]
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
        (status,) = service.ingestion_status("jason")
        assert status.state == "running"
        await asyncio.wait_for(service.ingest("jason", "1.4.4"), 10)  # joins the running job
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
    # A misspelt name: the module's items spelt like it, not its first five.
    typo = await svc.get_docs("jason", "Jason.decod", version="1.4.4")
    (notice,) = typo.notices
    near = notice.message.split("Documented near it: ", 1)[1]
    assert near.startswith("Jason.decode/2, Jason.decode!/2"), notice.message
    for both_wrong in ("Jasn.decod/2", "decod/2"):  # no module, or one jason does not have
        typo = await svc.get_docs("jason", both_wrong, version="1.4.4")
        assert "Documented near it: Jason.decode/2" in typo.notices[0].message, both_wrong
    module = await svc.get_docs("jason", "Jason.Encodr", version="1.4.4")
    assert "Documented near it: Jason.Encoder, Jason.Encode" in module.notices[0].message
    unlike = await svc.get_docs("jason", "Jason.frobnicate/1", version="1.4.4")
    assert "Documented near it: Jason" in unlike.notices[0].message  # the module's own, then


# -- the plan, progress and cancellation ---------------------------------------------------

ELIXIR = ("elixir", "1.18.4")  # the largest tarball of the corpus: seconds to parse and chunk


class PacedEmbedder(HashingEmbedder):
    """A hashing embedder that takes `pause_s` per call in a worker thread, like a real
    model does: cancellation must not wait for more than the call in flight."""

    def __init__(self, pause_s: float) -> None:
        super().__init__()
        self.pause_s = pause_s

    async def embed(self, texts: Sequence[str]) -> Vectors:
        await asyncio.to_thread(time.sleep, self.pause_s)
        return await super().embed(texts)


async def test_progress_is_pushed_to_every_listener_phase_by_phase(
    fake_hex: FakeHex, tmp_path: Path
) -> None:
    settings = settings_for(fake_hex, tmp_path, embed_batch_size=100)
    embedder = HashingEmbedder()
    service = await make_service(settings, embedder)
    first: list[IngestProgress] = []
    second: list[IngestProgress] = []
    try:
        await asyncio.gather(
            service.ingest("ecto", "3.12.5", progress=first.append),
            service.ingest("ecto", "3.12.5", progress=second.append),  # joins the same job
        )
    finally:
        await service.aclose()
    phases = list(dict.fromkeys(p.phase for p in first))
    assert phases == ["downloading", "parsing", "chunking", "writing", "embedding", "done"]
    embedding = [p.chunks_embedded for p in first if p.phase == "embedding"]
    assert embedding == sorted(embedding) and len(embedding) >= 3, embedding  # moves in steps
    assert second[-1] == first[-1] and second[-1].phase == "done"
    assert max(len(b) for b in embedder.batches) == 100  # EMBED_BATCH_SIZE, uncapped
    assert len(fake_hex.requests_to("/repo/docs/ecto-3.12.5.tar.gz")) == 1


async def test_status_is_a_typed_value_with_the_real_phase(
    fake_hex: FakeHex, tmp_path: Path
) -> None:
    settings = settings_for(fake_hex, tmp_path, ingest_timeout_ms=50, embed_batch_size=50)
    service = await make_service(settings, PacedEmbedder(0.2))
    try:
        waiting = await service.search_docs("ecto", "insert a changeset", version="3.12.5")
        assert waiting.ingestion is not None and waiting.ingestion.state == "running"
        seen = set()

        def embedding() -> JobStatus | None:
            (status,) = service.ingestion_status("ecto")
            seen.add(status.phase)
            return status if status.phase == "embedding" and status.chunks_embedded else None

        status = await eventually(embedding, what="ecto's job reporting embedded chunks")
        assert status.chunks_total > status.chunks_embedded > 0
        assert status.elapsed_s is not None and status.error is None
        assert "downloading" not in seen or len(seen) > 1
    finally:
        await service.aclose()


@pytest.mark.parametrize("phase", ["downloading", "parsing", "chunking", "embedding"])
async def test_cancel_stops_the_job_within_two_seconds(
    phase: str, fake_hex: FakeHex, tmp_path: Path
) -> None:
    settings = settings_for(fake_hex, tmp_path, embed_batch_size=50)
    if phase == "downloading":
        fake_hex.fail("/repo/docs/elixir-*", delay=30)  # a mirror that stalls
    service = await make_service(settings, PacedEmbedder(0.5))
    reached = asyncio.Event()

    def watch(p: IngestProgress) -> None:
        if p.phase == phase:
            reached.set()

    ingest = asyncio.create_task(service.ingest(*ELIXIR, progress=watch))
    await asyncio.wait_for(reached.wait(), 60)
    started = time.perf_counter()
    await service.aclose()  # what the MCP server does when stdin closes
    stopped = time.perf_counter() - started
    with pytest.raises(IngestCancelled, match="shutting down"):
        await ingest
    assert stopped < 2.0, f"cancelled during {phase}, stopped after {stopped:.1f} s"
    conn = connect(settings.database_path)
    if phase == "embedding":
        # Past the chunk write: the chunks stay (keyword search answers), the package is
        # 'partial' until a later job adds the vectors the cache does not hold.
        assert scalar(conn, "SELECT status FROM packages") == "partial"
        assert scalar(conn, "SELECT count(*) FROM chunks") > 0
    else:
        assert scalar(conn, "SELECT count(*) FROM packages") == 0
        assert scalar(conn, "SELECT count(*) FROM chunks") == 0
    assert scalar(conn, "SELECT status || ':' || error FROM ingest_jobs") == (
        "failed:ingestion was cancelled: hexlocal is shutting down"
    )
    assert scalar(conn, "PRAGMA integrity_check") == "ok"


@pytest.mark.parametrize(
    ("kind", "compiled", "expected"),
    [
        ("hex", None, (SourceKind.HEXDOCS, None)),
        ("hex", Path("/b/ebin"), (SourceKind.HEXDOCS, Path("/b/ebin"))),  # the fallback
        ("git", Path("/b/ebin"), (SourceKind.BEAM, None)),
        ("path", Path("/b/ebin"), (SourceKind.BEAM, None)),
    ],
)
def test_plan_picks_the_source_once(
    kind: str, compiled: Path | None, expected: tuple[SourceKind, Path | None]
) -> None:
    entry = LockEntry(name="dep", kind=kind, version="1.0.0" if kind == "hex" else None)
    resolved = ResolvedVersion("dep", "1.0.0", VersionSource.MIX_LOCK, lock_entry=entry)
    plan = plan_ingest(resolved, compiled=compiled, docs_html_url="https://docs.example/dep")
    assert (plan.source, plan.fallback) == expected
    assert plan.docs_html_url == ("https://docs.example/dep" if kind == "hex" else None)


def test_plan_of_an_uncompiled_git_dependency_names_the_fix() -> None:
    entry = LockEntry(name="dep", kind="git")
    resolved = ResolvedVersion("dep", "0.1.0", VersionSource.MIX_LOCK, lock_entry=entry)
    with pytest.raises(NotFound, match="mix compile"):
        plan_ingest(resolved, compiled=None, docs_html_url=None)


async def test_resume_skips_an_interrupted_job_whose_version_was_indexed_since(
    fake_hex: FakeHex, tmp_path: Path
) -> None:
    settings = settings_for(fake_hex, tmp_path)
    first = await make_service(settings)
    await first.ingest("jason", "1.4.4")
    conn = db(first)
    await first.aclose()
    conn.execute(  # a killed process's row; another run indexed jason 1.4.4 after it
        "INSERT INTO ingest_jobs(package, version, source, status, pid, started_at)"
        " VALUES ('jason', '1.4.4', 'auto', 'running', 2147483646, '2026-12-01T00:00:00Z')"
    )
    fake_hex.reset()
    second = await make_service(settings)
    try:
        await second.start()
        assert [s.state for s in second.ingestion_status()] == []  # no job started
        assert fake_hex.requests == []
    finally:
        await second.aclose()
