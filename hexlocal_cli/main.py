"""The `hexlocal` command: a click group over one module per command group.

Every command is registered here directly. The command modules import the engine lazily
(inside the command bodies), so `hexlocal serve`, which MCP clients start, and `--help`
stay quick.
"""

from __future__ import annotations

import click

from hexlocal_cli import (
    common,
    diff_cmd,
    docs_cmds,
    doctor_cmd,
    eval_cmd,
    maintenance_cmds,
    mcp_config_cmd,
    memory_cmds,
    misc_cmds,
    models_cmds,
    project_docs_cmd,
    sync_cmd,
    upgrade_cmd,
)

COMMANDS: tuple[click.Command, ...] = (
    *docs_cmds.COMMANDS,
    diff_cmd.diff_command,
    upgrade_cmd.upgrade_impact_command,
    *memory_cmds.COMMANDS,
    *misc_cmds.COMMANDS,
    doctor_cmd.doctor,
    *models_cmds.COMMANDS,
    sync_cmd.sync_command,
    mcp_config_cmd.mcp_config,
    eval_cmd.eval_command,
    maintenance_cmds.drift_command,
    maintenance_cmds.reindex_command,
    project_docs_cmd.index_docs_command,
)


class HexlocalGroup(click.Group):
    """The top-level group: checks the raw arguments once, before any command parses them."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        common.check_argv(args)
        return super().parse_args(ctx, args)


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


for _command in COMMANDS:
    cli.add_command(_command)


def main() -> None:
    """The `hexlocal` console script."""
    cli(prog_name="hexlocal")
