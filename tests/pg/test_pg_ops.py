"""Jobs, the sync queue, reindex and usage on PostgreSQL, where several servers on several
hosts share the rows: what each server may judge, claim and switch."""

from __future__ import annotations

import threading
from datetime import UTC, date, datetime

import numpy as np
import pytest

from hexlocal_core.errors import ModelError
from hexlocal_core.index.pg import ops
from hexlocal_core.index.pg.db import connect
from hexlocal_core.index.pg.store import PgStore
from hexlocal_core.index.rows import MemoryText, PackageWrite, QueueChanges, SyncRow
from hexlocal_core.model import UsageEvent, sha256_text
from hexlocal_core.search.arms import vector_arm
from tests.support.helpers import HashingEmbedder, chunk_of, item
from tests.support.pg import store

pytestmark = pytest.mark.integration

__all__ = ["store"]  # the fixture, used by name


def test_interrupted_jobs_are_judged_only_on_their_own_host(store: PgStore, pg_url: str) -> None:
    done = store.jobs.open_job("jason", "1.4.4", "hexdocs")
    store.jobs.close_job(done, done=True, progress={"chunks": 3}, error=None)
    dead = store.jobs.open_job("finch", "0.21.0", "hexdocs")
    live = store.jobs.open_job("mint", "1.7.1", "hexdocs")
    with connect(pg_url) as conn:
        conn.execute("UPDATE ingest_jobs SET pid = 999999 WHERE id = %s", (dead,))
        conn.execute(
            "INSERT INTO ingest_jobs(package, version, source, status, pid, host, started_at)"
            " VALUES ('plug', '1', 'hexdocs', 'running', 999999, 'another-host', 'x')"
        )

    def alive(pid: int) -> bool:
        return pid != 999999

    taken = store.jobs.take_interrupted(alive)
    assert [(j.id, j.package) for j in taken] == [(dead, "finch")]
    assert store.jobs.take_interrupted(alive) == []  # taken once, by one caller
    with connect(pg_url) as conn:
        status = dict(conn.execute("SELECT package, status FROM ingest_jobs").fetchall())
    assert status == {"jason": "done", "finch": "failed", "mint": "running", "plug": "running"}
    assert live


def _queue(store: PgStore, n: int) -> None:
    rows = tuple(SyncRow(f"p{i:02d}", "1.0.0", "hex", "queued", i) for i in range(n))
    store.sync.update_queue(lambda current: QueueChanges(upsert=rows))


def test_two_servers_claiming_at_once_never_get_one_row_twice(store: PgStore, pg_url: str) -> None:
    _queue(store, 40)
    other = PgStore(pg_url)
    claimed: list[list[str]] = [[], []]

    def work(index: int, s: PgStore) -> None:
        while (row := s.sync.claim_next()) is not None:
            claimed[index].append(row.package)
            s.sync.finish(row.package, "done")

    threads = [threading.Thread(target=work, args=(i, s)) for i, s in enumerate((store, other))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        other.close()
    everything = claimed[0] + claimed[1]
    assert sorted(everything) == [f"p{i:02d}" for i in range(40)]
    assert {r.status for r in store.sync.all_rows().values()} == {"done"}


def test_the_queue_is_claimed_in_order_and_finished_as_on_sqlite(store: PgStore) -> None:
    _queue(store, 3)
    first = store.sync.claim_next(skip=["p00"])
    assert first is not None and (first.package, first.status) == ("p01", "running")
    assert first.pid is not None
    store.sync.finish("p01", "failed", reason="boom", retry=False)
    store.sync.note_waiting("no embedder")
    rows = store.sync.all_rows()
    assert list(rows) == ["p00", "p01", "p02"]
    assert (rows["p01"].status, rows["p01"].reason, rows["p01"].retry) == ("failed", "boom", False)
    assert rows["p00"].reason == rows["p02"].reason == "no embedder"
    store.sync.update_queue(lambda current: QueueChanges(delete=("p00",)))
    assert list(store.sync.all_rows()) == ["p01", "p02"]
    with pytest.raises(ValueError, match="not a final sync status"):
        store.sync.finish("p02", "running")


def _write(store: PgStore, name: str, texts: list[str]) -> list[str]:
    emb = HashingEmbedder()
    chunks = [chunk_of(item(f"M.html#f{i}/0", t, package=name)) for i, t in enumerate(texts)]
    store.replace_package(
        PackageWrite(
            name=name,
            version="1.0.0",
            source="hexdocs",
            chunker_version=1,
            item_count=len(chunks),
            chunks=chunks,
            vectors=np.stack([emb.vector(c.embedding_text()) for c in chunks]),
            embed_model=emb.model_id,
            embed_provider="test",
        )
    )
    return [sha256_text(c.embedding_text()) for c in chunks]


def test_a_model_switch_rebuilds_every_vector_in_one_transaction(store: PgStore) -> None:
    _write(store, "alpha", ["one", "two", "three"])
    _write(store, "beta", ["four"])
    with store.session().atomic() as session:
        mid = session.memories.insert_memory(
            MemoryText("remember this", "h", "n"),
            curated=False,
            package=None,
            version=None,
            tags=(),
        )
    new = HashingEmbedder(dims=8, model_id="test:eight")
    texts = [t for p in ("alpha", "beta") for t in store.reindex.embedded_texts(p)]
    assert len(texts) == 4
    with pytest.raises(ModelError, match="have no vector under test:eight"):
        store.reindex.switch_model(new.model_id, "test", 8, {})
    assert store.embedding_config().model == "test:hashing"  # type: ignore[union-attr]
    store.reindex.cache_vectors(
        new.model_id, [h for h, _ in texts], [new.vector(t) for _, t in texts]
    )
    memory_vector = new.vector("remember this")
    store.reindex.switch_model(new.model_id, "test", 8, {mid: memory_vector})

    config = store.embedding_config()
    assert config is not None and (config.model, config.dims) == ("test:eight", 8)
    assert {p.embed_model for p in store.packages()} == {"test:eight"}
    reads = store.session().chunks
    for package, (text_hash, text) in zip(("alpha", "beta"), (texts[0], texts[3]), strict=True):
        hits = vector_arm(reads, new.vector(text), package=package, depth=5)
        assert hits[0][1] == pytest.approx(0.0, abs=1e-5)
        assert store.hydrate([hits[0][0]])[0].embed_hash == text_hash
    memories = store.session().memories
    assert memories.memory_knn(memory_vector, 1) == [(mid, pytest.approx(0.0, abs=1e-5))]
    assert memories.missing_vectors("test:eight", 10) == []


def test_usage_is_recorded_per_server_and_reported_for_all(store: PgStore, pg_url: str) -> None:
    named = PgStore(pg_url, server_id="server-b")
    try:
        named.usage.record(
            UsageEvent("m", "embed", 1, local=True, at=datetime(2026, 3, 2, 13, tzinfo=UTC))
        )
    finally:
        named.close()
    at = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    store.usage.record(UsageEvent("m", "embed", 10, at=at))
    store.usage.record(UsageEvent("m", "chat", 5, 7, success=False, at=at))
    with connect(pg_url) as conn:
        servers = {r[0] for r in conn.execute("SELECT server FROM usage_events")}
    assert servers == {ops.server_id(), "server-b"}
    events = store.usage.events(date(2026, 3, 2), date(2026, 3, 2))
    assert [(e.kind, e.total_tokens, e.success) for e in events] == [
        ("embed", 10, True),
        ("chat", 12, False),
        ("embed", 1, True),
    ]
    assert events[0].at == at
    assert store.usage.events(date(2026, 3, 3), date(2026, 3, 4)) == []
