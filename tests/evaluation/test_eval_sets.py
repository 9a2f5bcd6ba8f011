"""The query sets themselves: every expectation names items the tarball really has.

Checked twice, independently: against ExDoc's own search index in the tarball (the refs
as published) and against the items hexlocal's parser produces from it (what gets
indexed, so an expectation the parser would drop shows up here rather than as BROKEN in
an evaluation run). The bundled sets are also held out: they share no package with the
shared dev set the search was tuned on. `heldout_agent.jsonl` holds the three kinds of
question agents ask most (task, error, symbol), in roughly equal thirds.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from hexlocal_core.evaluation import EvalQuery, load_queries, ref_matches
from tests.support.eval_docs import assert_pasted_output, hex_items, published_refs
from tests.support.paths import REPO_ROOT, SHARED

BUNDLED = REPO_ROOT / "eval" / "queries.jsonl"
AGENT = REPO_ROOT / "eval" / "heldout_agent.jsonl"
CONFIRM = REPO_ROOT / "eval" / "confirm_tasks.jsonl"
CONFIRM_ERRORS = REPO_ROOT / "eval" / "confirm_errors.jsonl"
HELDOUT_ERRORS = REPO_ROOT / "eval" / "heldout_errors.jsonl"
HELDOUT_TASKS = REPO_ROOT / "eval" / "heldout_tasks.jsonl"
HELDOUT_MIXED = REPO_ROOT / "eval" / "heldout_mixed.jsonl"
HELDOUT_THIRD = REPO_ROOT / "eval" / "heldout_third.jsonl"
HELDOUT_FOURTH = REPO_ROOT / "eval" / "heldout_fourth.jsonl"
HELDOUT_FIFTH = REPO_ROOT / "eval" / "heldout_fifth.jsonl"
HELDOUT_SIXTH = REPO_ROOT / "eval" / "heldout_sixth.jsonl"
HELDOUT_SEVENTH = REPO_ROOT / "eval" / "heldout_seventh.jsonl"
HELDOUT_EIGHTH = REPO_ROOT / "eval" / "heldout_eighth.jsonl"
DEV = SHARED / "eval" / "dev.jsonl"
# Every query set; a new one joins here and in the checks of its kinds. The OTP sets
# (`otp.jsonl`, `otp_second.jsonl`) name OTP's doc tarball, not hexdocs tarballs: they are
# checked in test_otp_eval_set.py, the second one against every set here for copies.
ALL_SETS: tuple[Path, ...] = (
    BUNDLED,
    AGENT,
    CONFIRM,
    CONFIRM_ERRORS,
    HELDOUT_ERRORS,
    HELDOUT_TASKS,
)
ALL_SETS += (HELDOUT_MIXED, HELDOUT_THIRD, HELDOUT_FOURTH, HELDOUT_FIFTH, HELDOUT_SIXTH)
ALL_SETS += (HELDOUT_SEVENTH, HELDOUT_EIGHTH, DEV)
# The id letter is the kind's initial: c(oncept), t(ask), e(rror), s(ymbol); the
# confirmation sets' ids start with `cf-` (tasks) and `ce-` (errors), the held-out error,
# task, mixed, third, ..., eighth sets' with `he-`, `ht-`, `hm-`, `h3-` ... `h8-`.
_ID = re.compile(r"^(?:c[fe]-|h[etm345678]-)?(?P<package>[a-z][a-z0-9_]*)-(?P<kind>[ctes])-\d{2}$")
# `Mod.html#name/2`, `Mod.html#c:name/2`, `Mod.html#t:name/0`, optionally `-section`.
_NAMED_REF = re.compile(r"#(?:[ct]:)?(?P<name>[^/#]+)/\d+")
AGENT_KINDS = ("task", "error", "symbol")


def _holding(kind: str) -> list[Path]:
    """The query sets with queries of this kind: a new set is checked without a list to edit."""
    return [p for p in ALL_SETS if p.is_file() and any(q.kind == kind for q in load_queries(p))]


def _sets() -> list[Path]:
    return [path for path in ALL_SETS if path.is_file()]


def _queries() -> list[tuple[str, EvalQuery]]:
    return [(path.name, q) for path in _sets() for q in load_queries(path)]


@pytest.mark.parametrize(("source", "query"), _queries(), ids=lambda v: getattr(v, "id", v))
def test_expected_refs_exist_in_the_tarball(corpus: Path, source: str, query: EvalQuery) -> None:
    assert query.version is not None, f"{source}: {query.id} must pin the tarball version"
    published = published_refs(query.package, query.version)
    items = hex_items(query.package, query.version)
    if query.expect.form == "page":
        page = query.expect.targets[0]
        assert any(ref.split("#", 1)[0] == page for ref in published), f"no page {page}"
    else:
        missing = [t for t in query.expect.targets if t not in published]
        assert not missing, f"{query.id}: not in ExDoc's index: {missing}"
    answering = [i for i in items if ref_matches(i.ref, query.expect) and i.markdown.strip()]
    assert answering, f"{query.id}: the parser yields no item with text for {query.expect}"


@pytest.mark.parametrize("path", _sets(), ids=lambda p: p.name)
def test_ids_name_package_and_kind(path: Path) -> None:
    for query in load_queries(path):
        match = _ID.match(query.id)
        assert match, f"{query.id} is not <package>-<c|t|e|s>-<NN>"
        assert match["package"] == query.package
        assert match["kind"] == query.kind[0]


def test_bundled_set_is_large_balanced_and_held_out() -> None:
    queries = load_queries(BUNDLED)
    kinds = Counter(q.kind for q in queries)
    assert len(queries) >= 40
    assert abs(kinds["concept"] - kinds["symbol"]) <= 2, kinds
    assert len({q.package for q in queries}) >= 8
    if DEV.is_file():
        dev_packages = {q.package for q in load_queries(DEV)}
        assert not dev_packages & {q.package for q in queries}


def _dev_packages() -> set[str]:
    return {q.package for q in load_queries(DEV)} if DEV.is_file() else set()


def test_agent_set_is_large_balanced_and_held_out() -> None:
    queries = load_queries(AGENT)
    kinds = Counter(q.kind for q in queries)
    assert len(queries) >= 60
    assert set(kinds) == set(AGENT_KINDS), kinds
    assert min(kinds.values()) >= 20, kinds
    # "about equal thirds": no kind more than a sixth of the set away from a third
    assert max(kinds.values()) - min(kinds.values()) <= len(queries) // 6, kinds
    packages = Counter(q.package for q in queries)
    assert len(packages) >= 8, packages
    assert not _dev_packages() & set(packages)
    assert all(q.note.strip() for q in queries), "every query says why its answer answers it"


@pytest.mark.parametrize("path", _holding("task"), ids=lambda p: p.name)
def test_tasks_do_not_name_the_function_that_answers_them(path: Path) -> None:
    # A task is asked in the user's words: naming the answering function would make it a
    # symbol query in disguise and measure the keyword arm instead of understanding.
    for query in load_queries(path):
        if query.kind != "task":
            continue
        text = query.query.lower()
        for target in query.expect.targets:
            named = _NAMED_REF.search(target)
            if named:
                assert named["name"].lower() not in text, f"{query.id} names {named['name']}"


@pytest.mark.parametrize("path", _holding("error"), ids=lambda p: p.name)
def test_errors_are_pasted_output_not_questions(path: Path) -> None:
    # What an agent pastes is the printed message, often with PIDs, paths and line numbers.
    assert_pasted_output([q for q in load_queries(path) if q.kind == "error"])


def test_confirmation_set_is_tasks_over_enough_packages() -> None:
    # Written for one pre-registered check (docs/lab/retrieval-levers.md, lever 8): tasks
    # only, in the user's words, none copied from the agent set.
    queries = load_queries(CONFIRM)
    packages = Counter(q.package for q in queries)
    assert len(queries) >= 36 and {q.kind for q in queries} == {"task"}
    assert len(packages) >= 6 and max(packages.values()) <= 8, packages
    agent_texts = {q.query for q in load_queries(AGENT)}
    assert not agent_texts & {q.query for q in queries}
    assert all(q.note.strip() for q in queries)


@pytest.mark.parametrize(
    ("path", "size", "spread", "most"),
    [(CONFIRM_ERRORS, 48, 9, 8), (HELDOUT_ERRORS, 60, 12, 7)],
    ids=lambda v: getattr(v, "name", str(v)),
)
def test_error_sets_are_errors_over_enough_packages(
    path: Path, size: int, spread: int, most: int
) -> None:
    # Each written before any search ran on it, for a check decided in advance
    # (docs/lab/retrieval-levers.md, levers 11 and 12): errors only, none copied from the
    # other error sets.
    queries = load_queries(path)
    packages = Counter(q.package for q in queries)
    assert len(queries) >= size and {q.kind for q in queries} == {"error"}
    assert len(packages) >= spread and max(packages.values()) <= most, packages
    others = {
        q.query
        for other in (
            AGENT,
            CONFIRM_ERRORS,
            HELDOUT_ERRORS,
            HELDOUT_FIFTH,
            HELDOUT_SIXTH,
            HELDOUT_SEVENTH,
        )
        if other != path
        for q in load_queries(other)
    }
    assert not others & {q.query for q in queries}
    assert all(q.note.strip() for q in queries)


def test_held_out_task_set_is_tasks_over_enough_packages() -> None:
    # Written before any search ran on it, for the task levers' check decided in advance
    # (docs/lab/retrieval-levers.md, levers 13 and 14): tasks only, none copied from the
    # other task sets.
    queries = load_queries(HELDOUT_TASKS)
    packages = Counter(q.package for q in queries)
    assert len(queries) >= 60 and {q.kind for q in queries} == {"task"}
    assert len(packages) >= 12 and max(packages.values()) <= 7, packages
    others = {
        q.query
        for other in (AGENT, CONFIRM, HELDOUT_FIFTH, HELDOUT_SIXTH, HELDOUT_SEVENTH)
        for q in load_queries(other)
    }
    assert not others & {q.query for q in queries}
    assert all(q.note.strip() for q in queries)


# The one index the mixed set runs in: the dev, bundled and agent sets' versions.
MIXED_VERSIONS = {
    "anubis_mcp": "2.0.0",
    "boruta": "2.3.8",
    "db_connection": "2.10.2",
    "decimal": "2.3.0",
    "ecto": "3.14.2",
    "ecto_sql": "3.14.0",
    "ecto_sqlite3": "0.24.1",
    "eex": "1.18.4",
    "elixir": "1.18.4",
    "ex_unit": "1.18.4",
    "exqlite": "0.39.0",
    "finch": "0.23.0",
    "gen_magic": "1.1.1",
    "iex": "1.18.4",
    "jason": "1.4.4",
    "lazy_html": "0.1.11",
    "logger": "1.18.4",
    "mime": "2.0.7",
    "mint": "1.9.3",
    "mix": "1.18.4",
    "nimble_options": "1.1.1",
    "nimble_pool": "1.1.0",
    "plug": "1.19.2",
    "plug_crypto": "2.1.1",
    "req": "0.7.3",
    "sqlite_vec": "0.1.0",
    "telemetry": "1.2.1",
    "text_chunker": "0.7.0",
}


@pytest.mark.parametrize(
    ("path", "kinds", "spread", "most", "prefix"),
    [
        (HELDOUT_MIXED, {"task": 45, "concept": 30, "error": 25}, 14, 9, "hm-"),
        (HELDOUT_THIRD, {"task": 40, "concept": 30, "error": 30}, 16, 8, "h3-"),
        (HELDOUT_FIFTH, {"task": 30, "concept": 30, "error": 30}, 14, 7, "h5-"),
        (HELDOUT_SIXTH, {"task": 15, "error": 30, "symbol": 15}, 12, 6, "h6-"),
        (HELDOUT_SEVENTH, {"task": 30, "concept": 30, "error": 30}, 16, 7, "h7-"),
        (HELDOUT_EIGHTH, {"task": 55, "concept": 24, "error": 20}, 17, 15, "h8-"),
    ],
    ids=lambda v: getattr(v, "name", None) or "",
)
def test_held_out_mixed_sets_are_balanced_over_enough_packages(
    path: Path, kinds: dict[str, int], spread: int, most: int, prefix: str
) -> None:
    # Each written from the docs alone before any search ran on it, without reading the
    # other query sets, to judge one future change over the main index's package versions.
    queries = load_queries(path)
    packages = Counter(q.package for q in queries)
    assert Counter(q.kind for q in queries) == kinds
    assert len(packages) >= spread and max(packages.values()) <= most, packages
    off = {(q.package, q.version) for q in queries if MIXED_VERSIONS.get(q.package) != q.version}
    assert not off, f"versions outside the main index: {off}"
    assert len({q.id for q in queries}) == len(queries)
    assert all(q.id.startswith(prefix) for q in queries)
    others = {
        q.query
        for other in ALL_SETS
        if other != path and other.is_file()
        for q in load_queries(other)
    }
    assert not others & {q.query for q in queries}
    assert all(q.note.strip() for q in queries)


def test_held_out_fourth_set_is_task_error_symbol_thirds_over_enough_packages() -> None:
    # Written from the docs alone before any search ran on it, without reading the other
    # query sets: the three kinds agents ask most, in exact thirds, at the main index's
    # package versions, sharing no query text with any other set.
    queries = load_queries(HELDOUT_FOURTH)
    packages = Counter(q.package for q in queries)
    assert Counter(q.kind for q in queries) == {"task": 30, "error": 30, "symbol": 30}
    assert len(packages) >= 14 and max(packages.values()) <= 8, packages
    off = {(q.package, q.version) for q in queries if MIXED_VERSIONS.get(q.package) != q.version}
    assert not off, f"versions outside the main index: {off}"
    assert len({q.id for q in queries}) == len(queries)
    assert all(q.id.startswith("h4-") for q in queries)
    assert all(q.note.strip() for q in queries), "every query says why its answer answers it"
    others = {q.query for other in _sets() if other != HELDOUT_FOURTH for q in load_queries(other)}
    assert not others & {q.query for q in queries}
