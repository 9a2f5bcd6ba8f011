"""`hexlocal upgrade-impact PACKAGE [TO]`: what moving a dependency changes for this project.

One call of `Hexlocal.upgrade_impact`; the text is the MCP tool's (80 columns, what
breaks first), `--json` prints the structured report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
from rich.markup import escape

from hexlocal_cli import common

if TYPE_CHECKING:
    from hexlocal_core.service import Hexlocal
    from hexlocal_core.usecases.upgrade_impact import UpgradeReport


@click.command(name="upgrade-impact")
@click.argument("package")
@click.argument("to_version", metavar="[TO]", required=False)
@click.option(
    "--from",
    "from_version",
    metavar="VERSION",
    help="The version to compare from, for a package mix.lock does not pin.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def upgrade_impact_command(
    package: str, to_version: str | None, from_version: str | None, as_json: bool
) -> None:
    """What breaks or changes in this project's code if PACKAGE moves to TO.

    FROM is what mix.lock pins (for Elixir's own apps, the Elixir the project runs); TO
    defaults to hex.pm's latest stable release and may be a requirement ("~> 3.14").
    Every used function, callback or macro the new version removes, deprecates or
    changes is listed with its call sites, read from the compiled beams in _build (and
    lib/ sources for macros); then the changelog lines between the versions and the
    requirements other locked packages must meet. Nothing is indexed.
    """

    async def work(service: Hexlocal) -> UpgradeReport:
        return await service.upgrade_impact(package, to_version, from_version=from_version)

    from hexlocal_core.usecases.upgrade_text import render

    data = common.with_service(work, load_models=False).to_dict()
    if as_json:
        common.emit_json(data)
        return
    common.out(soft_wrap=True).print(escape(render(data)))
