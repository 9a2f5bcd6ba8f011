"""Hits of a dependency the project has in `deps/` also name the local file and line, so an
agent offline (or one that prefers the code to the docs) can open it.

Only when the folder holds the hit's version: `deps/` follows the lock, and a hit of
another version would point at lines that moved. Applied to every docs answer (one
package or project-wide); a folder's version is read once per change of its metadata.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from attrs import evolve

from hexlocal_core.ingest.deps_folder import (
    USAGE_RULES_FILE,
    dep_version,
    deps_dir,
    is_usage_rule_ref,
    local_source,
)
from hexlocal_core.model import Hit, SourceKind
from hexlocal_core.versions import LockTooLarge, MalformedLock, find_lock, load_lock


class LocalSources:
    def __init__(self, project_root: Path) -> None:
        self._root = project_root
        self._versions: dict[Path, tuple[int, str | None]] = {}

    def annotate(self, hits: Sequence[Hit]) -> tuple[Hit, ...]:
        """`hits` with `local_source` set where the project's deps/ holds the file (and,
        for the project's own modules, where they are defined)."""
        hits = tuple(own_location(hit) for hit in hits)
        deps = deps_dir(self._root) if hits else None
        if deps is None:
            return hits
        folders = self._folders(deps)
        return tuple(self._annotated(hit, deps, folders) for hit in hits)

    def _annotated(self, hit: Hit, deps: Path, folders: dict[str, str]) -> Hit:
        if hit.local_source is not None:
            return hit
        app = folders.get(hit.package, hit.package)
        dep = deps / app
        if not dep.is_dir() or not self._holds(dep, hit):
            return hit
        if hit.source == SourceKind.USAGE_RULES.value and is_usage_rule_ref(hit.ref):
            found: str | None = hit.ref.split("#", 1)[0] or USAGE_RULES_FILE
        else:
            found = local_source(hit.source_url, dep)
        if found is None:
            return hit
        shown = Path(os.path.relpath(dep, deps.parent)).as_posix()
        return evolve(hit, local_source=f"{shown}/{found}")

    def _holds(self, dep: Path, hit: Hit) -> bool:
        """Whether `dep` is the hit's version (a folder without Hex metadata, a git or path
        dependency, is what the lock pins, so it counts)."""
        version = self._version(dep)
        return version is None or version == hit.version

    def _version(self, dep: Path) -> str | None:
        try:
            stamp = (dep / "hex_metadata.config").stat().st_mtime_ns
        except OSError:
            return None
        cached = self._versions.get(dep)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        version = dep_version(dep)
        self._versions[dep] = (stamp, version)
        return version

    def _folders(self, deps: Path) -> dict[str, str]:
        """Hex package name -> its folder under deps/ (the lock's key), where they differ."""
        lock = find_lock(self._root)
        if lock is None:
            return {}
        try:
            entries = load_lock(lock).entries
        except (LockTooLarge, MalformedLock, OSError):  # reported by the lock's own readers
            return {}
        return {e.package: key for key, e in entries.items() if e.package and e.package != key}


def own_location(hit: Hit) -> Hit:
    """A module of the project's own app is located by its source file, relative to the
    project (`lib/my_app/greeter.ex:12`); its `source_url` holds just that."""
    if hit.source != SourceKind.PROJECT.value or not hit.source_url:
        return hit
    if "://" in hit.source_url:  # the project's markdown keeps a file:// URI
        return hit
    return evolve(hit, local_source=hit.source_url)
