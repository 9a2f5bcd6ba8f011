"""The `hexlocal` command: output, `--json`, exit codes, help and docs for every command.

Commands run in-process through click's CliRunner against the fake hex.pm (and the fake
GitHub). A command runs its own event loop, so it is invoked in a worker thread while the
fakes keep serving from the test's loop. The service is the real one with the
HashingEmbedder in place of the ONNX model (the stdio test covers the real default build).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from hexlocal_cli import common
from hexlocal_cli.main import cli, optional_command
from hexlocal_core.config import Settings
from hexlocal_core.service import Hexlocal, build
from tests.conftest import REPO_ROOT
from tests.fakes.fake_github import FakeGitHub
from tests.fakes.fake_hex import FakeHex
from tests.helpers import HashingEmbedder
from tests.hex_fixtures import client_for

PACKAGE = "nimble_pool"
VERSION = "1.1.0"


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """The command sets up hexlocal's logger; put it back for the tests that follow."""
    logger = logging.getLogger("hexlocal")
    handlers, level = list(logger.handlers), logger.level
    yield
    logger.handlers[:] = handlers
    logger.setLevel(level)


@pytest.fixture
async def fake_github() -> AsyncIterator[FakeGitHub]:
    async with FakeGitHub() as gh:
        yield gh


@pytest.fixture
def cli_env(
    fake_hex: FakeHex, fake_github: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    for name, value in {
        "HEX_API_URL": fake_hex.api_url,
        "HEX_MIRROR": fake_hex.mirror_url,
        "GITHUB_API_URL": fake_github.url,
        "PROJECT_ROOT": str(project),
        "DATABASE_PATH": str(tmp_path / "index.db"),
        "AI_RERANK_MODEL": "off",
        "HEXLOCAL_HTTP_TIMEOUT_S": "5",
    }.items():
        monkeypatch.setenv(name, value)

    def fake_build(settings: Settings, *, load_models: bool = True) -> Hexlocal:
        return build(
            settings,
            embedder=HashingEmbedder(),
            reranker=None,
            registry=client_for(settings),
            load_models=False,
        )

    monkeypatch.setattr(common, "build_service", fake_build)
    return tmp_path


async def run(*args: str) -> Result:
    return await asyncio.to_thread(CliRunner().invoke, cli, list(args), prog_name="hexlocal")


def parsed(result: Result) -> Any:
    assert result.exit_code == 0, (result.exit_code, result.output)
    return json.loads(result.stdout)  # stdout is one JSON document and nothing else


# -- search and list against the fake hex.pm ----------------------------------------------------


async def test_search_json_then_list(cli_env: Path, fake_hex: FakeHex) -> None:
    data = parsed(await run("search", PACKAGE, "checkout", "--version", VERSION, "--json"))
    assert (data["package"], data["version"]) == (PACKAGE, VERSION)
    assert "NimblePool.html#checkout!/4" in [hit["ref"] for hit in data["results"]]

    rows = parsed(await run("list", "--json"))
    assert [(r["name"], r["version"], r["status"]) for r in rows] == [
        (PACKAGE, VERSION, "complete")
    ]
    assert len(fake_hex.requests_to("/repo/docs/*")) == 1


async def test_human_output(cli_env: Path) -> None:
    found = await run("search", PACKAGE, "NimblePool.checkout!/4", "--version", VERSION)
    assert found.exit_code == 0, found.output
    assert f"{PACKAGE} {VERSION}" in found.stdout
    assert "NimblePool.html#checkout!/4" in found.stdout  # the hexdocs url is printed

    listed = await run("list")
    assert listed.exit_code == 0 and PACKAGE in listed.stdout and VERSION in listed.stdout

    exact = await run("get", PACKAGE, "NimblePool.stop/3")
    assert exact.exit_code == 0, exact.output
    assert "Stops the given `pool`" in exact.stdout


async def test_ingest_reports_each_package(cli_env: Path) -> None:
    outcomes = await run("ingest", f"{PACKAGE}@{VERSION}", "no_such_pkg", "--json")
    assert outcomes.exit_code == 1  # one package failed; the other was still indexed
    data = json.loads(outcomes.stdout)
    assert data[0]["status"] == "indexed" and data[0]["report"]["chunks"] > 0
    assert data[1]["error"] and "no_such_pkg" in data[1]["error"]

    again = parsed(await run("ingest", f"{PACKAGE}@{VERSION}", "--json"))
    assert again[0]["status"] == "already indexed"


# -- exit codes --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "code", "expected"),
    [
        (["search", PACKAGE, "   "], 2, "query is empty"),
        (["search", PACKAGE, "x", "--version", "1.x"], 2, "1.x"),
        (["search", PACKAGE, "x", "--limit", "99"], 2, "--limit"),
        (["search", "Not A Name", "x"], 2, "Not A Name"),
        (["ingest", f"{PACKAGE}@"], 2, "PACKAGE@VERSION"),
        (["usage", "--from", "May 1st"], 2, "YYYY-MM-DD"),
        (["search", "no_such_pkg", "x"], 1, "no_such_pkg"),
        (["get", PACKAGE, "not an identifier at all"], 2, "not an identifier"),
    ],
)
async def test_exit_codes(cli_env: Path, args: list[str], code: int, expected: str) -> None:
    result = await run(*args)
    assert result.exit_code == code, result.output
    assert expected in result.stderr
    assert not result.stdout.strip()


# -- the other commands --------------------------------------------------------------------------


async def test_remember_waits_for_curation_then_recall(cli_env: Path) -> None:
    outcomes = parsed(
        await run(
            "remember",
            "NimblePool.stop/3 belongs in test teardown",
            "--package",
            PACKAGE,
            "--tag",
            "testing",
            "--json",
        )
    )
    assert len(outcomes) == 1 and outcomes[0]["status"] != "pending", outcomes
    memories = parsed(await run("recall", "teardown", "--json"))
    assert any("teardown" in m["text"] for m in memories), memories


async def test_usage_issues_models_doctor(cli_env: Path) -> None:
    report = parsed(await run("usage", "--from", "2025-01-01", "--until", "2025-01-02", "--json"))
    assert report["from"] == "2025-01-01" and report["totals"]["calls"] == 0

    hits = parsed(await run("issues", "decode", "--repo", "michalmuskala/jason", "--json"))
    assert hits and all(h["repo"] == "michalmuskala/jason" for h in hits)

    rows = parsed(await run("models", "status", "--json"))
    assert {r["which"] for r in rows} == {"embedder", "reranker"}

    checks = parsed(await run("doctor", "--json"))
    names = {c["name"]: c for c in checks["checks"]}
    assert names["hex.pm API"]["status"] == "OK"
    assert names["sqlite-vec"]["status"] == "OK" and names["fts5"]["status"] == "OK"
    assert checks["settings"]["AI_API_KEY"] == "(unset)"


async def test_doctor_reports_unreachable_remotes_but_exits_0(
    cli_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HEX_API_URL", "http://127.0.0.1:9")  # discard port: refused
    monkeypatch.setenv("AI_API_KEY", "sk-secret-value")
    result = await run("doctor")
    assert result.exit_code == 0, result.output
    assert "WARN" in result.stdout and "hex.pm API" in result.stdout
    assert "sk-secret-value" not in result.stdout


# -- help and docs for every command ---------------------------------------------------------


def command_paths(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every registered command, the lazily loaded ones included."""
    yield path
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None, name
            yield from command_paths(sub, (*path, name))


def test_every_command_has_help() -> None:
    for path in command_paths(cli):
        result = CliRunner().invoke(cli, [*path, "--help"], prog_name="hexlocal")
        assert result.exit_code == 0, (path, result.output)
        assert result.stdout.startswith(f"Usage: {' '.join(('hexlocal', *path))}"), path


def test_every_command_is_documented() -> None:
    docs = (REPO_ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for path in command_paths(cli):
        heading = f"## {' '.join(('hexlocal', *path))}\n"
        assert heading in docs, f"{heading.strip()} missing: run python scripts/gen_cli_docs.py"


def test_docs_generator_renders_every_command() -> None:
    spec = importlib.util.spec_from_file_location(
        "gen_cli_docs", REPO_ROOT / "scripts" / "gen_cli_docs.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rendered = module.render()
    for path in command_paths(cli):
        assert f"## {' '.join(('hexlocal', *path))}\n" in rendered


def test_optional_commands_skip_only_their_own_missing_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert optional_command("hexlocal_cli.no_such_module", "x") is None
    (tmp_path / "broken_cmds.py").write_text("import no_such_dependency_for_hexlocal\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError):
        # the module exists but one of its imports is missing: a bug to surface, not skip
        optional_command("broken_cmds", "x")
