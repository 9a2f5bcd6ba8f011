"""mix.lock: find it, read it, turn it into `LockEntry` values.

The code lives in `hexlocal_core.versions` (terms.py parses, lockfile.py reads and caches,
location.py finds); this module keeps the names its callers import.
"""

from __future__ import annotations

from hexlocal_core.model import Atom
from hexlocal_core.versions.location import VCS_MARKERS, find_lock, find_mix_root, project_dirs
from hexlocal_core.versions.lockfile import (
    MAX_LOCK_BYTES,
    LockEntry,
    LockFile,
    LockTooLarge,
    load_lock,
    parse_lock,
    parse_lock_file,
    read_lock,
)
from hexlocal_core.versions.terms import MAX_DEPTH, BigNumber, MalformedLock, parse_elixir_term

__all__ = [
    "MAX_DEPTH",
    "MAX_LOCK_BYTES",
    "VCS_MARKERS",
    "Atom",
    "BigNumber",
    "LockEntry",
    "LockFile",
    "LockTooLarge",
    "MalformedLock",
    "find_lock",
    "find_mix_root",
    "load_lock",
    "parse_elixir_term",
    "parse_lock",
    "parse_lock_file",
    "project_dirs",
    "read_lock",
]
