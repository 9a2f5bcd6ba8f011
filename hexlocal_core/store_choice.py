"""Which storage engine holds the index: PostgreSQL with pgvector when `DATABASE_URL` names
one (team mode), else the SQLite file of `DATABASE_PATH`.

The one place above `index/` that names an engine (tests/test_architecture.py holds that):
everything else, `service.build()` included, holds the `DocsStore` this returns. Apart from
the facade because it changes with the engines (a new one, a driver's install hint), not
with the use cases.
"""

from __future__ import annotations

from pathlib import Path

from hexlocal_core.config import Settings
from hexlocal_core.errors import StoreError
from hexlocal_core.index.seam import DocsStore


def open_store(settings: Settings) -> DocsStore:
    """PostgreSQL when `DATABASE_URL` names one (team mode), else the SQLite file."""
    if settings.database_url:
        try:
            from hexlocal_core.index.pg.store import PgStore
        except ImportError as exc:
            raise StoreError(
                f"DATABASE_URL names PostgreSQL but its driver is missing ({exc.name}); "
                "install it with: pip install 'hexlocal[postgres]'"
            ) from exc
        store: DocsStore = PgStore(settings.database_url, server_id=settings.server_id)
        return store
    from hexlocal_core.index.sqlite.store import Store

    return Store(Path(settings.database_path))
