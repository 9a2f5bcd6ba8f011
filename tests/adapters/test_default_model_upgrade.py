"""The default embedder changed from fp32 to int8: an index that fp32 built keeps fp32 (its
vector search stays on) until `hexlocal reindex` moves it; an explicit AI_EMBED_MODEL wins.

Real SQLite, the real parser, the fake hex.pm with a real tarball, the real local models.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hexlocal_cli import common
from hexlocal_core.adapters import model_sources
from hexlocal_core.config import DEFAULT_EMBED_MODEL, Settings
from hexlocal_core.index.sqlite.db import scalar
from hexlocal_core.service import Hexlocal, build
from tests.fakes.fake_hex import FakeHex
from tests.support.harness import CliHarness
from tests.support.helpers import db
from tests.support.hex_fixtures import client_for, settings_for
from tests.support.paths import MODEL_CACHE

pytestmark = pytest.mark.integration

FP32 = "sentence-transformers/all-MiniLM-L6-v2"
INT8 = f"{FP32}@int8"
QUERY = "pretty print a JSON string with indentation"


@pytest.fixture(autouse=True)
def _model_package() -> None:
    if model_sources.pypi_model_dir() is None:
        pytest.skip(f"the model package is absent: {model_sources.PYPI_INSTALL}")


def _settings(fake_hex: FakeHex, tmp_path: Path, **overrides: object) -> Settings:
    return settings_for(
        fake_hex, tmp_path, ai_rerank_model="off", model_cache_dir=MODEL_CACHE, **overrides
    )


def _service(settings: Settings) -> Hexlocal:
    return build(settings, registry=client_for(settings))


def _indexed(service: Hexlocal) -> str | None:
    return service.diagnostics().embedding_model


def test_int8_is_the_default_and_an_explicit_model_is_remembered_as_such() -> None:
    assert DEFAULT_EMBED_MODEL == INT8
    default = Settings.from_env({})
    assert (default.ai_embed_model, default.embed_model_set) == (INT8, False)
    assert Settings.from_env({"AI_EMBED_MODEL": FP32}).embed_model_set
    assert Settings.from_env({}, ai_embed_model=FP32).embed_model_set


@pytest.mark.parametrize(
    ("indexed", "env", "served"),
    [
        (f"local:{FP32}", {}, FP32),  # the old default's index keeps its model
        (f"local:{INT8}", {}, INT8),
        (None, {}, INT8),  # a new index gets the default
        (f"local:{FP32}", {"AI_EMBED_MODEL": INT8}, INT8),  # named: the user's choice wins
        ("openai:text-embedding-3-small", {}, INT8),  # not a local model: not adopted
        ("local:someone/else", {}, INT8),  # a local id this build cannot run
    ],
)
def test_an_index_is_served_with_the_model_that_built_it_unless_one_is_named(
    indexed: str | None, env: dict[str, str], served: str
) -> None:
    assert Settings.from_env(env).served_with(indexed).ai_embed_model == served


async def test_an_fp32_index_keeps_its_vector_search_until_reindex_moves_it(
    fake_hex: FakeHex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = _service(_settings(fake_hex, tmp_path, ai_embed_model=FP32))
    try:
        await old.ingest("jason", "1.2.2")
        assert _indexed(old) == f"local:{FP32}"
    finally:
        await old.aclose()

    upgraded = _service(_settings(fake_hex, tmp_path))  # AI_EMBED_MODEL unset: int8 default
    try:
        found = await upgraded.search_docs("jason", QUERY, version="1.2.2", mode="vector")
        assert found.hits and found.notices == ()  # no mismatch: the vector arm answered
        assert _indexed(upgraded) == f"local:{FP32}"
    finally:
        await upgraded.aclose()

    # `hexlocal reindex` with AI_EMBED_MODEL unset moves the index to the default.
    cli = CliHarness(monkeypatch)
    cli.use(_settings(fake_hex, tmp_path))
    monkeypatch.delenv("AI_EMBED_MODEL", raising=False)
    doctor = await cli.run("doctor", "--json")
    (database,) = [c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "database"]
    assert f"vectors by local:{FP32} " in database["detail"]
    assert f"`hexlocal reindex` moves them to the default, {INT8}" in database["detail"]

    built: list[Settings] = []

    def build_service(s: Settings, *, load_models: bool = True) -> Hexlocal:
        built.append(s)
        return _service(s)

    monkeypatch.setenv("HEXLOCAL_MODEL_CACHE", str(MODEL_CACHE))
    monkeypatch.setattr(common, "build_service", build_service)
    moved = await cli.run("reindex", "--json")
    assert moved.exit_code == 0, moved.output
    assert built and built[0].ai_embed_model == INT8

    after = _service(_settings(fake_hex, tmp_path))
    try:
        assert _indexed(after) == f"local:{INT8}"
        found = await after.search_docs("jason", QUERY, version="1.2.2", mode="vector")
        assert found.hits and found.notices == ()
        assert any(h.ref.startswith("Jason.Formatter.html#pretty_print") for h in found.hits)
    finally:
        await after.aclose()
    again = await cli.run("doctor", "--json")
    (database,) = [c for c in json.loads(again.stdout)["checks"] if c["name"] == "database"]
    assert f"vectors by local:{INT8} " in database["detail"] and "kept" not in database["detail"]


async def test_a_running_server_follows_its_index_when_another_process_reindexes(
    fake_hex: FakeHex, tmp_path: Path
) -> None:
    old = _service(_settings(fake_hex, tmp_path, ai_embed_model=FP32))
    try:
        await old.ingest("jason", "1.2.2")
    finally:
        await old.aclose()

    server = _service(_settings(fake_hex, tmp_path))  # kept on fp32, AI_EMBED_MODEL unset
    try:
        before = await server.search_docs("jason", QUERY, version="1.2.2", mode="vector")
        assert before.hits and before.notices == ()

        mover = _service(_settings(fake_hex, tmp_path, ai_embed_model=INT8))
        try:
            assert (await mover.reindex()).switched
        finally:
            await mover.aclose()

        # The index is int8 now: the running server searches, ingests and stores with it.
        after = await server.search_docs("jason", QUERY, version="1.2.2", mode="vector")
        assert after.hits and after.notices == ()
        assert any(h.ref.startswith("Jason.Formatter.html#pretty_print") for h in after.hits)
        await server.ingest("mime", "1.3.1")
        models = scalar(db(server), "SELECT group_concat(DISTINCT embed_model) FROM packages")
        assert models == f"local:{INT8}"
    finally:
        await server.aclose()
