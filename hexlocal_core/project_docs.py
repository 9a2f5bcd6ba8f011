"""The project's own docs (README, docs/, guides/): indexed as their own source and
searched like a package. Incremental by content hash: the pipeline embeds only chunk text
it has never seen, so editing one file re-embeds only that file's changed chunks."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attrs import asdict, frozen

from hexlocal_core.ingest.markdown_files import PROJECT_PACKAGE, PROJECT_VERSION, scan_markdown
from hexlocal_core.ingest.pipeline import IndexRequest, chunk_items, index_items
from hexlocal_core.maintenance import compare
from hexlocal_core.model import SearchResult, SourceKind

if TYPE_CHECKING:
    from hexlocal_core.service import Hexlocal


@frozen
class ProjectIndexReport:
    files: int
    chunks: int
    unchanged: int
    added: int
    removed: int
    changed: int
    embedded: int
    skipped: dict[str, int]
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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
    service: Hexlocal, paths: Sequence[Path] | None = None
) -> ProjectIndexReport:
    """Index (or re-index) the project's markdown; a deleted file's chunks disappear."""
    if service.embedder is None:
        from hexlocal_core.errors import ModelError

        raise ModelError("no embedding model is available; see `hexlocal models status`")
    request = await asyncio.to_thread(project_request, service.settings.project_root, paths)
    stored = service.store.stored_hashes(PROJECT_PACKAGE)
    chunks = await asyncio.to_thread(chunk_items, request.items)
    counts = compare(stored, [(c.item.ref, c.ordinal, c.content_hash) for c in chunks])
    if not request.items:
        # Every file is gone (or skipped): the project's docs leave the index entirely.
        await asyncio.to_thread(service.store.delete_package, PROJECT_PACKAGE)
        skipped = dict(request.skipped or {})
        return ProjectIndexReport(0, 0, embedded=0, skipped=skipped, seconds=0.0, **counts)
    report = await index_items(
        service.store, service.embedder, request, batch_size=service.settings.embed_batch_size
    )
    return ProjectIndexReport(
        files=report.items,
        chunks=report.chunks,
        embedded=report.embedded,
        skipped=dict(report.skipped),
        seconds=report.seconds,
        **counts,
    )


async def search_project_docs(service: Hexlocal, query: str, *, limit: int = 5) -> SearchResult:
    from hexlocal_core.model import Notice
    from hexlocal_core.service import check_limit, check_query

    query = check_query(query)
    limit = check_limit(limit)
    if service.store.package(PROJECT_PACKAGE) is None:
        notice = Notice(
            "project_docs_not_indexed",
            "The project's docs are not indexed yet; run `hexlocal index-docs` (README.md, docs/ "
            "and guides/ under PROJECT_ROOT by default).",
        )
        return SearchResult(package=PROJECT_PACKAGE, version=None, query=query, notices=(notice,))
    mode = "rerank" if service.settings.rerank_enabled else "rrf"
    outcome = await service.engine.search(
        PROJECT_PACKAGE, query, limit=limit, mode=mode, exact=False
    )
    return SearchResult(
        package=PROJECT_PACKAGE,
        version=PROJECT_VERSION,
        query=query,
        hits=outcome.hits,
        notices=outcome.notices,
        version_source="project",
        timings_ms=outcome.timings_ms,
    )
