"""Where a package version's items come from: the HexDocs tarball, or compiled BEAM files.

The tarball is the default. BEAM Docs chunks serve git/path dependencies (hex.pm has no
docs for them), Elixir's own apps when the mirror has no tarball, and any package whose
compiled version matches when hex.pm cannot be reached.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from hexlocal_core.errors import IngestError, NotFound, RemoteError
from hexlocal_core.ingest.pipeline import IndexRequest
from hexlocal_core.model import Notice, ResolvedVersion, SourceKind
from hexlocal_core.ports import HexRegistry
from hexlocal_core.versions import ELIXIR_APPS

log = logging.getLogger("hexlocal.sources")


async def hexdocs_request(
    registry: HexRegistry, name: str, version: str, *, max_bytes: int, docs_html_url: str | None
) -> IndexRequest:
    """One GET of the docs tarball, parsed in memory (never written to disk)."""
    from hexlocal_core.ingest.hexdocs import parse_hexdocs
    from hexlocal_core.ingest.tarball import read_docs_tarball

    data = await registry.fetch_docs(name, version)

    def parse() -> IndexRequest:
        files = read_docs_tarball(data, max_bytes=max_bytes)
        parsed = parse_hexdocs(files, package=name, version=version, docs_html_url=docs_html_url)
        if not parsed.items:
            raise IngestError(f"the docs tarball of {name} {version} holds no documented items")
        return IndexRequest(
            package=name,
            version=version,
            source=SourceKind.HEXDOCS.value,
            items=parsed.items,
            docs_html_url=docs_html_url,
            meta={"generation": parsed.generation, "tarball_bytes": len(data)},
        )

    return await asyncio.to_thread(parse)


def beam_request(
    ebin: Path, name: str, version: str, *, notices: tuple[Notice, ...] = ()
) -> IndexRequest:
    from hexlocal_core.ingest.beam import items_from_beam_dir

    found = items_from_beam_dir(ebin, package=name, version=version)
    if not found.items:
        raise IngestError(f"no documented modules in {ebin} (skipped: {dict(found.skipped)})")
    return IndexRequest(
        package=name,
        version=version,
        source=SourceKind.BEAM.value,
        items=found.items,
        meta={"ebin": str(ebin)},
        notices=notices,
        skipped=dict(found.skipped),
    )


def compiled_ebin(
    name: str, version: str, project_root: Path, elixir_home: Path | None
) -> Path | None:
    """The ebin folder holding `name` compiled at exactly `version`, if any."""
    from hexlocal_core.ingest.beam_sources import find_build_app, find_elixir_lib

    app = (
        find_elixir_lib(name, elixir_home)
        if name in ELIXIR_APPS
        else find_build_app(project_root, name)
    )
    if app is None or app.version != version:
        return None
    return Path(app.ebin)


async def load_items(
    registry: HexRegistry,
    resolved: ResolvedVersion,
    *,
    project_root: Path,
    max_bytes: int,
    docs_html_url: str | None,
    elixir_home: Path | None = None,
) -> IndexRequest:
    """The items for a resolved version, from the best source available now."""
    name, version = resolved.name, resolved.version
    entry = resolved.lock_entry
    if entry is not None and getattr(entry, "kind", "hex") in ("git", "path"):
        ebin = await asyncio.to_thread(compiled_ebin, name, version, project_root, elixir_home)
        if ebin is None:
            raise NotFound(
                f"{name} is a {entry.kind} dependency, so hex.pm has no docs for it; compile the "
                f"project (`mix compile`) so hexlocal can read them from _build"
            )
        return await asyncio.to_thread(beam_request, ebin, name, version)
    try:
        return await hexdocs_request(
            registry, name, version, max_bytes=max_bytes, docs_html_url=docs_html_url
        )
    except (RemoteError, NotFound) as exc:
        ebin = await asyncio.to_thread(compiled_ebin, name, version, project_root, elixir_home)
        if ebin is None:
            raise
        why = (
            "hex.pm could not be reached"
            if isinstance(exc, RemoteError)
            else "hex.pm has no docs tarball"
        )
        notice = Notice(
            "docs_from_beam",
            f"{why} for {name} {version}, so the docs come from the compiled BEAM files in {ebin}.",
        )
        log.info("%s; falling back to %s", exc, ebin)
        return await asyncio.to_thread(beam_request, ebin, name, version, notices=(notice,))
