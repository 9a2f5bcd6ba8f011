"""Helpers shared by the maintenance, project-docs and reliability tests.

db_digest(path)          a hash of every row of every real table: "nothing was written"
consistency(path)        integrity_check plus hexlocal's own invariants (no half package)
service_for(...)         the service on HashingEmbedder against a fake hex.pm
CliHarness               runs `hexlocal ...` in a worker thread (the test's loop keeps
                         serving the fakes) with the composition root swapped for fakes
StandaloneHex            `python -m tests.fakes.fake_hex` in a subprocess, for processes
                         that are not the test's own
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from click.testing import CliRunner, Result

from hexlocal_cli import common
from hexlocal_core.config import Settings
from hexlocal_core.index.sqlite.db import connect, scalar
from hexlocal_core.ports import Embedder
from hexlocal_core.service import Hexlocal, build
from tests.fakes.fake_hex import client_for
from tests.support.helpers import HashingEmbedder
from tests.support.paths import REPO_ROOT

# -- database state ---------------------------------------------------------------------------


def db_digest(path: Path, *, skip: Sequence[str] = ()) -> str:
    """One hash over all rows of all ordinary tables (vec0 and FTS5 keep their data in
    shadow tables, which are ordinary), so any write anywhere changes it."""
    conn = connect(path, readonly=True)
    try:
        digest = hashlib.sha256()
        names = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
                " AND sql NOT LIKE 'CREATE VIRTUAL TABLE%' ORDER BY name"
            )
        ]
        for name in names:
            if name in skip:
                continue
            digest.update(name.encode())
            for row in conn.execute(f'SELECT * FROM "{name}" ORDER BY 1'):
                digest.update(repr(row).encode())
        return digest.hexdigest()
    finally:
        conn.close()


def consistency(path: Path) -> list[str]:
    """Problems found: SQLite's own check, then no package half-written (a complete package
    without all its vectors, a chunk count that lies) or orphaned rows."""
    conn = connect(path, readonly=True)
    try:
        problems: list[str] = []
        check = scalar(conn, "PRAGMA integrity_check")
        if check != "ok":
            problems.append(f"integrity_check: {check}")
        for name, stored, real in conn.execute(
            "SELECT p.name, p.chunk_count, (SELECT count(*) FROM chunks c WHERE c.package = p.name)"
            " FROM packages p"
        ):
            if stored != real:
                problems.append(f"{name}: chunk_count {stored} but {real} chunk rows")
        orphans = scalar(
            conn, "SELECT count(*) FROM chunks WHERE package NOT IN (SELECT name FROM packages)"
        )
        if orphans:
            problems.append(f"{orphans} chunks without a package row")
        has_vecs = scalar(conn, "SELECT 1 FROM sqlite_master WHERE name = 'chunk_vecs'")
        if has_vecs:
            # A 'partial' package (its embedding cut short) may lack vectors; a complete
            # one never does.
            counts = conn.execute(
                "SELECT (SELECT count(*) FROM chunk_vecs),"
                " (SELECT count(*) FROM chunk_vecs WHERE rowid NOT IN (SELECT id FROM chunks)),"
                " (SELECT count(*) FROM chunks WHERE id NOT IN (SELECT rowid FROM chunk_vecs)"
                "  AND package IN (SELECT name FROM packages WHERE status = 'complete'))"
            ).fetchall()[0]
            if counts[1] or counts[2]:
                problems.append(f"vectors {counts[0]}: {counts[1]} orphan, {counts[2]} missing")
        fts = scalar(conn, "SELECT count(*) FROM chunks_fts_docsize")
        real = scalar(conn, "SELECT count(*) FROM chunks")
        if fts != real:
            problems.append(f"FTS holds {fts} rows for {real} chunks")
        return problems
    finally:
        conn.close()


# -- building the service ---------------------------------------------------------------------


def service_for(settings: Settings, embedder: Embedder | None = None) -> Hexlocal:
    """The real service on real SQLite; remote ports aimed at the fakes by `settings`."""
    return build(
        settings,
        embedder=embedder if embedder is not None else HashingEmbedder(),
        reranker=None,
        registry=client_for(settings),
        load_models=False,
    )


def settings_env(settings: Settings) -> dict[str, str]:
    """The environment that makes `Settings.from_env()` equal `settings` (for the CLI)."""
    env = {
        "PROJECT_ROOT": str(settings.project_root),
        "DATABASE_PATH": str(settings.database_path),
        "HEX_API_URL": settings.hex_api_url,
        "HEX_MIRROR": settings.hex_mirror,
        "HEXLOCAL_HTTP_TIMEOUT_S": str(settings.http_timeout_s),
        "AI_RERANK_MODEL": settings.ai_rerank_model,
        "EMBED_BATCH_SIZE": str(settings.embed_batch_size),
    }
    if settings.github_api_url:
        env["GITHUB_API_URL"] = settings.github_api_url
    return env


@attrs.define
class CliHarness:
    """Runs the `hexlocal` click group with `common.build_service` returning `make()`."""

    monkeypatch: pytest.MonkeyPatch
    embedder: Callable[[], Embedder] = HashingEmbedder

    def use(self, settings: Settings) -> None:
        for name, value in settings_env(settings).items():
            self.monkeypatch.setenv(name, value)

        def build_service(s: Settings, *, load_models: bool = True) -> Hexlocal:
            return service_for(s, self.embedder())

        self.monkeypatch.setattr(common, "build_service", build_service)

    async def run(self, *args: str) -> Result:
        """`hexlocal ARGS` in a worker thread: its own event loop, as in a real run."""
        from hexlocal_cli.main import cli

        with _logging_restored():
            return await asyncio.to_thread(CliRunner().invoke, cli, list(args))


@contextlib.contextmanager
def _logging_restored() -> Iterator[None]:
    """The CLI reconfigures the `hexlocal` logger (no propagation); undo it for caplog."""
    logger = logging.getLogger("hexlocal")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    try:
        yield
    finally:
        logger.handlers[:] = saved[0]
        logger.setLevel(saved[1])
        logger.propagate = saved[2]


# -- a fake hex.pm in its own process ---------------------------------------------------------


class StandaloneHex:
    """`python -m tests.fakes.fake_hex --port 0` for processes other than the test's."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.base_url = ""

    def __enter__(self) -> StandaloneHex:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fakes.fake_hex", "--port", "0"],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )
        assert self.proc.stdout is not None
        self.base_url = self.proc.stdout.readline().strip()
        if not self.base_url.startswith("http://127.0.0.1:"):
            self.__exit__()
            raise RuntimeError(f"the fake hex.pm did not start: {self.base_url!r}")
        return self

    def __exit__(self, *exc: Any) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()

    @property
    def env(self) -> dict[str, str]:
        return {"HEX_API_URL": f"{self.base_url}/api", "HEX_MIRROR": f"{self.base_url}/repo"}
