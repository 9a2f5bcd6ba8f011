"""The fitted artifacts search loads (search/fitted/) are data files, each beside a
provenance record saying how it was made, and the wheel ships them."""

from __future__ import annotations

import json
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest

from hexlocal_core.search import learned_rank, query_adapter
from hexlocal_core.search.query_shape import Shape
from tests.support.paths import REPO_ROOT
from tests.support.scripts import load_script

FITTED = REPO_ROOT / "hexlocal_core" / "search" / "fitted"
RECORD_KEYS = {"artifact", "script", "command", "query_sets", "queries", "model", "commit", "date"}


def artifacts() -> list[Path]:
    return sorted(p for p in FITTED.iterdir() if not p.name.endswith(".provenance.json"))


def test_the_engine_loads_its_artifacts_from_the_fitted_folder() -> None:
    loaded = {learned_rank.WEIGHTS_FILE, query_adapter.ERROR_ADAPTER}
    assert loaded == set(artifacts())


@pytest.mark.parametrize("artifact", artifacts(), ids=lambda p: p.name)
def test_each_artifact_has_a_provenance_record(artifact: Path) -> None:
    record = json.loads(artifact.with_name(f"{artifact.stem}.provenance.json").read_text())
    assert RECORD_KEYS <= set(record), RECORD_KEYS - set(record)
    assert record["artifact"] == artifact.name
    assert all(record[key] not in ("", None, []) for key in RECORD_KEYS)
    script = record["script"]
    assert (REPO_ROOT / script).is_file() and record["command"].startswith(f"python {script}")


def test_every_record_names_an_artifact_that_exists() -> None:
    records = sorted(FITTED.glob("*.provenance.json"))
    assert {json.loads(r.read_text())["artifact"] for r in records} == {a.name for a in artifacts()}


def test_the_wheel_ships_every_artifact() -> None:
    package_data = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["hexlocal_core.search"]
    for path in sorted(FITTED.iterdir()):  # the records too: they travel with the data
        name = path.relative_to(FITTED.parent).as_posix()
        assert any(fnmatch(name, pattern) for pattern in package_data), name
    checked = set(load_script("fresh_venv").PACKAGE_DATA)  # what the wheel smoke test looks for
    assert {a.relative_to(REPO_ROOT).as_posix() for a in artifacts()} == checked


def test_the_weights_are_the_files_and_cover_every_shape() -> None:
    data = json.loads(learned_rank.WEIGHTS_FILE.read_text())
    assert {s.value: dict(w) for s, w in learned_rank.WEIGHTS.items()} == data["shapes"]
    assert set(learned_rank.WEIGHTS) == set(Shape)


@pytest.mark.parametrize(
    "text",
    [None, "not json", '{"shapes": {"prose": {}}}', '{"shapes": {"prose": {"cos": "NaN"}}}'],
)
def test_weights_that_cannot_be_used_are_refused_naming_the_file(
    tmp_path: Path, text: str | None
) -> None:
    path = tmp_path / "learned_rank.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(ValueError, match="learned_rank.json"):
        learned_rank.load_weights(path)
