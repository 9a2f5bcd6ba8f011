"""Which version's docs to use: Hex SemVer, the project's pins and the resolution chain.

One module per reason to change, leaves first (imports point up this list only):

    files.py       reading the project's files safely (no FIFO, size caps, short echoes)
    semver.py      Hex SemVer: parse, order, nearest versions, the latest stable release
    requirement.py Elixir version requirements (`~> 1.4`) and the newest release one allows
    names.py       valid Hex package names; the apps that ship with Elixir
    terms.py       the Elixir literal parser mix.lock is written in
    lockfile.py    mix.lock entries; the bounded, cached lock reader
    location.py    the walk up from PROJECT_ROOT: the Mix project root and its mix.lock
    probes.py      `_build` app versions, .tool-versions / mise.toml pins, `elixir --version`
    resolution.py  the chain: explicit -> mix.lock -> _build -> Hex latest stable

Import from the package (`from hexlocal_core.versions import resolve_version`); the
modules are the seams, the package is the interface.
"""

from __future__ import annotations

from hexlocal_core.versions.location import find_lock, find_mix_root, project_dirs
from hexlocal_core.versions.lockfile import (
    LockEntry,
    LockFile,
    LockTooLarge,
    MalformedLock,
    load_lock,
    parse_lock,
    read_lock,
)
from hexlocal_core.versions.names import ELIXIR_APPS, MAX_NAME_LENGTH, validate_package_name
from hexlocal_core.versions.probes import build_version, elixir_on_path, pinned_elixir, read_app_vsn
from hexlocal_core.versions.resolution import (
    LATEST,
    explain_missing_docs,
    resolve_version,
    why_no_docs,
)
from hexlocal_core.versions.semver import (
    MAX_VERSION_LENGTH,
    SemVer,
    is_stable,
    nearest_versions,
    parse_version,
    pick_latest,
    try_parse_version,
)

__all__ = [
    "ELIXIR_APPS",
    "LATEST",
    "MAX_NAME_LENGTH",
    "MAX_VERSION_LENGTH",
    "LockEntry",
    "LockFile",
    "LockTooLarge",
    "MalformedLock",
    "SemVer",
    "build_version",
    "elixir_on_path",
    "explain_missing_docs",
    "find_lock",
    "find_mix_root",
    "is_stable",
    "load_lock",
    "nearest_versions",
    "parse_lock",
    "parse_version",
    "pick_latest",
    "pinned_elixir",
    "project_dirs",
    "read_app_vsn",
    "read_lock",
    "resolve_version",
    "try_parse_version",
    "validate_package_name",
    "why_no_docs",
]
