"""The degradation ladder is no more the engine's than the answers are: through the facade,
the same searches on SQLite and on PostgreSQL give the same hits and the same notices when
the vector arm is lost (another model's index, no embedder) and when nothing matches."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hexlocal_core.model import SearchResult
from hexlocal_core.service import build
from tests.fakes.fake_hex import FakeHex, client_for, settings_for
from tests.support.helpers import HashingEmbedder

pytestmark = pytest.mark.integration


class OtherModel(HashingEmbedder):
    @property
    def model_id(self) -> str:
        return "test:another-model"


def _seen(result: SearchResult) -> tuple[list[str], list[str]]:
    return [h.ref for h in result.hits], [n.code for n in result.notices]


async def _ladder(fake_hex: FakeHex, tmp_path: Path, url: str) -> dict[str, Any]:
    settings = settings_for(fake_hex, tmp_path, database_url=url, ai_rerank_model="off")
    seen: dict[str, Any] = {}
    for name, embedder in (
        ("indexing", HashingEmbedder()),
        ("other", OtherModel()),
        ("none", None),
    ):
        async with client_for(settings) as registry:
            service = build(settings, embedder=embedder, registry=registry, load_models=False)
            async with service:
                found = await service.search_docs("jason", "decode keys to atoms", "1.4.4")
                nothing = await service.search_docs("jason", "zzqx vvwy", "1.4.4", mode="fts")
                seen[name] = (_seen(found), _seen(nothing))
    return seen


async def test_the_same_notices_on_both_engines(
    fake_hex: FakeHex, tmp_path: Path, pg_url: str
) -> None:
    sqlite = await _ladder(fake_hex, tmp_path / "sqlite", "")
    postgres = await _ladder(fake_hex, tmp_path / "pg", pg_url)
    (hits, codes), (none_hits, none_codes) = sqlite["indexing"]
    assert hits and none_hits == [] and "no_results" in none_codes
    assert sqlite["other"][0][1] != codes and sqlite["none"][0][1] != codes  # arms lost
    assert postgres == sqlite, (sqlite, postgres)
