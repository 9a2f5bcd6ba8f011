"""The PostgreSQL connection: a psycopg 3 pool, pgvector's adapter, transactions, errors.

The seam is synchronous (callers run it in worker threads), so this is psycopg's sync API.
Every statement module of the PostgreSQL engine (docs and memories alike) talks to the
database through an `Executor` (a `PgSession` is one), with these helpers:

    ex.execute(sql, params=None) -> psycopg.Cursor
        One statement. Inside `ex.atomic()` (in this thread) it runs on the transaction's
        connection; outside, on a pooled connection taken for that call alone, in
        autocommit (the statement is its own transaction). The cursor is client-side, its
        rows already fetched, so reading them after the connection went back is safe.
    ex.fetchall(sql, params=None) -> list[tuple[Any, ...]]
    ex.fetchone(sql, params=None) -> tuple[Any, ...] | None
    ex.scalar(sql, params=None) -> Any          first column of the first row, or None
    ex.atomic() -> context manager yielding ex: one transaction (BEGIN ... COMMIT), a
        SAVEPOINT when nested; any exception rolls it back and is re-raised. The
        transaction belongs to the calling thread: another thread using the same
        executor meanwhile gets pooled connections of its own.
    ex.connection() -> context manager yielding a psycopg connection: the transaction's
        inside atomic(), else a pooled one for the block (several statements on one
        connection without a transaction).

SQL uses psycopg's placeholders, `%s` or `%(name)s`, never `?` (a statement both engines
share is written with `?` and spelt for psycopg by `DIALECT`); a literal `%` is written
`%%` when params are given. A numpy array passed as a parameter is sent as `vector`
(pgvector's adapter, registered on every pooled connection).

Errors: a connection that cannot be made or is lost becomes `StoreError` naming the
server with its credentials masked ("cannot reach PostgreSQL at postgresql://****@host/db:
...; check DATABASE_URL"), a full disk a `StoreError` saying nothing was written. Other
database errors (a constraint, a bug in a statement) pass through as psycopg raised them,
as apsw's do on the SQLite side.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any, Self

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from hexlocal_core.errors import StoreError
from hexlocal_core.index.sql import Dialect, Row, SqlRunner
from hexlocal_core.redact import redact_url, redact_urls

POOL_MIN = 1
# Worker threads of one server (asyncio.to_thread's default pool is cpu + 4) plus the
# curation and sync workers; a caller past this waits up to POOL_WAIT_S for a connection.
POOL_MAX = 10
POOL_WAIT_S = 30.0
CONNECT_TIMEOUT_S = 10
APPLICATION_NAME = "hexlocal"

Params = Any  # a sequence or mapping of parameters, or None

# Advisory lock keys, two int4 each, so they never meet single-key locks of other software
# (the memory side's decision lock starts with 'hexp'). The migration and embedding locks
# are transaction-level; an ingest claim is session-level, 'hexi' and hashtext(package@version).
MIGRATION_LOCK = (0x6865786C, 1)  # 'hexl'
EMBEDDING_LOCK = (0x6865786C, 2)  # shared to write vectors, exclusive to switch models
INGEST_SPACE = 0x68657869  # 'hexi'
WRITE_SPACE = 0x68657877  # 'hexw', hashtext(package): one writer of a package at a time


def connection_options(url: str) -> dict[str, Any]:
    """Options every connection gets, unless the URL sets them itself."""
    try:
        given = conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        raise StoreError(
            f"DATABASE_URL is not a PostgreSQL connection URL ({redact_urls(str(exc))}); "
            "expected postgresql://user:password@host:5432/database"
        ) from exc
    options: dict[str, Any] = {"autocommit": True}
    if "connect_timeout" not in given:
        options["connect_timeout"] = CONNECT_TIMEOUT_S
    if "application_name" not in given:
        options["application_name"] = APPLICATION_NAME
    return options


def unreachable(location: str, exc: BaseException) -> StoreError:
    detail = redact_urls(str(exc).strip().replace("\n", " ")) or type(exc).__name__
    return StoreError(
        f"cannot reach PostgreSQL at {location}: {detail}; check DATABASE_URL and that the "
        "server is running and accepts connections from this host"
    )


def translate(exc: psycopg.Error, location: str) -> StoreError | None:
    """The StoreError a user can act on for `exc`, or None to let it pass as it is."""
    if isinstance(exc, pg_errors.DiskFull):
        return StoreError(
            f"the disk of the PostgreSQL server at {location} is full (nothing was written); "
            "free space on the server and retry"
        )
    if isinstance(exc, PoolTimeout | psycopg.OperationalError) and _connection_failure(exc):
        return unreachable(location, exc)
    return None


def _connection_failure(exc: psycopg.Error) -> bool:
    # A lost or refused connection has no SQLSTATE, or one of class 08 (connection
    # exception) or 57P (shutdown); a cancelled or timed-out query is not one.
    state = exc.sqlstate
    return state is None or state.startswith(("08", "57P"))


@contextlib.contextmanager
def translating(location: str) -> Iterator[None]:
    try:
        yield
    except psycopg.Error as exc:
        mapped = translate(exc, location)
        if mapped is None:
            raise
        raise mapped from exc


def connect(url: str) -> psycopg.Connection[tuple[Any, ...]]:
    """A connection of its own (not pooled), autocommit, for migrations and held locks."""
    options = connection_options(url)
    try:
        return psycopg.connect(url, **options)
    except psycopg.OperationalError as exc:  # refused, unknown host, bad password, ...
        raise unreachable(redact_url(url), exc) from exc


def _configure(conn: psycopg.Connection[Any]) -> None:
    from pgvector.psycopg import register_vector

    from hexlocal_core.index.pg.vectors import SESSION_EF_SEARCH

    register_vector(conn)
    # Deep enough for a search's depth without a SET LOCAL (one statement, no transaction).
    conn.execute(f"SET hnsw.ef_search = {int(SESSION_EF_SEARCH)}")


class Database:
    """The pool of one PostgreSQL database; opened after the schema is migrated, because
    pgvector's adapter needs the `vector` type the first step creates."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.location = redact_url(url)
        self._pool: ConnectionPool[psycopg.Connection[tuple[Any, ...]]] = ConnectionPool(
            url,
            kwargs=connection_options(url),
            min_size=POOL_MIN,
            max_size=POOL_MAX,
            timeout=POOL_WAIT_S,
            configure=_configure,
            check=ConnectionPool.check_connection,
            name="hexlocal",
            open=False,
        )
        with translating(self.location):
            try:
                self._pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
            except PoolTimeout as exc:
                self._pool.close()
                raise unreachable(self.location, exc) from exc

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        """A pooled connection (autocommit) for the block."""
        with translating(self.location), self._pool.connection() as conn:
            yield conn

    @contextlib.contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        """A pooled connection inside one transaction; an exception rolls it back."""
        with self.connection() as conn, conn.transaction():
            yield conn

    def close(self) -> None:
        self._pool.close()


class Executor:
    """Statements over a `Database`, inside this thread's `atomic()` transaction if any."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._local = threading.local()

    @property
    def location(self) -> str:
        return self._db.location

    def _current(self) -> psycopg.Connection[tuple[Any, ...]] | None:
        conn: psycopg.Connection[tuple[Any, ...]] | None = getattr(self._local, "conn", None)
        return conn

    @contextlib.contextmanager
    def atomic(self) -> Iterator[Self]:
        """One transaction for the block (a savepoint when nested)."""
        conn = self._current()
        if conn is not None:
            with translating(self._db.location), conn.transaction():
                yield self
            return
        with self._db.transaction() as conn:
            self._local.conn = conn
            try:
                yield self
            finally:
                self._local.conn = None

    def execute(self, sql: Any, params: Params = None) -> psycopg.Cursor[tuple[Any, ...]]:
        conn = self._current()
        if conn is not None:
            with translating(self._db.location):
                return conn.execute(sql, params)
        with self._db.connection() as pooled:
            return pooled.execute(sql, params)

    def fetchall(self, sql: Any, params: Params = None) -> list[tuple[Any, ...]]:
        return self.execute(sql, params).fetchall()

    def fetchone(self, sql: Any, params: Params = None) -> tuple[Any, ...] | None:
        return self.execute(sql, params).fetchone()

    def scalar(self, sql: Any, params: Params = None) -> Any:
        row = self.fetchone(sql, params)
        return None if row is None else row[0]

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        """The atomic transaction's connection, or a pooled one for the block: for the few
        statements that need one connection without a transaction (SET LOCAL needs one)."""
        conn = self._current()
        if conn is not None:
            yield conn
            return
        with self._db.connection() as pooled:
            yield pooled


# How PostgreSQL spells what the engines' shared statements leave open (`index/sql.py`):
# text ordered bytewise as SQLite's BINARY does, lists as one array parameter.
DIALECT = Dialect(
    mark="%s",
    position="strpos",
    bytewise=' COLLATE "C"',
    any_true="bool_or",
    arrays=True,
    unlimited=None,
)


class PgRunner(SqlRunner):
    """Shared statements (`index/*_sql.py`) run through an executor, `self._ex`."""

    dialect = DIALECT
    _ex: Executor

    def _rows(self, sql: str, params: Sequence[Any]) -> list[Row]:
        return self._ex.fetchall(sql, params)

    def _run(self, sql: str, params: Sequence[Any]) -> None:
        self._ex.execute(sql, params)
