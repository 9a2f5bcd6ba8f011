"""A real PostgreSQL 16 with pgvector for the team-mode tests, from the `pgserver` wheel.

One server per test session (it starts in about a second, as a non-root user it makes
itself when run as root); each test gets a database of its own, so tests never see each
other's rows. Tests that need it are skipped with the reason when pgserver is missing.
"""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_names = itertools.count()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    pgserver = pytest.importorskip("pgserver", reason="team mode tests need pgserver")
    root = Path(tempfile.mkdtemp(prefix="hexlocal-pg-"))
    server = pgserver.get_server(root / "data", cleanup_mode="stop")
    import psycopg

    # A throwaway server: without fsync, stopping it no longer writes out every test
    # database (measured: stop 24.5 s -> 1.6 s, creating 20 databases 10.4 s -> 4.8 s).
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET fsync = off")
        conn.execute("ALTER SYSTEM SET synchronous_commit = off")
        conn.execute("SELECT pg_reload_conf()")
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture
def pg_url(pg_server: Any) -> str:
    """A fresh, empty database on the session's server, as a `postgresql://` URL."""
    import psycopg

    name = f"t{next(_names)}"
    admin = pg_server.get_uri()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return str(pg_server.get_uri(name))
