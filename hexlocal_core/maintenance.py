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
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw
import numpy as np
from attrs import asdict, frozen

from hexlocal_core.chunk import CHUNKER_VERSION
from hexlocal_core.errors import HexlocalError, ModelError, UserInputError
from hexlocal_core.index.db import atomic, rows, scalar
from hexlocal_core.index.store import CHUNK_VEC_TABLE, MEMORY_VEC_TABLE, utcnow
from hexlocal_core.ingest.pipeline import IndexRequest, chunk_items, provider_of
from hexlocal_core.ingest.sources import beam_request, load_items
from hexlocal_core.model import (
    IndexedPackage,
    ResolvedVersion,
    SourceKind,
    VersionSource,
    embedding_text,
)
from hexlocal_core.ports import Embedder

if TYPE_CHECKING:
    from hexlocal_core.service import Hexlocal

log = logging.getLogger("hexlocal.maintenance")

# (package, texts embedded so far, texts to embed in all): texts, not packages, because
# one large package (Elixir's own docs) can take minutes with the local model.
ReindexProgress = Callable[[str, int, int], None]
ChunkKey = tuple[str, int, str]  # (ref, ordinal, content hash)


# -- drift ----------------------------------------------------------------------------------


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
        if self.drifted:
            return (
                f"refresh recommended (`hexlocal ingest {self.package}@{self.version} --refresh`)"
            )
        if self.chunker_stored != self.chunker_current:
            return (
                f"no refresh needed (chunker v{self.chunker_current} cuts it exactly as "
                f"v{self.chunker_stored} did)"
            )
        return "no refresh needed"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "drifted": self.drifted, "verdict": self.verdict}


def _keyed(chunks: Sequence[ChunkKey]) -> dict[tuple[str, int, int], str]:
    """Chunks keyed by (ref, ordinal, occurrence).

    Refs are not unique: a changelog has one `#bug-fixes` section per release, so the
    n-th chunk with the same (ref, ordinal) is matched with the n-th one on the other side.
    """
    seen: Counter[tuple[str, int]] = Counter()
    out: dict[tuple[str, int, int], str] = {}
    for ref, ordinal, digest in chunks:
        out[(ref, ordinal, seen[(ref, ordinal)])] = digest
        seen[(ref, ordinal)] += 1
    return out


def compare(stored: Sequence[ChunkKey], current: Sequence[ChunkKey]) -> dict[str, int]:
    """Counts of unchanged / added / removed / changed chunks, each chunk counted once."""
    old = _keyed(stored)
    new = _keyed(current)
    both = old.keys() & new.keys()
    changed = sum(1 for k in both if old[k] != new[k])
    return {
        "unchanged": len(both) - changed,
        "added": len(new.keys() - old.keys()),
        "removed": len(old.keys() - new.keys()),
        "changed": changed,
    }


async def _rederive(service: Hexlocal, pkg: IndexedPackage) -> IndexRequest:
    """The package's items as the current code reads them from the source it came from."""
    meta = service.store.package_meta(pkg.name)
    if pkg.source == SourceKind.BEAM.value and meta.get("ebin"):
        return await asyncio.to_thread(beam_request, Path(str(meta["ebin"])), pkg.name, pkg.version)
    if pkg.source == SourceKind.PROJECT.value:
        from hexlocal_core.project_docs import project_request

        paths = [Path(p) for p in meta["paths"]] if meta.get("paths") else None
        return await asyncio.to_thread(project_request, service.settings.project_root, paths)
    # The docs URL is a column, not part of `meta`; it only shapes links, never chunk text.
    docs_url = scalar(
        service.store.conn, "SELECT docs_html_url FROM packages WHERE name = ?", (pkg.name,)
    )
    resolved = ResolvedVersion(pkg.name, pkg.version, VersionSource.INDEXED)
    return await load_items(
        service.registry,
        resolved,
        project_root=service.settings.project_root,
        max_bytes=service.settings.max_docs_bytes,
        docs_html_url=docs_url or None,
        elixir_home=service.settings.elixir_home,
    )


async def drift(service: Hexlocal, names: Sequence[str] = ()) -> list[DriftReport]:
    """Per indexed package (or those named): how its chunks would change if re-indexed now."""
    packages = service.store.packages()
    if names:
        known = {p.name for p in packages}
        missing = [n for n in names if n not in known]
        if missing:
            raise UserInputError(
                f"not indexed: {', '.join(missing)}; `hexlocal list` shows what is"
            )
        packages = [p for p in packages if p.name in names]
    return [await _drift_one(service, pkg) for pkg in packages]


async def _drift_one(service: Hexlocal, pkg: IndexedPackage) -> DriftReport:
    stored = service.store.stored_hashes(pkg.name)
    try:
        request = await _rederive(service, pkg)
    except (HexlocalError, OSError) as exc:
        # One unreachable source must not hide the verdicts of the others.
        return DriftReport(
            pkg.name,
            pkg.version,
            pkg.source,
            unchanged=0,
            added=0,
            removed=0,
            changed=0,
            chunker_stored=pkg.chunker_version,
            chunker_current=CHUNKER_VERSION,
            error=str(exc),
        )
    chunks = await asyncio.to_thread(chunk_items, request.items)
    counts = compare(stored, [(c.item.ref, c.ordinal, c.content_hash) for c in chunks])
    return DriftReport(
        pkg.name,
        pkg.version,
        pkg.source,
        unchanged=counts["unchanged"],
        added=counts["added"],
        removed=counts["removed"],
        changed=counts["changed"],
        chunker_stored=pkg.chunker_version,
        chunker_current=CHUNKER_VERSION,
    )


# -- reindex --------------------------------------------------------------------------------


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
    embedded: int = 0  # texts embedded by this run (the rest came from the cache)
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


def _uncached(service: Hexlocal, model: str, texts: list[tuple[str, str]]) -> dict[str, str]:
    """hash -> text of the texts with no vector under `model` yet (each text once)."""
    cached = service.store.cached_vectors(model, [h for h, _ in texts])
    return {h: t for h, t in texts if h not in cached}


def _memory_texts(service: Hexlocal) -> list[tuple[int, str]]:
    found = service.store.conn.execute("SELECT id, text FROM memories ORDER BY id")
    return [(int(r[0]), str(r[1])) for r in found]


def _require_embedder(service: Hexlocal) -> Embedder:
    if service.embedder is None:
        raise ModelError("no embedding model is available; see `hexlocal models status`")
    return service.embedder


async def plan_reindex(service: Hexlocal) -> ReindexPlan:
    """What a reindex would do; reads only."""
    model = _require_embedder(service).model_id
    config = service.store.embedding_config()
    packages = service.store.packages()
    texts = [t for p in packages for t in _embed_texts(service, p.name)]
    todo = _uncached(service, model, texts)
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
    progress: ReindexProgress | None = None,
) -> ReindexReport:
    """Re-embed every package under the configured model; switch only when all are done.

    A failure is a value: the report names the packages still to do, the index stays
    wholly on the old model, and a re-run embeds only what the cache lacks.
    """
    plan = await plan_reindex(service)
    if dry_run:
        return ReindexReport(plan, (), plan.packages, switched=False)
    embedder = _require_embedder(service)
    counter = _Counter(plan.texts_to_embed, progress)
    done: list[str] = []
    for index, name in enumerate(plan.packages):
        try:
            await _embed_package_into_cache(service, embedder, name, counter)
        except Exception as exc:  # noqa: BLE001 - any failure: report exactly what remains
            log.warning("reindex of %s failed: %s", name, exc)
            remaining = plan.packages[index:]
            return ReindexReport(plan, tuple(done), remaining, False, counter.done, str(exc))
        done.append(name)
    try:
        memory_vectors = await _memory_vectors(service, embedder, counter)
        counter.finish()  # everything is embedded: what remains is the switch
        dims = embedder.dims
        await asyncio.to_thread(
            _switch, service, embedder.model_id, provider_of(embedder), dims, memory_vectors
        )
    except Exception as exc:  # noqa: BLE001 - the switch rolled back; the cache is kept
        log.warning("reindex switch failed: %s", exc)
        return ReindexReport(plan, tuple(done), (), False, counter.done, str(exc))
    return ReindexReport(plan, tuple(done), (), True, counter.done)


class _Counter:
    """Counts embedded texts and forwards them to the progress callback."""

    def __init__(self, total: int, progress: ReindexProgress | None) -> None:
        self.total = total
        self.done = 0
        self._progress = progress

    def add(self, package: str, n: int) -> None:
        self.done += n
        if self._progress is not None:
            self._progress(package, self.done, self.total)

    def finish(self) -> None:
        if self._progress is not None:
            self._progress("", self.total, self.total)


async def _embed_package_into_cache(
    service: Hexlocal, embedder: Embedder, name: str, counter: _Counter
) -> None:
    """All of a package's vectors under the new model land in the cache in one transaction."""
    model = embedder.model_id
    todo = _uncached(service, model, _embed_texts(service, name))
    counter.add(name, 0)
    if not todo:
        return
    hashes = list(todo)
    step = service.settings.embed_batch_size
    blobs: list[bytes] = []
    for start in range(0, len(hashes), step):
        part = hashes[start : start + step]
        vectors = await embedder.embed([todo[h] for h in part])
        blobs.extend(np.asarray(v, dtype=np.float32).tobytes() for v in vectors)
        counter.add(name, len(part))

    def write() -> None:
        with atomic(service.store.conn) as conn:
            for h, blob in zip(hashes, blobs, strict=True):
                conn.execute(
                    "INSERT OR REPLACE INTO embed_cache(model, text_hash, dims, vector)"
                    " VALUES (?,?,?,?)",
                    (model, h, len(blob) // 4, blob),
                )

    await asyncio.to_thread(write)


async def _memory_vectors(
    service: Hexlocal, embedder: Embedder, counter: _Counter
) -> dict[int, bytes]:
    """Memories are few and have no cache: they are embedded right before the switch."""
    memories = _memory_texts(service)
    if not memories:
        return {}
    vectors = await embedder.embed([t for _, t in memories])
    counter.add("memories", len(memories))
    return {
        mid: np.asarray(v, dtype=np.float32).tobytes()
        for (mid, _), v in zip(memories, vectors, strict=True)
    }


def _switch(
    service: Hexlocal, model: str, provider: str, dims: int, memory_vectors: dict[int, bytes]
) -> None:
    """One transaction: new vector tables filled from the cache, new model recorded."""
    store = service.store
    with atomic(store.conn) as conn:
        # Checked inside the write lock: another process may have ingested meanwhile.
        missing = scalar(
            conn,
            "SELECT count(*) FROM chunks c LEFT JOIN embed_cache e ON e.model = ?"
            " AND e.text_hash = c.embed_hash WHERE e.text_hash IS NULL",
            (model,),
        )
        if missing:
            raise ModelError(
                f"{missing} chunks have no vector under {model} (a package was indexed "
                "meanwhile); nothing was switched. Run `hexlocal reindex` again."
            )
        dims = _dims_of(conn, model, memory_vectors) or dims
        if not dims:
            # Nothing to embed and a model that learns its dimension on first use: forget
            # the old model, and let the next ingest record the new one.
            conn.execute(f"DROP TABLE IF EXISTS {CHUNK_VEC_TABLE}")
            conn.execute(f"DROP TABLE IF EXISTS {MEMORY_VEC_TABLE}")
            conn.execute("DELETE FROM embedding_config")
            return
        store.switch_embedding(conn, model, dims, provider)
        conn.execute(
            f"INSERT INTO {CHUNK_VEC_TABLE}(rowid, embedding, package, has_example)"
            " SELECT c.id, e.vector, c.package, c.has_example FROM chunks c"
            " JOIN embed_cache e ON e.model = ? AND e.text_hash = c.embed_hash",
            (model,),
        )
        for mid, blob in memory_vectors.items():
            conn.execute(
                f"INSERT INTO {MEMORY_VEC_TABLE}(rowid, embedding) VALUES (?, ?)", (mid, blob)
            )
        conn.execute("UPDATE packages SET embed_model = ?", (model,))
        conn.execute("UPDATE memories SET embed_model = ?", (model,))
    log.info("index switched to %s at %s", model, utcnow())


def _dims_of(conn: apsw.Connection, model: str, memory_vectors: dict[int, bytes]) -> int:
    """The dimension the vectors really have (an API embedder learns its own on first use)."""
    found = scalar(conn, "SELECT dims FROM embed_cache WHERE model = ? LIMIT 1", (model,))
    if found:
        return int(found)
    for blob in memory_vectors.values():
        return len(blob) // 4
    return 0
