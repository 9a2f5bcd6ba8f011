"""Servers sharing one index ingest a package version once.

The engine decides who holds the claim (PostgreSQL: an advisory lock, see tests/pg/); this
is the ingestor's side, over the real SQLite store with a claim held "elsewhere": it
waits without blocking the loop, answers from the other server's work without downloading
anything, and a cancelled wait leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import attrs
import pytest

from hexlocal_core.adapters.hex import HexClient
from hexlocal_core.index.sqlite.store import Store
from hexlocal_core.ingest import ingestor as ingestor_module
from hexlocal_core.ingest.ingestor import Ingestor, SourcePaths
from hexlocal_core.model import IngestProgress, Phase, ResolvedVersion, VersionSource
from tests.fakes.fake_hex import FakeHex
from tests.support.helpers import HashingEmbedder, chunk_of, item, write_package
from tests.support.pg import package_write
from tests.support.waiting import eventually


class ClaimedElsewhere(Store):
    """The real store, with the claim held by "another server" until `free` is set."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.free = threading.Event()
        self.refused = 0
        self.released = 0

    def try_ingest_claim(self, package: str, version: str) -> Any:
        if not self.free.is_set():
            self.refused += 1
            return None
        outer = self

        class Claim:
            def release(self) -> None:
                outer.released += 1

        return Claim()


@pytest.fixture(autouse=True)
def _fast_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ingestor_module, "CLAIM_POLL_S", 0.02)


def _ingestor(store: Store, hex_client: HexClient, tmp_path: Path) -> Ingestor:
    paths = SourcePaths(tmp_path, None, 50 * 1024 * 1024)
    return Ingestor(store, HashingEmbedder(), hex_client, paths, slice_size=64)


JASON = ResolvedVersion("jason", "1.4.4", VersionSource.EXPLICIT)


async def test_a_version_another_server_indexed_is_not_downloaded_again(
    tmp_path: Path, hex_client: HexClient, fake_hex: FakeHex
) -> None:
    store = ClaimedElsewhere(tmp_path / "x.db")
    heard: list[IngestProgress] = []
    run = asyncio.create_task(_ingestor(store, hex_client, tmp_path).run(JASON, heard.append))
    # The loop stays free while the ingestor waits: this poll runs beside it.
    await eventually(lambda: store.refused >= 3, what="the ingestor asking for the claim 3 times")
    chunks = [chunk_of(item("Jason.html#decode/2", "Parses JSON.", package="jason"))]
    write_package(store, "jason", chunks)  # the other server's work...
    store.conn.execute("UPDATE packages SET version = '1.4.4' WHERE name = 'jason'")
    store.free.set()  # ...and its claim released
    report = await run
    assert (report.package, report.version, report.chunks, report.embedded) == (
        "jason",
        "1.4.4",
        1,
        0,
    )
    assert fake_hex.requests_to("*jason*") == []
    assert store.released == 1
    assert any("another hexlocal process" in p.message for p in heard)


async def test_the_claim_holder_ingests_and_releases(
    tmp_path: Path, hex_client: HexClient, fake_hex: FakeHex
) -> None:
    store = ClaimedElsewhere(tmp_path / "x.db")
    store.free.set()
    report = await _ingestor(store, hex_client, tmp_path).run(JASON, lambda _: None)
    assert report.chunks > 1 and report.embedded == report.chunks - report.reused
    assert fake_hex.requests_to("*jason*")
    assert store.released == 1 and store.package("jason") is not None


async def test_a_cancelled_wait_takes_nothing(
    tmp_path: Path, hex_client: HexClient, fake_hex: FakeHex
) -> None:
    store = ClaimedElsewhere(tmp_path / "x.db")
    run = asyncio.create_task(_ingestor(store, hex_client, tmp_path).run(JASON, lambda _: None))
    await eventually(lambda: store.refused >= 2, what="the ingestor asking for the claim twice")
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert store.released == 0 and store.package("jason") is None
    assert fake_hex.requests_to("*jason*") == []


class SlowToClaim(Store):
    """The real store and its real file claim, taken only once `go` is set: a cancel
    lands while the worker thread is acquiring it."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.asked = threading.Event()
        self.go = threading.Event()

    def try_ingest_claim(self, package: str, version: str) -> Any:
        self.asked.set()
        self.go.wait(10)
        return super().try_ingest_claim(package, version)


async def test_a_cancel_while_the_claim_is_being_taken_gives_it_back(
    tmp_path: Path, hex_client: HexClient, fake_hex: FakeHex
) -> None:
    # The shutdown of one service must not leave the claim held: another service on the
    # same index in this process (a library user, a test) would wait on it for ever.
    store = SlowToClaim(tmp_path / "x.db")
    run = asyncio.create_task(_ingestor(store, hex_client, tmp_path).run(JASON, lambda _: None))
    await asyncio.to_thread(store.asked.wait, 10)
    run.cancel()
    await asyncio.sleep(0.05)  # the task is cancelled while the thread still works
    store.go.set()
    with pytest.raises(asyncio.CancelledError):
        await run
    again = Store.try_ingest_claim(store, "jason", "1.4.4")
    assert again is not None, "the cancelled ingestion kept its claim"
    again.release()
    assert fake_hex.requests_to("*jason*") == [] and store.package("jason") is None


def _partial_jason(store: Store) -> None:
    """The other server's first step: jason 1.4.4's chunks, no vectors yet."""
    chunks = [chunk_of(item("Jason.html#decode/2", "Parses JSON.", package="jason"))]
    write = package_write("jason", "1.4.4", chunks)
    store.replace_package(attrs.evolve(write, vectors=None))


async def test_a_waiting_server_answers_by_keyword_once_the_other_wrote_the_chunks(
    tmp_path: Path, hex_client: HexClient, fake_hex: FakeHex
) -> None:
    store = ClaimedElsewhere(tmp_path / "x.db")
    heard: list[IngestProgress] = []
    run = asyncio.create_task(_ingestor(store, hex_client, tmp_path).run(JASON, heard.append))
    await eventually(lambda: store.refused >= 2, what="the ingestor asking for the claim twice")
    assert not [p for p in heard if p.phase == Phase.EMBEDDING]
    _partial_jason(store)
    # Searchable: this server's searches answer by keyword.
    await eventually(
        lambda: [p for p in heard if p.phase == Phase.EMBEDDING],
        what="the waiting server reporting the other's chunks as searchable",
        detail=lambda: heard,
    )
    assert [p.message for p in heard if p.phase == Phase.EMBEDDING] == [
        "another hexlocal process sharing this index is embedding it"
    ]
    assert store.mark_complete("jason", "1.4.4")  # the other server's last vector...
    store.free.set()  # ...and its claim released
    report = await run
    assert (report.chunks, report.embedded) == (1, 0)
    assert fake_hex.requests_to("*jason*") == []


async def test_a_partial_package_left_by_a_server_that_stopped_is_finished_here(
    tmp_path: Path, hex_client: HexClient, fake_hex: FakeHex
) -> None:
    store = ClaimedElsewhere(tmp_path / "x.db")
    _partial_jason(store)  # written, then the other server died: its claim is free
    store.free.set()
    report = await _ingestor(store, hex_client, tmp_path).run(JASON, lambda _: None)
    # Its stored chunk is embedded here; the docs are not read again.
    assert (report.chunks, report.embedded) == (1, 1)
    assert fake_hex.requests_to("*jason*") == []
    pkg = store.package("jason")
    assert pkg is not None and pkg.status == "complete"
