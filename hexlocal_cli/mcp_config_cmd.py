"""`hexlocal mcp-config CLIENT`: a ready MCP client config with absolute paths filled in.

The example files in examples/mcp/ need hand edits (`/absolute/path/to/...`), and an MCP
client started from a desktop launcher often has neither the shell's PATH nor its working
directory: so the command is the absolute path of this installation's `hexlocal-mcp` (or
this interpreter with `-m hexlocal_mcp`), and PROJECT_ROOT is absolute.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import attrs
import click

from hexlocal_cli import common

SERVER_NAME = "hexlocal"
SCRIPT = "hexlocal-mcp"


@attrs.frozen
class Client:
    """Where one client reads its config, and whether its entries carry `type`."""

    where: str
    typed: bool


CLIENTS: dict[str, Client] = {
    "claude-code": Client("save as .mcp.json in the project root", typed=True),
    "cursor": Client("save as .cursor/mcp.json in the project (or ~/.cursor/mcp.json)", True),
    "antigravity": Client("paste into Manage MCP servers -> View raw config", typed=False),
}


def server_command(executable: str | None = None) -> list[str]:
    """This installation's server: the `hexlocal-mcp` script installed beside the running
    interpreter, else that interpreter running the package. The path is not resolved:
    a venv's python is a symlink whose target is outside the venv."""
    python = Path(executable or sys.executable).absolute()
    script = python.parent / SCRIPT
    if script.is_file():
        return [str(script)]
    return [str(python), "-m", "hexlocal_mcp"]


def uvx_command(source: str) -> list[str]:
    """`uvx --from SOURCE hexlocal-mcp`; a local wheel or folder becomes absolute, a URL
    (git+https://..., https://...whl) is kept as given."""
    if "://" not in source and not source.startswith("git+"):
        local = Path(source).expanduser()
        if not local.exists():
            raise click.BadParameter(
                f"{source} does not exist; give a built wheel (`python -m build`) or a git "
                "URL (git+https://...)",
                param_hint="--uvx-from",
            )
        source = str(local.absolute())
    uvx = shutil.which("uvx") or "uvx"  # absolute when found: clients may lack the PATH
    return [uvx, "--from", source, SCRIPT]


def config_for(client: str, command: list[str], project: Path) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "stdio"} if CLIENTS[client].typed else {}
    entry.update(command=command[0], args=command[1:], env={"PROJECT_ROOT": str(project)})
    return {"mcpServers": {SERVER_NAME: entry}}


@click.command("mcp-config")
@click.argument("client", type=click.Choice(sorted(CLIENTS)))
@click.option(
    "--project",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The Elixir project (PROJECT_ROOT); default: the working directory.",
)
@click.option(
    "--uvx-from",
    metavar="WHEEL_OR_GIT_URL",
    help="Run hexlocal with `uvx --from ...` instead of this installation.",
)
def mcp_config(client: str, project: Path | None, uvx_from: str | None) -> None:
    """Print a ready MCP config (JSON) for claude-code, cursor or antigravity.

    The command and PROJECT_ROOT are absolute paths. Where to put it goes to stderr.
    """
    root = (project or Path.cwd()).absolute()
    command = uvx_command(uvx_from) if uvx_from else server_command()
    common.emit_json(config_for(client, command, root))
    click.echo(f"{client}: {CLIENTS[client].where}", err=True)
    if not (root / "mix.exs").is_file():
        click.echo(f"note: {root} has no mix.exs; pass --project with your Mix project", err=True)
