"""Maintenance: `drift` (must I re-index after changing the chunker?) and `reindex`
(re-embed everything under the configured model).

Drift re-derives items and chunks with the current code and compares content hashes with
what is stored; it computes no embeddings. Reindex embeds each package into the vector
cache in its own transaction, then switches the whole index in one final transaction, so
an interruption leaves the index fully on the old model and a re-run resumes from cache.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from attrs import asdict, frozen

from hexlocal_core.chunk import CHUNKER_VERSION
from hexlocal_core.errors import ModelError, UserInputError
from hexlocal_core.index.db import atomic, rows
from hexlocal_core.index.store import CHUNK_VEC_TABLE, MEMORY_VEC_TABLE, utcnow
from hexlocal_core.ingest.pipeline import IndexRequest, chunk_items, embed_with_cache, provider_of
from hexlocal_core.ingest.sources import beam_request, load_items
from hexlocal_core.model import (
    IndexedPackage,
    ResolvedVersion,
    SourceKind,
    VersionSource,
    embedding_text,
)

if TYPE_CHECKING:
    from hexlocal_core.service import Hexlocal

log = logging.getLogger("hexlocal.maintenance")


@frozen
class DriftReport:
    package: str
    version: str
    source: str
    unchanged: int
    added: int
    removed: int
    changed: int
    chunker_stored: int
    chunker_current: int
    error: str | None = None

    @property
    def drifted(self) -> bool:
        return bool(self.error or self.added or self.removed or self.changed)

    @property
    def verdict(self) -> str:
        if self.error:
            return f"could not check: {self.error}"
        if not self.drifted:
            return "no refresh needed"
        return (
            f"refresh recommended (`hexlocal ingest {self.package}@{self.version} --refresh`)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "drifted": self.drifted, "verdict": self.verdict}


def compare(stored: Sequence[tuple[str, int, str]], current: Sequence[tuple[str, int, str]]) -> dict[str, int]:
    """Counts of unchanged / added / removed / changed chunks, keyed by (ref, ordinal)."""
    old = {(ref, n): h for ref, n, h in stored}
    new = {(ref, n): h for ref, n, h in current}
    both = old.keys() & new.keys()
    changed = sum(1 for k in both if old[k] != new[k])
    return {
        "unchanged": len(both) - changed,
        "added": len(new.keys() - old.keys()),
        "removed": len(old.keys() - new.keys()),
        "changed": changed,
    }


async def _rederive(service: Hexlocal, pkg: IndexedPackage) -> IndexRequest:
    meta = service.store.package_meta(pkg.name)
    if pkg.source == SourceKind.BEAM.value and meta.get("ebin"):
        return await asyncio.to_thread(beam_request, Path(str(meta["ebin"])), pkg.name, pkg.version)
    if pkg.source == SourceKind.PROJECT.value:
        from hexlocal_core.project_docs import project_request

        return await asyncio.to_thread(project_request, service.settings.project_root, None)
    resolved = ResolvedVersion(pkg.name, pkg.version, VersionSource.INDEXED)
    return await load_items(
        service.registry,
        resolved,
        project_root=service.settings.project_root,
        max_bytes=service.settings.max_docs_bytes,
        docs_html_url=meta.get("docs_html_url") or None,
        elixir_home=service.settings.elixir_home,
    )


async def drift(service: Hexlocal, names: Sequence[str] = ()) -> list[DriftReport]:
    """Per indexed package (or those named): how its chunks would change if re-indexed now."""
    packages = service.store.packages()
    if names:
        known = {p.name for p in packages}
        missing = [n for n in names if n not in known]
        if missing:
            raise UserInputError(f"not indexed: {', '.join(missing)}; `hexlocal list` shows what is")
        packages = [p for p in packages if p.name in names]
    reports = []
    for pkg in packages:
        stored = service.store.stored_hashes(pkg.name)
        try:
            request = await _rederive(service, pkg)
        except Exception as exc:  # noqa: BLE001 - one unreachable package must not stop the rest
            reports.append(DriftReport(pkg.name, pkg.version, pkg.source, 0, 0, 0, 0,
                                       pkg.chunker_version, CHUNKER_VERSION, error=str(exc)))
            continue
        chunks = await asyncio.to_thread(chunk_items, request.items)
        current = [(c.item.ref, c.ordinal, c.content_hash) for c in chunks]
        counts = compare(stored, current)
        reports.append(DriftReport(pkg.name, pkg.version, pkg.source, chunker_stored=pkg.chunker_version,
                                   chunker_current=CHUNKER_VERSION, **counts))
    return reports


@frozen
class ReindexPlan:
    from_model: str | None
    to_model: str
    packages: tuple[str, ...]
    chunks: int
    memories: int
    texts_to_embed: int  # after the cache
    estimated_tokens: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@frozen
class ReindexReport:
    plan: ReindexPlan
    done: tuple[str, ...]
    remaining: tuple[str, ...]
    switched: bool
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "plan": self.plan.to_dict()}


def _embed_texts(service: Hexlocal, package: str) -> list[tuple[str, str]]:
    """(embed_hash, text embedded) for a package's chunks, rebuilt from stored rows."""
    sql = "SELECT title, signature, content, embed_hash FROM chunks WHERE package = ? ORDER BY id"
    return [
        (r["embed_hash"], embedding_text(r["title"], r["signature"], r["content"]))
        for r in rows(service.store.conn, sql, (package,))
    ]


def _memory_texts(service: Hexlocal) -> list[tuple[int, str]]:
    return [(int(r[0]), str(r[1])) for r in service.store.conn.execute("SELECT id, text FROM memories")]


async def plan_reindex(service: Hexlocal) -> ReindexPlan:
    if service.embedder is None:
        raise ModelError("no embedding model is available; see `hexlocal models status`")
    model = service.embedder.model_id
    config = service.store.embedding_config()
    packages = service.store.packages()
    texts = [t for p in packages for t in _embed_texts(service, p.name)]
    cached = service.store.cached_vectors(model, [h for h, _ in texts])
    todo = {h: t for h, t in texts if h not in cached}
    memories = _memory_texts(service)
    chars = sum(len(t) for t in todo.values()) + sum(len(t) for _, t in memories)
    return ReindexPlan(
        from_model=config.model if config else None,
        to_model=model,
        packages=tuple(p.name for p in packages),
        chunks=len(texts),
        memories=len(memories),
        texts_to_embed=len(todo) + len(memories),
        estimated_tokens=chars // 4,  # ~4 characters per word piece for English prose
    )


async def reindex(
    service: Hexlocal,
    *,
    dry_run: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> ReindexReport:
    """Re-embed every package under the configured model; switch only when all are done."""
    plan = await plan_reindex(service)
    if dry_run:
        return ReindexReport(plan, (), plan.packages, switched=False)
    assert service.embedder is not None
    embedder = service.embedder
    done: list[str] = []
    for index, name in enumerate(plan.packages):
        if progress:
            progress(name, index, len(plan.packages))
        try:
            await _embed_package_into_cache(service, name)
        except Exception as exc:  # noqa: BLE001 - report exactly which packages remain
            log.warning("reindex of %s failed: %s", name, exc)
            return ReindexReport(plan, tuple(done), plan.packages[index:], switched=False, error=str(exc))
        done.append(name)
    memory_vectors = await _memory_vectors(service)
    await asyncio.to_thread(_switch, service, embedder.model_id, provider_of(embedder), memory_vectors)
    if progress:
        progress("", len(plan.packages), len(plan.packages))
    return ReindexReport(plan, tuple(done), (), switched=True)


async def _embed_package_into_cache(service: Hexlocal, name: str) -> None:
    """All of a package's vectors under the new model land in the cache in one transaction."""
    assert service.embedder is not None
    texts = _embed_texts(service, name)
    model = service.embedder.model_id
    cached = service.store.cached_vectors(model, [h for h, _ in texts])
    todo = {h: t for h, t in texts if h not in cached}
    if not todo:
        return
    hashes = list(todo)
    vectors = await service.embedder.embed([todo[h] for h in hashes])

    def write() -> None:
        with atomic(service.store.conn) as conn:
            for h, v in zip(hashes, vectors, strict=True):
                blob = np.asarray(v, dtype=np.float32).tobytes()
                conn.execute(
                    "INSERT OR REPLACE INTO embed_cache(model, text_hash, dims, vector) VALUES (?,?,?,?)",
                    (model, h, len(blob) // 4, blob),
                )

    await asyncio.to_thread(write)


async def _memory_vectors(service: Hexlocal) -> dict[int, bytes]:
    assert service.embedder is not None
    memories = _memory_texts(service)
    if not memories:
        return {}
    vectors = await service.embedder.embed([t for _, t in memories])
    return {mid: np.asarray(v, dtype=np.float32).tobytes() for (mid, _), v in zip(memories, vectors, strict=True)}


def _switch(service: Hexlocal, model: str, provider: str, memory_vectors: dict[int, bytes]) -> None:
    """One transaction: new vector tables filled from the cache, new model recorded."""
    store = service.store
    conn = store.conn
    with atomic(conn):
        dims = _dims_of(conn, model, service.embedder.dims if service.embedder else 0)
        store.switch_embedding(conn, model, dims, provider)
        conn.execute(
            f"INSERT INTO {CHUNK_VEC_TABLE}(rowid, embedding, package, has_example)"
            " SELECT c.id, e.vector, c.package, c.has_example FROM chunks c"
            " JOIN embed_cache e ON e.model = ? AND e.text_hash = c.embed_hash",
            (model,),
        )
        for mid, blob in memory_vectors.items():
            conn.execute(f"INSERT INTO {MEMORY_VEC_TABLE}(rowid, embedding) VALUES (?, ?)", (mid, blob))
        conn.execute("UPDATE packages SET embed_model = ?", (model,))
        conn.execute("UPDATE memories SET embed_model = ?", (model,))
        missing = conn.execute(
            "SELECT count(*) FROM chunks c LEFT JOIN embed_cache e ON e.model = ? AND e.text_hash ="
            " c.embed_hash WHERE e.text_hash IS NULL",
            (model,),
        ).fetchall()[0][0]
        if missing:
            raise ModelError(f"{missing} chunks have no vector under {model}; nothing was switched")
    log.info("index switched to %s at %s", model, utcnow())


def _dims_of(conn: Any, model: str, fallback: int) -> int:
    for (dims,) in conn.execute("SELECT dims FROM embed_cache WHERE model = ? LIMIT 1", (model,)):
        return int(dims)
    return fallback
