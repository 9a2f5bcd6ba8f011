"""The project's own modules: the `@moduledoc`/`@doc` that `mix compile` puts into each
beam of the project's apps, `_build/<env>/lib/<app>/ebin` (an umbrella's apps included).

Each own app is indexed as a package named by the app, at a version that says which
beams it was read from: the `.app` file's `vsn` plus a fingerprint of the ebin folder
(`0.1.0+b1946ac9`). A recompile changes the fingerprint, so the next lookup sees a new
version and indexes it again, embedding only the chunks whose text changed (the cache
is by content). Items carry their source location, `lib/my_app/greeter.ex:12`, relative
to the project, instead of a URL.

Which apps are the project's (`own_apps`, also what `upgrade_impact` reads the calls of):
the compiled apps of `_build/<env>/lib` that mix.lock does not name. Every dependency
fetched from Hex or git is in the lock; the root app, an umbrella's apps and path
dependencies are not. One env is read, the first of dev, test, prod (then any other)
that has compiled apps. When the lock cannot be read, the apps mix.exs declares stand in
for "not in the lock": the root `mix.exs`'s `app:`, or with `apps_path:` (an umbrella)
each `apps/*/mix.exs`'s, found by a bounded text scan (mix.exs is Elixir code; nothing is
evaluated).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Sequence
from pathlib import Path

from attrs import evolve, frozen

from hexlocal_core.ingest.beam import BeamItems, items_from_beam_dir
from hexlocal_core.ingest.beam_sources import app_version, build_envs
from hexlocal_core.ingest.docs_chunk import BeamDocs
from hexlocal_core.model import DocItem, DocType, SourceKind
from hexlocal_core.untrusted import NotReadable, read_regular
from hexlocal_core.versions import (
    LockTooLarge,
    MalformedLock,
    find_lock,
    find_mix_root,
    load_lock,
    try_parse_version,
)

log = logging.getLogger("hexlocal.ingest.project_code")

MAX_MIX_EXS_BYTES = 512 * 1024
MAX_UMBRELLA_APPS = 500
MAX_BEAMS = 20_000  # files stat'ed for the fingerprint; a huge project is cut, not hung
_APP = re.compile(r"\bapp:\s*:(?:\"([a-z][a-z0-9_]{0,63})\"|([a-z][a-z0-9_]{0,63})\b)")
_APPS_PATH = re.compile(r"\bapps_path:\s*\"([^\"\n]{1,200})\"")


@frozen
class OwnApp:
    app: str
    vsn: str  # the `.app` file's
    ebin: Path

    def version(self) -> str:
        """`vsn+fingerprint`: a new version whenever the beams change."""
        return f"{self.vsn}+{fingerprint(self.ebin)}"


def project_top(project_root: Path) -> Path | None:
    """The folder whose `_build` holds the project's apps: an umbrella's root (beside the
    lock, or, before it has a lock, the one whose `apps_path` holds this app), else the
    Mix project's."""
    lock = find_lock(project_root)
    if lock is not None and (lock.parent / "mix.exs").is_file():
        return lock.parent
    mix_root = find_mix_root(project_root)
    if mix_root is None:
        return None
    return _umbrella_of(mix_root) or mix_root


def _umbrella_of(app_root: Path) -> Path | None:
    """The umbrella `apps/<app>` belongs to: the mix.exs two levels up, when its
    `apps_path` names this app's folder (Mix builds a child into the umbrella's _build)."""
    top = app_root.parent.parent
    text = _read(top / "mix.exs")
    umbrella = _APPS_PATH.search(text) if text else None
    if umbrella is None:
        return None
    try:
        same = (top / umbrella.group(1)).resolve() == app_root.parent.resolve()
    except OSError:
        return None
    return top if same else None


def own_app_names(top: Path) -> list[str]:
    """The project's apps, from mix.exs files (see the module docstring)."""
    text = _read(top / "mix.exs")
    if text is None:
        return []
    umbrella = _APPS_PATH.search(text)
    if umbrella is None:
        name = _app_name(text)
        return [name] if name else []
    apps = (top / umbrella.group(1)).resolve()
    if not apps.is_relative_to(top.resolve()) or not apps.is_dir():
        return []
    names: list[str] = []
    for child in sorted(apps.iterdir())[:MAX_UMBRELLA_APPS]:
        child_text = _read(child / "mix.exs")
        name = _app_name(child_text) if child_text else None
        if name:
            names.append(name)
    return names


def own_apps(project_root: Path) -> list[OwnApp]:
    """The project's own compiled apps, each with its `.app` vsn and ebin folder (the rule
    is the module docstring's)."""
    top = project_top(project_root)
    if top is None:
        return []
    locked = _locked_names(top)
    declared = None if locked is not None else set(own_app_names(top))
    build = top / "_build"
    for env in build_envs(build):
        found: list[OwnApp] = []
        for ebin in _compiled_ebins(build / env / "lib"):
            app = ebin.parent.name
            if (app in locked) if locked is not None else (app not in (declared or ())):
                continue
            vsn = app_version(ebin, app)
            if vsn is not None and try_parse_version(vsn) is not None:
                found.append(OwnApp(app, vsn.strip(), ebin))
        if found:
            return found
    return []


def _locked_names(top: Path) -> frozenset[str] | None:
    """The apps mix.lock names (none when there is no lock); None when it cannot be read."""
    lock = find_lock(top)
    if lock is None:
        return frozenset()
    try:
        return frozenset(load_lock(lock).entries)
    except (MalformedLock, LockTooLarge, OSError) as exc:
        log.debug("own apps without %s: %s", lock, exc)
        return None


def _compiled_ebins(lib: Path) -> list[Path]:
    """`lib/<app>/ebin` folders holding beams, in name order, at most MAX_UMBRELLA_APPS."""
    try:
        apps = sorted(lib.iterdir())[:MAX_UMBRELLA_APPS]
    except OSError:
        return []
    ebins = (app / "ebin" for app in apps)
    return [e for e in ebins if e.is_dir() and any(e.glob("*.beam"))]


def own_app(project_root: Path, name: str) -> OwnApp | None:
    """`name` when it is one of the project's own compiled apps."""
    return next((a for a in own_apps(project_root) if a.app == name), None)


def fingerprint(ebin: Path) -> str:
    """8 hex digits over the beams' names, sizes and modification times."""
    digest = hashlib.sha256()
    try:
        beams = sorted(ebin.glob("*.beam"))[:MAX_BEAMS]
    except OSError:
        beams = []
    for beam in beams:
        try:
            info = beam.stat()
        except OSError:
            continue
        digest.update(f"{beam.name}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:8]


def project_code_items(ebin: Path, *, package: str, version: str, root: Path) -> BeamItems:
    """The app's documented items, each with its source location instead of a URL."""
    resolved = root.resolve()

    def located(docs: BeamDocs, items: list[DocItem]) -> list[DocItem]:
        path = _relative(docs.source, resolved) if docs.source else None
        lines = {_entry_key(e.kind, e.name, e.arity): e.line for e in docs.entries}
        out = []
        for item in items:
            line = docs.line if item.function is None else lines.get(_item_key(item))
            where = f"{path}:{line}" if path and line else path
            out.append(evolve(item, hexdocs_url="", source_url=where, source=SourceKind.PROJECT))
        return out

    return items_from_beam_dir(ebin, package=package, version=version, each_module=located)


def _entry_key(kind: str, name: str, arity: int) -> tuple[str, str, int]:
    family = "c" if kind in ("callback", "macrocallback") else "t" if kind == "type" else ""
    return family, name, arity


_ITEM_KINDS = {
    DocType.CALLBACK: "callback",
    DocType.MACROCALLBACK: "callback",
    DocType.TYPE: "type",
    DocType.OPAQUE: "type",
}


def _item_key(item: DocItem) -> tuple[str, str, int]:
    return _entry_key(
        _ITEM_KINDS.get(item.doc_type, "function"), item.function or "", item.arity or 0
    )


def _relative(source: str, root: Path) -> str:
    """The compiled file's path relative to the project, when it is inside it; else its
    tail from `lib/` (a build made elsewhere, in a container, say); else as compiled."""
    path = Path(source)
    if path.is_absolute() and path.is_relative_to(root):
        return path.relative_to(root).as_posix()
    parts: Sequence[str] = path.parts
    for marker in ("lib", "apps"):
        if marker in parts:
            return "/".join(parts[parts.index(marker) :])
    return source


def _app_name(text: str) -> str | None:
    m = _APP.search(text)
    return (m.group(1) or m.group(2)) if m else None


def _read(path: Path) -> str | None:
    try:
        return read_regular(path, MAX_MIX_EXS_BYTES).decode("utf-8", errors="replace")
    except (NotReadable, OSError):
        return None
