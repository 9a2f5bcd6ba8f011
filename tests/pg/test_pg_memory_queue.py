"""Two servers curating one remember_queue on PostgreSQL: every request decided exactly
once, none lost, no memory written twice.

A "server" is a `PgStore` of its own (its own pool) on the shared database. The lease in
`next_pending` keeps servers with different owners off each other's rows; the claim under
lock (`request_status` inside the applying transaction) is what makes two servers that
did pick the same row apply it once, so the tests make them pick the same rows on purpose.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from hexlocal_core.index.pg.db import EMBEDDING_LOCK
from hexlocal_core.index.pg.memories import PgMemoryQueries
from hexlocal_core.index.pg.store import PgSession, PgStore
from hexlocal_core.index.rows import MemoryText, NewRequest
from hexlocal_core.index.seam import DocsStore
from hexlocal_core.memory import queue
from hexlocal_core.memory.service import MemoryPorts, MemoryService
from hexlocal_core.model import sha256_text
from tests.support.helpers import HashingEmbedder
from tests.support.memory import settings_for

pytestmark = pytest.mark.integration

N = 24


@pytest.fixture
def servers(pg_url: str) -> Iterator[Callable[[], PgStore]]:
    """Opens PgStores on one database (each one server); closes them all at the end."""
    opened: list[PgStore] = []

    def open_one() -> PgStore:
        opened.append(PgStore(pg_url))
        return opened[-1]

    yield open_one
    for store in opened:
        store.close()


class OwnedStore:
    """A store whose sessions lease queue rows as `owner`: one server among several."""

    def __init__(self, store: PgStore, owner: str) -> None:
        self._store, self._owner = store, owner

    def session(self) -> PgSession:
        session = self._store.session()
        session.memories = PgMemoryQueries(session, owner=self._owner)
        return session

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def enqueue(store: PgStore, n: int = N) -> list[str]:
    ids = [f"req{i:03d}" for i in range(n)]
    session = store.session()
    with session.atomic():
        session.memories.enqueue([NewRequest(r, f"fact {r}", None, None, ()) for r in ids])
    return ids


def count(store: PgStore, sql: str) -> int:
    return int(store.session().scalar(sql) or 0)


# -- the claim and finish of memory/queue.py, in two threads --------------------------------


def drain_in_lockstep(
    session: PgSession, barrier: threading.Barrier, fetching: threading.Lock
) -> dict[str, int]:
    """Curates until the queue is empty. Both threads take their next row (one after the
    other, so SKIP LOCKED never skips a row the other is just leasing) before either
    applies one: with one owner, they always hold the same row."""
    done = {"applied": 0, "skipped": 0}
    while True:
        with fetching:
            item = queue.next_pending(session)
        barrier.wait()
        if item is None:
            return done
        with session.atomic():
            if not queue.claim(session, item.request_id):
                done["skipped"] += 1
                continue
            text = item.submission.text
            memory_id = session.memories.insert_memory(
                MemoryText(text, sha256_text(text), sha256_text(text)),
                curated=False, package=None, version=None, tags=(),
            )  # fmt: skip
            session.memories.log_curation(item.request_id, "create", memory_id, None, "new")
            queue.finish(
                session, item.request_id, action="create", memory_id=memory_id, reason="new",
                curated=False, model=None,
            )  # fmt: skip
            done["applied"] += 1


def run_threads(work: list[Callable[[], dict[str, int]]]) -> list[dict[str, int]]:
    results: list[dict[str, int]] = [{} for _ in work]
    failures: list[BaseException] = []

    def run(i: int) -> None:
        try:
            results[i] = work[i]()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(work))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not failures, failures
    return results


def assert_each_decided_once(store: PgStore, ids: list[str]) -> None:
    rows = store.session().memories.requests(ids)
    assert [rows[r].status for r in ids] == ["done"] * len(ids)
    memory_ids = [rows[r].memory_id for r in ids]
    assert len(set(memory_ids)) == len(ids)  # one memory each, none shared
    assert count(store, "SELECT count(*) FROM memories") == len(ids)
    assert count(store, "SELECT count(DISTINCT text) FROM memories") == len(ids)
    log = store.session().fetchall("SELECT request_id FROM curation_log ORDER BY request_id")
    assert [r[0] for r in log] == sorted(ids)  # one decision each


def test_two_servers_holding_the_same_rows_apply_each_once(
    servers: Callable[[], PgStore],
) -> None:
    one, two = servers(), servers()
    ids = enqueue(one)
    barrier, fetching = threading.Barrier(2, timeout=30), threading.Lock()
    # One owner for both: the lease does not separate them, only the claim can.
    sessions = [one.session(), two.session()]
    for s in sessions:
        s.memories = PgMemoryQueries(s, owner="same")

    def drain(session: PgSession) -> Callable[[], dict[str, int]]:
        return lambda: drain_in_lockstep(session, barrier, fetching)

    results = run_threads([drain(s) for s in sessions])

    assert sum(r["applied"] for r in results) == N
    assert sum(r["skipped"] for r in results) == N  # every row was held by both
    assert_each_decided_once(one, ids)


def test_servers_with_their_own_leases_never_take_the_same_row(
    servers: Callable[[], PgStore],
) -> None:
    one, two = servers(), servers()
    ids = enqueue(one)
    taken: dict[str, list[str]] = {"a": [], "b": []}

    def drain(store: PgStore, owner: str) -> dict[str, int]:
        session = store.session()
        session.memories = PgMemoryQueries(session, owner=owner)
        while (row := session.memories.next_pending()) is not None:
            taken[owner].append(row.request_id)
            with session.atomic():
                assert queue.claim(session, row.request_id)
                queue.finish(
                    session, row.request_id, action="discard", memory_id=None, reason="test",
                    curated=False, model=None,
                )  # fmt: skip
        return {}

    run_threads([lambda: drain(one, "a"), lambda: drain(two, "b")])

    assert sorted(taken["a"] + taken["b"]) == ids  # each handed out once, none left
    assert one.session().memories.pending_count() == 0


# -- the real memory service: two of them on one database ------------------------------------


def service(store: DocsStore, tmp_path: Path) -> MemoryService:
    ports = MemoryPorts(settings_for(tmp_path), store, HashingEmbedder(dims=32), None)
    return MemoryService(ports)


@pytest.mark.parametrize("owners", ["shared", "own"])
async def test_two_memory_services_curate_each_request_once(
    servers: Callable[[], PgStore], tmp_path: Path, owners: str
) -> None:
    # "shared": both servers of this process lease as one owner (so both curate every
    # item and the claim decides); "own": as on two hosts, each leases its own rows.
    stores = [servers(), servers()]
    views = [
        cast(DocsStore, OwnedStore(s, f"server-{i}") if owners == "own" else s)
        for i, s in enumerate(stores)
    ]
    first, second = service(views[0], tmp_path), service(views[1], tmp_path)
    texts = [f"fact {i}: module M{i} needs option opt_{i}" for i in range(N)]
    try:
        answers = await first.remember(texts[: N // 2])
        answers += await second.remember(texts[N // 2 :])
        await asyncio.gather(first.start(), second.start())
        drained = await asyncio.gather(first.drain(timeout=60), second.drain(timeout=60))
    finally:
        await asyncio.gather(first.stop(), second.stop())

    assert all(drained)
    ids = [a["request_id"] for a in answers]
    statuses = first.remember_status(ids)
    assert [s["status"] for s in statuses] == ["done"] * N
    assert [s["action"] for s in statuses] == ["create"] * N
    store = stores[0]
    found = store.session().fetchall("SELECT text FROM memories ORDER BY text")
    assert [r[0] for r in found] == sorted(texts)  # none lost, none twice
    log = store.session().fetchall("SELECT request_id, action FROM curation_log")
    assert sorted(r[0] for r in log) == sorted(ids) and {r[1] for r in log} == {"create"}
    vectors = count(store, "SELECT count(*) FROM memory_vecs")
    assert vectors == N  # each memory embedded once by whichever server applied it


# -- what a decision reads while another server writes --------------------------------------


def text_of(value: str) -> MemoryText:
    return MemoryText(value, sha256_text(value), sha256_text(value))


def race(first: Callable[[threading.Event], None], second: Callable[[], str | None]) -> str:
    """Runs `first` (which sets the event once it holds its transaction, then writes and
    commits a little later) and `second` (started once the event is set); returns what
    `second` read."""
    holding, read = threading.Event(), []

    def later() -> dict[str, int]:
        assert holding.wait(10)
        read.append(second())
        return {}

    def now() -> dict[str, int]:
        first(holding)
        return {}

    run_threads([now, later])
    return str(read[0])


def test_a_decision_sees_the_rewrite_another_server_is_committing(
    servers: Callable[[], PgStore],
) -> None:
    one, two = servers(), servers()
    enqueue(one, 2)
    a, b = one.session(), two.session()
    target = a.memories.insert_memory(
        text_of("old"), curated=False, package=None, version=None, tags=()
    )

    def rewrite(holding: threading.Event) -> None:
        with a.atomic():
            assert queue.claim(a, "req000")
            holding.set()
            threading.Event().wait(0.3)  # the other decision starts meanwhile
            a.memories.rewrite_memory(target, text_of("new"), package=None, version=None, tags=())

    def decide() -> str | None:
        with b.atomic():
            assert queue.claim(b, "req001")  # waits for the decision in flight
            return b.memories.memories_by_ids([target])[target].text

    # Reading "old" here would let this decision overwrite the rewrite it never saw.
    assert race(rewrite, decide) == "new"


def test_the_backfill_reads_a_text_being_rewritten_after_the_rewrite(
    servers: Callable[[], PgStore],
) -> None:
    one, two = servers(), servers()
    a, b = one.session(), two.session()
    target = a.memories.insert_memory(
        text_of("old"), curated=False, package=None, version=None, tags=()
    )

    def rewrite(holding: threading.Event) -> None:
        with a.atomic():
            a.memories.rewrite_memory(target, text_of("new"), package=None, version=None, tags=())
            holding.set()
            threading.Event().wait(0.3)

    def backfill() -> str | None:
        with b.atomic():
            return b.memories.memory_text(target)  # then its vector would be written

    assert race(rewrite, backfill) == "new"


def test_a_decision_and_a_model_switch_do_not_deadlock(servers: Callable[[], PgStore]) -> None:
    one, two = servers(), servers()
    enqueue(one, 1)
    switch, decision = one.session(), two.session()
    target = switch.memories.insert_memory(
        text_of("old"), curated=False, package=None, version=None, tags=()
    )

    def switch_model(holding: threading.Event) -> None:
        with switch.atomic():  # as reindex's switch: the model lock, then every memory row
            switch.execute("SELECT pg_advisory_xact_lock(%s, %s)", EMBEDDING_LOCK)
            holding.set()
            threading.Event().wait(0.3)  # the decision starts meanwhile
            switch.execute("UPDATE memories SET embed_model = 'test:new'")

    def decide() -> str | None:
        with decision.atomic():  # as records.apply: claim, rewrite, then the vector's model
            assert queue.claim(decision, "req000")
            decision.memories.rewrite_memory(
                target, text_of("new"), package=None, version=None, tags=()
            )
            decision.claim_embedding("test:new", 2, "test")
        return "applied"

    # Locking the row before the model would deadlock (PostgreSQL then kills one side).
    assert race(switch_model, decide) == "applied"
