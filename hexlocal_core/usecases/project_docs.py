"""The project's own docs (README, docs/, guides/): indexed as their own source and
searched like a package, together with its own modules' docs (`ingest/project_code.py`).
Incremental by content hash: the pipeline embeds only chunk text it has never seen, so
editing one file re-embeds only that file's changed chunks."""

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
from hexlocal_core.ingest.pipeline import IngestRequest, ingest_items
from hexlocal_core.ingest.project_code import own_apps
from hexlocal_core.model import Notice, ResolvedMode, SearchMode, SearchResult, SourceKind
from hexlocal_core.model_guard import model_guard
from hexlocal_core.notice_codes import NoticeCode
from hexlocal_core.ports import Embedder
from hexlocal_core.search.cross_package import search_many
from hexlocal_core.search.engine import SearchEngine
from hexlocal_core.threads import in_worker
from hexlocal_core.usecases.chunk_diff import compare
from hexlocal_core.usecases.ingest import Ingestion
from hexlocal_core.usecases.local_sources import own_location


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


def project_request(project_root: Path, paths: Sequence[Path] | None) -> IngestRequest:
    scanned = scan_markdown(project_root, paths)
    return IngestRequest(
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
    model_guard(store, embedder)
    request = await in_worker(lambda: project_request(project_root, paths))
    stored = await in_worker(lambda: store.stored_hashes(PROJECT_PACKAGE))
    chunks = await in_worker(lambda: chunk_items(request.items).chunks)
    diff = compare(stored, [(c.item.ref, c.ordinal, c.content_hash) for c in chunks])
    counts = asdict(diff)
    if not request.items:
        # Every file is gone (or skipped): the project's docs leave the index entirely.
        await in_worker(lambda: store.delete_package(PROJECT_PACKAGE))
        return ProjectIndexReport(0, 0, embedded=0, skipped=dict(request.skipped or {}), **counts)
    report = await ingest_items(store, embedder, request, slice_size=slice_size)
    return ProjectIndexReport(
        files=report.items,
        chunks=report.chunks,
        embedded=report.embedded,
        skipped=dict(report.skipped),
        seconds=report.seconds,
        **counts,
    )


async def search_project_docs(
    engine: SearchEngine,
    store: DocsStore,
    ingestion: Ingestion,
    project_root: Path,
    query: str,
    *,
    limit: int,
    rerank_enabled: bool,
) -> SearchResult:
    """The project's markdown (when `index-docs` indexed it) and its own modules' docs
    (compiled in `_build`, indexed again whenever the beams change), searched together."""
    query = check_query(query)
    limit = check_limit(limit)
    notices: list[Notice] = []
    names = [PROJECT_PACKAGE] if store.package(PROJECT_PACKAGE) is not None else []
    for app in await in_worker(lambda: own_apps(project_root)):
        prepared = await ingestion.prepare(
            app.app, None, refresh=False, progress=None, searchable=True
        )
        notices.extend(n for n in prepared.notices if n.code != NoticeCode.SETTING_IGNORED)
        if prepared.waiting is None:
            names.append(app.app)
    if not names:
        notice = Notice(
            NoticeCode.PROJECT_DOCS_NOT_INDEXED,
            "Nothing of the project is indexed yet: compile it (`mix compile`) so its modules' "
            "docs are read from _build, and run `hexlocal index-docs` for README.md, docs/ "
            "and guides/ under PROJECT_ROOT.",
        )
        return SearchResult(package=PROJECT_PACKAGE, version=None, query=query, notices=(notice,))
    ran = ResolvedMode.of(SearchMode.RERANK, rerank_enabled=rerank_enabled)
    outcome = await search_many(engine, names, query, limit=limit, mode=ran.used, exact=True)
    return SearchResult(
        package=PROJECT_PACKAGE,
        version=PROJECT_VERSION,
        query=query,
        hits=tuple(own_location(hit) for hit in outcome.hits),
        notices=(*notices, *outcome.notices),
        version_source="project",
        timings_ms=outcome.timings_ms,
        mode=ran,
    )
