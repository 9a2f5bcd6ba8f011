"""The `hexlocal` command: a click group over one module per command group.

Commands written elsewhere plug in through `OPTIONAL_COMMANDS`, loaded lazily: a module
is imported only when its command runs or the command list is shown, so `hexlocal serve`
(what MCP clients start) does not pay for the engine imports of `eval`. A command whose
module does not exist is skipped; only a missing module of that exact name is skipped,
an import error inside an existing module is a bug and surfaces.
"""

from __future__ import annotations

import importlib
import importlib.util

import click

from hexlocal_cli import common, docs_cmds, memory_cmds, misc_cmds

# command name -> (module, attribute) of commands other modules provide.
OPTIONAL_COMMANDS: dict[str, tuple[str, str]] = {
    "eval": ("hexlocal_cli.eval_cmd", "eval_command"),
    "drift": ("hexlocal_cli.maintenance_cmds", "drift_command"),
    "reindex": ("hexlocal_cli.maintenance_cmds", "reindex_command"),
    "index-docs": ("hexlocal_cli.project_docs_cmd", "index_docs_command"),
}


def optional_command(module: str, attribute: str) -> click.Command | None:
    """The command `attribute` of `module`, or None when that module does not exist."""
    try:
        loaded = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise  # the module exists but one of its own imports is missing: a real error
        return None
    command = getattr(loaded, attribute)
    if not isinstance(command, click.Command):
        raise TypeError(f"{module}.{attribute} is not a click command")
    return command


def _module_exists(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


class HexlocalGroup(click.Group):
    """A group whose optional commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        optional = [name for name, (mod, _) in OPTIONAL_COMMANDS.items() if _module_exists(mod)]
        return sorted({*super().list_commands(ctx), *optional})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in OPTIONAL_COMMANDS:
            command = optional_command(*OPTIONAL_COMMANDS[cmd_name])
        return command


@click.group(
    cls=HexlocalGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(package_name="hexlocal", prog_name="hexlocal")
@click.option("-v", "--verbose", count=True, help="More logging on stderr (-vv for debug).")
def cli(verbose: int) -> None:
    """hexlocal: answers about Hex packages from the docs of the versions your project locks.

    Settings come from the environment (PROJECT_ROOT, DATABASE_PATH, ...); see
    `hexlocal doctor`. Exit codes: 0 ok, 1 failure, 2 usage error. `--json` prints only
    JSON on stdout.
    """
    common.setup_logging(verbose)


for _command in (*docs_cmds.COMMANDS, *memory_cmds.COMMANDS, *misc_cmds.COMMANDS):
    cli.add_command(_command)


def main() -> None:
    """The `hexlocal` console script."""
    cli(prog_name="hexlocal")
