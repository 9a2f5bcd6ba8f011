"""Every MCP tool argument, given wrong types, emptiness, 1 MB, control characters,
unknown packages and versions, and hostile FTS syntax.

Bad arguments must come back as an error result whose message names the problem; valid
but odd input (FTS operators, quotes, unknown identifiers) must be answered normally. In
no case may a traceback or an "internal error" reach the client, and the server must
answer the next call. The server is the real one over the in-memory fastmcp Client, on a
service with the HashingEmbedder, the fake hex.pm and the fake GitHub.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from fastmcp.client.client import CallToolResult
from mcp_types import TextContent

from hexlocal_core.adapters.github import GitHubIssues
from hexlocal_core.config import Settings
from hexlocal_core.service import Hexlocal, build
from hexlocal_mcp.server import create_server
from hexlocal_mcp.tools import TOOLS
from tests.fakes.fake_github import FakeGitHub
from tests.fakes.fake_hex import FakeHex, client_for, settings_for
from tests.support.helpers import HashingEmbedder
from tests.support.tool_calls import VALID_ARGS

pytestmark = pytest.mark.integration

MB = "x" * 1_000_000
OK = "answered"  # the expectation of a case that must not be an error

# Arguments a case also changes, for the argument to be the one in effect.
ALSO: dict[tuple[str, str], dict[str, Any]] = {
    ("search_github_issues", "package"): {"repo": None},  # repo would win over package
}

# (tool, argument, value, what the answer must match: a regex for the error, or OK)
CASES: list[tuple[str, str, Any, str]] = [
    # search_docs
    ("search_docs", "package", 123, r"package"),
    ("search_docs", "package", "", r"package"),
    ("search_docs", "package", "Not A Package!", r"package name|Not A Package"),
    ("search_docs", "package", MB, r"package"),
    ("search_docs", "package", "jas\x00on", r"package"),
    ("search_docs", "package", "no_such_pkg", r"no_such_pkg"),
    ("search_docs", "package", None, r"package"),
    ("search_docs", "query", 123, r"query"),
    ("search_docs", "query", "", r"query is empty"),
    ("search_docs", "query", "   ", r"query is empty"),
    ("search_docs", "query", MB, r"1,000,000 characters"),
    ("search_docs", "query", "decode\x00\x07", r"control characters"),
    ("search_docs", "query", ["decode"], r"query"),
    ("search_docs", "version", 1.4, r"version"),
    ("search_docs", "version", "", OK),  # blank means "not given" (see the test below)
    ("search_docs", "version", "not-a-version", r"not-a-version"),
    ("search_docs", "version", "9.9.9", r"9\.9\.9"),
    ("search_docs", "version", MB[:100_000], r"version"),
    ("search_docs", "version", "1.4.4\n", OK),  # surrounding whitespace is trimmed
    ("search_docs", "version", "1.4\x00.4", r"version|1\.4"),
    ("search_docs", "limit", "five", r"limit"),
    ("search_docs", "limit", 0, r"limit"),
    ("search_docs", "limit", -1, r"limit"),
    ("search_docs", "limit", 21, r"limit"),
    ("search_docs", "limit", 10**12, r"limit"),
    ("search_docs", "limit", 1.5, r"limit"),
    ("search_docs", "examples_only", "maybe", r"examples_only"),
    ("search_docs", "examples_only", [True], r"examples_only"),
    ("search_docs", "packages", "jason", r"packages"),
    ("search_docs", "packages", [123], r"packages"),
    ("search_docs", "packages", ["Bad Name"], r"package"),
    ("search_docs", "packages", ["jason"] * 10_000, r"packages|at most"),
    # diff_versions
    ("diff_versions", "package", "", r"package"),
    ("diff_versions", "package", "Bad Name", r"package name|Bad Name"),
    ("diff_versions", "package", MB, r"package"),
    ("diff_versions", "package", "no_such_pkg", r"no_such_pkg"),
    ("diff_versions", "from_version", "not-a-version", r"not-a-version"),
    ("diff_versions", "from_version", "9.9.9", r"9\.9\.9"),
    ("diff_versions", "to_version", MB[:100_000], r"version"),
    ("diff_versions", "to_version", "1.4\x00.5", r"version|1\.4"),
    ("diff_versions", "kind", "everything", r"kind"),
    ("diff_versions", "limit", 0, r"limit"),
    ("diff_versions", "limit", 10**12, r"limit"),
    ("diff_versions", "offset", -1, r"offset"),
    ("diff_versions", "offset", "ten", r"offset"),
    # hostile FTS syntax is a valid query: answered, never an FTS5 syntax error
    *(
        ("search_docs", "query", q, OK)
        for q in (
            '"unbalanced',
            "decode AND OR NOT",
            "NEAR(decode encode, 2)",
            "content:decode",
            "*",
            "^decode",
            "decode* -encode +map",
            "Enum.map/2 :on_conflict ~> |> <<>>",
            "'; DROP TABLE chunks; --",
            "(((((",
            "\u202edecode",  # a bidi override: not a control character
        )
    ),
    # search_project_docs (nothing indexed: a notice says so)
    ("search_project_docs", "query", 123, r"query"),
    ("search_project_docs", "query", "", r"query is empty"),
    ("search_project_docs", "query", MB, r"1,000,000 characters"),
    ("search_project_docs", "query", "a\x07b", r"control characters"),
    ("search_project_docs", "query", '"unbalanced NEAR(', OK),
    ("search_project_docs", "limit", 0, r"limit"),
    ("search_project_docs", "limit", 21, r"limit"),
    ("search_project_docs", "limit", "five", r"limit"),
    # get_docs
    ("get_docs", "identifier", 5, r"identifier"),
    ("get_docs", "identifier", "", r"empty"),
    ("get_docs", "identifier", "not an identifier!!", r"not an identifier"),
    ("get_docs", "identifier", MB, r"characters"),
    ("get_docs", "identifier", "Jason.\x00decode/2", r"control characters"),
    ("get_docs", "identifier", "Jason.nope/9", OK),  # a not_found notice, not an error
    ("get_docs", "package", "no_such_pkg", r"no_such_pkg"),
    ("get_docs", "version", "9.9.9", r"9\.9\.9"),
    ("get_docs", "package", "erlang", r"no package found"),  # Jason is no OTP module
    ("get_docs", "identifier", ":no_such_module.f/1", OK),  # not in jason: a notice
    # upgrade_impact
    ("upgrade_impact", "package", "", r"package"),
    ("upgrade_impact", "package", "Bad Name", r"package name|Bad Name"),
    ("upgrade_impact", "package", MB, r"package"),
    ("upgrade_impact", "to_version", "9.9.9", r"9\.9\.9"),
    ("upgrade_impact", "to_version", "1.4\x00.5", r"version|1\.4"),
    ("upgrade_impact", "to_version", MB[:100_000], r"version"),
    ("upgrade_impact", "from_version", "not-a-version", r"not-a-version"),
    ("upgrade_impact", "from_version", "0.0.1", r"0\.0\.1"),
    # ingestion_status
    ("ingestion_status", "package", 42, r"package"),
    ("ingestion_status", "package", "Bad Name", r"package name|Bad Name"),
    ("ingestion_status", "package", MB, r"package"),
    ("ingestion_status", "package", "no_such_pkg", OK),  # idle: nothing known about it
    # remember
    ("remember", "texts", "one string", r"texts"),
    ("remember", "texts", [], r"texts|empty|nothing"),
    ("remember", "texts", [""], r"empty"),
    ("remember", "texts", [123], r"texts"),
    ("remember", "texts", [MB], r"characters|long"),
    ("remember", "texts", ["a\x00b"], r"control characters"),
    ("remember", "texts", ["fact"] * 10_000, r"texts|at most|too many"),
    ("remember", "package", "Bad Name", r"package"),
    ("remember", "version", "1.0.0", r"package"),  # a version needs a package
    ("remember", "tags", "tag", r"tags"),
    ("remember", "tags", [""], r"tag"),
    ("remember", "tags", ["a\nb"], r"tag"),
    ("remember", "tags", [MB], r"tag"),
    # remember_status
    ("remember_status", "request_ids", "id", r"request_ids"),
    ("remember_status", "request_ids", [], r"request"),
    ("remember_status", "request_ids", [1], r"request_ids"),
    ("remember_status", "request_ids", ["not-an-id\x00"], OK),  # status "unknown", per id
    ("remember_status", "request_ids", [MB], r"request"),
    # recall
    ("recall", "query", "", r"empty"),
    ("recall", "query", MB, r"characters|long"),
    ("recall", "query", "a\x1bb", r"control characters"),
    ("recall", "query", 'NEAR("x" OR', OK),
    ("recall", "limit", 0, r"limit"),
    ("recall", "limit", 51, r"limit"),
    ("recall", "limit", "all", r"limit"),
    ("recall", "package", "Bad Name", r"package"),
    ("recall", "include_deprecated", "maybe", r"include_deprecated"),
    # search_github_issues
    ("search_github_issues", "query", "", r"empty"),
    ("search_github_issues", "query", MB, r"characters|long"),
    ("search_github_issues", "query", "a\x00b", r"control characters"),
    ("search_github_issues", "repo", "not a repo", r"repo"),
    ("search_github_issues", "repo", "a/b/c", r"repo"),
    ("search_github_issues", "org", "bad org!", r"org"),
    ("search_github_issues", "type", "bug", r"type"),
    ("search_github_issues", "state", "maybe", r"state"),
    ("search_github_issues", "limit", 0, r"limit"),
    ("search_github_issues", "limit", 51, r"limit"),
    ("search_github_issues", "package", "no_such_pkg", r"no_such_pkg"),
    # GitHub's own qualifiers pass through; GitHub's refusal comes back in plain words
    ("search_github_issues", "query", "is:issue repo:evil/x label:", r"GitHub rejected"),
    ("search_github_issues", "query", 'AND OR NOT "unbalanced', OK),
    # get_token_usage
    ("get_token_usage", "from", "yesterday", r"from|date|YYYY-MM-DD"),
    ("get_token_usage", "until", "2026-13-45", r"until|date|YYYY-MM-DD"),
    ("get_token_usage", "from", 20260101, r"from"),
    ("get_token_usage", "until", "2026-01-01\x00", r"until|date|YYYY-MM-DD"),
    ("get_token_usage", "until", "9999-12-31", r"until=9999-12-31 is too far"),  # OverflowError
    # what a JS client sends when it cuts a string inside an emoji, and other oversized values
    ("search_docs", "query", "caf\ud800", r"query.*surrogate"),
    ("search_docs", "limit", 10**5000, r"limit.*digits"),
    ("get_docs", "identifier", "Jason.\udc00/2", r"surrogate"),
    ("search_project_docs", "query", "\ud83d", r"surrogate"),
    ("remember", "texts", ["a lesson \ud800"], r"texts.*surrogate"),
    ("remember", "tags", ["\udfff"], r"tag"),
    # Twenty bad entries: the first three named, the rest counted, one short line.
    ("remember_status", "request_ids", ["x\ud800"] * 20, r"request_ids\.2.*; and 17 more\."),
    ("recall", "query", "\ud800", r"surrogate"),
    ("recall", "limit", -(10**30), r"limit"),
    ("search_github_issues", "query", "x\ud800", r"surrogate"),
]


def factory(settings: Settings) -> Hexlocal:
    return build(
        settings,
        embedder=HashingEmbedder(),
        reranker=None,
        registry=client_for(settings),
        issues=GitHubIssues(settings, retry_delay_s=0.01),
        load_models=False,
    )


@pytest.fixture
async def client(fake_hex: FakeHex, tmp_path: Path) -> AsyncIterator[Client[Any]]:
    async with FakeGitHub() as gh:
        settings = settings_for(fake_hex, tmp_path, ai_rerank_model="off", github_api_url=gh.url)
        async with Client(create_server(lambda: factory(settings))) as c:
            # Indexed up front, so cases about other arguments do not wait on an ingest.
            ready = await c.call_tool(
                "search_docs", VALID_ARGS["search_docs"], raise_on_error=False
            )
            assert not ready.is_error, ready.content
            yield c


def text_of(result: CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


def case_id(case: tuple[str, str, Any, str]) -> str:
    tool, arg, value, _ = case
    shown = repr(value)
    return f"{tool}.{arg}={shown[:24]}{'...' if len(shown) > 24 else ''}"


async def test_every_bad_argument_is_a_clear_error(client: Client[Any]) -> None:
    """One server for the whole table (the cases are many and each is quick)."""
    problems = []
    for case in CASES:
        tool, arg, value, expect = case
        arguments = {**VALID_ARGS[tool], **ALSO.get((tool, arg), {}), arg: value}
        result = await client.call_tool(tool, arguments, raise_on_error=False)
        problem = judge(result, expect)
        if problem:
            problems.append(f"{case_id(case)}: {problem}")
    assert problems == [], "\n".join(problems)
    # Still up, and still answering.
    after = await client.call_tool("list_indexed_packages", {}, raise_on_error=False)
    assert not after.is_error and "jason" in text_of(after)


def judge(result: CallToolResult, expect: str) -> str | None:
    """What is wrong with the answer, or None."""
    text = text_of(result)
    if "Traceback" in text or "internal error" in text:
        return f"leaked internals: {text[:300]}"
    if result.is_error and len(text) > 2_000:
        return f"an error of {len(text)} characters: bad input must not be echoed whole"
    if expect == OK:
        return f"expected an answer, got an error: {text[:300]}" if result.is_error else None
    if not result.is_error:
        return f"expected an error, got an answer: {text[:200]}"
    if not re.search(expect, text, re.IGNORECASE):
        return f"the message does not match {expect!r}: {text[:300]}"
    return None


def test_every_tool_and_argument_is_covered() -> None:
    """A new tool or argument needs its bad-input cases here."""
    covered = {(tool, arg) for tool, arg, _, _ in CASES}
    for spec in TOOLS:
        assert spec.name in VALID_ARGS, f"no base call for {spec.name}"
        for name in inspect.signature(spec.fn).parameters:
            if name == "ctx":
                continue
            public = "from" if name == "from_" else name
            assert (spec.name, public) in covered, f"no bad-input case for {spec.name}.{public}"


async def test_blank_version_keeps_the_indexed_version(client: Client[Any]) -> None:
    result = await client.call_tool(
        "search_docs", {"package": "jason", "query": "decode", "version": " "}
    )
    assert result.structured_content is not None
    assert result.structured_content["version"] == "1.4.4"  # indexed, not hex.pm's latest
    codes = [n["code"] for n in result.structured_content["notices"]]
    assert "indexed_version_differs" in codes and "version_replaced" not in codes


# -- database faults: a one-line error with the path and the fix, from both faces ------------


def _parent_is_a_file(tmp: Path) -> Path:
    (tmp / "not-a-dir").write_text("x")
    return tmp / "not-a-dir" / "index.db"


def _garbage(tmp: Path) -> Path:
    path = tmp / "garbage.db"
    path.write_bytes(b"this is not SQLite " * 500)
    return path


def _truncated(tmp: Path) -> Path:
    path = tmp / "truncated.db"
    service = build(Settings(database_path=path, project_root=tmp), load_models=False)
    service.list_packages()
    asyncio.run(service.aclose())
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2 + 100])  # cut mid-page
    return path


def _read_only_dir(tmp: Path) -> Path:
    folder = tmp / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    return folder / "index.db"


def _read_only_file(tmp: Path) -> Path:
    path = tmp / "read-only.db"
    service = build(Settings(database_path=path, project_root=tmp), load_models=False)
    asyncio.run(service.aclose())
    path.chmod(0o444)
    return path


ROOT = os.geteuid() == 0  # permissions do not stop root: those two cases need a user
DB_FAULTS = [
    pytest.param(_parent_is_a_file, id="parent-is-a-file"),
    pytest.param(_garbage, id="garbage-file"),
    pytest.param(_truncated, id="truncated-file"),
    pytest.param(_read_only_dir, id="read-only-dir", marks=pytest.mark.skipif(ROOT, reason="root")),
    pytest.param(
        _read_only_file, id="read-only-file", marks=pytest.mark.skipif(ROOT, reason="root")
    ),
]


def _one_clear_line(text: str, db: Path) -> list[str]:
    problems = []
    if "Traceback" in text or "internal error" in text:
        problems.append("leaked internals")
    if len(text.strip().splitlines()) != 1:
        problems.append(f"{len(text.strip().splitlines())} lines")
    if str(db) not in text:
        problems.append("the path is missing")
    if "DATABASE_PATH" not in text:
        problems.append("the fix (DATABASE_PATH) is missing")
    return problems


@pytest.mark.parametrize("make_fault", DB_FAULTS)
def test_database_fault_in_the_cli(
    make_fault: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from hexlocal_cli.main import cli

    db = make_fault(tmp_path)
    monkeypatch.setenv("DATABASE_PATH", str(db))
    monkeypatch.setenv("PROJECT_ROOT", str(tmp_path))
    result = CliRunner().invoke(cli, ["list"], prog_name="hexlocal")
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("Error: "), result.stderr
    assert _one_clear_line(result.stderr, db) == [], result.stderr
    assert not result.stdout.strip()


@pytest.mark.parametrize("make_fault", DB_FAULTS)
async def test_database_fault_in_mcp(make_fault: Any, tmp_path: Path) -> None:
    db = await asyncio.to_thread(make_fault, tmp_path)  # it may run a service of its own
    settings = Settings(database_path=db, project_root=tmp_path, ai_rerank_model="off")

    def broken() -> Hexlocal:
        return build(settings, embedder=HashingEmbedder(), load_models=False)

    async with Client(create_server(broken, settings=settings)) as c:
        result = await c.call_tool("list_indexed_packages", {}, raise_on_error=False)
        text = text_of(result)
        assert result.is_error, text
        assert _one_clear_line(text, db) == [], text
        # The server still answers (with the same clear error), it did not die.
        again = await c.call_tool("search_docs", VALID_ARGS["search_docs"], raise_on_error=False)
        assert again.is_error and str(db) in text_of(again)
