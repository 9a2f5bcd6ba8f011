"""`sync` end to end: a mix.lock in tmp, the fake hex serving the corpus's real tarballs,
the real parser and SQLite. The embedder is the HashingEmbedder: these tests are about
orchestration (queue, states, failures, resuming, searches during a sync)."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from hexlocal_core.config import Settings
from hexlocal_core.errors import NotFound
from hexlocal_core.index.rows import SyncRow
from hexlocal_core.index.sqlite.db import connect, rows, scalar
from hexlocal_core.index.sqlite.store import Store
from hexlocal_core.ingest.beam_sources import find_elixir_lib
from hexlocal_core.model import IndexedPackage, JobStatus, PackageState, Phase, SyncState
from hexlocal_core.service import Hexlocal, build
from hexlocal_core.usecases.sync_plan import SyncTarget, package_states, plan_queue
from tests.fakes.fake_hex import FakeHex
from tests.support.helpers import GatedEmbedder, HashingEmbedder, db
from tests.support.hex_fixtures import client_for, settings_for
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

# Small corpus packages, at versions the corpus holds; in sync (lock) order.
LOCKED = {"jason": "1.4.4", "mime": "2.0.7", "nimble_options": "1.1.1", "telemetry": "1.2.1"}
WAIT_S = 20.0  # upper bound for a state to be reached; never a speed assertion


def lock_text(pins: dict[str, str], extra: str = "") -> str:
    lines = [
        f'  "{name}": {{:hex, :{name}, "{version}", "abc", [:mix], [], "hexpm", "def"}},'
        for name, version in pins.items()
    ]
    return "%{\n" + "\n".join(lines) + "\n" + extra + "}\n"


def project(settings: Settings, pins: dict[str, str] = LOCKED, extra: str = "") -> Path:
    root = settings.project_root
    (root / "mix.exs").write_text("defmodule App.MixProject do\nend\n")
    (root / "mix.lock").write_text(lock_text(pins, extra))
    return root


def sync_settings(fake: FakeHex, tmp_path: Path, **overrides: Any) -> Settings:
    overrides.setdefault("sync_elixir", False)  # Elixir's apps: one test of their own
    return settings_for(fake, tmp_path, ai_rerank_model="off", **overrides)


def make(settings: Settings, embedder: HashingEmbedder | None = None) -> Hexlocal:
    return build(
        settings,
        embedder=embedder or HashingEmbedder(),
        reranker=None,
        registry=client_for(settings),
        load_models=False,
    )


@pytest.fixture
async def svc(fake_hex: FakeHex, tmp_path: Path) -> AsyncIterator[Hexlocal]:
    settings = sync_settings(fake_hex, tmp_path)
    project(settings)
    service = make(settings)
    yield service
    await service.aclose()


def by_name(states: Sequence[PackageState]) -> dict[str, PackageState]:
    return {s.name: s for s in states}


async def until(
    service: Hexlocal, ok: Callable[[dict[str, PackageState]], bool]
) -> dict[str, PackageState]:
    """Polls `project_packages` until `ok` holds (or fails after WAIT_S)."""
    seen: list[dict[str, PackageState]] = []

    async def reached() -> dict[str, PackageState] | None:
        seen[:] = [by_name(await service.project_packages())]
        return seen[0] if ok(seen[0]) else None

    return await eventually(
        reached,
        what="the packages' states reaching the expected ones",
        timeout=WAIT_S,
        detail=lambda: seen,
    )


def complete(service: Hexlocal) -> bool:
    """Every locked package indexed with its vectors (a partial one is listed indexed too,
    keyword only)."""
    packages = service.list_packages()
    return len(packages) == len(LOCKED) and all(p.complete for p in packages)


def forget(service: Hexlocal, name: str) -> None:
    """Deletes a package the way the store does (its vectors too)."""
    store = Store(Path(service.diagnostics().database_path))
    try:
        assert store.delete_package(name)
    finally:
        store.close()


def docs_requests(fake: FakeHex, name: str) -> int:
    return len(fake.requests_to(f"/repo/docs/{name}-*"))


# -- the use case -------------------------------------------------------------------------


async def test_sync_indexes_every_locked_package_at_its_version(
    svc: Hexlocal, fake_hex: FakeHex
) -> None:
    report = await svc.sync(wait=True)
    assert report.queued == 4 and not report.running
    assert report.count(SyncState.INDEXED) == 4
    indexed = {p.name: p.version for p in svc.list_packages()}  # the old call still works
    assert indexed == LOCKED
    for state in report.packages:
        assert (state.locked_version, state.indexed_version) == (LOCKED[state.name],) * 2
        assert state.kind == "hex" and state.chunks > 0
    assert all(docs_requests(fake_hex, name) == 1 for name in LOCKED)

    again = await svc.sync(wait=True)  # nothing owed: no job, no request
    assert again.queued == 0 and again.count(SyncState.INDEXED) == 4
    assert all(docs_requests(fake_hex, name) == 1 for name in LOCKED)
    result = await svc.search_docs("telemetry", "attach a handler")
    assert result.hits and result.version == "1.2.1"


async def test_states_move_from_queued_to_indexing_to_indexed(
    svc: Hexlocal, fake_hex: FakeHex
) -> None:
    fake_hex.fail("/repo/docs/mime-*", delay=1.0)  # holds the second package a moment
    seen: list[PackageState] = []
    report = await svc.sync(wait=False, progress=seen.append)
    assert report.running and report.queued == 4
    states = await until(svc, lambda s: s["mime"].state is SyncState.INDEXING)
    assert states["jason"].state is SyncState.INDEXED
    assert states["nimble_options"].state is SyncState.QUEUED
    assert states["telemetry"].state is SyncState.QUEUED
    await svc.sync(wait=True, progress=seen.append)  # joins the running worker
    assert docs_requests(fake_hex, "mime") == 1
    moving = [s for s in seen if s.state is SyncState.INDEXING and s.phase is Phase.EMBEDDING]
    assert moving and all(s.chunks_total > 0 for s in moving)  # "indexing n/m chunks"
    assert {s.name for s in seen if s.state is SyncState.INDEXED} >= {"nimble_options"}
    final = by_name(await svc.project_packages())
    assert {n: s.state for n, s in final.items()} == {n: SyncState.INDEXED for n in LOCKED}


async def test_a_failure_reason_does_not_repeat_the_name_and_version(
    fake_hex: FakeHex, tmp_path: Path
) -> None:
    settings = sync_settings(fake_hex, tmp_path)
    project(settings, {**LOCKED, "mime": "9.9.9"})
    fake_hex.fail("/api/packages/mime", status=503)  # no release list to explain it from
    service = make(settings)
    try:
        states = by_name((await service.sync(wait=True)).packages)
    finally:
        await service.aclose()
    # Shown as "mime 9.9.9: failed: <reason>": the reason starts with what went wrong.
    assert (states["mime"].reason or "").startswith("there is no docs tarball for this version")


async def test_a_failing_package_shows_why_and_the_rest_continue(
    fake_hex: FakeHex, tmp_path: Path
) -> None:
    settings = sync_settings(fake_hex, tmp_path)
    project(settings, {**LOCKED, "mime": "9.9.9"})  # the corpus has no mime 9.9.9 docs
    fake_hex.fail("/repo/docs/nimble_options-*", status=503)  # and one transient failure
    service = make(settings)
    try:
        states = by_name((await service.sync(wait=True)).packages)
        assert states["mime"].state is SyncState.FAILED
        assert "9.9.9" in (states["mime"].reason or "") and "no docs" in (
            states["mime"].reason or ""
        )
        assert (states["mime"].reason or "").startswith("mime 9.9.9 is not among the releases")
        assert states["nimble_options"].state is SyncState.FAILED
        assert {states[n].state for n in ("jason", "telemetry")} == {SyncState.INDEXED}
        listed = by_name(await service.project_packages())
        assert listed["mime"].state is SyncState.FAILED and listed["mime"].reason

        # A background sync (the next start) retries the transient failure, not the 404.
        fake_hex.reset()
        states = by_name(
            (await service._syncer.sync(wait=True, progress=None, retry_failed=False)).packages
        )
        assert states["nimble_options"].state is SyncState.INDEXED
        assert states["mime"].state is SyncState.FAILED
        assert docs_requests(fake_hex, "mime") == 0
        # An explicit sync retries every failure.
        await service.sync(wait=True)
        assert docs_requests(fake_hex, "mime") == 1
    finally:
        await service.aclose()


async def test_a_sync_cut_short_resumes_at_the_next_start_without_duplicates(
    fake_hex: FakeHex, tmp_path: Path
) -> None:
    settings = sync_settings(fake_hex, tmp_path)
    project(settings)
    fake_hex.fail("/repo/docs/nimble_options-*", delay=30.0)  # the process ends during it
    first = make(settings)
    await first.sync(wait=False)
    await until(first, lambda s: s["nimble_options"].state is SyncState.INDEXING)
    await first.aclose()
    conn = db(first)
    # The first pass writes every package's chunks before any vector: jason and mime
    # answer by keyword, and their rows stay queued for the vectors.
    found = rows(conn, "SELECT name, status FROM packages ORDER BY name")
    assert [(r["name"], r["status"]) for r in found] == [("jason", "partial"), ("mime", "partial")]
    left = rows(conn, "SELECT package, status, pid FROM sync_queue ORDER BY seq")
    assert [(r["package"], r["status"], r["pid"]) for r in left] == [
        ("jason", "queued", None),
        ("mime", "queued", None),
        ("nimble_options", "queued", None),
        ("telemetry", "queued", None),
    ]

    fake_hex.reset()
    second = make(settings)  # HEXLOCAL_SYNC_ON_START defaults to true
    try:
        await second.start()
        await until(second, lambda _: complete(second))
        # jason and mime are embedded from their stored chunks: not downloaded again.
        assert {n: docs_requests(fake_hex, n) for n in LOCKED} == {
            "jason": 0,
            "mime": 0,
            "nimble_options": 1,
            "telemetry": 1,
        }
        conn = db(second)
        assert scalar(conn, "SELECT count(*) FROM sync_queue") == 4
        per_package = "SELECT package, count(*) AS n FROM chunks GROUP BY package"
        stored = {r["package"]: r["n"] for r in rows(conn, per_package)}
        assert stored == {p.name: p.chunk_count for p in second.list_packages()}
    finally:
        await second.aclose()


async def test_every_package_answers_by_keyword_before_any_vector(
    fake_hex: FakeHex, tmp_path: Path
) -> None:
    # A fresh project: the first pass writes all the packages' chunks, so the last one in
    # the lock answers (alone, and in a project-wide search) while none has a vector yet.
    settings = sync_settings(fake_hex, tmp_path, answer_while_embedding=True)
    project(settings)
    embedder = GatedEmbedder()
    service = make(settings, embedder)
    try:
        await service.sync(wait=False)
        await until(service, lambda _: len(service.list_packages()) == len(LOCKED))
        assert {p.status for p in service.list_packages()} == {"partial"}
        last = await service.search_docs("telemetry", "attach a handler to an event")
        assert last.hits and last.version == LOCKED["telemetry"]
        assert any(n.code == "embedding_in_progress" for n in last.notices)
        across = await service.search_project_deps("encode a map as JSON")
        assert across.hits and across.hits[0].package == "jason"
        embedder.gate.set()
        await until(service, lambda _: complete(service))
        assert {p.status for p in service.list_packages()} == {"complete"}
        # One download each: the vectors were made from the stored chunks.
        assert {n: docs_requests(fake_hex, n) for n in LOCKED} == dict.fromkeys(LOCKED, 1)
    finally:
        await service.aclose()


async def test_a_search_meeting_the_first_pass_gets_its_chunks_and_embeds_that_package(
    fake_hex: FakeHex, tmp_path: Path
) -> None:
    # The user asks about telemetry while the first pass is downloading it: the answer
    # waits for its chunks (not for the pass, nor for any vector), and telemetry is the
    # next package embedded, ahead of the queue.
    settings = sync_settings(fake_hex, tmp_path, answer_while_embedding=True)
    project(settings)
    fake_hex.fail("/repo/docs/telemetry-*", delay=1.0)
    embedder = GatedEmbedder()
    service = make(settings, embedder)
    try:
        await service.sync(wait=False)
        await until(service, lambda s: s["telemetry"].state is SyncState.INDEXING)
        result = await service.search_docs("telemetry", "attach a handler to an event")
        assert result.hits and result.ingestion is None
        assert any(n.code == "embedding_in_progress" for n in result.notices)
        # Its embedding job runs (held at the gate), while jason's is still first in the queue.
        await until(service, lambda s: s["telemetry"].phase is Phase.EMBEDDING)
        (status,) = service.ingestion_status("telemetry")
        assert status.state == "running"
        assert not any(p.complete for p in service.list_packages())
        embedder.gate.set()
        await until(service, lambda _: complete(service))
        assert {n: docs_requests(fake_hex, n) for n in LOCKED} == dict.fromkeys(LOCKED, 1)
    finally:
        await service.aclose()


async def test_a_search_meeting_a_first_pass_that_fails_gets_that_failure_from_one_download(
    fake_hex: FakeHex, tmp_path: Path
) -> None:
    # telemetry's docs are gone (a 404) and the user asks about it while the first pass is
    # fetching them: the answer is that failure, the one the sync records, not a second
    # download of its own.
    settings = sync_settings(fake_hex, tmp_path, answer_while_embedding=True)
    project(settings)
    fake_hex.fail("/repo/docs/telemetry-*", status=404, delay=1.0)
    service = make(settings, GatedEmbedder())
    try:
        await service.sync(wait=False)
        await until(service, lambda s: s["telemetry"].state is SyncState.INDEXING)
        with pytest.raises(NotFound, match="telemetry"):
            await service.search_docs("telemetry", "attach a handler to an event")
        states = await until(service, lambda s: s["telemetry"].state is SyncState.FAILED)
        assert "no docs" in (states["telemetry"].reason or "")
        assert docs_requests(fake_hex, "telemetry") == 1
    finally:
        await service.aclose()


async def test_a_row_claimed_by_a_process_that_died_is_taken_up_again(
    svc: Hexlocal, fake_hex: FakeHex
) -> None:
    await svc.sync(wait=True)
    conn = db(svc)
    forget(svc, "mime")
    # What a killed worker leaves: its row running, claimed by a pid that no longer runs.
    conn.execute(
        "UPDATE sync_queue SET status = 'running', pid = 2147483646 WHERE package = 'mime'"
    )
    states = by_name(await svc.project_packages())
    assert states["mime"].state is SyncState.QUEUED
    report = await svc.sync(wait=True)
    assert by_name(list(report.packages))["mime"].state is SyncState.INDEXED
    assert docs_requests(fake_hex, "mime") == 2


async def test_after_a_kill_the_resumed_job_and_the_sync_share_one_download(
    fake_hex: FakeHex, tmp_path: Path
) -> None:
    settings = sync_settings(fake_hex, tmp_path)
    project(settings, {"jason": "1.4.4", "mime": "2.0.7"})
    first = make(settings)
    await first.sync(wait=True)
    conn = db(first)
    forget(first, "mime")
    await first.aclose()
    # What `kill -9` during mime's job leaves: mime not written, its job row and its sync
    # row both 'running' under a pid that no longer runs.
    dead = 2147483646
    conn.execute(
        "UPDATE sync_queue SET status = 'running', pid = ? WHERE package = 'mime'", (dead,)
    )
    conn.execute(
        "INSERT INTO ingest_jobs(package, version, source, status, pid, started_at)"
        " VALUES ('mime', '2.0.7', 'auto', 'running', ?, '2026-12-01T00:00:00Z')",
        (dead,),
    )
    fake_hex.reset()
    second = make(settings)
    try:
        await second.start()  # resumes mime's job, and syncs: the worker joins that job
        await until(second, lambda s: s["mime"].state is SyncState.INDEXED)
        await second.sync(wait=True)
        assert docs_requests(fake_hex, "mime") == 1 and docs_requests(fake_hex, "jason") == 0
    finally:
        await second.aclose()


async def test_a_search_for_the_package_being_synced_waits_for_its_job(
    svc: Hexlocal, fake_hex: FakeHex
) -> None:
    fake_hex.fail("/repo/docs/jason-*", delay=0.5)
    await svc.sync(wait=False)
    await until(svc, lambda s: s["jason"].state is SyncState.INDEXING)
    result = await svc.search_docs("jason", "Jason.decode/2")
    assert result.hits and result.version == "1.4.4" and result.ingestion is None
    assert docs_requests(fake_hex, "jason") == 1  # the sync's job, not a second one


async def test_a_search_for_a_queued_package_starts_it_now(
    svc: Hexlocal, fake_hex: FakeHex
) -> None:
    fake_hex.fail("/repo/docs/jason-*", delay=30.0)  # the worker is stuck on the first
    await svc.sync(wait=False)
    await until(svc, lambda s: s["jason"].state is SyncState.INDEXING)
    result = await svc.search_docs("telemetry", "attach a handler")
    assert result.hits and result.version == "1.2.1"
    states = by_name(await svc.project_packages())
    assert states["telemetry"].state is SyncState.INDEXED
    assert states["jason"].state is SyncState.INDEXING
    assert states["mime"].state is SyncState.QUEUED
    assert docs_requests(fake_hex, "telemetry") == 1


@pytest.mark.parametrize("sync_on_start", ["true", "false"])
async def test_start_syncs_in_the_background_unless_the_setting_is_off(
    fake_hex: FakeHex, tmp_path: Path, sync_on_start: str
) -> None:
    base = settings_for(fake_hex, tmp_path)
    env = {
        "HEX_API_URL": fake_hex.api_url,
        "HEX_MIRROR": fake_hex.mirror_url,
        "PROJECT_ROOT": str(base.project_root),
        "DATABASE_PATH": str(base.database_path),
        "HEXLOCAL_SYNC_ON_START": sync_on_start,
        "HEXLOCAL_SYNC_ELIXIR": "off",
    }
    settings = Settings.from_env(env)
    assert settings.sync_on_start is (sync_on_start == "true") and not settings.warnings
    project(settings)
    service = make(settings)
    try:
        before = asyncio.all_tasks()
        await service.start()
        # What start() set going, rather than a wait for something that must not happen:
        # the setting on, the same start() has a sync task and the queue fills (the
        # control that shows what "off" would have seen).
        started = {task.get_name() for task in asyncio.all_tasks() - before}
        if settings.sync_on_start:
            assert "hexlocal-sync" in started, started
            await eventually(
                lambda: scalar(db(service), "SELECT count(*) FROM sync_queue"),
                what="the background sync queueing the locked packages",
            )
            return
        assert "hexlocal-sync" not in started, started
    finally:
        await service.aclose()
    # Off: the service closed, so nothing can start any more; nothing ever did.
    assert fake_hex.requests == []
    assert scalar(connect(settings.database_path), "SELECT count(*) FROM sync_queue") == 0


def test_a_malformed_sync_setting_falls_back_to_on_with_a_warning() -> None:
    settings = Settings.from_env({"HEXLOCAL_SYNC_ON_START": "sometimes"})
    assert settings.sync_on_start
    assert any("HEXLOCAL_SYNC_ON_START" in w for w in settings.warnings)


# -- what the project runs besides Hex packages ---------------------------------------------


async def test_elixir_apps_are_queued_at_the_projects_elixir_version(
    fake_hex: FakeHex, tmp_path: Path
) -> None:
    settings = sync_settings(fake_hex, tmp_path, sync_elixir=True)
    root = project(settings, {"jason": "1.4.4"})
    (root / ".tool-versions").write_text("erlang 27.1\nelixir 1.18.4-otp-27\n")
    fake_hex.fail("/repo/docs/jason-*", delay=30.0)  # hold the worker: states only
    service = make(settings)
    try:
        await service.sync(wait=False)
        states = await service.project_packages()
        apps = [s for s in states if s.kind == "elixir"]
        assert [s.name for s in apps] == ["eex", "ex_unit", "iex", "logger", "mix", "elixir"]
        assert {(s.locked_version, s.state) for s in apps} == {("1.18.4", SyncState.QUEUED)}
    finally:
        await service.aclose()


async def test_git_deps_are_read_from_build_or_skipped_with_the_fix(
    fake_hex: FakeHex, tmp_path: Path
) -> None:
    eex = find_elixir_lib("eex", None)
    if eex is None:
        pytest.skip("Elixir is not installed")
    settings = sync_settings(fake_hex, tmp_path)
    git = '  "{0}": {{:git, "https://example.invalid/{0}.git", "0123abc", []}},\n'
    root = project(settings, {"jason": "1.4.4"}, git.format("built_dep") + git.format("raw_dep"))
    ebin = root / "_build" / "dev" / "lib" / "built_dep" / "ebin"
    shutil.copytree(eex.ebin, ebin)  # real BEAM files with docs chunks
    (ebin / "built_dep.app").write_text(
        '{application,built_dep,[{description,"x"},{vsn,"0.3.0"},{modules,[]}]}.\n'
    )
    service = make(settings)
    try:
        states = by_name(list((await service.sync(wait=True)).packages))
        assert states["built_dep"].state is SyncState.INDEXED
        assert (states["built_dep"].kind, states["built_dep"].indexed_version) == ("git", "0.3.0")
        assert states["raw_dep"].state is SyncState.SKIPPED
        assert "mix compile" in (states["raw_dep"].reason or "")
        assert states["jason"].state is SyncState.INDEXED
        assert not fake_hex.requests_to("/repo/docs/*_dep-*")
    finally:
        await service.aclose()


async def test_list_shows_outdated_and_unlocked_packages(svc: Hexlocal) -> None:
    await svc.ingest("jason", "1.2.2")  # the lock pins 1.4.4
    await svc.ingest("decimal", "2.3.0")  # not in the lock at all
    states = by_name(await svc.project_packages())
    assert states["jason"].state is SyncState.OUTDATED
    assert (states["jason"].locked_version, states["jason"].indexed_version) == ("1.4.4", "1.2.2")
    assert states["decimal"].state is SyncState.INDEXED and not states["decimal"].locked
    assert states["mime"].state is SyncState.NOT_INDEXED
    assert states["decimal"].to_dict()["locked"] is False


async def test_without_a_mix_project_sync_says_so_and_queues_nothing(
    fake_hex: FakeHex, tmp_path: Path
) -> None:
    service = make(sync_settings(fake_hex, tmp_path, sync_elixir=True))
    try:
        report = await service.sync(wait=True)
        assert report.packages == () and report.queued == 0
        assert [n.code for n in report.notices] == ["no_mix_project"]
    finally:
        await service.aclose()


# -- the pure queue decisions ------------------------------------------------------------------


def _row(name: str, status: str, version: str = "1.0.0", **kw: Any) -> SyncRow:
    return SyncRow(name, version, "hex", status, 0, **kw)


@pytest.mark.parametrize(
    ("old", "indexed", "retry_failed", "expected"),
    [
        (None, None, False, "queued"),
        (None, "1.0.0", False, "done"),
        (None, "0.9.0", False, "queued"),  # indexed at another version: the lock wins
        (_row("a", "failed", retry=False), None, False, "failed"),  # a 404 is not retried
        (_row("a", "failed", retry=False), None, True, "queued"),  # unless asked
        (_row("a", "failed", retry=True), None, False, "queued"),  # a transient failure is
        (_row("a", "failed", "0.9.0", retry=False), None, False, "queued"),  # a new pin
        (_row("a", "done"), None, False, "queued"),  # deleted since
    ],
)
def test_plan_queue(
    old: SyncRow | None, indexed: str | None, retry_failed: bool, expected: str
) -> None:
    current = {"a": old} if old else {}
    changes = plan_queue(
        [SyncTarget("a", "1.0.0", "hex")],
        current,
        {"a": indexed} if indexed else {},
        retry_failed=retry_failed,
        claimed=lambda row: False,
    )
    assert [r.status for r in changes.upsert] == [expected]


def test_plan_queue_keeps_live_claims_and_drops_unlocked_rows() -> None:
    current = {"a": _row("a", "running", pid=1), "gone": _row("gone", "queued")}
    changes = plan_queue(
        [SyncTarget("a", "1.0.0", "hex"), SyncTarget("b", None, "git", skip="not compiled")],
        current,
        {},
        retry_failed=True,
        claimed=lambda row: row.pid == 1,
    )
    assert [(r.package, r.status, r.reason) for r in changes.upsert] == [
        ("b", "skipped", "not compiled")
    ]
    assert changes.delete == ("gone",)


def test_a_running_job_wins_over_the_queue_row() -> None:
    pkg = IndexedPackage("a", "0.9.0", "hexdocs", "complete", 10, 3, 1, "now")
    job = JobStatus("a", "running", "1.0.0", Phase.EMBEDDING, 5, 20)
    (state,) = package_states(
        [SyncTarget("a", "1.0.0", "hex")], {"a": _row("a", "queued")}, {"a": pkg}, {"a": job}
    )
    assert (state.state, state.chunks_embedded, state.chunks_total) == (SyncState.INDEXING, 5, 20)
    assert state.indexed_version == "0.9.0"
