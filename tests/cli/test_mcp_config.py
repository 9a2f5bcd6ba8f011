"""`hexlocal mcp-config`: the printed config parses, names a server that exists and starts,
and carries absolute paths (an MCP client may start it from `/` without the shell's PATH)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from hexlocal_cli.main import cli
from hexlocal_cli.mcp_config_cmd import CLIENTS, server_command

pytestmark = pytest.mark.integration

CLIENT_NAMES = sorted(CLIENTS)


def invoke(*args: str) -> Result:
    # Through the group, as a user runs it: click caches a command's help option from the
    # first context it sees, and the bare command's would drop the group's `-h` for every
    # later test (test_cli's help-text check failed after this module).
    return CliRunner().invoke(cli, ["mcp-config", *args])


def entry_of(result: Result) -> dict[str, Any]:
    assert result.exit_code == 0, result.output
    config = json.loads(result.stdout)
    assert list(config) == ["mcpServers"]
    assert list(config["mcpServers"]) == ["hexlocal"]
    entry: dict[str, Any] = config["mcpServers"]["hexlocal"]
    return entry


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "my_app"
    root.mkdir()
    (root / "mix.exs").write_text("defmodule MyApp.MixProject do\nend\n")
    return root


@pytest.mark.parametrize("client", CLIENT_NAMES)
def test_config_names_this_installations_server_by_absolute_path(
    client: str, project: Path
) -> None:
    entry = entry_of(invoke(client, "--project", str(project)))
    command = Path(entry["command"])
    assert command.is_absolute() and command.is_file() and os.access(command, os.X_OK)
    assert entry["env"] == {"PROJECT_ROOT": str(project)}
    assert Path(entry["env"]["PROJECT_ROOT"]).is_absolute()
    # The script of the environment running hexlocal, not whatever is first on PATH.
    assert [entry["command"], *entry["args"]] == server_command(sys.executable)


def test_project_defaults_to_the_working_directory_made_absolute(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    entry = entry_of(invoke("cursor"))
    assert entry["env"]["PROJECT_ROOT"] == str(project)


def test_relative_project_is_made_absolute(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project.parent)
    entry = entry_of(invoke("antigravity", "--project", "my_app"))
    assert entry["env"]["PROJECT_ROOT"] == str(project)


def test_each_client_gets_its_own_shape(project: Path) -> None:
    typed = {c: "type" in entry_of(invoke(c, "--project", str(project))) for c in CLIENT_NAMES}
    assert typed == {"antigravity": False, "claude-code": True, "cursor": True}


def test_printed_command_starts_hexlocal_mcp(project: Path) -> None:
    """The config runs: the printed command with `--version` prints this version."""
    entry = entry_of(invoke("claude-code", "--project", str(project)))
    done = subprocess.run(
        [entry["command"], *entry["args"], "--version"],
        env={**os.environ, **entry["env"]},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert version("hexlocal") in done.stdout


def test_without_a_script_the_interpreter_runs_the_package(tmp_path: Path) -> None:
    python = tmp_path / "bin" / "python3"
    assert server_command(str(python)) == [str(python), "-m", "hexlocal_mcp"]
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "hexlocal-mcp").write_text("#!/bin/sh\n")
    assert server_command(str(python)) == [str(tmp_path / "bin" / "hexlocal-mcp")]


def test_uvx_from_a_wheel_gives_its_absolute_path(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = project / "dist" / "hexlocal-0.1.0-py3-none-any.whl"
    wheel.parent.mkdir()
    wheel.write_bytes(b"PK")
    monkeypatch.chdir(project)
    entry = entry_of(invoke("claude-code", "--uvx-from", "dist/" + wheel.name))
    assert Path(entry["command"]).name == "uvx"
    assert entry["args"] == ["--from", str(wheel), "hexlocal-mcp"]
    assert entry["env"] == {"PROJECT_ROOT": str(project)}


def test_uvx_from_a_git_url_is_kept_as_given(project: Path) -> None:
    url = "git+https://example.org/hexlocal.git@v0.1.0"
    entry = entry_of(invoke("cursor", "--project", str(project), "--uvx-from", url))
    assert entry["args"] == ["--from", url, "hexlocal-mcp"]


def test_uvx_from_a_missing_wheel_is_a_usage_error(project: Path) -> None:
    result = invoke("cursor", "--project", str(project), "--uvx-from", "nope.whl")
    assert result.exit_code == 2
    assert "nope.whl does not exist" in result.output
    assert result.stdout == ""
    assert "Traceback" not in result.output


def test_unknown_client_and_missing_project_are_usage_errors(tmp_path: Path) -> None:
    assert invoke("vscode").exit_code == 2
    result = invoke("cursor", "--project", str(tmp_path / "absent"))
    assert result.exit_code == 2 and "does not exist" in result.output


def test_a_folder_without_mix_exs_gets_a_note_on_stderr(tmp_path: Path) -> None:
    result = invoke("cursor", "--project", str(tmp_path))
    entry_of(result)  # still a config on stdout
    assert "no mix.exs" in result.stderr
