"""The ingestion claim of an SQLite index: an OS file lock beside the database file.

Two processes on one index file (two MCP clients open on one project, a CLI `sync` beside
a server) each meet a package that is new or partial, and each would download and embed
it. The claim makes one of them do it and the other wait for its work (the ingestor's
side, as on PostgreSQL, where an advisory lock plays this part). The lock is the kernel's
(`filelock`'s flock on POSIX, msvcrt on Windows), so a process that dies releases it with
its file descriptors and nothing is left to clean up.
"""

from __future__ import annotations

import hashlib
import logging
import sys
from pathlib import Path

from filelock import BaseFileLock, Timeout, UnixFileLock, WindowsFileLock

log = logging.getLogger("hexlocal.index")

# The kernel's lock only: filelock's soft fallback (a marker file) would outlive a killed
# holder and keep every other process waiting.
_HardLock = WindowsFileLock if sys.platform == "win32" else UnixFileLock


class FileClaim:
    """A held claim; `release` gives it back (a second release does nothing)."""

    def __init__(self, lock: BaseFileLock | None) -> None:
        self._lock = lock

    def release(self) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()


def claim_dir(database: Path) -> Path:
    return database.with_name(database.name + ".claims")


def try_file_claim(database: Path, package: str, version: str) -> FileClaim | None:
    """The claim on `package@version` for this process, or None while another holds it.

    Where no lock file can be made (a read-only folder), ingestion goes on unclaimed: at
    worst two processes embed one package, and the store's writes stay whole."""
    key = hashlib.sha256(f"{package}@{version}".encode()).hexdigest()[:24]
    folder = claim_dir(database)
    # thread_local=False: acquired and released from different worker threads.
    lock = _HardLock(folder / f"{key}.lock", timeout=0, thread_local=False)
    try:
        folder.mkdir(exist_ok=True)
        lock.acquire()
    except Timeout:
        return None
    except (OSError, NotImplementedError) as exc:  # no folder, or a filesystem without locks
        log.debug("no ingestion claim for %s %s: %s", package, version, exc)
        return FileClaim(None)
    return FileClaim(lock)
