"""`hexlocal diff PACKAGE [FROM] [TO]`: what changed between two versions of a package.

One call of `Hexlocal.diff_versions`; the text is the MCP tool's (`formatting.version_diff`),
`--json` prints the structured answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
from rich.markup import escape

from hexlocal_cli import common
from hexlocal_core import bounds

if TYPE_CHECKING:
    from hexlocal_core.service import Hexlocal
    from hexlocal_core.usecases.diff import VersionDiff

KINDS = ("added", "removed", "deprecated", "signature_changed", "docs_changed")


@click.command(name="diff")
@click.argument("package")
@click.argument("from_version", metavar="[FROM]", required=False)
@click.argument("to_version", metavar="[TO]", required=False)
@click.option("--kind", type=click.Choice(KINDS), help="Only this kind of change.")
@click.option(
    "--limit",
    type=click.IntRange(1, bounds.MAX_DIFF_LIMIT),
    default=bounds.DEFAULT_DIFF_LIMIT,
    show_default=True,
    help="Entries shown per kind.",
)
@click.option(
    "--offset",
    type=click.IntRange(0, bounds.MAX_DIFF_OFFSET),
    default=0,
    show_default=True,
    help="Skip this many entries of each kind (the next page).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the diff as JSON.")
def diff_command(
    package: str,
    from_version: str | None,
    to_version: str | None,
    kind: str | None,
    limit: int,
    offset: int,
    as_json: bool,
) -> None:
    """What changed in PACKAGE from FROM to TO: added, removed, deprecated, signature and
    docs changes, by module.

    FROM defaults to what mix.lock pins (else the indexed version), TO to the latest
    stable release. An OTP application's versions are OTP releases (`hexlocal diff
    stdlib OTP-27.3.4.1 OTP-28.0`; FROM defaults to the project's OTP, TO must be
    given). Both versions' docs are read in memory; the index is not changed.
    """

    async def work(service: Hexlocal) -> VersionDiff:
        return await service.diff_versions(
            package, from_version, to_version, kind=kind, limit=limit, offset=offset
        )

    from hexlocal_mcp.formatting import version_diff

    data = common.with_service(work, load_models=False).to_dict()
    if as_json:
        common.emit_json(data)
        return
    common.print_notices(data["notices"])
    body = version_diff({**data, "notices": []})
    # A URL stays one piece for the terminal to open; the CLI's next page is an option.
    body = body.replace("call again with kind=", "--kind ").replace(", offset=", " --offset ")
    common.out(soft_wrap=True).print(escape(body))
