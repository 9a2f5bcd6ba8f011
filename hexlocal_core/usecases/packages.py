"""list_packages and diagnostics: what the index holds, and the facts `doctor` shows."""

from __future__ import annotations

from pathlib import Path

from hexlocal_core.index.store import Store
from hexlocal_core.model import Diagnostics, IndexedPackage


def list_packages(store: Store) -> list[IndexedPackage]:
    return store.packages()


def diagnostics(store: Store, *, project_root: Path, warnings: tuple[str, ...]) -> Diagnostics:
    import apsw

    from hexlocal_core.index.migrations import SCHEMA_VERSION

    config = store.embedding_config()
    return Diagnostics(
        database_path=str(store.path),
        project_root=str(project_root),
        schema_version=store.schema_version,
        schema_known=SCHEMA_VERSION,
        sqlite=apsw.sqlite_lib_version(),
        packages=len(store.packages()),
        chunks=store.chunk_count(),
        embedding_model=config.model if config else None,
        embedding_dims=config.dims if config else None,
        settings_warnings=warnings,
    )
