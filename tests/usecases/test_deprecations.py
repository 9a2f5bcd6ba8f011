"""Hits of a deprecated function say so, with the replacement the docs name, in both faces.

Real SQLite and the real parser over the corpus's decimal 2.0.0 tarball (served by the
loopback fake hex); `Decimal.cmp/2` is deprecated there in favour of `compare/2`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from click.testing import CliRunner

from hexlocal_cli import common
from hexlocal_cli.main import cli
from hexlocal_core.service import Hexlocal, build
from hexlocal_mcp.formatting import deprecation, search_result
from tests.fakes.fake_hex import FakeHex
from tests.support.helpers import HashingEmbedder
from tests.support.hex_fixtures import client_for, settings_for

pytestmark = pytest.mark.integration

NOTE = "deprecated: Use compare/2 instead."


@pytest.mark.parametrize(
    ("message", "note"),
    [
        ("This function is deprecated. Use compare/2 instead.", NOTE),
        ("This callback is deprecated. Use Repo.transact/2.", "deprecated: Use Repo.transact/2."),
        ("deprecated", "deprecated"),  # only flagged by ExDoc's sidebar
        ("Use  the\nMapSet module.", "deprecated: Use the MapSet module."),
    ],
)
def test_deprecation_note(message: str, note: str) -> None:
    assert deprecation(message) == note


async def test_deprecated_hit_names_its_replacement_in_both_faces(
    fake_hex: FakeHex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for(fake_hex, tmp_path, ai_rerank_model="off")

    def make(s: object = settings, load_models: bool = True) -> Hexlocal:
        return build(
            settings,
            embedder=HashingEmbedder(),
            reranker=None,
            registry=client_for(settings),
            load_models=False,
        )

    async with make() as svc:
        result = await svc.get_docs("decimal", "Decimal.cmp/2", "2.0.0")
    (hit,) = [h for h in result.hits if h.ref.endswith("#cmp/2")]
    assert hit.deprecated == "This function is deprecated. Use compare/2 instead."
    text = search_result(result.to_dict())
    assert f"Decimal.cmp/2 (function, v2.0.0) - {NOTE}" in text

    for name, value in {
        "HEX_API_URL": fake_hex.api_url,
        "HEX_MIRROR": fake_hex.mirror_url,
        "PROJECT_ROOT": str(settings.project_root),
        "DATABASE_PATH": str(settings.database_path),
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(common, "build_service", make)
    args = ["get", "decimal", "Decimal.cmp/2", "--version", "2.0.0"]
    shown = await asyncio.to_thread(CliRunner().invoke, cli, args, prog_name="hexlocal")
    assert shown.exit_code == 0, shown.output
    assert NOTE in shown.output
