"""list_packages and diagnostics: what the index holds, and the facts `doctor` shows."""

from __future__ import annotations

from pathlib import Path

from hexlocal_core.index.seam import DocsStore
from hexlocal_core.model import Diagnostics, IndexedPackage


def list_packages(store: DocsStore) -> list[IndexedPackage]:
    return store.packages()


def diagnostics(store: DocsStore, *, project_root: Path, warnings: tuple[str, ...]) -> Diagnostics:
    config = store.embedding_config()
    return Diagnostics(
        database_path=store.location,
        project_root=str(project_root),
        schema_version=store.schema_version,
        schema_known=store.schema_latest,
        engine=store.engine,
        packages=len(store.packages()),
        chunks=store.chunk_count(),
        embedding_model=config.model if config else None,
        embedding_dims=config.dims if config else None,
        settings_warnings=warnings,
    )
