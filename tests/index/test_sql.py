"""The SQL both engines share: how each engine's dialect spells a statement written once."""

from __future__ import annotations

import ast

import pytest

from hexlocal_core.index.sql import Dialect
from hexlocal_core.index.sqlite.db import DIALECT as SQLITE
from tests.support.paths import REPO_ROOT

pytest.importorskip("psycopg", reason="the PostgreSQL dialect lives beside its driver")
from hexlocal_core.index.pg.db import DIALECT as POSTGRES  # noqa: E402

SHARED = sorted((REPO_ROOT / "hexlocal_core" / "index").glob("*sql.py"))


@pytest.mark.parametrize(
    ("dialect", "spelt"),
    [
        (SQLITE, "SELECT id FROM chunks WHERE package = ? AND title = ?"),
        (POSTGRES, "SELECT id FROM chunks WHERE package = %s AND title = %s"),
    ],
)
def test_a_statement_is_spelt_for_the_engines_driver(dialect: Dialect, spelt: str) -> None:
    assert dialect.sql("SELECT id FROM chunks WHERE package = ? AND title = ?") == spelt


@pytest.mark.parametrize(
    ("dialect", "one_of", "none_of"),
    [
        (
            SQLITE,
            ("doc_type IN (?,?)", ["type", "callback"]),
            ("doc_type NOT IN (?,?)", ["type", "callback"]),
        ),
        (
            POSTGRES,
            ("doc_type = ANY(?::text[])", [["type", "callback"]]),
            ("doc_type <> ALL(?::text[])", [["type", "callback"]]),
        ),
    ],
)
def test_a_list_is_a_mark_per_value_or_one_array(
    dialect: Dialect, one_of: tuple[str, list[object]], none_of: tuple[str, list[object]]
) -> None:
    assert dialect.one_of("doc_type", ("type", "callback"), "text") == one_of
    assert dialect.none_of("doc_type", ("type", "callback"), "text") == none_of


@pytest.mark.parametrize(("dialect", "unlimited"), [(SQLITE, -1), (POSTGRES, None)])
def test_a_negative_limit_is_none(dialect: Dialect, unlimited: int | None) -> None:
    assert dialect.limit(7) == 7
    assert dialect.limit(0) == 0
    assert dialect.limit(-1) == unlimited


def test_shared_statements_hold_no_percent_sign() -> None:
    # psycopg reads `%` as the start of a placeholder, and `Dialect.sql` turns every `?`
    # into one: a shared statement must hold neither a `%` nor a `?` that is not a mark.
    assert len(SHARED) >= 5
    found = [
        f"{path.name}:{node.lineno}"
        for path in SHARED
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "%" in node.value
    ]
    assert found == []
