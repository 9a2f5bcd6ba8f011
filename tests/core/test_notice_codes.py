"""Notice codes come from one registry (`notice_codes.NoticeCode`): every code the core
returns is a member, each member says what it means, docs/notices.md is generated from
it, and the faces and docs name no code it does not hold."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from hexlocal_core.model import Notice
from hexlocal_core.notice_codes import NoticeCode
from tests.support.paths import REPO_ROOT
from tests.support.scripts import load_script

GEN = load_script("gen_notices_docs")


def test_every_member_says_what_it_means_and_values_are_unique() -> None:
    codes = list(GEN.codes())
    assert [c.name for c in codes] == [m.name for m in NoticeCode]
    assert [c.value for c in codes if not c.meaning] == []
    assert all(c.section for c in codes)
    assert len({m.value for m in NoticeCode}) == len(NoticeCode)


def test_a_member_without_a_docstring_is_seen() -> None:
    source = 'class NoticeCode:\n    # -- a --\n    A = "a"\n    """Means a."""\n    B = "b"\n'
    found = {c.value: (c.section, c.meaning) for c in GEN.codes(source)}
    assert found == {"a": ("a", "Means a."), "b": ("a", "")}


def test_docs_notices_md_is_up_to_date() -> None:
    current = (REPO_ROOT / "docs" / "notices.md").read_text(encoding="utf-8")
    assert current == GEN.render(), "run python scripts/gen_notices_docs.py"


def test_released_codes_keep_their_values() -> None:
    # Clients act on these; a renamed member must keep its value.
    assert NoticeCode.EMBEDDING_IN_PROGRESS == "embedding_in_progress"
    assert NoticeCode.VERSION_REPLACED.value == "version_replaced"
    assert Notice(NoticeCode.NO_RESULTS, "m").to_dict() == {"code": "no_results", "message": "m"}
    assert type(Notice(NoticeCode.NO_RESULTS, "m").to_dict()["code"]) is str


def _notice_codes_in_code() -> list[str]:
    """Where the core builds a Notice with a code that is not a NoticeCode member."""
    bad: list[str] = []
    for path in sorted((REPO_ROOT / "hexlocal_core").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Notice":
                first = node.args[0] if node.args else None
                if isinstance(first, ast.Constant | ast.JoinedStr):
                    bad.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}")
    return bad


def test_no_notice_is_built_from_a_literal_code() -> None:
    assert _notice_codes_in_code() == []


# How prose names a code: "the `not_found` notice", "notice embedding_in_progress",
# "NOTICE [suspicious_content]", "code": "no_changelog".
_NAMED = re.compile(
    r"`?\b([a-z]+(?:_[a-z]+)+)`? notices?\b|\bnotices? \(?`?([a-z]+(?:_[a-z]+)+)\b"
    r"|NOTICE \[([a-z]+(?:_[a-z]+)+)\]|\"code\": \"([a-z]+(?:_[a-z]+)+)\""
)


def _texts() -> list[Path]:
    docs = REPO_ROOT / "docs"
    return [
        REPO_ROOT / "README.md",
        *sorted(docs.glob("*.md")),
        *sorted((docs / "decisions").glob("*.md")),
        *sorted((REPO_ROOT / "examples").glob("*.md")),
        *sorted((REPO_ROOT / "hexlocal_mcp").rglob("*.py")),
        *sorted((REPO_ROOT / "hexlocal_cli").rglob("*.py")),
    ]


def test_the_faces_and_docs_name_only_registered_codes() -> None:
    known = {m.value for m in NoticeCode}
    named: dict[str, list[str]] = {}
    for path in _texts():
        for found in _NAMED.finditer(path.read_text(encoding="utf-8")):
            code = next(g for g in found.groups() if g)
            named.setdefault(code, []).append(str(path.relative_to(REPO_ROOT)))
    assert named, "the pattern finds the codes the docs name"
    assert {code: where for code, where in named.items() if code not in known} == {}


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("returns the `not_found` notice", "not_found"),
        ("(notice embedding_in_progress) while", "embedding_in_progress"),
        ("NOTICE [suspicious_content] x", "suspicious_content"),
        ('"code": "no_changelog"', "no_changelog"),
    ],
)
def test_the_naming_pattern_finds_a_code(text: str, code: str) -> None:
    found = _NAMED.search(text)
    assert found is not None and next(g for g in found.groups() if g) == code
