"""remember / recall without a chat model: the queue, ordering, restarts, the deterministic
policy, thresholds, staleness and hostile queries. LLM paths: test_memory_curation.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from hexlocal_core.errors import UserInputError
from hexlocal_core.index.sqlite.db import atomic, rows, scalar
from hexlocal_core.index.sqlite.vectors import create_vector_tables
from hexlocal_core.memory.policy import NO_CHAT
from hexlocal_core.memory.service import MemoryService
from hexlocal_core.service import Hexlocal
from tests.support.helpers import HashingEmbedder, db
from tests.support.memory import (
    GatedEmbedder,
    TableEmbedder,
    log_rows,
    make_service,
    write_lock,
)

pytestmark = pytest.mark.integration

ServiceFactory = Callable[..., Hexlocal]


@pytest.fixture
async def services(tmp_path: Path) -> AsyncIterator[ServiceFactory]:
    """Builds services on one tmp database; closes each (worker included) at the end."""
    made: list[Hexlocal] = []

    def factory(**kwargs: Any) -> Hexlocal:
        kwargs.setdefault("embedder", HashingEmbedder(dims=64))
        service = make_service(tmp_path, **kwargs)
        made.append(service)
        return service

    yield factory
    for service in made:
        await service.aclose()


async def remember_and_drain(
    service: Hexlocal, texts: list[str], **kw: Any
) -> list[dict[str, Any]]:
    ids = [r["request_id"] for r in await service.remember(texts, **kw)]
    assert await service.drain_memory(timeout=10)
    return service.remember_status(ids)


def memory_count(service: Hexlocal) -> int:
    return int(scalar(db(service), "SELECT count(*) FROM memories") or 0)


# -- the queue ----------------------------------------------------------------------------


async def test_remember_queues_durably_and_returns_pending_ids(services: ServiceFactory) -> None:
    service = services(embedder=GatedEmbedder(open_for=0))  # the worker cannot finish anything
    texts = ["first fact about stdio", "second fact about ecto"]

    answer = await service.remember(texts, package="ecto", tags=["bug"])

    assert [r["status"] for r in answer] == ["pending", "pending"]
    ids = [r["request_id"] for r in answer]
    assert len(set(ids)) == 2 and all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
    queued = rows(
        db(service),
        "SELECT request_id, text, package, tags, status FROM remember_queue ORDER BY seq",
    )
    assert [(q["request_id"], q["text"], q["package"]) for q in queued] == [
        (ids[0], texts[0], "ecto"),
        (ids[1], texts[1], "ecto"),
    ]
    assert all(q["status"] == "pending" and q["tags"] == '["bug"]' for q in queued)
    assert [s["status"] for s in service.remember_status(ids)] == ["pending", "pending"]


async def test_twenty_texts_are_curated_in_submission_order(services: ServiceFactory) -> None:
    service = services()
    texts = [f"fact number {i}: module M{i} needs option opt_{i}" for i in range(20)]

    statuses = await remember_and_drain(service, texts)

    assert [s["status"] for s in statuses] == ["done"] * 20
    assert [s["action"] for s in statuses] == ["create"] * 20
    memory_ids = [s["memory_id"] for s in statuses]
    assert memory_ids == sorted(memory_ids) and len(set(memory_ids)) == 20
    stored = rows(db(service), "SELECT id, text FROM memories ORDER BY id")
    assert [r["text"] for r in stored] == texts
    assert [r["request_id"] for r in log_rows(service)] == [s["request_id"] for s in statuses]


async def test_request_ids_survive_a_restart(services: ServiceFactory) -> None:
    first = services()
    statuses = await remember_and_drain(first, ["ids outlive the process"])
    await first.aclose()

    second = services()
    again = second.remember_status([statuses[0]["request_id"], "0" * 32])

    assert again[0] == statuses[0]
    assert again[1]["status"] == "unknown"


async def test_restart_mid_queue_resumes_without_loss_or_duplication(
    services: ServiceFactory,
) -> None:
    gated = GatedEmbedder(open_for=4)
    first = services(embedder=gated)
    texts = [f"resumable fact {i} about GenServer.call timeout_{i}" for i in range(10)]
    ids = [r["request_id"] for r in await first.remember(texts)]
    await asyncio.wait_for(gated.reached.wait(), 5)
    await first.aclose()  # stops the worker: abandons item 5 mid-embedding

    second = services()
    done = [s["status"] for s in second.remember_status(ids)]  # read before it starts
    assert done == ["done"] * 4 + ["pending"] * 6
    await second.start()
    assert await second.drain_memory(timeout=10)

    statuses = second.remember_status(ids)
    assert [s["status"] for s in statuses] == ["done"] * 10
    stored = rows(db(second), "SELECT id, text FROM memories ORDER BY id")
    assert [r["text"] for r in stored] == texts
    assert [s["memory_id"] for s in statuses] == [r["id"] for r in stored]
    assert [r["request_id"] for r in log_rows(second)] == ids  # one decision each


async def test_drain_times_out_while_the_worker_is_blocked(services: ServiceFactory) -> None:
    gated = GatedEmbedder(open_for=0)
    service = services(embedder=gated)
    await service.remember(["blocked fact"])

    assert await service.drain_memory(timeout=0.1) is False
    gated.release()
    assert await service.drain_memory(timeout=5) is True


async def test_an_item_that_keeps_failing_is_marked_failed_and_the_queue_moves_on(
    services: ServiceFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Broken(HashingEmbedder):
        async def embed(self, texts: Any) -> Any:
            if any("poison" in t for t in texts):
                raise RuntimeError("embedder bug")
            return await super().embed(texts)

    monkeypatch.setattr(MemoryService, "RETRY_DELAYS_S", (0.0, 0.0))
    service = services(embedder=Broken(dims=64))

    statuses = await remember_and_drain(service, ["a poison text", "a healthy text"])

    assert [s["status"] for s in statuses] == ["failed", "done"]
    assert "after 3 attempts" in statuses[0]["reason"] and "embedder bug" in statuses[0]["reason"]
    kept = scalar(db(service), "SELECT text FROM remember_queue WHERE status = 'failed'")
    assert kept == "a poison text"
    assert [r["action"] for r in log_rows(service, statuses[0]["request_id"])] == ["failed"]


# -- validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("texts", "kwargs", "message"),
    [
        ([], {}, "non-empty list"),
        ("a bare string", {}, "non-empty list"),
        (["ok", "  "], {}, "text 2 is empty"),
        (["x" * 8_001], {}, "8,000"),
        (["t"] * 101, {}, "limit is 100"),
        (["ok"], {"package": "Not A Package"}, "not a Hex package name"),
        (["ok"], {"version": "1.0.0"}, "needs its package"),
        (["ok"], {"package": "jason", "version": "v1"}, "not a valid version"),
        (["ok"], {"tags": "bug"}, "list of short strings"),
        (["ok"], {"tags": ["x" * 51]}, "short one-line"),
        (["bell \x07"], {}, "control characters"),
    ],
)
async def test_remember_rejects_bad_arguments(
    services: ServiceFactory, texts: Any, kwargs: dict[str, Any], message: str
) -> None:
    service = services()
    with pytest.raises(UserInputError, match=message):
        await service.remember(texts, **kwargs)
    assert scalar(db(service), "SELECT count(*) FROM remember_queue") == 0


@pytest.mark.parametrize("query", ["", "   ", "x" * 4_001])
async def test_recall_rejects_empty_or_huge_queries(services: ServiceFactory, query: str) -> None:
    with pytest.raises(UserInputError):
        await services().recall(query)


# -- the policy without a chat model -------------------------------------------------------


async def test_without_a_chat_model_exact_duplicates_are_discarded(
    services: ServiceFactory,
) -> None:
    service = services()
    statuses = await remember_and_drain(
        service,
        ["Req retries 429 responses by default.", "  req RETRIES 429   responses by default!! "],
    )

    created, dropped = statuses
    assert (created["action"], dropped["action"]) == ("create", "discard")
    assert dropped["memory_id"] == created["memory_id"]
    assert NO_CHAT in dropped["reason"] and dropped["curated"] is False
    assert memory_count(service) == 1
    assert log_rows(service, dropped["request_id"])[0]["memory_id"] == created["memory_id"]


async def test_without_a_chat_model_near_duplicates_keep_new_words(
    services: ServiceFactory,
) -> None:
    emb = TableEmbedder()
    base = emb.place("roots/list deadlocks the stdio transport in anubis_mcp 1.14.0", 1.0)
    reordered = emb.place("in anubis_mcp 1.14.0 roots/list deadlocks the stdio transport", 0.98)
    newer = emb.place("roots/list deadlocks the stdio transport in anubis_mcp 1.15.0", 0.985)
    related = emb.place("the stdio transport of anubis_mcp buffers stderr", 0.85)
    service = services(embedder=emb)

    statuses = await remember_and_drain(service, [base, reordered, newer, related])

    assert [s["action"] for s in statuses] == ["create", "discard", "create", "create"]
    assert "similarity 0.98, no new words" in statuses[1]["reason"]
    assert NO_CHAT in statuses[2]["reason"] and NO_CHAT in statuses[3]["reason"]
    assert all(s["curated"] is False and s["model"] is None for s in statuses)


@pytest.mark.parametrize(
    ("sim", "action", "reason"),
    [
        (0.7999, "create", "nearest similarity 0.7999 < 0.80"),
        (0.80, "create", NO_CHAT),  # at the floor: curation is due, the rule decides
        (0.9699, "create", NO_CHAT),
        (0.97, "discard", "similarity 0.97, no new words"),
    ],
)
async def test_thresholds_at_their_boundaries_without_a_chat_model(
    services: ServiceFactory, sim: float, action: str, reason: str
) -> None:
    emb = TableEmbedder()
    base = emb.place("mint pools connections per host", 1.0)
    variant = emb.place("per host mint pools connections", sim)  # same words, other order
    service = services(embedder=emb)

    statuses = await remember_and_drain(service, [base, variant])

    assert statuses[0]["reason"] == "no similar memory stored"
    assert statuses[1]["action"] == action
    assert reason in statuses[1]["reason"]


async def test_without_an_embedder_memories_are_kept_for_keyword_recall(
    services: ServiceFactory,
) -> None:
    service = services(embedder=None)
    statuses = await remember_and_drain(
        service, ["Oban.insert/2 needs a repo", "oban.insert/2 needs a repo."]
    )

    assert [s["action"] for s in statuses] == ["create", "discard"]
    assert "no embedding model" in statuses[0]["reason"] and statuses[0]["curated"] is False
    found = await service.recall("insert")
    assert [m.text for m in found] == ["Oban.insert/2 needs a repo"]
    assert found[0].history[0]["action"] == "create"


async def test_another_models_index_skips_vectors_and_says_so(services: ServiceFactory) -> None:
    service = services()
    with atomic(db(service)) as conn:  # as if another model had built the index
        create_vector_tables(conn, 64)
        conn.execute(
            "INSERT INTO embedding_config(id, model, dims, provider, recorded_at)"
            " VALUES (1, 'local:other-model', 64, 'local', '2026-12-01T00:00:00+00:00')"
        )

    statuses = await remember_and_drain(service, ["Finch pools need a name"])

    assert "built by local:other-model" in statuses[0]["reason"]
    assert scalar(db(service), "SELECT count(*) FROM memory_vecs") == 0
    assert [m.text for m in await service.recall("Finch")] == ["Finch pools need a name"]


async def test_memories_stored_without_vectors_are_embedded_at_the_next_start(
    services: ServiceFactory,
) -> None:
    first = services(embedder=None)
    await remember_and_drain(first, ["Bandit speaks HTTP/2 without TLS"])
    await first.aclose()

    emb = TableEmbedder()
    emb.place("Bandit speaks HTTP/2 without TLS", 1.0)
    emb.place("http2 cleartext server", 0.9)
    second = services(embedder=emb)
    await second.start()
    assert await second.drain_memory(timeout=5)

    assert scalar(db(second), "SELECT count(*) FROM memory_vecs") == 1
    found = await second.recall("http2 cleartext server")  # no shared keyword
    assert [m.text for m in found] == ["Bandit speaks HTTP/2 without TLS"]


# -- recall -------------------------------------------------------------------------------


async def test_recall_fuses_keyword_and_vector_arms(services: ServiceFactory) -> None:
    emb = TableEmbedder()
    by_vector = emb.place("connection pools starve under load", 1.0)
    emb.place("why do my requests hang", 0.9)
    service = services(embedder=emb)
    await remember_and_drain(service, [by_vector, "Req.get!/2 raises on 4xx when told to"])

    assert [m.text for m in await service.recall("why do my requests hang")] == [by_vector]
    keyword = await service.recall("Req.get!/2")
    assert keyword[0].text == "Req.get!/2 raises on 4xx when told to"


async def test_recall_returns_nothing_when_nothing_matches(services: ServiceFactory) -> None:
    emb = TableEmbedder()
    emb.place("banana bread recipe", 1.0)  # orthogonal to every unplaced text
    service = services(embedder=emb)
    await remember_and_drain(service, ["Plug.Conn is immutable"])

    assert await service.recall("banana bread recipe") == []


async def test_recall_scopes_to_a_package(services: ServiceFactory) -> None:
    service = services()
    await remember_and_drain(service, ["timeouts are in milliseconds"], package="finch")
    await remember_and_drain(service, ["timeouts are in seconds here"], package="tesla")

    found = await service.recall("timeouts", package="tesla")

    assert [(m.package, m.text) for m in found] == [("tesla", "timeouts are in seconds here")]


async def test_recall_returns_whole_memory_values(services: ServiceFactory) -> None:
    service = services()
    statuses = await remember_and_drain(
        service,
        ["Ecto.Multi names must be unique"],
        package="ecto",
        version="3.11.0",
        tags=["multi", "gotcha"],
    )

    (memory,) = await service.recall("Ecto.Multi")

    assert memory.id == statuses[0]["memory_id"]
    assert (memory.package, memory.version, memory.tags) == ("ecto", "3.11.0", ("multi", "gotcha"))
    assert memory.curated is False and memory.deprecated is False and memory.stale is False
    assert memory.created_at and memory.updated_at
    assert [h["request_id"] for h in memory.history] == [statuses[0]["request_id"]]


async def test_memory_goes_stale_when_mix_lock_moves_on(
    services: ServiceFactory, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    service = services()
    project.mkdir(exist_ok=True)
    write_lock(project, {"pkg": "1.0.0"})
    await remember_and_drain(service, ["pkg 1.0.0 leaks a port"], package="pkg", version="1.0.0")

    assert [m.stale for m in await service.recall("leaks port")] == [False]
    write_lock(project, {"pkg": "1.1.0"})
    assert [m.stale for m in await service.recall("leaks port")] == [True]
    write_lock(project, {"other": "2.0.0"})  # no longer pinned: nothing to compare with
    assert [m.stale for m in await service.recall("leaks port")] == [False]
    (project / "mix.lock").write_text("%{ this is not a lock")
    assert [m.stale for m in await service.recall("leaks port")] == [False]


@pytest.mark.parametrize(
    "query",
    [
        '"unbalanced quote',
        "NEAR(stdio deadlock, 2)",
        "stdio*",
        "text:deadlock",
        "stdio AND OR NOT",
        "'); DROP TABLE memories; --",
        "^deadlock",
        "(((",
        ":::",
        "Enum.map/2",
        "c:init/1",
        "-stdio +deadlock",
        "🦀 émoji ñ",
    ],
)
async def test_hostile_fts_syntax_never_breaks_recall(services: ServiceFactory, query: str) -> None:
    service = services()
    await remember_and_drain(service, ["roots/list can deadlock the stdio transport"])

    found = await service.recall(query)

    assert isinstance(found, list)
    assert memory_count(service) == 1  # the DROP did nothing
    if "stdio" in query or "deadlock" in query:
        assert [m.text for m in found] == ["roots/list can deadlock the stdio transport"]


# -- with the real local embedder -----------------------------------------------------------


@pytest.fixture
def minilm() -> Any:
    from hexlocal_core.adapters import model_sources
    from tests.support.model_fixtures import model_settings

    if model_sources.pypi_model_dir() is None:
        pytest.skip(f"the model package is absent: {model_sources.PYPI_INSTALL}")
    from hexlocal_core.adapters.local_embedder import build_local_embedder

    return build_local_embedder(model_settings())


async def test_with_minilm_a_version_change_is_kept_and_noise_is_not_recalled(
    services: ServiceFactory, minilm: Any
) -> None:
    base = "roots/list deadlocks the stdio transport in anubis_mcp 1.14.0"
    service = services(embedder=minilm)

    statuses = await remember_and_drain(
        service,
        [
            base,
            "Roots/list deadlocks the stdio transport in anubis_mcp 1.14.0!",
            # 0.985 similar to the base with this model, yet a new fact:
            "roots/list deadlocks the stdio transport in anubis_mcp 1.15.0; fixed in 1.16",
            "Ecto.Multi.run callbacks must return {:ok, value} or {:error, reason}",
        ],
    )

    assert [s["action"] for s in statuses] == ["create", "discard", "create", "create"]
    assert "< 0.80" in statuses[3]["reason"]
    assert (await service.recall("stdio deadlock roots"))[0].text == base
    assert await service.recall("weather in Paris tomorrow") == []
