"""Recall: the docs' hybrid search applied to memories, plus history and staleness.

The same sanitizer and fusion as docs search: an FTS arm over `memories_fts` and a vector
arm over `memory_vecs`, fused by RRF. Scope (package, deprecated) is applied inside each
arm before its depth cut. Unlike docs, a memory store is small and mostly off-topic for
any one query, so the vector arm keeps only neighbours above MIN_SIMILARITY: otherwise
every query would "recall" the nearest unrelated facts.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import apsw

from hexlocal_core.index.db import rows, scalar
from hexlocal_core.memory import records
from hexlocal_core.memory.policy import similarity
from hexlocal_core.mixlock import MalformedLock, find_lock, read_lock
from hexlocal_core.model import Memory
from hexlocal_core.ports import Vectors
from hexlocal_core.search.fusion import rrf
from hexlocal_core.search.sanitizer import to_match
from hexlocal_core.versions import try_parse_version

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


def _scope(package: str | None, include_deprecated: bool) -> tuple[str, tuple[Any, ...]]:
    """SQL conditions on `memories m`, as ' AND ...' text and its parameters."""
    conditions: list[str] = []
    params: list[Any] = []
    if not include_deprecated:
        conditions.append("m.deprecated = 0")
    if package is not None:
        conditions.append("m.package = ?")
        params.append(package)
    return "".join(f" AND {c}" for c in conditions), tuple(params)


def keyword_arm(
    conn: apsw.Connection, query: str, where: str, params: tuple[Any, ...]
) -> list[int]:
    match = to_match(query)
    if match is None:
        return []
    w = ", ".join(str(x) for x in BM25_WEIGHTS)
    sql = (
        f"SELECT m.id, bm25(memories_fts, {w}) AS score FROM memories_fts"
        " JOIN memories m ON m.id = memories_fts.rowid"
        f" WHERE memories_fts MATCH ?{where} ORDER BY score LIMIT ?"
    )
    return [int(r[0]) for r in conn.execute(sql, (match, *params, DEPTH))]


def vector_arm(
    conn: apsw.Connection, vector: Vectors | None, where: str, params: tuple[Any, ...]
) -> list[int]:
    if vector is None:
        return []
    # k-NN cannot filter, so ask for as many extra rows as the scope leaves out.
    excluded = int(
        scalar(conn, f"SELECT count(*) FROM memories m WHERE NOT (1 = 1{where})", params) or 0
    )
    near = [(i, similarity(d)) for i, d in records.knn(conn, vector, DEPTH + excluded)]
    if not near:
        return []
    marks = ",".join("?" * len(near))
    allowed = {
        int(r[0])
        for r in conn.execute(
            f"SELECT m.id FROM memories m WHERE m.id IN ({marks}){where}",
            (*(i for i, _ in near), *params),
        )
    }
    return [i for i, sim in near if i in allowed and sim >= MIN_SIMILARITY][:DEPTH]


def search(
    conn: apsw.Connection,
    query: str,
    vector: Vectors | None,
    *,
    limit: int,
    package: str | None,
    include_deprecated: bool,
    pins: Mapping[str, str],
) -> list[Memory]:
    where, params = _scope(package, include_deprecated)
    fused = rrf([keyword_arm(conn, query, where, params), vector_arm(conn, vector, where, params)])
    return hydrate(conn, fused[:limit], pins)


def history(conn: apsw.Connection, ids: Sequence[int]) -> dict[int, list[dict[str, Any]]]:
    """The curation log entries that touched each memory, oldest first."""
    out: dict[int, list[dict[str, Any]]] = {i: [] for i in ids}
    if not ids:
        return out
    marks = ",".join("?" * len(ids))
    for r in rows(
        conn,
        "SELECT memory_id, request_id, action, model, reason, at FROM curation_log"
        f" WHERE memory_id IN ({marks}) ORDER BY id",
        tuple(ids),
    ):
        out[r.pop("memory_id")].append(r)
    return out


def hydrate(conn: apsw.Connection, ids: Sequence[int], pins: Mapping[str, str]) -> list[Memory]:
    """Memory values for `ids`, in that order."""
    found = records.by_ids(conn, ids)
    logs = history(conn, ids)
    return [_memory(found[i], logs[i], pins) for i in ids if i in found]


def _memory(r: dict[str, Any], log_rows: list[dict[str, Any]], pins: Mapping[str, str]) -> Memory:
    return Memory(
        id=r["id"],
        text=r["text"],
        curated=bool(r["curated"]),
        created_at=r["created_at"],
        updated_at=r["updated_at"],
        package=r["package"],
        version=r["version"],
        tags=tuple(json.loads(r["tags"])),
        deprecated=bool(r["deprecated"]),
        stale=is_stale(r["package"], r["version"], pins),
        history=tuple(log_rows),
    )
