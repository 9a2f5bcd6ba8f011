"""docs/settings.md says what config.py does: every variable Settings reads is described,
with the default Settings takes, and nothing it no longer reads is described."""

from __future__ import annotations

from hexlocal_core.config import ENV_VARIABLES, Settings
from tests.support.paths import REPO_ROOT
from tests.support.scripts import load_script

GEN = load_script("gen_settings_docs")


def test_every_variable_settings_reads_is_described_and_nothing_else() -> None:
    read, _ = GEN.names_read()
    described = [doc.name for doc in GEN.all_docs()]
    assert sorted(read) == sorted(described)
    assert len(described) == len(set(described))


def test_every_variable_settings_reads_is_cleared_by_the_test_fixture() -> None:
    # ENV_VARIABLES is what tests/conftest.py clears so the host's settings never leak in.
    read, _ = GEN.names_read()
    assert sorted(read) == sorted(ENV_VARIABLES)


def test_every_described_field_exists() -> None:
    fields = {a.name for a in Settings.__attrs_attrs__}
    assert [d.field for d in GEN.all_docs() if d.field not in fields] == []


def test_the_model_download_variables_are_described() -> None:
    _, hub = GEN.names_read()
    assert sorted(hub) == sorted(doc.name for doc in GEN.HUB)


def test_a_default_shown_is_the_value_settings_takes_when_unset() -> None:
    text = GEN.render()
    assert "| `INGEST_TIMEOUT_MS` | `25000` |" in text
    assert "| `HEXLOCAL_ANSWER_WHILE_EMBEDDING` | `true` |" in text
    assert "| `AI_API_KEY` | unset |" in text
    unset = Settings.from_env({})
    assert f"| `AI_EMBED_MODEL` | `{unset.ai_embed_model}` |" in text


def test_docs_settings_md_is_up_to_date() -> None:
    current = (REPO_ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    assert current == GEN.render(), "run python scripts/gen_settings_docs.py"
