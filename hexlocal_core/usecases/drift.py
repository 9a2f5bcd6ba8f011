"""`drift`: must I re-index after changing the chunker or the parsers?

Drift re-derives items and chunks with the current code, from the source each package
came from, and compares content hashes with what is stored; it computes no embeddings.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attrs import asdict, frozen

from hexlocal_core.chunk import CHUNKER_VERSION, chunk_items
from hexlocal_core.errors import HexlocalError, UserInputError
from hexlocal_core.index.seam import DocsStore
from hexlocal_core.ingest.ingestor import Ingestor
from hexlocal_core.ingest.pipeline import IngestRequest
from hexlocal_core.ingest.sources import beam_request
from hexlocal_core.model import IndexedPackage, ResolvedVersion, SourceKind, VersionSource
from hexlocal_core.threads import in_worker
from hexlocal_core.usecases.chunk_diff import ChunkDiff, compare
from hexlocal_core.usecases.project_docs import project_request


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


async def drift(
    store: DocsStore, ingestor: Ingestor, project_root: Path, names: Sequence[str] = ()
) -> list[DriftReport]:
    """Per indexed package (or those named): how its chunks would change if re-indexed now."""
    packages = store.packages()
    if names:
        known = {p.name for p in packages}
        missing = [n for n in names if n not in known]
        if missing:
            raise UserInputError(
                f"not indexed: {', '.join(missing)}; `hexlocal list` shows what is"
            )
        packages = [p for p in packages if p.name in names]
    return [await _drift_one(store, ingestor, project_root, pkg) for pkg in packages]


async def _rederive(
    store: DocsStore, ingestor: Ingestor, project_root: Path, pkg: IndexedPackage
) -> IngestRequest:
    """The package's items as the current code reads them from the source it came from."""
    meta = store.package_meta(pkg.name)
    if pkg.source == SourceKind.BEAM.value and meta.ebin:
        ebin = Path(meta.ebin)
        return await in_worker(lambda: beam_request(ebin, pkg.name, pkg.version))
    if pkg.source == SourceKind.PROJECT.value:
        paths = [Path(p) for p in meta.paths] if meta.paths else None
        return await in_worker(lambda: project_request(project_root, paths))
    resolved = ResolvedVersion(pkg.name, pkg.version, VersionSource.INDEXED)
    plan = await ingestor.plan(resolved, docs_html_url=meta.docs_html_url, ask_hex=False)
    return await ingestor.read(plan)


async def _drift_one(
    store: DocsStore, ingestor: Ingestor, project_root: Path, pkg: IndexedPackage
) -> DriftReport:
    stored = store.stored_hashes(pkg.name)
    try:
        request = await _rederive(store, ingestor, project_root, pkg)
    except (HexlocalError, OSError) as exc:
        # One unreachable source must not hide the verdicts of the others.
        return _report(pkg, ChunkDiff(0, 0, 0, 0), error=str(exc))
    chunks = await in_worker(lambda: chunk_items(request.items).chunks)
    diff = compare(stored, [(c.item.ref, c.ordinal, c.content_hash) for c in chunks])
    return _report(pkg, diff)


def _report(pkg: IndexedPackage, diff: ChunkDiff, error: str | None = None) -> DriftReport:
    return DriftReport(
        pkg.name,
        pkg.version,
        pkg.source,
        unchanged=diff.unchanged,
        added=diff.added,
        removed=diff.removed,
        changed=diff.changed,
        chunker_stored=pkg.chunker_version,
        chunker_current=CHUNKER_VERSION,
        error=error,
    )
