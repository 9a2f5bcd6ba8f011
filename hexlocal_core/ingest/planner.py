"""Where a package version's docs come from, decided once, before anything is fetched.

A pure function: the ingestor gathers the facts (the resolved version, the compiled app
in `_build` or Elixir's lib folder, the docs URL hex.pm lists), `plan_ingest` decides, the
ingestor runs the plan. The rules:

- a git or path dependency has no docs on hex.pm: its compiled BEAM files, or a clear
  error naming `mix compile`;
- the project's own app: its compiled BEAM files, with source locations (`PROJECT`);
- anything else: the HexDocs tarball, falling back to the compiled BEAM files (when they
  are at exactly the version) if the mirror is unreachable or has no tarball.
"""

from __future__ import annotations

from pathlib import Path

from attrs import frozen

from hexlocal_core.errors import NotFound
from hexlocal_core.model import ResolvedVersion, SourceKind, VersionSource

SCM_KINDS = ("git", "path")


@frozen
class IngestPlan:
    package: str
    version: str
    source: SourceKind  # HEXDOCS (the tarball), BEAM (compiled files), PROJECT (own app)
    ebin: Path | None  # BEAM: the folder read; HEXDOCS: the fallback, if any
    docs_html_url: str | None = None  # links of hexdocs items point here

    @property
    def fallback(self) -> Path | None:
        return self.ebin if self.source is SourceKind.HEXDOCS else None


def needs_compiled(resolved: ResolvedVersion) -> bool:
    """True when only compiled files can hold the docs (git and path dependencies, and the
    project's own apps)."""
    if resolved.source is VersionSource.PROJECT:
        return True
    entry = resolved.lock_entry
    return entry is not None and entry.kind in SCM_KINDS


def plan_ingest(
    resolved: ResolvedVersion, *, compiled: Path | None, docs_html_url: str | None
) -> IngestPlan:
    """The plan for `resolved`; `compiled` is the ebin folder holding it at exactly its version.

    Raises NotFound for a git/path dependency that is not compiled.
    """
    name, version = resolved.name, resolved.version
    if resolved.source is VersionSource.PROJECT:
        return IngestPlan(name, version, SourceKind.PROJECT, Path(resolved.detail))
    if needs_compiled(resolved):
        if compiled is None:
            kind = resolved.lock_entry.kind if resolved.lock_entry else "git"
            raise NotFound(
                f"{name} is a {kind} dependency, so hex.pm has no docs for it; compile the "
                "project (`mix compile`) so hexlocal can read them from _build"
            )
        return IngestPlan(name, version, SourceKind.BEAM, compiled)
    return IngestPlan(name, version, SourceKind.HEXDOCS, compiled, docs_html_url)
