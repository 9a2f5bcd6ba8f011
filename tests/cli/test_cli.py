"""The `hexlocal` command: output, `--json`, exit codes, help and docs for every command.

Commands run in-process through click's CliRunner against the fake hex.pm (and the fake
GitHub). A command runs its own event loop, so it is invoked in a worker thread while the
fakes keep serving from the test's loop. The service is the real one with the
HashingEmbedder in place of the ONNX model (the stdio test covers the real default build).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from hexlocal_cli import common
from hexlocal_cli.main import cli
from hexlocal_core import bounds
from hexlocal_core.config import Settings
from tests.fakes.fake_github import FakeGitHub
from tests.fakes.fake_hex import FakeHex
from tests.support.helpers import cli_builds_with_fakes
from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.integration

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

    cli_builds_with_fakes(monkeypatch)
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


async def test_list_shows_every_locked_package_with_its_state(
    cli_env: Path, fake_hex: FakeHex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`list` answers "what does my project run, and is it indexed?": the indexed package
    with its facts, a locked one not indexed yet, and a git dep that cannot be (and why)."""
    monkeypatch.setenv("HEXLOCAL_SYNC_ELIXIR", "false")
    (cli_env / "project" / "mix.exs").write_text("defmodule P.MixProject do\nend\n")
    (cli_env / "project" / "mix.lock").write_text(
        "%{\n"
        f'  "{PACKAGE}": {{:hex, :{PACKAGE}, "{VERSION}", "abc", [:mix], [], "hexpm", "def"}},\n'
        '  "jason": {:hex, :jason, "1.4.4", "abc", [:mix], [], "hexpm", "def"},\n'
        '  "gone": {:git, "https://example.invalid/gone.git", "0123abc", []},\n'
        "}\n"
    )
    await run("search", PACKAGE, "checkout")
    rows = {r["name"]: r for r in parsed(await run("list", "--json"))}

    assert rows[PACKAGE]["state"] == "indexed" and rows[PACKAGE]["status"] == "complete"
    assert rows[PACKAGE]["version"] == VERSION and rows[PACKAGE]["locked"] is True
    assert (rows["jason"]["state"], rows["jason"]["locked_version"]) == ("not indexed", "1.4.4")
    assert rows["gone"]["state"] == "skipped" and rows["gone"]["reason"]
    table = await run("list")
    assert table.exit_code == 0 and "not indexed" in table.stdout and "skipped" in table.stdout


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
        # bytes that were not UTF-8 reach Python as lone surrogates (surrogateescape)
        (["search", PACKAGE, "caf\udcc3"], 2, "not valid UTF-8"),
        (["usage", "--until", "9999-12-31"], 2, "too far in the future"),
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
    # The database facts come from the service (usage above created the file).
    assert names["database"]["status"] == "OK" and "schema" in names["database"]["detail"]
    assert names["engine"]["status"] == "OK" and "sqlite-vec" in names["engine"]["detail"]
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


async def test_doctor_shows_the_values_the_mcp_server_uses(
    cli_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI itself waits up to an hour for an ingestion; the server's budget is its own
    (INGEST_TIMEOUT_MS, 25 s by default), and that is what doctor shows."""
    checks = parsed(await run("doctor", "--json"))
    assert checks["settings"]["INGEST_TIMEOUT_MS"] == "25000"
    assert {c["name"] for c in checks["checks"]} >= {"installation"}
    monkeypatch.setenv("INGEST_TIMEOUT_MS", "40000")
    assert parsed(await run("doctor", "--json"))["settings"]["INGEST_TIMEOUT_MS"] == "40000"


async def test_doctor_names_the_otp_and_whether_its_docs_are_installed(
    cli_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from tests.support.otp_corpus import OTP25, OTP27, install

    (cli_env / "project" / "mix.exs").write_text("defmodule A.MixProject do\nend\n")
    monkeypatch.setenv("HEXLOCAL_OTP_ROOT", str(install(tmp_path_factory, OTP27)))
    names = {c["name"]: c for c in parsed(await run("doctor", "--json"))["checks"]}
    otp = names["Erlang/OTP"]
    assert otp["status"] == "OK" and "OTP 27.3.4.1" in otp["detail"], otp
    assert "HEXLOCAL_OTP_ROOT" in otp["detail"] and "docs in the beams" in otp["detail"]
    # `mix new` writes no mix.lock until a dependency is fetched: nothing to fix
    assert names["mix.lock"]["status"] == "OK" and "none yet" in names["mix.lock"]["detail"]

    bare = cli_env / "otp-bare"  # OTP 25 as Debian's erlang-base leaves it: no docs
    shutil.copytree(install(tmp_path_factory, OTP25), bare, ignore=shutil.ignore_patterns("doc"))
    monkeypatch.setenv("HEXLOCAL_OTP_ROOT", str(bare))
    names = {c["name"]: c for c in parsed(await run("doctor", "--json"))["checks"]}
    otp = names["Erlang/OTP"]
    assert otp["status"] == "WARN" and "docs not installed" in otp["detail"], otp
    assert "erlang-doc" in otp["fix"]


# -- help and docs for every command ---------------------------------------------------------

DOCS_WIDTH = 100  # docs/cli.md shows what a terminal this wide shows (scripts/gen_cli_docs.py)


def command_paths(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every registered command."""
    yield path
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None, name
            yield from command_paths(sub, (*path, name))


def live_help(path: tuple[str, ...]) -> str:
    # click wraps at the terminal width less 2, and takes a given terminal_width as is.
    result = CliRunner().invoke(
        cli, [*path, "--help"], prog_name="hexlocal", terminal_width=DOCS_WIDTH - 2
    )
    assert result.exit_code == 0, (path, result.output)
    return result.stdout.rstrip()


def documented_help() -> dict[tuple[str, ...], str]:
    """docs/cli.md as {command path: the help text it shows}, read from the file itself."""
    docs = (REPO_ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    sections = re.findall(r"^## hexlocal(.*?)\n\n```text\n(.*?)\n```$", docs, re.M | re.S)
    return {tuple(heading.split()): body.rstrip() for heading, body in sections}


def test_every_command_has_help() -> None:
    for path in command_paths(cli):
        assert live_help(path).startswith(f"Usage: {' '.join(('hexlocal', *path))}"), path


def test_docs_show_each_commands_real_help() -> None:
    """docs/cli.md must be what `--help` prints now: a changed option or command fails here."""
    documented = documented_help()
    commands = set(command_paths(cli))
    fix = "run python scripts/gen_cli_docs.py"
    assert set(documented) == commands, (
        f"undocumented: {sorted(commands - set(documented))}, "
        f"stale: {sorted(set(documented) - commands)}; {fix}"
    )
    for path in sorted(commands):
        assert documented[path] == live_help(path), f"hexlocal {' '.join(path)}: {fix}"


def test_the_entry_point_prints_the_documented_help() -> None:
    """The installed way in (`python -m hexlocal_cli`), not only the click object."""
    env = {**os.environ, "COLUMNS": str(DOCS_WIDTH), "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "hexlocal_cli", "--help"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip() == documented_help()[()]


def test_limits_come_from_the_shared_bounds() -> None:
    ctx = click.Context(cli)
    limits = {}
    for name in ("search", "recall", "issues"):
        command = cli.get_command(ctx, name)
        assert command is not None
        option = next(p for p in command.params if p.name == "limit")
        assert isinstance(option.type, click.IntRange)
        limits[name] = option.type.max
    assert limits == {
        "search": bounds.MAX_LIMIT,
        "recall": bounds.MAX_RECALL_LIMIT,
        "issues": bounds.MAX_ISSUE_LIMIT,
    }


# -- entry points: --help and --version print and exit -----------------------------------------


def run_module(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.PIPE,  # held open: a server that started would wait, not exit
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_help_and_version_print_and_exit() -> None:
    helped = run_module("hexlocal_mcp", "--help")
    assert helped.returncode == 0 and helped.stdout.startswith("Usage: hexlocal-mcp"), helped
    version = run_module("hexlocal_mcp", "--version")
    assert version.returncode == 0 and version.stdout.startswith("hexlocal-mcp, version "), version
    wrong = run_module("hexlocal_mcp", "--port", "3")
    assert wrong.returncode == 2 and "'--port'" in wrong.stderr and not wrong.stdout
    cli_version = CliRunner().invoke(cli, ["--version"], prog_name="hexlocal")
    assert cli_version.exit_code == 0 and cli_version.stdout.startswith("hexlocal, version ")


# -- the project's own docs --------------------------------------------------------------------


def write_project_docs(project: Path) -> None:
    (project / "README.md").write_text("# My app\n\nDeploys with `mix release` behind nginx.\n")
    (project / "docs").mkdir()
    (project / "docs" / "testing.md").write_text(
        "# Testing\n\nEvery test runs inside a database sandbox checkout.\n"
    )


async def test_search_project_docs_names_files_not_internal_keys(cli_env: Path) -> None:
    project = cli_env / "project"
    write_project_docs(project)
    indexed = parsed(await run("index-docs", "--json"))
    assert indexed["files"] == 2

    data = parsed(await run("search", "--project", "database sandbox", "--json"))
    assert data["package"] == "project docs" and data["version"] is None
    top = data["results"][0]
    assert top["path"] == str((project / "docs" / "testing.md").resolve())
    assert top["hexdocs_url"] is None

    human = await run("search", "--project", "database sandbox")
    assert human.exit_code == 0, human.output
    assert "project docs: " in human.stdout and "docs/testing.md" in human.stdout
    listed = await run("list")
    listed_json = await run("list", "--json")
    for output in (json.dumps(data), human.stdout, listed.stdout, listed_json.stdout):
        assert "__project__" not in output and "vlocal" not in output and "(extras" not in output
    assert "project docs" in listed.stdout

    both = await run("search", "--project", PACKAGE, "sandbox")
    assert both.exit_code == 2 and "only QUERY" in both.stderr
    mixed = await run("search", "--project", "sandbox", "--mode", "fts")
    assert mixed.exit_code == 2 and "--mode" in mixed.stderr
    alone = await run("search", "sandbox")
    assert alone.exit_code == 2 and "PACKAGE and QUERY" in alone.stderr


# -- 80 columns ----------------------------------------------------------------------------------

WIDTH = 80
QUERY_SET = (
    '{"id": "np-s-01", "kind": "symbol", "package": "nimble_pool", "version": "1.1.0", '
    '"query": "NimblePool.checkout!/4", "expect": {"ref": "NimblePool.html#checkout!/4"}}\n'
    '{"id": "np-c-01", "kind": "concept", "package": "nimble_pool", "version": "1.1.0", '
    '"query": "stop the pool and its workers", "expect": {"ref": "NimblePool.html#stop/3"}}\n'
)


def record_usage(database: Path) -> None:
    """Usage rows with long model names, as a cloud setup records them."""
    from hexlocal_core.index.sqlite.store import Store
    from hexlocal_core.model import UsageEvent

    store = Store(database)
    try:
        sink = store.usage
        for model, kind in (
            ("local:sentence-transformers/all-MiniLM-L6-v2", "embed"),
            ("mistral-large-latest-with-a-very-long-deployment-suffix", "chat"),
        ):
            sink.record(
                UsageEvent(
                    model=model, kind=kind, prompt_tokens=1_234_567, completion_tokens=98_765
                )
            )
    finally:
        store.close()


async def test_every_table_fits_80_columns(cli_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", str(WIDTH))  # rich takes the width from it (no terminal)
    write_project_docs(cli_env / "project")
    (cli_env / "dev.jsonl").write_text(QUERY_SET)
    assert (await run("ingest", f"{PACKAGE}@{VERSION}")).exit_code == 0
    record_usage(cli_env / "index.db")
    eval_db = str(cli_env / "eval.db")
    commands = [
        ["usage"],
        ["index-docs"],
        ["drift"],
        ["reindex", "--dry-run"],
        ["reindex"],
        ["list"],
        ["ingest", f"{PACKAGE}@{VERSION}", "no_such_pkg"],
        ["models", "status"],
        ["models", "status", "--verbose"],
        ["models", "list"],
        ["doctor"],
        ["eval", "--queries", str(cli_env / "dev.jsonl"), "--database", eval_db, "--ingest"],
        ["eval", "--queries", str(cli_env / "dev.jsonl"), "--database", eval_db, "-v"],
    ]
    for args in commands:
        result = await run(*args)
        assert result.exit_code in (0, 1), (args, result.output)
        assert result.stdout.strip(), args
        # Log records are one line each by design; everything else is rendered to fit.
        shown = [*result.stdout.splitlines(), *result.stderr.splitlines()]
        for line in (x for x in shown if not x.startswith(("WARNING ", "INFO ", "DEBUG "))):
            assert len(line) <= WIDTH, (args, line)
            assert "…" not in line, (args, line)  # folded, never cut


# -- models and doctor say what is present, what is missing and the one fix ----------------------


async def test_models_status_gives_one_verdict_per_model(cli_env: Path, wide: None) -> None:
    from hexlocal_core.adapters import model_sources

    rows = model_sources.model_status(Settings.from_env())
    plain = await run("models", "status")
    assert plain.exit_code == 0, plain.output
    lines = [line for line in plain.stdout.splitlines() if not line.startswith("  ")]
    # COLUMNS is wide enough that no verdict wraps.
    assert [[w.rstrip(":") for w in line.split()[:2]] for line in lines] == [
        [r.which.value, r.presence.value] for r in rows
    ]
    assert "local folder" not in plain.stdout  # the steps only with --verbose
    verbose = await run("models", "status", "--verbose")
    assert "local folder" in verbose.stdout

    data = parsed(await run("models", "status", "--json"))
    assert [(r["which"], r["presence"], r["usable"]) for r in data] == [
        (r.which.value, r.presence.value, r.usable) for r in rows
    ]
    assert data[0]["steps"], "--json carries the lookup steps"


@pytest.fixture
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")


async def test_doctor_fails_without_a_usable_embedder(
    cli_env: Path, monkeypatch: pytest.MonkeyPatch, wide: None
) -> None:
    empty = cli_env / "empty-model"
    empty.mkdir()
    monkeypatch.setenv("HEXLOCAL_EMBED_MODEL_DIR", str(empty))
    result = await run("doctor", "--json")
    assert result.exit_code == 1, result.output
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    embedder = checks["embedder model"]
    assert embedder["status"] == "FAIL" and str(empty) in embedder["fix"], embedder
    human = await run("doctor")
    assert human.exit_code == 1 and "FAIL embedder model: broken" in human.stdout


async def test_doctor_checks_the_lock_and_refuses_a_404(
    cli_env: Path, fake_hex: FakeHex, monkeypatch: pytest.MonkeyPatch, wide: None
) -> None:
    project = cli_env / "project"
    (project / "mix.exs").write_text("defmodule MyApp.MixProject do\nend\n")
    (project / "mix.lock").write_text(
        '%{\n  "jason": {:hex, :jason, "1.4.4", "abc", [:mix], [], "hexpm", "def"},\n'
        '  "nimble_pool": {:hex, :nimble_pool, "1.1.0", "abc", [:mix], [], "hexpm", "def"},\n'
        '  "dep": {:git, "https://example.invalid/dep.git", "0123abc", []},\n}\n'
    )
    (project / "lib" / "my_app").mkdir(parents=True)
    monkeypatch.setenv("PROJECT_ROOT", str(project / "lib" / "my_app"))  # a subfolder
    monkeypatch.setenv("HEX_MIRROR", f"{fake_hex.base_url}/no-such-mirror")
    result = await run("doctor", "--json")
    assert result.exit_code == 0, result.output  # remote problems warn; searches still work
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    lock = checks["mix.lock"]
    assert lock["status"] == "OK", lock
    assert str(project / "mix.lock") in lock["detail"] and "2 Hex package(s)" in lock["detail"]
    assert "1 other dep(s)" in lock["detail"]
    mirror = checks["hex.pm docs mirror"]
    assert mirror["status"] == "WARN" and "404" in mirror["detail"], mirror
    assert checks["hex.pm API"]["status"] == "OK"


# -- eval has an index of its own ---------------------------------------------------------------

JASON_SET = (
    '{"id": "jason-s-01", "kind": "symbol", "package": "jason", "version": "1.4.5", '
    '"query": "Jason.decode/2", "expect": {"ref": "Jason.html#decode/2"}}\n'
)


async def test_eval_ingest_never_changes_the_project_index(cli_env: Path) -> None:
    assert (await run("ingest", "jason@1.4.4")).exit_code == 0
    before = parsed(await run("list", "--json"))
    queries = cli_env / "jason-set.jsonl"
    queries.write_text(JASON_SET)

    report = parsed(await run("eval", "--queries", str(queries), "--ingest", "--json"))
    after = parsed(await run("list", "--json"))
    assert [(p["name"], p["version"]) for p in after] == [(p["name"], p["version"]) for p in before]
    assert [(p["name"], p["version"]) for p in after] == [("jason", "1.4.4")]
    # The default: the set's own index in the user data dir (XDG_DATA_HOME in tests).
    import platformdirs

    own = Path(platformdirs.user_data_dir("hexlocal", appauthor=False)) / "eval" / "jason-set.db"
    assert own.is_file()
    assert [(p["name"], p["version"]) for p in report["fingerprint"]["packages"]] == [
        ("jason", "1.4.5")
    ]


def test_eval_choices_are_the_cores() -> None:
    from hexlocal_cli.eval_cmd import eval_command
    from hexlocal_core.evaluation import EVAL_MODES, KINDS

    options = {p.name: p for p in eval_command.params}
    only, modes = options["only"].type, options["modes"].type
    assert tuple(only.choices) == tuple(KINDS)
    assert tuple(modes.choices) == tuple(EVAL_MODES)
    assert only.convert("error", None, None) == "error"
    with pytest.raises(click.BadParameter):
        modes.convert("fts,nope", None, None)


def test_a_cli_run_waits_for_the_whole_ingestion(monkeypatch: pytest.MonkeyPatch) -> None:
    # A one-shot command dies with its background job: an answer by keyword would leave
    # the package partial, and the next run would download it again to finish it.
    monkeypatch.setenv("HEXLOCAL_ANSWER_WHILE_EMBEDDING", "true")
    monkeypatch.setenv("INGEST_TIMEOUT_MS", "100")
    settings = common.load_settings()
    assert settings.answer_while_embedding is False
    assert settings.ingest_timeout_ms == common.CLI_INGEST_WAIT_MS


# -- the project's own modules ----------------------------------------------------------------

OWN_MODULE = """defmodule MyApp.Limits do
  @moduledoc "Rate limits for outgoing webhooks."

  @doc "Whether the caller may send another webhook now."
  def allow?(key), do: key != nil
end
"""


@pytest.mark.elixir
async def test_an_own_module_is_shown_by_its_source_file_and_line(cli_env: Path) -> None:
    from tests.support.elixir import compile_app

    project = cli_env / "project"
    (project / "mix.exs").write_text("defmodule MyApp.MixProject do\nend\n")
    compile_app(project, "my_app", {"lib/my_app/limits.ex": OWN_MODULE})
    shown = await run("get", "MyApp.Limits.allow?/1")
    assert shown.exit_code == 0, shown.output
    # the project's own code has no hexdocs URL: where to read more is its file and line
    # (the line the beam's Docs chunk records for it, as ExDoc's source links use it)
    assert "lib/my_app/limits.ex:4" in shown.stdout, shown.stdout
    assert "MyApp.Limits.html#allow?/1" not in shown.stdout


def test_list_says_what_a_package_is_when_it_is_not_a_dependency() -> None:
    from hexlocal_cli.docs_cmds import _list_detail

    row = {"state": "indexed", "ingested_at": "2026-12-04T14:49:31+00:00", "source": "beam"}
    assert _list_detail({**row, "kind": "otp"}) == "OTP, 2026-12-04 14:49"
    assert _list_detail({**row, "kind": "elixir"}) == "Elixir, 2026-12-04 14:49"
    assert _list_detail({**row, "kind": "project"}) == "own app, 2026-12-04 14:49"
    hex_row = {**row, "kind": "hex", "source": "hexdocs"}
    assert _list_detail(hex_row) == "hexdocs, 2026-12-04 14:49"  # a dependency: its source
