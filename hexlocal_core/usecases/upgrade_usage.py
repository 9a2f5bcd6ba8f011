"""What the project uses of one package: its compiled calls, and what only its source shows.

The project's own apps (`ingest/project_code.own_apps`: the compiled apps mix.lock does
not name, so umbrella apps and path deps too): their beams give the exact remote calls
(`ingest/beam_calls`). A call of a module of the project that
implements one of the package's behaviours (`use Ecto.Repo` puts `@behaviour
Ecto.Repo` in `Shop.Repo`) is a use of that behaviour's callback. Macros leave no call
in a beam, so the source scan (`ingest/elixir_source`) adds the package's macros the
source calls; with nothing compiled it is the only witness, and a notice says so.

Reading beams is cached per file (path, size, mtime): a second call re-reads only what
was recompiled.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence, Set
from pathlib import Path

from attrs import field, frozen

from hexlocal_core.cancel import checkpoint
from hexlocal_core.ingest.beam_calls import ModuleCalls, read_beam_calls
from hexlocal_core.ingest.beam_file import BeamSkipped, read_capped, real_path
from hexlocal_core.ingest.elixir_source import SourceScan, scan_project, source_files
from hexlocal_core.ingest.project_code import own_apps
from hexlocal_core.lru import Lru
from hexlocal_core.model import Notice
from hexlocal_core.notice_codes import NoticeCode
from hexlocal_core.usecases.diff import GUIDES, ApiEntry
from hexlocal_core.usecases.upgrade_join import Site, Use, parse_name

MAX_BEAMS = 50_000  # a monorepo has a few thousand modules; past this, say so and stop
BEAM_CACHE = 100_000  # files whose reading is kept between calls
MAX_BEAM_BYTES = 64 * 1024 * 1024
FileKey = tuple[str, int, int]  # (path, size, mtime_ns)


@frozen
class ProjectUses:
    uses: tuple[Use, ...]
    beam_sites: int  # call sites of the package found in beams
    source_sites: int  # ... and by the source scan
    modules: int  # compiled modules read
    notices: tuple[Notice, ...] = ()
    fingerprint: tuple[FileKey, ...] = field(factory=tuple, repr=False)


class BeamReader:
    """Reads beams, keeping each file's result while the file is unchanged."""

    def __init__(self, size: int = BEAM_CACHE) -> None:
        self._cache: Lru[FileKey, ModuleCalls | str] = Lru(size)

    def read(
        self, ebins: Sequence[Path]
    ) -> tuple[list[ModuleCalls], dict[str, int], list[FileKey]]:
        """The modules, the skipped files by reason (the walks stopped early too), and
        the files' keys."""
        modules: list[ModuleCalls] = []
        skipped: dict[str, int] = {}
        keys: list[FileKey] = []
        for ebin in ebins:
            root = real_path(ebin)
            for path in sorted(ebin.glob("*.beam")):
                checkpoint()
                if len(keys) >= MAX_BEAMS:
                    skipped["over_limit"] = skipped.get("over_limit", 0) + 1
                    continue
                key = _key(path)
                keys.append(key)
                found = self._cache.get(key)
                if found is None:
                    found = self._cache.put(key, self._read(path, root))
                if isinstance(found, str):
                    skipped[found] = skipped.get(found, 0) + 1
                    continue
                if found.stopped:
                    skipped[found.stopped] = skipped.get(found.stopped, 0) + 1
                modules.append(found)
        return modules, skipped, keys

    def _read(self, path: Path, root: Path | None) -> ModuleCalls | str:
        try:
            return read_beam_calls(read_capped(path, MAX_BEAM_BYTES, root))
        except BeamSkipped as exc:
            return exc.reason


def _key(path: Path) -> FileKey:
    try:
        info = os.stat(path)
    except OSError:
        return (str(path), -1, -1)
    return (str(path), info.st_size, info.st_mtime_ns)


def beam_uses(
    modules: Iterable[ModuleCalls],
    package_modules: Set[str],
    callbacks: Mapping[str, Set[tuple[str, int]]],
    mix_root: Path,
) -> list[Use]:
    """Uses of the package's modules, and of its behaviours' callbacks through the
    project's modules implementing them (`callbacks`: behaviour -> {(name, arity)})."""
    modules = list(modules)
    implements = {m.module: m for m in modules if m.behaviours}
    out: list[Use] = []
    for module in modules:
        for call in module.calls:
            caller = f"{module.module}.{call.caller}" if call.caller else module.module
            via = f"&{call.module}.{call.function}/{call.arity}" if call.fun_ref else None
            site = Site(_relative(call.file, mix_root), call.line, caller, via)
            if call.module in package_modules:
                out.append(Use(call.module, call.function, call.arity, site))
            target = implements.get(call.module)
            for behaviour in target.behaviours if target else ():
                arity = _callback_arity(
                    call.function, call.arity, target.exports if target else frozenset(),
                    callbacks.get(behaviour, frozenset()),
                )  # fmt: skip
                if arity is not None:
                    how = f"{call.module}.{call.function}/{call.arity}"
                    out.append(Use(behaviour, call.function, arity, _via(site, how), True))
    return out


def _via(site: Site, how: str) -> Site:
    return Site(site.file, site.line, site.caller, how)


def _callback_arity(
    name: str, arity: int, exports: Set[tuple[str, int]], callbacks: Set[tuple[str, int]]
) -> int | None:
    """The callback a call of `name/arity` reaches: the same arity, or a higher one the
    module defines through default arguments (it exports every arity in between)."""
    k = arity
    while True:
        if (name, k) in callbacks:
            return k
        if (name, k + 1) not in exports or k - arity > 8:
            return None
        k += 1


def _relative(file: str | None, root: Path) -> str | None:
    if file is None or not os.path.isabs(file):
        return file
    try:
        return Path(file).relative_to(root).as_posix()
    except ValueError:
        return file


def source_uses(
    scan: SourceScan,
    package_modules: Set[str],
    macros: Set[tuple[str, str]],
    callbacks: Mapping[str, Set[tuple[str, int]]],
    *,
    compiled: bool,
) -> list[Use]:
    """The scan's calls of the package: only its macros when the project is compiled
    (the beams hold the rest, exactly), else every call, callbacks through `use`."""
    out: list[Use] = []
    for call in scan.calls:
        caller = ".".join(filter(None, (call.in_module, call.caller))) or None
        site = Site(call.file, call.line, caller, "source")
        if call.module in package_modules:
            if not compiled or (call.module, call.function) in macros:
                out.append(Use(call.module, call.function, call.arity, site))
            continue
        if compiled:
            continue
        for behaviour in scan.behaviours.get(call.module, ()):
            names = callbacks.get(behaviour, frozenset())
            arity = next(
                (a for n, a in sorted(names) if n == call.function and a >= call.arity), None
            )
            if arity is not None:
                how = f"{call.module}.{call.function}/{call.arity}, source"
                out.append(Use(behaviour, call.function, arity, _via(site, how), True))
    return out


def project_uses(
    mix_root: Path,
    before: Sequence[ApiEntry],
    after: Sequence[ApiEntry],
    reader: BeamReader,
) -> ProjectUses:
    """Every use of the package (whose entries are `before` and `after`) in the project."""
    entries = [*before, *after]
    modules = {e.group for e in entries if e.group != GUIDES}
    callbacks: dict[str, set[tuple[str, int]]] = {}
    names: dict[str, set[str]] = {}
    macros: set[tuple[str, str]] = set()
    for entry in entries:
        parsed = parse_name(entry.name) if entry.group != GUIDES else None
        if parsed is None or parsed.prefix == "t":
            continue
        if parsed.prefix == "c":
            callbacks.setdefault(entry.group, set()).add((parsed.name, parsed.arity))
            continue
        names.setdefault(entry.group, set()).add(parsed.name)
        if entry.doc_type == "macro":
            macros.add((entry.group, parsed.name))
    compiled, skipped, keys = reader.read([app.ebin for app in own_apps(mix_root)])
    from_beams = beam_uses(compiled, modules, callbacks, mix_root)
    scan = scan_project(mix_root, names)
    from_source = source_uses(scan, modules, macros, callbacks, compiled=bool(compiled))
    sources = [_key(p) for p in source_files(mix_root)]
    return ProjectUses(
        uses=(*from_beams, *from_source),
        beam_sites=len(from_beams),
        source_sites=len(from_source),
        modules=len(compiled),
        notices=_notices(mix_root, compiled, skipped, scan),
        fingerprint=(*keys, *sources),
    )


def _notices(
    mix_root: Path, compiled: list[ModuleCalls], skipped: Mapping[str, int], scan: SourceScan
) -> tuple[Notice, ...]:
    out: list[Notice] = []
    if not compiled:
        out.append(
            Notice(
                NoticeCode.NOT_COMPILED,
                f"nothing of the project is compiled under {mix_root / '_build'}, so its "
                f"calls come from a source scan of lib/ ({scan.files} files): dynamic calls "
                "are missed and a call's arity is read from the text. Run `mix compile` in "
                "the project for the exact calls with their lines.",
            )
        )
    if skipped:
        counts = ", ".join(f"{reason}: {n}" for reason, n in sorted(skipped.items()))
        out.append(
            Notice(
                NoticeCode.BEAMS_SKIPPED,
                f"some compiled modules were read only in part or not at all ({counts}); "
                "their calls are listed without a line where the walk stopped",
            )
        )
    no_lines = sorted(m.module for m in compiled if not m.has_lines)
    if no_lines:
        why = "no line table (their call sites name the calling function, not the line)"
        out.append(Notice(NoticeCode.NO_LINE_TABLE, _some(no_lines, why)))
    stripped = sorted(m.module for m in compiled if not m.has_attributes)
    if stripped:
        why = (
            "no attribute chunk (stripped): calls through a behaviour they implement cannot be told"
        )
        out.append(Notice(NoticeCode.NO_ATTRIBUTES, _some(stripped, why)))
    if scan.truncated:
        out.append(
            Notice(NoticeCode.SOURCE_SCAN_TRUNCATED, f"the source scan stopped: {scan.truncated}")
        )
    return tuple(out)


def _some(modules: list[str], what: str) -> str:
    shown = ", ".join(modules[:5]) + (f" and {len(modules) - 5} more" if len(modules) > 5 else "")
    return f"{shown}: {what}"
