"""The MCP clients `hexlocal mcp-config` writes for: where each keeps its config, in which
format, and how it hands the server its environment.

Checked against each client's documentation and, for Claude Code, Codex, Gemini CLI and
opencode, against the clients themselves (`make clients`). What differs:

- the file and the key the servers live under (`mcpServers`, `servers`, `context_servers`,
  `mcp`, Codex's TOML `[mcp_servers.NAME]`), and the entry's shape;
- where the server starts: a project-scope file names its project (PROJECT_ROOT absolute);
  a user-scope file serves every project, so PROJECT_ROOT is the client's workspace
  variable where it has one, else left out when the client starts servers in the project
  (the server's default is its working directory), else pinned with a note;
- the environment: Codex starts servers with a minimal one and Gemini CLI strips every
  variable named like a secret, so every setting is written into the entry's `env`;
  secrets are written as a reference the client resolves where it can (`secrets="ref"`),
  never as values unless asked (`secrets="inline"`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

from attrs import frozen

from hexlocal_cli.config_files import toml_string
from hexlocal_core.client_env import UserDirs, is_secret

SERVER_NAME = "hexlocal"
# Seconds Codex waits for a server to start (its default, 10, is close to a cold start on
# a loaded laptop; a first `uvx` start also installs hexlocal).
CODEX_STARTUP_S = 30
CODEX_STARTUP_UVX_S = 120


class Scope(StrEnum):
    PROJECT = "project"
    USER = "user"


class Secrets(StrEnum):
    REF = "ref"  # a reference the client resolves from its own environment
    INLINE = "inline"  # the value itself (the file is made private)
    OMIT = "omit"


FileAt = Callable[[Path, UserDirs], Path]


@frozen
class Client:
    name: str
    title: str
    container: str  # the key (or TOML table) the servers live under
    files: Mapping[Scope, FileAt]
    default_scope: Scope
    shape: Callable[[list[str], dict[str, str]], dict[str, Any]]
    comments: bool = False  # the client reads JSON with comments (JSONC)
    secret_ref: Callable[[str], str] | None = None  # how its config refers to a variable
    user_root: str | None = None  # PROJECT_ROOT in a user-scope file; None: left out
    pins_project: bool = False  # a user-scope file must name the project (start dir unknown)
    note: str = ""

    @property
    def toml(self) -> bool:
        return self.container == "mcp_servers"


def _typed(command: list[str], env: dict[str, str]) -> dict[str, Any]:
    return {"type": "stdio", "command": command[0], "args": command[1:], "env": env}


def _plain(command: list[str], env: dict[str, str]) -> dict[str, Any]:
    return {"command": command[0], "args": command[1:], "env": env}


def _opencode(command: list[str], env: dict[str, str]) -> dict[str, Any]:
    return {"type": "local", "command": command, "enabled": True, "environment": env}


def _in(*parts: str) -> FileAt:
    return lambda project, _dirs: project.joinpath(*parts)


def _home(*parts: str) -> FileAt:
    return lambda _project, dirs: dirs.home.joinpath(*parts)


CLIENTS: dict[str, Client] = {
    c.name: c
    for c in (
        Client(
            "claude-code",
            "Claude Code",
            "mcpServers",
            {Scope.PROJECT: _in(".mcp.json")},
            Scope.PROJECT,
            _typed,
            secret_ref=lambda name: "${" + name + ":-}",
            note="Claude Code asks once before it starts a project's .mcp.json servers; "
            "--add-json prints a `claude mcp add-json` command instead (local or user scope)",
        ),
        Client(
            "cursor",
            "Cursor",
            "mcpServers",
            {Scope.PROJECT: _in(".cursor", "mcp.json"), Scope.USER: _home(".cursor", "mcp.json")},
            Scope.PROJECT,
            _typed,
            secret_ref=lambda name: "${env:" + name + "}",
            user_root="${workspaceFolder}",
        ),
        Client(
            "antigravity",
            "Antigravity",
            "mcpServers",
            {Scope.USER: _home(".gemini", "antigravity", "mcp_config.json")},
            Scope.USER,
            _plain,
            pins_project=True,
            note="Antigravity's MCP config serves every workspace: it names this project; "
            "run mcp-config again from another project to switch",
        ),
        Client(
            "codex",
            "Codex CLI",
            "mcp_servers",
            {
                Scope.USER: lambda _project, dirs: dirs.codex_home / "config.toml",
                Scope.PROJECT: _in(".codex", "config.toml"),
            },
            Scope.USER,
            _plain,
            note="Codex starts servers with a minimal environment: hexlocal's settings are "
            "in `env`, secrets are forwarded by name (`env_vars`) from Codex's own environment",
        ),
        Client(
            "vscode",
            "VS Code",
            "servers",
            {Scope.PROJECT: _in(".vscode", "mcp.json")},
            Scope.PROJECT,
            _typed,
            comments=True,
            secret_ref=lambda name: "${env:" + name + "}",
            user_root="${workspaceFolder}",
        ),
        Client(
            "zed",
            "Zed",
            "context_servers",
            {
                Scope.USER: lambda _project, dirs: dirs.config_home / "zed" / "settings.json",
                Scope.PROJECT: _in(".zed", "settings.json"),
            },
            Scope.USER,
            _plain,
            comments=True,
            note="Zed starts context servers in the project's root and passes them its own "
            "environment",
        ),
        Client(
            "opencode",
            "opencode",
            "mcp",
            {
                Scope.PROJECT: _in("opencode.json"),
                Scope.USER: lambda _p, dirs: dirs.config_home / "opencode" / "opencode.json",
            },
            Scope.PROJECT,
            _opencode,
            comments=True,
            secret_ref=lambda name: "{env:" + name + "}",
        ),
        Client(
            "gemini",
            "Gemini CLI",
            "mcpServers",
            {
                Scope.PROJECT: _in(".gemini", "settings.json"),
                Scope.USER: _home(".gemini", "settings.json"),
            },
            Scope.PROJECT,
            _plain,
            comments=True,
            note="Gemini CLI starts stdio servers only in a trusted folder (`gemini trust`), "
            "and hides every variable named like a secret (*TOKEN*, *KEY*, *CERT*, ...) from "
            "them, $VAR references included: secrets reach hexlocal only as values "
            "(--secrets inline)",
        ),
        Client(
            "windsurf",
            "Windsurf",
            "mcpServers",
            {Scope.USER: _home(".codeium", "windsurf", "mcp_config.json")},
            Scope.USER,
            _plain,
            secret_ref=lambda name: "${env:" + name + "}",
            pins_project=True,
            note="Windsurf's MCP config serves every workspace: it names this project; "
            "run mcp-config again from another project to switch",
        ),
    )
}


@frozen
class Server:
    """What the entry starts: the command, and the settings it must be handed."""

    command: list[str]
    settings: dict[str, str]  # hexlocal's variables set here (config.server_environment)
    project: Path
    startup_s: int = CODEX_STARTUP_S


@frozen
class Entry:
    """One client's entry for hexlocal, and what the user should know about it."""

    value: Any  # the JSON entry, or Codex's TOML table as text
    secrets_inline: bool  # a secret's value is in it: the file must be private
    notes: tuple[str, ...]


def project_root(client: Client, scope: Scope, project: Path) -> str | None:
    """PROJECT_ROOT in this file, None when it is left to the server's working directory."""
    if scope is Scope.PROJECT or client.pins_project:
        return str(project)
    return client.user_root


def build_entry(client: Client, scope: Scope, server: Server, secrets: Secrets) -> Entry:
    env: dict[str, str] = {}
    root = project_root(client, scope, server.project)
    if root is not None:
        env["PROJECT_ROOT"] = root
    forwarded: list[str] = []
    left_out: list[str] = []
    inline = False
    for name, setting in server.settings.items():
        if name == "PROJECT_ROOT":
            continue
        if not is_secret(name, setting):
            env[name] = setting
        elif secrets is Secrets.INLINE:
            env[name], inline = setting, True
        elif secrets is Secrets.REF and client.toml:
            forwarded.append(name)
        elif secrets is Secrets.REF and client.secret_ref is not None:
            env[name] = client.secret_ref(name)
        else:
            left_out.append(name)
    notes = [client.note] if client.note else []
    if left_out:
        why = "--secrets omit" if secrets is Secrets.OMIT else f"{client.title} cannot refer to one"
        notes.append(
            f"not written ({why}): {', '.join(left_out)}; --secrets inline writes their values"
        )
    if inline:
        notes.append("secrets are written as values: the file is made readable by you only")
    if client.toml:
        value: Any = codex_table(server.command, env, forwarded, server.startup_s)
    else:
        value = client.shape(server.command, env)
    return Entry(value, inline, tuple(notes))


def codex_table(command: list[str], env: dict[str, str], forwarded: list[str], startup: int) -> str:
    lines = [
        f"[mcp_servers.{SERVER_NAME}]",
        f"command = {toml_string(command[0])}",
        f"args = [{', '.join(toml_string(a) for a in command[1:])}]",
        f"startup_timeout_sec = {startup}",
    ]
    if forwarded:
        lines.append(f"env_vars = [{', '.join(toml_string(n) for n in forwarded)}]")
    if env:
        lines += ["", f"[mcp_servers.{SERVER_NAME}.env]"]
        lines += [f"{name} = {toml_string(value)}" for name, value in env.items()]
    return "\n".join(lines) + "\n"


def document(client: Client, entry: Entry) -> str:
    """What `mcp-config` prints: the part of the client's file that holds the entry."""
    if client.toml:
        return str(entry.value)
    doc = {client.container: {SERVER_NAME: entry.value}}
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
