"""Recall: the docs' hybrid search applied to memories, plus history and staleness.

The same sanitizer and fusion as docs search: an FTS arm over `memories_fts` and a vector
arm over `memory_vecs`, fused by RRF. Scope (package, deprecated) is applied inside each
arm before its depth cut. Unlike docs, a memory store is small and mostly off-topic for
any one query, so the vector arm keeps only neighbours above MIN_SIMILARITY: otherwise
every query would "recall" the nearest unrelated facts.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

from attrs import asdict

from hexlocal_core.index.rows import CurationEntry, MemoryRow, MemoryScope
from hexlocal_core.index.seam import Session
from hexlocal_core.memory import records
from hexlocal_core.memory.policy import similarity
from hexlocal_core.model import Memory
from hexlocal_core.ports import Vectors
from hexlocal_core.search.fusion import rrf
from hexlocal_core.search.sanitizer import to_match
from hexlocal_core.versions import MalformedLock, find_lock, read_lock, try_parse_version

log = logging.getLogger("hexlocal.memory")

DEPTH = 15
# Measured with all-MiniLM-L6-v2 on five stored facts: unrelated queries ("weather in
# Paris tomorrow") scored <= 0.13 against every one; the weakest related query scored 0.29.
MIN_SIMILARITY = 0.2
BM25_WEIGHTS = (1.0, 1.5)  # text, split identifier parts (as docs weigh them)


def lock_pins(project_root: Path) -> dict[str, str]:
    """Package -> version pinned by the project's mix.lock, read fresh; {} when unknown."""
    lock = find_lock(project_root)
    if lock is None:
        return {}
    try:
        entries = read_lock(lock)
    except MalformedLock as exc:
        log.warning("staleness not checked: %s", exc)
        return {}
    pins: dict[str, str] = {}
    for entry in entries.values():
        if entry.kind == "hex" and entry.version:
            pins[entry.name] = entry.version
            pins[entry.package or entry.name] = entry.version
    return pins


def is_stale(package: str | None, version: str | None, pins: Mapping[str, str]) -> bool:
    """Tied to package@version while the lock now pins that package at another version."""
    if not package or not version or package not in pins:
        return False
    pinned, ours = try_parse_version(pins[package]), try_parse_version(version)
    if pinned is None or ours is None:
        return pins[package] != version
    return pinned != ours


def keyword_arm(conn: Session, query: str, scope: MemoryScope) -> list[int]:
    match = to_match(query)
    if match is None:
        return []
    return conn.memories.keyword_memory_ids(match, scope, depth=DEPTH, weights=BM25_WEIGHTS)


def vector_arm(conn: Session, vector: Vectors | None, scope: MemoryScope) -> list[int]:
    if vector is None:
        return []
    # k-NN cannot filter, so ask for as many extra rows as the scope leaves out.
    excluded = conn.memories.out_of_scope_count(scope)
    near = [(i, similarity(d)) for i, d in records.knn(conn, vector, DEPTH + excluded)]
    allowed = conn.memories.in_scope([i for i, _ in near], scope)
    return [i for i, sim in near if i in allowed and sim >= MIN_SIMILARITY][:DEPTH]


def search(
    conn: Session,
    query: str,
    vector: Vectors | None,
    *,
    limit: int,
    package: str | None,
    include_deprecated: bool,
    pins: Mapping[str, str],
) -> list[Memory]:
    scope = MemoryScope(package, include_deprecated)
    fused = rrf([keyword_arm(conn, query, scope), vector_arm(conn, vector, scope)])
    return hydrate(conn, fused[:limit], pins)


def history(conn: Session, ids: Sequence[int]) -> dict[int, list[CurationEntry]]:
    """The curation log entries that touched each memory, oldest first."""
    return conn.memories.curation_history(ids)


def hydrate(conn: Session, ids: Sequence[int], pins: Mapping[str, str]) -> list[Memory]:
    """Memory values for `ids`, in that order."""
    found = records.by_ids(conn, ids)
    logs = history(conn, ids)
    return [_memory(found[i], logs[i], pins) for i in ids if i in found]


def _memory(r: MemoryRow, entries: list[CurationEntry], pins: Mapping[str, str]) -> Memory:
    return Memory(
        id=r.id,
        text=r.text,
        curated=r.curated,
        created_at=r.created_at,
        updated_at=r.updated_at,
        package=r.package,
        version=r.version,
        tags=r.tags,
        deprecated=r.deprecated,
        stale=is_stale(r.package, r.version, pins),
        # Memory.history is the answer's shape (mappings); the log rows themselves are typed.
        history=tuple(asdict(e) for e in entries),
    )
