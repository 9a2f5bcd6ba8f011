"""The decision records and the lab journal hold together: the index lists every record
under its own title, each record has the sections a reader looks for, a superseded record
names one that exists, and every `docs/decisions/` or `docs/lab/` file they cite exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

DECISIONS = REPO_ROOT / "docs" / "decisions"
LAB = REPO_ROOT / "docs" / "lab"
RECORDS = sorted(DECISIONS.glob("[0-9][0-9][0-9][0-9]-*.md"))
_ROW = re.compile(
    r"^\| \[(\d{4})\]\((\d{4}-[\w-]+\.md)\) \| (.+?) \| (in force|superseded) \|", re.M
)
_CITED = re.compile(r"docs/(?:decisions|lab)/[\w.-]+\.md")


def test_the_index_lists_every_record_under_its_title() -> None:
    rows = {m[2]: (m[3], m[4]) for m in _ROW.finditer((DECISIONS / "README.md").read_text())}
    assert sorted(rows) == [p.name for p in RECORDS]
    for path in RECORDS:
        heading = path.read_text(encoding="utf-8").splitlines()[0]
        title, status = rows[path.name]
        assert heading == f"# {path.name[:4]}. {title}"
        assert status in _status(path)


def _status(path: Path) -> str:
    found = re.search(r"^- \*\*Status:\*\* (.+)$", path.read_text(encoding="utf-8"), re.M)
    assert found, f"{path.name} has no Status line"
    return found.group(1)


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.name)
def test_a_record_has_context_decision_numbers_and_its_successor(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    for section in ("## Context", "## Decision", "## The numbers that decided it"):
        assert f"\n{section}\n" in text, f"{path.name} lacks {section}"
    successor = re.search(r"^- \*\*Superseded by:\*\* (.+)$", text, re.M)
    assert successor is not None
    if _status(path).startswith("superseded"):
        named = re.search(r"`(\d{4}-[\w-]+\.md)`", successor.group(1))
        assert named and (DECISIONS / named.group(1)).is_file()
    else:
        assert successor.group(1) == "nothing"


def test_every_cited_record_and_journal_file_exists() -> None:
    sources = [*DECISIONS.glob("*.md"), *LAB.glob("*.md"), REPO_ROOT / "eval" / "README.md"]
    cited = {m for path in sources for m in _CITED.findall(path.read_text(encoding="utf-8"))}
    assert cited, "nothing cited: the pattern is broken"
    assert sorted(c for c in cited if not (REPO_ROOT / c).is_file()) == []


def test_the_journal_index_lists_every_journal_file() -> None:
    index = (LAB / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `([\w-]+\.md)` \|", index, re.M))
    assert listed == {p.name for p in LAB.glob("*.md")} - {"README.md"}
