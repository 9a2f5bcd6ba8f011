"""The SQLite connection: apsw with sqlite-vec loaded, WAL, busy timeout, foreign keys.

apsw rather than the stdlib `sqlite3` because it bundles a current SQLite (FTS5 included)
on every platform and loads extensions without a custom build. `atomic()` starts writes
with BEGIN IMMEDIATE: a deferred transaction that later wants to write can fail at once
with SQLITE_BUSY_SNAPSHOT in WAL mode, which no busy timeout retries.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import apsw

from hexlocal_core.errors import StoreError
from hexlocal_core.index.sql import Dialect, Row, SqlRunner
from hexlocal_core.index.sqlite import fts

log = logging.getLogger("hexlocal.db")

BUSY_TIMEOUT_MS = 15_000
BULK_CACHE_KIB = 65_536  # measured: 100k-vector loads 23 s -> 2 s with a 64 MiB cache


class Connected(Protocol):
    """What the statement classes need of the store: this thread's connection.

    A Protocol here, not the Store, so `ops.py` does not import the module that imports it.
    """

    @property
    def conn(self) -> apsw.Connection: ...


# How SQLite spells what the engines' shared statements leave open (`index/sql.py`).
DIALECT = Dialect(
    mark="?", position="instr", bytewise="", any_true="max", arrays=False, unlimited=-1
)


class SqliteRunner(SqlRunner):
    """Shared statements (`index/*_sql.py`) run on this thread's connection, `self.conn`."""

    dialect = DIALECT

    @property
    def conn(self) -> apsw.Connection:
        raise NotImplementedError

    def _rows(self, sql: str, params: Sequence[Any]) -> list[Row]:
        return list(self.conn.execute(sql, params))

    def _run(self, sql: str, params: Sequence[Any]) -> None:
        self.conn.execute(sql, params)


def _load_vec(conn: apsw.Connection) -> None:
    import sqlite_vec

    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.enable_load_extension(False)


def connect(path: Path | str, *, readonly: bool = False) -> apsw.Connection:
    """Open the database with hexlocal's pragmas; creates the parent directory on demand."""
    target = str(path)
    if target != ":memory:":
        Path(target).parent.mkdir(parents=True, exist_ok=True)
    flags = (
        apsw.SQLITE_OPEN_READONLY
        if readonly
        else apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    )
    try:
        conn = apsw.Connection(target, flags=flags)
    except apsw.Error as exc:
        raise StoreError(f"cannot open the index database {target}: {exc}") from exc
    conn.setbusytimeout(BUSY_TIMEOUT_MS)
    try:
        _load_vec(conn)
    except (apsw.Error, OSError) as exc:
        raise StoreError(f"cannot load sqlite-vec into SQLite: {exc}; reinstall hexlocal") from exc
    for pragma in (
        "PRAGMA foreign_keys=ON",
        "PRAGMA synchronous=NORMAL",
        f"PRAGMA cache_size=-{BULK_CACHE_KIB}",
        "PRAGMA temp_store=MEMORY",
    ):
        conn.execute(pragma)
    if not readonly and target != ":memory:":
        _set_wal(conn)
    fts.register(conn)
    return conn


def _set_wal(conn: apsw.Connection) -> None:
    # Switching to WAL needs a moment with no other writer; a second process may hold it.
    for attempt in range(50):
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except apsw.BusyError:
            time.sleep(0.05 * (attempt + 1))
    raise StoreError("the index database stayed busy while switching to WAL mode")


@contextlib.contextmanager
def atomic(conn: apsw.Connection) -> Iterator[apsw.Connection]:
    """One write transaction (BEGIN IMMEDIATE), or a SAVEPOINT when already inside one.

    Any exception rolls everything back, so the database is left exactly as it was.
    """
    if not conn.get_autocommit():
        with conn:  # apsw's context manager is a SAVEPOINT
            yield conn
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException as exc:
        # SQLite may already have rolled back (SQLITE_FULL can end the transaction itself);
        # a second ROLLBACK would raise and hide the cause.
        if not conn.get_autocommit():
            conn.execute("ROLLBACK")
        if isinstance(exc, apsw.FullError):
            raise disk_full(conn) from exc
        raise


def disk_full(conn: apsw.Connection) -> StoreError:
    """SQLITE_FULL as the user can act on it; nothing of the write was kept."""
    where = conn.filename or "the index database"
    return StoreError(
        f"the disk holding {where} is full (nothing was written); free space and retry, "
        "or point DATABASE_PATH at a disk with room"
    )


def rows(conn: apsw.Connection, sql: str, params: Any = ()) -> list[dict[str, Any]]:
    """Run a query and return dicts keyed by column name."""
    cur = conn.execute(sql, params)
    out: list[dict[str, Any]] = []
    try:
        names = [d[0] for d in cur.getdescription()]
    except apsw.ExecutionCompleteError:
        return out
    for row in cur:
        out.append(dict(zip(names, row, strict=True)))
    return out


def scalar(conn: apsw.Connection, sql: str, params: Any = ()) -> Any:
    for row in conn.execute(sql, params):
        return row[0]
    return None


class ConnectionPool:
    """One connection per thread: apsw connections must not run two transactions at once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._all: list[apsw.Connection] = []
        self._lock = threading.Lock()

    def get(self) -> apsw.Connection:
        conn: apsw.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path)
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                with contextlib.suppress(apsw.Error):
                    conn.close()
            self._all.clear()
        self._local = threading.local()
