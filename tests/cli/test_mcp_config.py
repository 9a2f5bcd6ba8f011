"""`hexlocal mcp-config`: each client's entry in that client's own format and file, the
server's settings carried in its env, secrets handled as asked, existing files merged
(never clobbered, a backup kept), and absolute paths (a client may start the server
from `/` without the shell's PATH)."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from hexlocal_cli.main import cli
from hexlocal_cli.mcp_clients import CLIENTS, Scope
from hexlocal_cli.mcp_config_cmd import server_command
from hexlocal_core.client_env import SERVER_ENV_EXTRA

pytestmark = pytest.mark.integration

CLIENT_NAMES = sorted(CLIENTS)
# client -> (its key, the entry's shape beyond command/args/env)
FORMATS: dict[str, tuple[str, dict[str, Any]]] = {
    "claude-code": ("mcpServers", {"type": "stdio"}),
    "cursor": ("mcpServers", {"type": "stdio"}),
    "vscode": ("servers", {"type": "stdio"}),
    "antigravity": ("mcpServers", {}),
    "gemini": ("mcpServers", {}),
    "windsurf": ("mcpServers", {}),
    "zed": ("context_servers", {}),
    "opencode": ("mcp", {"type": "local", "enabled": True}),
}
# client, scope -> where --write puts it: ("project" | "home", path parts)
FILES = {
    ("claude-code", "project"): ("project", ".mcp.json"),
    ("cursor", "project"): ("project", ".cursor/mcp.json"),
    ("cursor", "user"): ("home", ".cursor/mcp.json"),
    ("antigravity", "user"): ("home", ".gemini/antigravity/mcp_config.json"),
    ("codex", "user"): ("home", ".codex/config.toml"),
    ("codex", "project"): ("project", ".codex/config.toml"),
    ("vscode", "project"): ("project", ".vscode/mcp.json"),
    ("zed", "user"): ("home", ".config/zed/settings.json"),
    ("zed", "project"): ("project", ".zed/settings.json"),
    ("opencode", "project"): ("project", "opencode.json"),
    ("opencode", "user"): ("home", ".config/opencode/opencode.json"),
    ("gemini", "project"): ("project", ".gemini/settings.json"),
    ("gemini", "user"): ("home", ".gemini/settings.json"),
    ("windsurf", "user"): ("home", ".codeium/windsurf/mcp_config.json"),
}


def invoke(*args: str) -> Result:
    # Through the group, as a user runs it: click caches a command's help option from the
    # first context it sees, and the bare command's would drop the group's `-h` for every
    # later test (test_cli's help-text check failed after this module).
    return CliRunner().invoke(cli, ["mcp-config", *args])


@pytest.fixture(autouse=True)
def shell(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A shell with no hexlocal, hub, proxy or CA variable set, and HOME under tmp."""
    for name in (*SERVER_ENV_EXTRA, "HEXLOCAL_ANSWER_WHILE_EMBEDDING", "HEXLOCAL_MODEL_CACHE"):
        monkeypatch.delenv(name, raising=False)
    for name in ("XDG_CONFIG_HOME", "CODEX_HOME"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "my_app"
    root.mkdir()
    (root / "mix.exs").write_text("defmodule MyApp.MixProject do\nend\n")
    return root


def printed(result: Result, client: str) -> dict[str, Any]:
    """The entry a printed config holds, checked for the client's container."""
    assert result.exit_code == 0, result.output
    if client == "codex":
        doc = tomllib.loads(result.stdout)
        assert list(doc) == ["mcp_servers"]
        entry: dict[str, Any] = doc["mcp_servers"]["hexlocal"]
        return entry
    doc = json.loads(result.stdout)
    assert list(doc) == [FORMATS[client][0]]
    assert list(doc[FORMATS[client][0]]) == ["hexlocal"]
    entry = doc[FORMATS[client][0]]["hexlocal"]
    return entry


def command_of(entry: dict[str, Any]) -> list[str]:
    if isinstance(entry["command"], list):
        return list(entry["command"])
    return [entry["command"], *entry["args"]]


def env_of(entry: dict[str, Any]) -> dict[str, str]:
    env: dict[str, str] = entry.get("environment", entry.get("env", {}))
    return env


@pytest.mark.parametrize("client", CLIENT_NAMES)
def test_each_client_gets_its_own_format_and_this_installations_server(
    client: str, project: Path
) -> None:
    scope = "project" if Scope.PROJECT in CLIENTS[client].files else "user"
    entry = printed(invoke(client, "--project", str(project), "--scope", scope), client)
    command = command_of(entry)
    assert Path(command[0]).is_absolute() and os.access(command[0], os.X_OK)
    # The script of the environment running hexlocal, not whatever is first on PATH.
    assert command == server_command(sys.executable)
    if client != "codex":
        for key, value in FORMATS[client][1].items():
            assert entry[key] == value
    assert env_of(entry)["PROJECT_ROOT"] == str(project)


@pytest.mark.parametrize(("client", "scope"), sorted(FILES))
def test_write_puts_the_entry_in_the_clients_own_file(
    client: str, scope: str, project: Path, shell: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    result = invoke(client, "--scope", scope, "--write")
    assert result.exit_code == 0, result.output
    base, parts = FILES[client, scope]
    path = (project if base == "project" else shell) / parts
    assert f"{path}: wrote hexlocal" in result.stdout
    text = path.read_text()
    doc = tomllib.loads(text) if client == "codex" else json.loads(text)
    container = "mcp_servers" if client == "codex" else FORMATS[client][0]
    assert command_of(doc[container]["hexlocal"]) == server_command(sys.executable)


@pytest.mark.parametrize(
    ("client", "root"),
    [
        ("cursor", "${workspaceFolder}"),  # its user file serves every workspace
        ("codex", None),  # Codex starts servers in the session's folder
        ("zed", None),  # Zed starts context servers in the project's root
        ("gemini", None),
        ("opencode", None),
        ("antigravity", "PROJECT"),  # no workspace variable: this project, with a note
        ("windsurf", "PROJECT"),
    ],
)
def test_a_user_scope_entry_names_no_one_project_unless_it_must(
    client: str, root: str | None, project: Path
) -> None:
    result = invoke(client, "--project", str(project), "--scope", "user")
    env = env_of(printed(result, client))
    assert env.get("PROJECT_ROOT") == (str(project) if root == "PROJECT" else root)
    if root == "PROJECT":
        assert "serves every workspace" in result.stderr


def test_the_servers_settings_are_carried_paths_made_absolute(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    monkeypatch.setenv("HEX_MIRROR", "https://mirror.example/repo")
    monkeypatch.setenv("HEX_API_URL", "https://mirror.example/api")
    monkeypatch.setenv("DATABASE_PATH", "indexes/shared.db")
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.example")
    monkeypatch.setenv("SSL_CERT_FILE", "~/certs/ca.pem")
    monkeypatch.setenv("INGEST_TIMEOUT_MS", "40000")
    monkeypatch.setenv("HEXLOCAL_HTTP_TOKEN", "only-serve-http-reads-it")
    monkeypatch.setenv("AI_API_KEY", "")  # blank: not set
    env = env_of(printed(invoke("gemini"), "gemini"))
    assert env == {
        "PROJECT_ROOT": str(project),
        "DATABASE_PATH": str(project / "indexes" / "shared.db"),
        "INGEST_TIMEOUT_MS": "40000",
        "HEX_API_URL": "https://mirror.example/api",
        "HEX_MIRROR": "https://mirror.example/repo",
        "HF_ENDPOINT": "https://hub.example",
        "SSL_CERT_FILE": str(Path("~/certs/ca.pem").expanduser()),
    }


@pytest.mark.parametrize(
    ("client", "written"),
    [
        ("claude-code", "${GITHUB_TOKEN:-}"),
        ("cursor", "${env:GITHUB_TOKEN}"),
        ("vscode", "${env:GITHUB_TOKEN}"),
        ("windsurf", "${env:GITHUB_TOKEN}"),
        ("opencode", "{env:GITHUB_TOKEN}"),
        ("gemini", None),  # it hides *TOKEN* variables, references included
        ("zed", None),
        ("antigravity", None),
    ],
)
def test_secrets_are_references_the_client_resolves_never_values(
    client: str, written: str | None, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secret_value_123")
    result = invoke(client, "--project", str(project))
    assert "ghp_secret_value_123" not in result.stdout + result.stderr
    assert env_of(printed(result, client)).get("GITHUB_TOKEN") == written
    if written is None:
        assert "not written" in result.stderr and "GITHUB_TOKEN" in result.stderr


def test_codex_forwards_secrets_by_name(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secret_value_123")
    monkeypatch.setenv("AI_API_KEY", "sk-secret")
    monkeypatch.setenv("HTTPS_PROXY", "http://user:pw@proxy.example:3128")  # credentials: one too
    monkeypatch.setenv("HEX_MIRROR", "https://mirror.example/repo")
    result = invoke("codex", "--project", str(project))
    entry = printed(result, "codex")
    assert entry["env_vars"] == ["AI_API_KEY", "GITHUB_TOKEN", "HTTPS_PROXY"]
    assert entry["env"] == {"HEX_MIRROR": "https://mirror.example/repo"}
    assert entry["startup_timeout_sec"] == 30
    assert "pw@" not in result.stdout and "sk-secret" not in result.stdout


def test_inline_secrets_are_written_into_a_private_file(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secret_value_123")
    result = invoke("gemini", "--project", str(project), "--secrets", "inline", "--write")
    assert result.exit_code == 0, result.output
    path = project / ".gemini" / "settings.json"
    assert json.loads(path.read_text())["mcpServers"]["hexlocal"]["env"]["GITHUB_TOKEN"] == (
        "ghp_secret_value_123"
    )
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "readable by you only" in result.stderr


def test_omitted_secrets_are_named(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AI_API_KEY", "sk-secret")
    result = invoke("cursor", "--project", str(project), "--secrets", "omit")
    assert "AI_API_KEY" not in env_of(printed(result, "cursor"))
    assert "not written (--secrets omit): AI_API_KEY" in result.stderr


# -- merging into an existing file ----------------------------------------------------------


def test_an_existing_config_is_merged_and_backed_up(project: Path) -> None:
    path = project / ".mcp.json"
    old = {"mcpServers": {"other": {"command": "other-mcp"}}, "note": "mine"}
    path.write_text(json.dumps(old, indent=2))
    result = invoke("claude-code", "--project", str(project), "--write")
    assert result.exit_code == 0, result.output
    doc = json.loads(path.read_text())
    assert doc["note"] == "mine" and doc["mcpServers"]["other"] == {"command": "other-mcp"}
    assert doc["mcpServers"]["hexlocal"]["command"] == server_command(sys.executable)[0]
    backups = list(project.glob(".mcp.json.*.bak"))
    assert [json.loads(b.read_text()) for b in backups] == [old]
    assert f"the old file is kept as {backups[0]}" in result.stdout
    again = invoke("claude-code", "--project", str(project), "--write")
    assert "already up to date" in again.stdout
    assert len(list(project.glob(".mcp.json.*.bak"))) == 1


def test_a_malformed_config_is_refused_and_left_untouched(project: Path) -> None:
    path = project / ".cursor" / "mcp.json"
    path.parent.mkdir()
    path.write_bytes(b'{"mcpServers": {"other": {"command": "x",}\n')
    result = invoke("cursor", "--project", str(project), "--write")
    assert result.exit_code == 1
    assert f"{path} has comments or trailing commas" in result.output
    assert "Nothing was written" in result.output and "Traceback" not in result.output
    path.write_bytes(b'{"mcpServers": {"other": {"command": "x"}\n')
    result = invoke("cursor", "--project", str(project), "--write")
    assert result.exit_code == 1 and "is not valid JSON" in result.output
    assert "line 2 column 1" in result.output
    assert path.read_bytes() == b'{"mcpServers": {"other": {"command": "x"}\n'
    assert sorted(p.name for p in path.parent.iterdir()) == ["mcp.json"]


def test_vscode_and_zed_files_with_comments_keep_them(project: Path, shell: Path) -> None:
    vscode = project / ".vscode" / "mcp.json"
    vscode.parent.mkdir()
    vscode.write_text(
        '{\n  // team servers\n  "servers": {\n    "db": {"type": "stdio", "command": "db"},\n'
        "  },\n}\n"
    )
    assert invoke("vscode", "--project", str(project), "--write").exit_code == 0
    assert "// team servers" in vscode.read_text()
    zed = shell / ".config" / "zed" / "settings.json"
    zed.parent.mkdir(parents=True)
    zed.write_text('// Zed settings\n{\n  "theme": "One Dark", // mine\n}\n')
    assert invoke("zed", "--project", str(project), "--write").exit_code == 0
    text = zed.read_text()
    assert "// Zed settings" in text and "// mine" in text and '"context_servers"' in text


def test_a_codex_config_keeps_its_other_settings(project: Path, shell: Path) -> None:
    path = shell / ".codex" / "config.toml"
    path.parent.mkdir()
    path.write_text('model = "o4"\n\n[mcp_servers.hexlocal]\ncommand = "/old/hexlocal-mcp"\n')
    result = invoke("codex", "--project", str(project), "--write")
    assert result.exit_code == 0, result.output
    doc = tomllib.loads(path.read_text())
    assert doc["model"] == "o4"
    assert doc["mcp_servers"]["hexlocal"]["command"] == server_command(sys.executable)[0]


def test_codex_home_and_xdg_config_home_are_honoured(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert invoke("codex", "--project", str(project), "--write").exit_code == 0
    assert (tmp_path / "codex" / "config.toml").is_file()
    assert invoke("zed", "--project", str(project), "--write").exit_code == 0
    assert (tmp_path / "xdg" / "zed" / "settings.json").is_file()


def test_file_overrides_the_clients_usual_place(project: Path, tmp_path: Path) -> None:
    target = tmp_path / "profile" / "mcp.json"
    result = invoke("vscode", "--project", str(project), "--file", str(target), "--write")
    assert result.exit_code == 0, result.output
    assert "hexlocal" in json.loads(target.read_text())["servers"]


# -- Claude Code's add-json form --------------------------------------------------------------


def test_add_json_prints_a_command_claude_accepts(project: Path) -> None:
    """`claude mcp add-json NAME JSON` takes the server's entry, not a whole .mcp.json
    document: given {"mcpServers": ...} it answers "Invalid configuration"."""
    result = invoke("claude-code", "--project", str(project), "--add-json")
    assert result.exit_code == 0, result.output
    argv = shlex.split(result.stdout)
    assert argv[:6] == ["claude", "mcp", "add-json", "--scope", "local", "hexlocal"]
    entry = json.loads(argv[6])
    assert set(entry) == {"type", "command", "args", "env"}
    assert entry["env"]["PROJECT_ROOT"] == str(project)
    user = shlex.split(
        invoke("claude-code", "--project", str(project), "--add-json", "--scope", "user").stdout
    )
    assert user[4] == "user" and "PROJECT_ROOT" not in json.loads(user[6])["env"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("claude-code", "--scope", "user", "--write"), "use --add-json --scope user"),
        (("claude-code", "--add-json", "--write"), "drop --write"),
        (("cursor", "--add-json"), "--add-json is Claude Code's"),
        (("cursor", "--scope", "local"), "--scope local is Claude Code's"),
        (("vscode", "--scope", "user"), "VS Code has no user config"),
        (("antigravity", "--scope", "project"), "Antigravity has no project config"),
    ],
)
def test_impossible_combinations_are_usage_errors(
    args: tuple[str, ...], says: str, project: Path
) -> None:
    result = invoke(*args, "--project", str(project))
    assert result.exit_code == 2 and says in result.output
    assert not (project / ".mcp.json").exists()


# -- the command itself -------------------------------------------------------------------


def test_printed_command_starts_hexlocal_mcp(project: Path) -> None:
    """The config runs: the printed command with `--version` prints this version."""
    entry = printed(invoke("claude-code", "--project", str(project)), "claude-code")
    done = subprocess.run(
        [*command_of(entry), "--version"],
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


def test_project_defaults_to_project_root_then_the_working_directory(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    assert env_of(printed(invoke("cursor"), "cursor"))["PROJECT_ROOT"] == str(project)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PROJECT_ROOT", str(project))
    assert env_of(printed(invoke("cursor"), "cursor"))["PROJECT_ROOT"] == str(project)


def test_relative_project_is_made_absolute(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project.parent)
    entry = printed(invoke("antigravity", "--project", "my_app"), "antigravity")
    assert entry["env"]["PROJECT_ROOT"] == str(project)


def test_unknown_client_and_missing_project_are_usage_errors(tmp_path: Path) -> None:
    assert invoke("emacs").exit_code == 2
    result = invoke("cursor", "--project", str(tmp_path / "absent"))
    assert result.exit_code == 2 and "does not exist" in result.output


def test_a_folder_without_mix_exs_gets_a_note_on_stderr(tmp_path: Path) -> None:
    result = invoke("cursor", "--project", str(tmp_path))
    printed(result, "cursor")  # still a config on stdout
    assert "no mix.exs" in result.stderr


# -- uvx ----------------------------------------------------------------------------------


@pytest.fixture
def fake_uvx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `uvx` on PATH that records its arguments and answers like uvx would."""
    folder = tmp_path / "uvbin"
    folder.mkdir()
    log = tmp_path / "uvx.calls"
    script = folder / "uvx"
    script.write_text(
        f'#!/bin/sh\necho "$@" >> {log}\n'
        'if [ -n "$UVX_FAIL" ]; then echo "error: no network" >&2; exit 2; fi\n'
        'echo "hexlocal-mcp, version 0.1.0"\n'
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return log


def test_uvx_from_a_wheel_starts_offline_after_filling_uvs_cache(
    project: Path, fake_uvx: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = project / "dist" / "hexlocal-0.1.0-py3-none-any.whl"
    wheel.parent.mkdir()
    wheel.write_bytes(b"PK")
    monkeypatch.chdir(project)
    result = invoke("codex", "--uvx-from", "dist/" + wheel.name)
    entry = printed(result, "codex")
    assert Path(entry["command"]).name == "uvx" and Path(entry["command"]).is_absolute()
    assert entry["args"] == ["--offline", "--from", str(wheel), "hexlocal-mcp"]
    assert entry["startup_timeout_sec"] == 120
    # Filled once, with the network: the client's first start needs none.
    assert fake_uvx.read_text() == f"--from {wheel} hexlocal-mcp --version\n"


def test_uvx_from_a_git_url_is_kept_as_given(project: Path, fake_uvx: Path) -> None:
    url = "git+https://example.org/hexlocal.git@v0.1.0"
    entry = printed(invoke("cursor", "--project", str(project), "--uvx-from", url), "cursor")
    assert entry["args"] == ["--offline", "--from", url, "hexlocal-mcp"]


def test_uvx_that_cannot_install_is_a_clear_error(
    project: Path, fake_uvx: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UVX_FAIL", "1")
    url = "git+https://example.org/hexlocal.git"
    result = invoke("cursor", "--project", str(project), "--uvx-from", url, "--write")
    assert result.exit_code == 1
    assert "uvx could not install hexlocal (exit 2)" in result.output
    assert "error: no network" in result.output
    assert result.stdout == "" and not (project / ".cursor").exists()


def test_uvx_from_a_missing_wheel_is_a_usage_error(project: Path) -> None:
    result = invoke("cursor", "--project", str(project), "--uvx-from", "nope.whl")
    assert result.exit_code == 2
    assert "nope.whl does not exist" in result.output
    assert result.stdout == ""
    assert "Traceback" not in result.output


def test_a_usage_error_comes_before_uvxs_cache_is_filled(project: Path, fake_uvx: Path) -> None:
    url = "git+https://example.org/hexlocal.git"
    result = invoke("vscode", "--project", str(project), "--scope", "user", "--uvx-from", url)
    assert result.exit_code == 2 and "VS Code has no user config" in result.output
    assert not fake_uvx.exists()  # minutes of downloads, the first time: not for an error
