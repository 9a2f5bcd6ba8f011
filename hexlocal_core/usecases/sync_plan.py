"""Pure decisions of `sync`: which packages the project runs, what the queue becomes, and
the state of each package for `list`. No I/O here; `usecases/sync.py` gathers the facts
(the lock, `_build`, the Elixir version, the index) and acts on what these return.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from attrs import frozen

from hexlocal_core.errors import UserInputError
from hexlocal_core.index.rows import QueueChanges, SyncRow
from hexlocal_core.model import IndexedPackage, JobStatus, PackageState, SyncState
from hexlocal_core.untrusted import clip
from hexlocal_core.versions import ELIXIR_APPS, LockEntry, try_parse_version, validate_package_name

# Elixir's own apps, in the order sync indexes them: the small ones first, `elixir` (the
# largest docs set of all, ~1.9 MB of tarball) last, so more packages are ready sooner.
ELIXIR_ORDER = ("eex", "ex_unit", "iex", "logger", "mix", "elixir")
assert set(ELIXIR_ORDER) == ELIXIR_APPS

# A package indexed at its version whose vectors are not all there (its embedding was cut
# short): keyword search and exact lookups answer, the next job adds the rest.
KEYWORD_ONLY = "keyword search only: embedding incomplete"


@frozen
class SyncTarget:
    """A package the project runs, at the version it runs; `skip` says why sync cannot."""

    name: str
    version: str | None
    kind: str  # hex | git | path | elixir | another SCM's name
    skip: str | None = None


PROJECT_KIND = "project"  # the project's own app, compiled in _build
OTP_KIND = "otp"  # an OTP application of the project's OTP release
# Kinds synced at the version the target names (the others as a search would ask).
VERSIONED_KINDS = ("elixir", OTP_KIND)

BuildProbe = Callable[[str], str | None]  # app name -> its version compiled in _build


def lock_targets(
    entries: Mapping[str, LockEntry], problems: Mapping[str, str], built: BuildProbe
) -> list[SyncTarget]:
    """One target per lock entry, in the lock's (alphabetical) order."""
    out: dict[str, SyncTarget] = {}
    for key in sorted(entries):
        target = _entry_target(key, entries[key], built)
        out.setdefault(target.name, target)
    for key in sorted(problems):
        name = clip(key, 60)
        out.setdefault(name, SyncTarget(name, None, "?", skip=problems[key]))
    return list(out.values())


def _entry_target(key: str, entry: LockEntry, built: BuildProbe) -> SyncTarget:
    name = entry.package or key if entry.kind == "hex" else key
    try:
        name = validate_package_name(name)
    except UserInputError as exc:  # a bad name in the lock skips that entry only
        return SyncTarget(clip(name, 60), None, entry.kind, skip=str(exc))
    if entry.kind == "hex":
        if try_parse_version(entry.version or "") is None:
            why = f"mix.lock pins {name} to {clip(str(entry.version), 40)!r}, not a version"
            return SyncTarget(name, None, "hex", skip=why)
        if entry.repo and entry.repo != "hexpm":
            why = f"{name} comes from the Hex repository {entry.repo!r}, whose docs are private"
            return SyncTarget(name, entry.version, "hex", skip=why)
        return SyncTarget(name, entry.version, "hex")
    if entry.kind in ("git", "path"):
        version = built(key)
        if version is None:
            why = (
                f"a :{entry.kind} dependency has no docs on hex.pm and {name} is not compiled; "
                "run `mix compile` so sync can read its docs from _build"
            )
            return SyncTarget(name, None, entry.kind, skip=why)
        return SyncTarget(name, version, entry.kind)
    kind = clip(entry.kind, 30)
    why = f"a :{kind} dependency; sync reads Hex, git and path dependencies"
    return SyncTarget(name, None, kind, skip=why)


def elixir_targets(version: str | None, skip: str | None) -> list[SyncTarget]:
    return [SyncTarget(app, version, "elixir", skip=skip) for app in ELIXIR_ORDER]


def otp_targets(apps: Iterable[tuple[str, str | None]]) -> list[SyncTarget]:
    """The OTP applications the project uses, at their versions in its OTP release; one
    whose version needs a download (a pinned release not installed) is left to a search."""
    why = (
        "the project's OTP release is not installed; search_docs with this package reads "
        "its docs from the release's doc tarball"
    )
    return [SyncTarget(app, vsn, OTP_KIND, skip=None if vsn else why) for app, vsn in apps]


def plan_queue(
    targets: Iterable[SyncTarget],
    current: Mapping[str, SyncRow],
    indexed: Mapping[str, str],
    *,
    retry_failed: bool,
    claimed: Callable[[SyncRow], bool],
) -> QueueChanges:
    """The queue for `targets`: each becomes done (indexed at its version), skipped, kept
    (failed and not to be retried, or claimed by a live worker) or queued; rows of
    packages the project no longer runs are dropped.

    `indexed` maps package -> indexed version; `claimed(row)` says whether a live worker
    holds a 'running' row.
    """
    upsert: list[SyncRow] = []
    wanted: set[str] = set()
    for seq, t in enumerate(targets):
        wanted.add(t.name)
        old = current.get(t.name)
        if old is not None and old.status == "running" and claimed(old):
            continue
        version = t.version or ""
        if t.skip is not None:
            upsert.append(SyncRow(t.name, version, t.kind, "skipped", seq, reason=t.skip))
        elif indexed.get(t.name) == t.version:
            upsert.append(SyncRow(t.name, version, t.kind, "done", seq))
        elif (
            old is not None
            and old.status == "failed"
            and old.version == version
            and not (retry_failed or old.retry)
        ):
            upsert.append(SyncRow(t.name, version, t.kind, "failed", seq, old.reason, False))
        else:
            upsert.append(SyncRow(t.name, version, t.kind, "queued", seq))
    gone = tuple(
        name
        for name, row in current.items()
        if name not in wanted and not (row.status == "running" and claimed(row))
    )
    return QueueChanges(tuple(upsert), gone)


def package_states(
    targets: Iterable[SyncTarget],
    rows: Mapping[str, SyncRow],
    indexed: Mapping[str, IndexedPackage],
    jobs: Mapping[str, JobStatus],
    *,
    hidden: Callable[[str], bool] = lambda name: name.startswith("__"),
) -> list[PackageState]:
    """Every package the project runs, in sync order, then every other indexed package."""
    out = [_state(t, rows.get(t.name), indexed.get(t.name), jobs.get(t.name)) for t in targets]
    seen = {s.name for s in out}
    for name in sorted(set(indexed) | set(jobs)):
        if name in seen or hidden(name):
            continue
        pkg, job = indexed.get(name), jobs.get(name)
        if job is not None and job.state == "running":
            out.append(_indexing(name, None, None, pkg, job))
        elif pkg is not None:
            out.append(
                PackageState(
                    name,
                    SyncState.INDEXED,
                    indexed_version=pkg.version,
                    chunks=pkg.chunk_count,
                )
            )
    return out


def _state(
    t: SyncTarget, row: SyncRow | None, pkg: IndexedPackage | None, job: JobStatus | None
) -> PackageState:
    if job is not None and job.state == "running":
        return _indexing(t.name, t.kind, t.version, pkg, job)
    base = PackageState(
        t.name,
        SyncState.NOT_INDEXED,
        kind=t.kind,
        locked_version=t.version,
        indexed_version=pkg.version if pkg else None,
        chunks=pkg.chunk_count if pkg else 0,
    )
    if pkg is not None and t.version is not None and pkg.version == t.version:
        if not pkg.complete:
            return _with(base, SyncState.INDEXED, KEYWORD_ONLY)
        return _with(base, SyncState.INDEXED)
    if t.skip is not None:
        return _with(base, SyncState.SKIPPED, t.skip)
    if row is not None and row.version == (t.version or ""):
        by_row = {
            "queued": SyncState.QUEUED,
            "running": SyncState.INDEXING,
            "failed": SyncState.FAILED,
            "skipped": SyncState.SKIPPED,
        }.get(row.status)
        if by_row is not None:
            return _with(base, by_row, row.reason)
    if pkg is not None:
        return _with(base, SyncState.OUTDATED)
    return base


def _with(base: PackageState, state: SyncState, reason: str | None = None) -> PackageState:
    return PackageState(
        base.name,
        state,
        kind=base.kind,
        locked_version=base.locked_version,
        indexed_version=base.indexed_version,
        chunks=base.chunks,
        reason=reason,
    )


def _indexing(
    name: str,
    kind: str | None,
    locked: str | None,
    pkg: IndexedPackage | None,
    job: JobStatus,
) -> PackageState:
    return PackageState(
        name,
        SyncState.INDEXING,
        kind=kind,
        locked_version=locked or job.version,
        indexed_version=pkg.version if pkg else None,
        chunks=pkg.chunk_count if pkg else 0,
        phase=job.phase,
        chunks_embedded=job.chunks_embedded,
        chunks_total=job.chunks_total,
    )
