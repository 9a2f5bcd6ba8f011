"""The project's own docs (README, docs/, guides/): indexed as their own source and
searched like a package. Incremental by content hash: the pipeline embeds only chunk text
it has never seen, so editing one file re-embeds only that file's changed chunks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from attrs import asdict, field, frozen

from hexlocal_core.bounds import check_limit, check_query
from hexlocal_core.chunk import chunk_items
from hexlocal_core.errors import ModelError
from hexlocal_core.index.seam import DocsStore
from hexlocal_core.ingest.markdown_files import PROJECT_PACKAGE, PROJECT_VERSION, scan_markdown
from hexlocal_core.ingest.pipeline import IndexRequest, in_worker, index_items
from hexlocal_core.ingest.pipeline import model_guard as guard
from hexlocal_core.model import Notice, SearchResult, SourceKind
from hexlocal_core.ports import Embedder
from hexlocal_core.search.engine import SearchEngine
from hexlocal_core.usecases.chunk_diff import compare


@frozen
class ProjectIndexReport:
    files: int
    chunks: int
    unchanged: int
    added: int
    removed: int
    changed: int
    embedded: int
    skipped: Mapping[str, int] = field(factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "skipped": dict(self.skipped)}


def project_request(project_root: Path, paths: Sequence[Path] | None) -> IndexRequest:
    scanned = scan_markdown(project_root, paths)
    return IndexRequest(
        package=PROJECT_PACKAGE,
        version=PROJECT_VERSION,
        source=SourceKind.PROJECT.value,
        items=scanned.items,
        meta={"paths": [str(p) for p in paths] if paths else None},
        skipped=dict(scanned.skipped),
    )


async def index_project_docs(
    store: DocsStore,
    embedder: Embedder | None,
    project_root: Path,
    paths: Sequence[Path] | None,
    *,
    slice_size: int,
) -> ProjectIndexReport:
    """Index (or re-index) the project's markdown; a deleted file's chunks disappear."""
    if embedder is None:
        raise ModelError("no embedding model is available; see `hexlocal models status`")
    guard(store, embedder)
    request = await in_worker(lambda: project_request(project_root, paths))
    stored = await in_worker(lambda: store.stored_hashes(PROJECT_PACKAGE))
    chunks = await in_worker(lambda: chunk_items(request.items).chunks)
    diff = compare(stored, [(c.item.ref, c.ordinal, c.content_hash) for c in chunks])
    counts = asdict(diff)
    if not request.items:
        # Every file is gone (or skipped): the project's docs leave the index entirely.
        await in_worker(lambda: store.delete_package(PROJECT_PACKAGE))
        return ProjectIndexReport(0, 0, embedded=0, skipped=dict(request.skipped or {}), **counts)
    report = await index_items(store, embedder, request, slice_size=slice_size)
    return ProjectIndexReport(
        files=report.items,
        chunks=report.chunks,
        embedded=report.embedded,
        skipped=dict(report.skipped),
        seconds=report.seconds,
        **counts,
    )


async def search_project_docs(
    engine: SearchEngine, store: DocsStore, query: str, *, limit: int, rerank_enabled: bool
) -> SearchResult:
    query = check_query(query)
    limit = check_limit(limit)
    if store.package(PROJECT_PACKAGE) is None:
        notice = Notice(
            "project_docs_not_indexed",
            "The project's docs are not indexed yet; run `hexlocal index-docs` (README.md, docs/ "
            "and guides/ under PROJECT_ROOT by default).",
        )
        return SearchResult(package=PROJECT_PACKAGE, version=None, query=query, notices=(notice,))
    mode = "rerank" if rerank_enabled else "rrf"
    outcome = await engine.search(PROJECT_PACKAGE, query, limit=limit, mode=mode, exact=False)
    return SearchResult(
        package=PROJECT_PACKAGE,
        version=PROJECT_VERSION,
        query=query,
        hits=outcome.hits,
        notices=outcome.notices,
        version_source="project",
        timings_ms=outcome.timings_ms,
    )
