"""`hexlocal mcp-config CLIENT`: this installation's MCP server entry for one client, in
that client's own format, printed or merged into its config file (`--write`).

An MCP client started from a desktop launcher often has neither the shell's PATH nor its
working directory, and some (Codex, Gemini CLI) drop the shell's environment on purpose:
so the command is an absolute path, and every hexlocal setting set here goes into the
entry's `env` (`mcp_clients` says per client what is carried and how secrets are).
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import click

from hexlocal_cli import config_files, mcp_clients
from hexlocal_cli.mcp_clients import CLIENTS, SERVER_NAME, Client, Scope, Secrets, Server
from hexlocal_core import install
from hexlocal_core.client_env import PATH_VARIABLES
from hexlocal_core.config import server_environment, user_dirs

SCRIPT = "hexlocal-mcp"
UVX_WARM_TIMEOUT_S = 900  # a first `uvx` run downloads every dependency
# Claude Code's scopes for `claude mcp add-json`: local (this project, private), user, project.
CLAUDE_SCOPES = ("local", "user", "project")


def server_command(executable: str | None = None) -> list[str]:
    """This installation's server: the `hexlocal-mcp` script installed beside the running
    interpreter, else that interpreter running the package. The path is not resolved:
    a venv's python is a symlink whose target is outside the venv."""
    python = Path(executable or sys.executable).absolute()
    script = python.parent / SCRIPT
    if script.is_file():
        return [str(script)]
    return [str(python), "-m", "hexlocal_mcp"]


def uvx_source(source: str) -> str:
    """A local wheel or folder made absolute; a URL (git+https://..., https://...whl) as is."""
    if "://" in source or source.startswith("git+"):
        return source
    local = Path(source).expanduser()
    if not local.exists():
        raise click.BadParameter(
            f"{source} does not exist; give a built wheel (`python -m build`) or a git "
            "URL (git+https://...)",
            param_hint="--uvx-from",
        )
    return str(local.absolute())


def uvx_command(source: str) -> list[str]:
    """`uvx --offline --from SOURCE hexlocal-mcp`: without --offline uvx asks the package
    index on every start (about 1 s more than the installed command, and no start at all
    without a network); with it, the start is the installed command's, from uv's cache,
    which `warm_uvx` fills first."""
    uvx = shutil.which("uvx") or "uvx"  # absolute when found: clients may lack the PATH
    return [uvx, "--offline", "--from", source, SCRIPT]


def warm_uvx(command: list[str]) -> str:
    """Runs the uvx command once with the network (no --offline), so uv's cache holds
    hexlocal and its dependencies; returns the version it printed."""
    online = [part for part in command if part != "--offline"]
    click.echo(f"preparing uv's cache: {shlex.join([*online, '--version'])} ...", err=True)
    try:
        done = subprocess.run(
            [*online, "--version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=UVX_WARM_TIMEOUT_S,
        )
    except FileNotFoundError as exc:
        raise click.ClickException(
            "uvx is not installed (`pip install uv`, or drop --uvx-from)"
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise click.ClickException(f"uvx did not finish within {UVX_WARM_TIMEOUT_S} s") from exc
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-6:])
        raise click.ClickException(
            f"uvx could not install hexlocal (exit {done.returncode}); the config would not "
            f"start offline. Run it again with a network.\n{tail}"
        )
    return done.stdout.strip()


def chosen_command(uvx_from: str | None) -> tuple[list[str], str | None]:
    """The server command, and why it is not this interpreter's script when it is not.
    A uvx command's cache is filled now, so the client's first start works offline."""
    if not uvx_from:
        here = install.detect()
        if here.kind is not install.Kind.UVX:
            return server_command(), None
        why = (
            "hexlocal runs from uvx's cache here, a folder uv may rebuild or delete: the "
            "entry starts it with uvx instead"
        )
        source = here.source or install.DISTRIBUTION
    else:
        source, why = uvx_source(uvx_from), None
    command = uvx_command(source)
    click.echo(f"uvx: {warm_uvx(command)} is in uv's cache", err=True)
    return command, why


def server_settings(root: Path) -> dict[str, str]:
    """hexlocal's variables set here, paths made absolute (a client may start the server
    elsewhere), PROJECT_ROOT the project's."""
    settings = server_environment()
    for name in PATH_VARIABLES & settings.keys():
        settings[name] = str(Path(settings[name]).expanduser().absolute())
    settings["PROJECT_ROOT"] = str(root)
    return settings


def target_file(client: Client, scope: Scope, root: Path, file: Path | None) -> Path:
    if file is not None:
        return file.expanduser().absolute()
    place = client.files.get(scope)
    if place is None:
        if client.name == "claude-code":
            raise click.UsageError(
                "Claude Code keeps user-scope servers in ~/.claude.json, its own state file, "
                "which hexlocal does not edit: use --add-json --scope user and run the "
                "command it prints"
            )
        scopes = ", ".join(sorted(client.files))
        raise click.UsageError(f"{client.title} has no {scope} config; its scopes: {scopes}")
    return place(root, user_dirs())


def merge(client: Client, path: Path, entry: mcp_clients.Entry) -> config_files.Written:
    old = config_files.read_text(path)
    keys = (client.container, SERVER_NAME)
    if client.toml:
        new = config_files.set_toml_table(path, old, keys, str(entry.value))
    else:
        new = config_files.set_json_entry(path, old, keys, entry.value, comments=client.comments)
    return config_files.write(path, new, old, private=entry.secrets_inline)


def claude_add_json(entry: mcp_clients.Entry, scope: str) -> str:
    """The command line; `add-json` takes the server's entry alone (a whole `.mcp.json`
    document, `{"mcpServers": ...}`, is what it rejects as "Invalid configuration")."""
    document = json.dumps(entry.value, ensure_ascii=False)
    return shlex.join(["claude", "mcp", "add-json", "--scope", scope, SERVER_NAME, document])


@click.command("mcp-config")
@click.argument("client_name", metavar="CLIENT", type=click.Choice(sorted(CLIENTS)))
@click.option(
    "--project",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The Elixir project (PROJECT_ROOT); default: PROJECT_ROOT, else the working directory.",
)
@click.option(
    "--scope",
    type=click.Choice([*(s.value for s in Scope), "local"]),
    help="project: the project's config file; user: the client's own, for every project "
    "(default: per client, see docs/clients.md). local: with --add-json only.",
)
@click.option("--write", is_flag=True, help="Merge the entry into the config file (backup kept).")
@click.option(
    "--file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The config file to merge into, instead of the client's usual one.",
)
@click.option(
    "--secrets",
    type=click.Choice([s.value for s in Secrets]),
    default=Secrets.REF.value,
    show_default=True,
    help="AI_API_KEY, GITHUB_TOKEN, DATABASE_URL: a reference the client resolves from its "
    "environment (ref), the values themselves (inline; the file is made private), or omit.",
)
@click.option(
    "--uvx-from",
    metavar="WHEEL_OR_GIT_URL",
    help="Start hexlocal with `uvx --offline --from ...` (uv's cache is filled now).",
)
@click.option(
    "--add-json", is_flag=True, help="claude-code: print a `claude mcp add-json` command."
)
def mcp_config(
    client_name: str,
    project: Path | None,
    scope: str | None,
    write: bool,
    file: Path | None,
    secrets: str,
    uvx_from: str | None,
    add_json: bool,
) -> None:
    """Print (or --write) hexlocal's entry for an MCP client, in its own format.

    Clients: claude-code, cursor, antigravity, codex, vscode, zed, opencode, gemini,
    windsurf. The command and the paths are absolute, and every hexlocal setting set in
    this shell is carried in the entry's env. Where the entry goes, and what a client does
    with the environment, is said on stderr; docs/clients.md has the details.
    """
    client = CLIENTS[client_name]
    if add_json and client.name != "claude-code":
        raise click.UsageError("--add-json is Claude Code's form; drop it for " + client.title)
    if add_json and write:
        raise click.UsageError("--add-json prints a command for you to run; drop --write")
    if scope == "local" and not add_json:
        raise click.UsageError("--scope local is Claude Code's, with --add-json")
    root = (project or Path(server_environment().get("PROJECT_ROOT") or ".")).expanduser()
    root = root.absolute()
    claude_scope = scope or "local"
    if add_json:  # Claude's local and project scopes both name this project
        where = Scope.USER if claude_scope == "user" else Scope.PROJECT
    else:
        where = Scope(scope) if scope else client.default_scope
    # Known before uvx's cache is filled (minutes, the first time): a usage error is not.
    path = None if add_json else target_file(client, where, root, file)
    command, why = chosen_command(uvx_from)
    startup = mcp_clients.CODEX_STARTUP_UVX_S if "--offline" in command else None
    server = Server(command, server_settings(root), root, startup or mcp_clients.CODEX_STARTUP_S)
    entry = mcp_clients.build_entry(client, where, server, Secrets(secrets))
    if path is None:
        click.echo(claude_add_json(entry, claude_scope))
        _notes(tuple(n for n in entry.notes if n != client.note), why, root)
        return
    if not write:
        click.echo(mcp_clients.document(client, entry), nl=False)
        click.echo(f"{client.title}: merge this into {path} (or rerun with --write)", err=True)
        _notes(entry.notes, why, root)
        return
    try:
        written = merge(client, path, entry)
    except config_files.ConfigFileError as exc:
        raise click.ClickException(f"{exc}. Nothing was written.") from exc
    if not written.changed:
        click.echo(f"{path}: {SERVER_NAME} is already up to date")
    else:
        kept = f" (the old file is kept as {written.backup})" if written.backup else ""
        click.echo(f"{path}: wrote {SERVER_NAME}{kept}")
    _notes(entry.notes, why, root)


def _notes(notes: tuple[str, ...], why: str | None, root: Path) -> None:
    for note in (*((why,) if why else ()), *notes):
        click.echo(f"note: {note}", err=True)
    if not (root / "mix.exs").is_file():
        click.echo(f"note: {root} has no mix.exs; pass --project with your Mix project", err=True)
