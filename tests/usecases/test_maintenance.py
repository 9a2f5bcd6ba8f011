"""`drift` and `reindex`, through the core functions and the `hexlocal` commands.

Real SQLite, the real parser, the fake hex.pm serving real tarballs; the embedders are
HashingEmbedders, so a "model switch" is from one hashing model to another of other dims.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from hexlocal_core.config import Settings
from hexlocal_core.errors import RemoteError, UserInputError
from hexlocal_core.index.sqlite.db import scalar
from hexlocal_core.index.sqlite.store import Store
from hexlocal_core.service import Hexlocal
from hexlocal_core.usecases.chunk_diff import compare
from tests.fakes.fake_hex import FakeHex, settings_for
from tests.support.harness import CliHarness, consistency, db_digest, service_for
from tests.support.helpers import HashingEmbedder, db

pytestmark = pytest.mark.integration

MODEL_A = "test:model-a"
MODEL_B = "test:model-b"
PACKAGES = (("jason", "1.4.4"), ("nimble_pool", "1.1.0"))


class FailingEmbedder(HashingEmbedder):
    """A HashingEmbedder whose `fail_on`-th embed call raises, like an API going down."""

    def __init__(self, fail_on: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fail_on = fail_on
        self.calls = 0

    async def embed(self, texts: Sequence[str]) -> Any:
        self.calls += 1
        if self.calls == self.fail_on:
            raise RemoteError("POST http://127.0.0.1:9/v1/embeddings answered 503")
        return await super().embed(texts)


@pytest.fixture
def settings(fake_hex: FakeHex, tmp_path: Path) -> Settings:
    # One batch per package, so "the 2nd call" is "the 2nd package".
    return settings_for(fake_hex, tmp_path, ai_rerank_model="off", embed_batch_size=1000)


@pytest.fixture
async def indexed(settings: Settings) -> AsyncIterator[Settings]:
    """jason and nimble_pool indexed under model A (16 dims), plus two memories."""
    service = service_for(settings, HashingEmbedder(dims=16, model_id=MODEL_A))
    try:
        for name, version in PACKAGES:
            await service.ingest(name, version)
        await service.remember(
            ["Jason.decode!/2 raises Jason.DecodeError on invalid input", "NimblePool lazy init"]
        )
        assert await service.drain_memory(timeout=20)
    finally:
        await service.aclose()
    yield settings


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> CliHarness:
    return CliHarness(monkeypatch)


def model_b() -> HashingEmbedder:
    return HashingEmbedder(dims=24, model_id=MODEL_B)


def chunk_count(service: Hexlocal, package: str) -> int:
    return int(scalar(db(service), "SELECT count(*) FROM chunks WHERE package = ?", (package,)))


# -- compare ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stored", "current", "expected"),
    [
        ([("a", 0, "h1")], [("a", 0, "h1")], (1, 0, 0, 0)),
        ([("a", 0, "h1")], [("a", 0, "h2")], (0, 0, 0, 1)),
        ([("a", 0, "h1")], [("a", 0, "h1"), ("a", 1, "h2")], (1, 1, 0, 0)),
        ([("a", 0, "h1"), ("b", 0, "h2")], [("a", 0, "h1")], (1, 0, 1, 0)),
        # A changelog repeats `#bug-fixes` once per release: every chunk counts once.
        (
            [("cl#fix", 0, "x"), ("cl#fix", 0, "y")],
            [("cl#fix", 0, "x"), ("cl#fix", 0, "y")],
            (2, 0, 0, 0),
        ),
        (
            [("cl#fix", 0, "x"), ("cl#fix", 0, "y")],
            [("cl#fix", 0, "x"), ("cl#fix", 0, "z")],
            (1, 0, 0, 1),
        ),
        ([("cl#fix", 0, "x")], [("cl#fix", 0, "x"), ("cl#fix", 0, "y")], (1, 1, 0, 0)),
        ([], [], (0, 0, 0, 0)),
    ],
)
def test_compare_counts_every_chunk_once(
    stored: list[tuple[str, int, str]],
    current: list[tuple[str, int, str]],
    expected: tuple[int, int, int, int],
) -> None:
    diff = compare(stored, current)
    assert (diff.unchanged, diff.added, diff.removed, diff.changed) == expected


# -- drift ------------------------------------------------------------------------------------


async def test_unchanged_index_has_no_drift(indexed: Settings, fake_hex: FakeHex) -> None:
    service = service_for(indexed, HashingEmbedder(dims=16, model_id=MODEL_A))
    try:
        before = db_digest(indexed.database_path)
        reports = await service.drift()
        assert [r.package for r in reports] == ["jason", "nimble_pool"]
        for report in reports:
            assert not report.drifted and report.error is None, report
            assert report.unchanged == chunk_count(service, report.package)
            assert report.verdict == "no refresh needed"
        assert db_digest(indexed.database_path) == before  # drift only reads
    finally:
        await service.aclose()


async def test_simulated_chunker_change_is_reported(indexed: Settings) -> None:
    service = service_for(indexed, HashingEmbedder(dims=16, model_id=MODEL_A))
    conn = db(service)
    total = chunk_count(service, "jason")
    # As if the stored chunks had been cut by another chunker: one chunk's text differs,
    # one the current code makes is missing, and one it no longer makes is still there.
    where = "package = 'jason' AND ref LIKE 'Jason.html#%'"
    first = int(scalar(conn, f"SELECT min(id) FROM chunks WHERE {where}"))
    last = int(scalar(conn, f"SELECT max(id) FROM chunks WHERE {where}"))
    conn.execute("UPDATE chunks SET content_hash = ? WHERE id = ?", ("0" * 64, first))
    conn.execute("DELETE FROM chunks WHERE id = ?", (last,))
    conn.execute(
        "INSERT INTO chunks(package, version, ordinal, ref, page, title, doc_type, content,"
        " content_hash, embed_hash, source) SELECT package, version, 99, ref, page, title,"
        " doc_type, content, content_hash, embed_hash, source FROM chunks WHERE id = ?",
        (first + 1,),
    )
    try:
        [jason] = await service.drift(["jason"])
    finally:
        await service.aclose()
    assert (jason.unchanged, jason.added, jason.removed, jason.changed) == (total - 2, 1, 1, 1)
    assert jason.drifted and "hexlocal ingest jason@1.4.4 --refresh" in jason.verdict


async def test_unreachable_source_is_an_error_not_a_crash(
    indexed: Settings, fake_hex: FakeHex
) -> None:
    fake_hex.fail("/repo/docs/jason-*", status=500)
    service = service_for(indexed, HashingEmbedder(dims=16, model_id=MODEL_A))
    try:
        jason, nimble = await service.drift()
    finally:
        await service.aclose()
    assert jason.error is not None and "/repo/docs/jason-1.4.4.tar.gz" in jason.error
    assert jason.drifted and jason.verdict.startswith("could not check")
    assert not nimble.drifted  # one bad source does not hide the others


async def test_drift_of_an_unknown_package_is_a_usage_error(indexed: Settings) -> None:
    service = service_for(indexed)
    try:
        with pytest.raises(UserInputError, match="not indexed: ecto"):
            await service.drift(["ecto"])
    finally:
        await service.aclose()


async def test_drift_command_exit_codes_and_json(indexed: Settings, cli: CliHarness) -> None:
    cli.use(indexed)
    clean = await cli.run("drift")
    assert clean.exit_code == 0, clean.output
    assert "No drift: 2 package(s)" in clean.stdout
    as_json = await cli.run("drift", "nimble_pool", "--json")
    assert as_json.exit_code == 0
    data = json.loads(as_json.stdout)
    assert data["drifted"] is False
    assert [(p["package"], p["removed"], p["verdict"]) for p in data["packages"]] == [
        ("nimble_pool", 0, "no refresh needed")
    ]
    service = service_for(indexed)
    db(service).execute("UPDATE chunks SET content_hash = 'x' WHERE package = 'jason'")
    await service.aclose()
    drifted = await cli.run("drift", "--json")
    assert drifted.exit_code == 1
    jason = json.loads(drifted.stdout)["packages"][0]
    assert jason["drifted"] and jason["unchanged"] == 0 and jason["changed"] > 0
    table = await cli.run("drift")
    assert table.exit_code == 1 and "jason: refresh recommended" in table.stdout
    unknown = await cli.run("drift", "ecto")
    assert unknown.exit_code == 2 and "not indexed: ecto" in unknown.output


# -- reindex ----------------------------------------------------------------------------------


def vector_state(service: Hexlocal) -> tuple[Any, ...]:
    conn = db(service)
    return (
        scalar(conn, "SELECT model || ':' || dims || ':' || recorded_at FROM embedding_config"),
        scalar(conn, "SELECT count(*) FROM chunk_vecs"),
        scalar(conn, "SELECT count(*) FROM memory_vecs"),
        scalar(conn, "SELECT group_concat(DISTINCT embed_model) FROM packages"),
        scalar(conn, "SELECT group_concat(DISTINCT embed_model) FROM memories"),
    )


async def test_reindex_switches_every_package_and_memory(indexed: Settings) -> None:
    embedder = model_b()
    service = service_for(indexed, embedder)
    try:
        stale = await service.search_docs("jason", "decode a JSON string", version="1.4.4")
        (mismatch,) = [n for n in stale.notices if n.code == "embedding_model_mismatch"]
        # A server started before another process reindexed is the case a restart fixes.
        assert "hexlocal reindex" in mismatch.message and "restart" in mismatch.message
        plan = await service.plan_reindex()
        distinct = scalar(db(service), "SELECT count(DISTINCT embed_hash) FROM chunks")
        assert (plan.from_model, plan.to_model, plan.packages) == (
            MODEL_A,
            MODEL_B,
            ("jason", "nimble_pool"),
        )
        assert (plan.memories, plan.texts_to_embed) == (2, distinct + 2)
        seen: list[tuple[str, int, int]] = []
        report = await service.reindex(progress=lambda *p: seen.append(p))
        assert report.switched and report.remaining == () and report.error is None
        assert report.done == ("jason", "nimble_pool") and report.embedded == distinct + 2
        chunks = service.diagnostics().chunks
        assert vector_state(service)[1:] == (chunks, 2, MODEL_B, MODEL_B)
        config = service.diagnostics()
        assert (config.embedding_model, config.embedding_dims) == (MODEL_B, 24)
        assert seen[-1] == ("", distinct + 2, distinct + 2)
        assert [done for _, done, _ in seen] == sorted(done for _, done, _ in seen)
        # The vector arm answers again, under model B, with no mismatch notice.
        found = await service.search_docs(
            "jason", "decode a JSON string", version="1.4.4", mode="vector"
        )
        assert found.hits and not found.notices
        memories = await service.recall("Jason.decode!/2 DecodeError")
        assert memories and "DecodeError" in memories[0].text
    finally:
        await service.aclose()
    assert consistency(indexed.database_path) == []


async def test_failure_midway_keeps_model_a_and_rerun_uses_the_cache(indexed: Settings) -> None:
    service = service_for(indexed, FailingEmbedder(fail_on=2, dims=24, model_id=MODEL_B))
    before = vector_state(service)
    vectors_before = db_digest(indexed.database_path, skip=("embed_cache",))
    try:
        report = await service.reindex()
    finally:
        await service.aclose()
    assert not report.switched
    assert (report.done, report.remaining) == (("jason",), ("nimble_pool",))
    assert report.error is not None and "503" in report.error
    # Only the cache gained rows; everything the index answers from is untouched.
    assert db_digest(indexed.database_path, skip=("embed_cache",)) == vectors_before
    on_a = service_for(indexed, HashingEmbedder(dims=16, model_id=MODEL_A))
    try:
        assert vector_state(on_a) == before
        found = await on_a.search_docs("jason", "decode", version="1.4.4", mode="vector")
        assert found.hits and not found.notices
    finally:
        await on_a.aclose()

    rerun = model_b()
    service = service_for(indexed, rerun)
    try:
        store = Store(indexed.database_path)
        jason_texts = {t for _, t in store.reindex.embedded_texts("jason")}
        store.close()
        nimble = scalar(
            db(service),
            "SELECT count(DISTINCT embed_hash) FROM chunks WHERE package = 'nimble_pool'",
        )
        plan = await service.plan_reindex()
        assert plan.texts_to_embed == nimble + 2  # jason comes from the cache now
        report = await service.reindex()
        assert report.switched and report.embedded == nimble + 2
        embedded = [t for batch in rerun.batches for t in batch]
        assert not jason_texts & set(embedded)
    finally:
        await service.aclose()
    assert consistency(indexed.database_path) == []


async def test_reindex_command(indexed: Settings, cli: CliHarness) -> None:
    cli.use(indexed)
    cli.embedder = model_b
    before = db_digest(indexed.database_path)
    dry = await cli.run("reindex", "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    plan = json.loads(dry.stdout)["plan"]
    assert (plan["from_model"], plan["to_model"], plan["memories"]) == (MODEL_A, MODEL_B, 2)
    assert plan["texts_to_embed"] > 0 and plan["estimated_tokens"] > 0
    table = await cli.run("reindex", "--dry-run")
    assert table.exit_code == 0 and "texts to embed" in table.stdout
    assert db_digest(indexed.database_path) == before  # a dry run writes nothing

    cli.embedder = lambda: FailingEmbedder(fail_on=2, dims=24, model_id=MODEL_B)
    failed = await cli.run("reindex")
    assert failed.exit_code == 1
    assert "Remaining: nimble_pool" in failed.stderr and "still wholly on" in failed.stderr
    assert "test:model-a" in failed.stderr

    cli.embedder = model_b
    done = await cli.run("reindex", "--json")
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    assert data["switched"] and data["remaining"] == [] and data["done"] == ["jason", "nimble_pool"]


async def test_a_reindex_that_moved_models_says_which_running_servers_follow(
    indexed: Settings, cli: CliHarness
) -> None:
    cli.use(indexed)
    cli.embedder = model_b
    moved = await cli.run("reindex")
    assert moved.exit_code == 0, moved.output
    said = " ".join(moved.stdout.split())  # the console wraps at 80 columns
    assert "Reindexed 2 package(s) under test:model-b" in said
    assert "servers with AI_EMBED_MODEL unset follow the index" in said
    assert "restart any that name another model" in said
    again = await cli.run("reindex")  # already on model B: nothing for a server to pick up
    assert again.exit_code == 0 and "restart" not in again.stdout
