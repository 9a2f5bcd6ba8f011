"""store_choice: the SQLite file by default, PostgreSQL when DATABASE_URL names one, and a
missing driver said with its install hint."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hexlocal_core.config import Settings
from hexlocal_core.errors import StoreError
from hexlocal_core.store_choice import open_store


def test_without_a_database_url_the_index_is_the_sqlite_file(tmp_path: Path) -> None:
    settings = Settings(project_root=tmp_path, database_path=tmp_path / "index.db")
    store = open_store(settings)
    try:
        assert (tmp_path / "index.db").exists()
    finally:
        store.close()


def test_a_postgresql_url_without_its_driver_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "hexlocal_core.index.pg.store", None)  # import fails
    settings = Settings(
        project_root=tmp_path,
        database_path=tmp_path / "index.db",
        database_url="postgresql://u:secret@db/hexlocal",
    )
    with pytest.raises(StoreError, match=r"pip install 'hexlocal\[postgres\]'"):
        open_store(settings)
