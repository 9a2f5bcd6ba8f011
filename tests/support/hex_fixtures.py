"""Pytest plugin: a fake Hex on loopback, Settings pointing at it, a HexClient for it.

Registered as a plugin (`pytest_plugins = ["tests.support.hex_fixtures"]`), it provides:

    fake_hex       a started FakeHex (api_url, mirror_url, requests, fail(), reset())
    hex_settings   Settings with HEX_API_URL/HEX_MIRROR at the fake, PROJECT_ROOT and
                   DATABASE_PATH under tmp, and a short HTTP timeout
    hex_client     a HexClient on those settings with millisecond backoff, closed after

and re-exports the helpers `settings_for(fake, tmp_path, **overrides)` and
`client_for(settings, **options)` (defined beside the fake so test modules can import
them without importing this plugin early).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hexlocal_core.adapters.hex import HexClient
from hexlocal_core.config import Settings
from tests.fakes.fake_hex import FakeHex, client_for, settings_for

__all__ = ["client_for", "fake_hex", "hex_client", "hex_settings", "settings_for"]


@pytest.fixture
async def fake_hex(corpus: Path) -> AsyncIterator[FakeHex]:
    async with FakeHex(corpus=corpus) as fake:
        yield fake


@pytest.fixture
def hex_settings(fake_hex: FakeHex, tmp_path: Path) -> Settings:
    return settings_for(fake_hex, tmp_path)


@pytest.fixture
async def hex_client(hex_settings: Settings) -> AsyncIterator[HexClient]:
    async with client_for(hex_settings) as client:
        yield client
