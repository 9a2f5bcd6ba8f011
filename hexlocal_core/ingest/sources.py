"""Reading a plan's items: the HexDocs tarball, or compiled BEAM files.

The tarball is the default. BEAM Docs chunks serve git/path dependencies (hex.pm has no
docs for them), Elixir's own apps when the mirror has no tarball, and any package whose
compiled version matches when hex.pm cannot be reached (see `planner`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from attrs import evolve

from hexlocal_core.errors import IngestError, NotFound, RemoteError, VersionNotFound
from hexlocal_core.ingest.pipeline import IngestRequest
from hexlocal_core.ingest.planner import IngestPlan
from hexlocal_core.model import Notice, Phase, ResolvedVersion, SourceKind
from hexlocal_core.notice_codes import NoticeCode
from hexlocal_core.ports import HexRegistry
from hexlocal_core.threads import in_worker
from hexlocal_core.versions import ELIXIR_APPS, explain_missing_docs

log = logging.getLogger("hexlocal.sources")

PhaseFn = Callable[[Phase], None]


def tarball_request(
    data: bytes, name: str, version: str, *, max_bytes: int, docs_html_url: str | None
) -> IngestRequest:
    """The items of a docs tarball, parsed in memory (never written to disk)."""
    from hexlocal_core.ingest.hexdocs import parse_hexdocs
    from hexlocal_core.ingest.tarball import read_docs_tarball

    files = read_docs_tarball(data, max_bytes=max_bytes, package=name)
    parsed = parse_hexdocs(files, package=name, version=version, docs_html_url=docs_html_url)
    if not parsed.items:
        raise IngestError(f"the docs tarball of {name} {version} holds no documented items")
    return IngestRequest(
        package=name,
        version=version,
        source=SourceKind.HEXDOCS.value,
        items=parsed.items,
        docs_html_url=docs_html_url,
        meta={"generation": parsed.generation, "tarball_bytes": len(data)},
    )


def beam_request(
    ebin: Path, name: str, version: str, *, notices: tuple[Notice, ...] = ()
) -> IngestRequest:
    from hexlocal_core.ingest.beam import items_from_beam_dir

    found = items_from_beam_dir(ebin, package=name, version=version)
    if not found.items:
        raise IngestError(f"no documented modules in {ebin} (skipped: {dict(found.skipped)})")
    return IngestRequest(
        package=name,
        version=version,
        source=SourceKind.BEAM.value,
        items=found.items,
        meta={"ebin": str(ebin)},
        notices=notices,
        skipped=dict(found.skipped),
    )


def with_usage_rules(
    request: IngestRequest, resolved: ResolvedVersion, project_root: Path
) -> IngestRequest:
    """`request` plus the usage rules the package ships in the project's deps/, when that
    folder holds exactly this version (a Hex dependency's metadata says so; a git or path
    dependency's folder is what the lock pins)."""
    from hexlocal_core.ingest.deps_folder import dep_version, deps_dir, usage_rule_items

    deps = deps_dir(project_root)
    if deps is None:
        return request
    entry = resolved.lock_entry
    dep = deps / (entry.name if entry is not None else request.package)
    scm = entry is not None and entry.kind in ("git", "path")
    if not dep.is_dir() or not (scm or dep_version(dep) == request.version):
        return request
    rules = usage_rule_items(dep, request.package, request.version)
    if not rules:
        return request
    log.info(
        "%s %s: %d usage-rules file(s) from %s", request.package, request.version, len(rules), dep
    )
    meta = {**(request.meta or {}), "usage_rules": [item.ref for item in rules]}
    return evolve(request, items=(*request.items, *rules), meta=meta)


def project_request(ebin: Path, name: str, version: str, root: Path) -> IngestRequest:
    """The project's own app, from its compiled beams, located in the project's files."""
    from hexlocal_core.ingest.project_code import project_code_items

    found = project_code_items(ebin, package=name, version=version, root=root)
    if not found.items:
        raise IngestError(
            f"{name} is compiled in {ebin} but documents nothing: add @moduledoc/@doc, or "
            f"check that docs are not turned off (skipped: {dict(found.skipped)})"
        )
    return IngestRequest(
        package=name,
        version=version,
        source=SourceKind.PROJECT.value,
        items=found.items,
        meta={"ebin": str(ebin)},
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


async def read_plan(
    registry: HexRegistry,
    plan: IngestPlan,
    *,
    max_bytes: int,
    phase: PhaseFn,
    root: Path | None = None,
) -> IngestRequest:
    """The plan's items: the tarball (or its fallback), or the compiled files."""
    name, version = plan.package, plan.version
    if plan.source is SourceKind.PROJECT:
        assert plan.ebin is not None and root is not None
        phase(Phase.PARSING)
        own, top = plan.ebin, root
        return await in_worker(lambda: project_request(own, name, version, top))
    if plan.source is SourceKind.BEAM:
        assert plan.ebin is not None
        phase(Phase.PARSING)
        ebin = plan.ebin
        return await in_worker(lambda: beam_request(ebin, name, version))
    phase(Phase.DOWNLOADING)
    try:
        data = await registry.fetch_docs(name, version)
    except (RemoteError, NotFound) as exc:
        fallback = plan.fallback
        if fallback is None:
            if isinstance(exc, VersionNotFound):
                raise await explain_missing_docs(registry, name, version, exc) from None
            if type(exc) is RemoteError and name not in ELIXIR_APPS:
                raise RemoteError(
                    f"{exc}. Without hex.pm, hexlocal reads the docs from the compiled"
                    f" dependency: compile the project (`mix compile`) so _build holds"
                    f" {name} {version}."
                ) from None
            raise
        why = (
            "hex.pm could not be reached"
            if isinstance(exc, RemoteError)
            else "hex.pm has no docs tarball"
        )
        notice = Notice(
            NoticeCode.DOCS_FROM_BEAM,
            f"{why} for {name} {version}, so the docs come from the compiled BEAM files in "
            f"{fallback}.",
        )
        log.info("%s; falling back to %s", exc, fallback)
        phase(Phase.PARSING)
        return await in_worker(lambda: beam_request(fallback, name, version, notices=(notice,)))
    phase(Phase.PARSING)
    url = plan.docs_html_url
    return await in_worker(
        lambda: tarball_request(data, name, version, max_bytes=max_bytes, docs_html_url=url)
    )
