"""Shared fixtures: a clean environment, the shared corpus, a user dir under tmp."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from hexlocal_core.config import ENV_VARIABLES
from tests.support.paths import CORPUS, HEXDOCS, MODEL_CACHE, SHARED, in_ci, shared

if TYPE_CHECKING:
    from hexlocal_core.index.sqlite.store import Store

pytest_plugins = [
    "tests.support.hex_fixtures",
    "tests.support.model_fixtures",
    "tests.support.pg_fixtures",
]


def pytest_sessionstart(session: pytest.Session) -> None:
    """Under CI the shared data must be there: without it a third of the suite would
    skip itself and the run would still be green."""
    if in_ci() and not CORPUS.is_dir():
        raise pytest.UsageError(
            f"CI=true but the shared data is not at {SHARED} (no {CORPUS}): lay it beside"
            " the checkout or point HEXLOCAL_SHARED at it; CI does not skip what it needs"
        )


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No host setting leaks into a test; the user data dir lives under tmp."""
    for name in ENV_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # As `settings_for` does: a search waits for the whole ingestion unless a test asks.
    monkeypatch.setenv("HEXLOCAL_ANSWER_WHILE_EMBEDDING", "false")
    home = tmp_path_factory.mktemp("xdg")
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "cache"))
    # Built ONNX graphs are reused across tests and runs (building one costs seconds).
    monkeypatch.setenv("HEXLOCAL_MODEL_CACHE", str(MODEL_CACHE))


@pytest.fixture(autouse=True)
def _restore_hexlocal_logger() -> Iterator[None]:
    """The MCP server's log set-up stops the `hexlocal` logger propagating (stdout is the
    protocol); restore it after each test, or caplog sees nothing in the tests after."""
    from hexlocal_mcp.logs import LOGGERS

    loggers = [logging.getLogger(name) for name in LOGGERS]
    saved = [(list(lg.handlers), lg.level, lg.propagate) for lg in loggers]
    yield
    for logger, (handlers, level, propagate) in zip(loggers, saved, strict=True):
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate = propagate


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The shared corpus (skipped locally when absent, a failure under CI)."""
    shared(HEXDOCS, "the shared corpus")
    return CORPUS


@pytest.fixture(scope="module")
def jason_index(tmp_path_factory: pytest.TempPathFactory, corpus: Path) -> Path:
    """A real index of jason 1.4.4 (real parsers and pipeline, the hashing embedder), one
    per test module: what the engine tests rank against."""
    from tests.support.helpers import index_corpus_package

    path = tmp_path_factory.mktemp("jason") / "engine.db"
    return index_corpus_package(path, HEXDOCS / "jason-1.4.4.tar.gz", "jason", "1.4.4")


@pytest.fixture
def jason_store(jason_index: Path) -> Iterator[Store]:
    from hexlocal_core.index.sqlite.store import Store

    opened = Store(jason_index)
    yield opened
    opened.close()
