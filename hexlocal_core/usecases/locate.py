"""Which package documents a module: `get_docs("Jason.decode/2")` with no package named.

Gather the facts that say who owns a module (each `.app` file lists its app's modules),
then choose (pure). The facts, in the order they win:

1. the project's dependencies: mix.lock's packages, their `.app` in `_build`;
2. the project's own apps (umbrella apps included), compiled in `_build`;
3. Elixir's own apps (elixir, eex, ex_unit, iex, logger, mix), from the installed Elixir;
4. the OTP applications of the project's OTP (`:ets` -> stdlib, `:gen_tcp` -> kernel);
5. packages already indexed here that document the module;
6. a guess from the module's first segment (`Jason` -> jason), for hex.pm to confirm.

A module two sources claim (a fork in the lock beside the original) is answered from the
first, and the others are named in a notice. Nothing here downloads; `.app` files are
read again only when they change.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from pathlib import Path

from attrs import frozen

from hexlocal_core.errors import UserInputError
from hexlocal_core.index.seam import DocsStore
from hexlocal_core.ingest.beam_sources import find_elixir_lib
from hexlocal_core.ingest.project_code import own_apps
from hexlocal_core.model import Notice
from hexlocal_core.notice_codes import NoticeCode
from hexlocal_core.search.exact import Identifier
from hexlocal_core.versions import (
    ELIXIR_APPS,
    LockTooLarge,
    MalformedLock,
    build_version,
    find_lock,
    load_lock,
)
from hexlocal_core.versions.app_file import app_modules

OTP_ALIASES = frozenset({"erlang", "otp"})  # package names that mean "the OTP apps"


def one_otp_app(name: str, example: str) -> str:
    """`name`, unless it is an alias for all the OTP apps, which a version comparison cannot
    take (each app has its own versions): then a UserInputError naming the apps to use."""
    if isinstance(name, str) and name.strip().lower() in OTP_ALIASES:
        raise UserInputError(
            f"{name!r} means all the OTP applications, and each has its own versions: name "
            f"one (erts for the erlang module, kernel, stdlib, ...), like `{example}`"
        )
    return name


OtpOwners = Mapping[str, tuple[str, ...]]  # module -> the OTP apps whose .app lists it
# app -> the modules its .app lists (atoms as written: `Elixir.Jason`, `ets`)
ModuleTable = Mapping[str, frozenset[str]]


class Origin(StrEnum):
    LOCK = "mix.lock"
    PROJECT = "the project's own app"
    ELIXIR = "Elixir"
    OTP = "Erlang/OTP"
    INDEXED = "indexed here"
    GUESS = "guessed from the module's name"


@frozen
class Owner:
    package: str
    origin: Origin


@frozen
class Located:
    owners: tuple[Owner, ...]  # the first answers; the rest are named in a notice
    near: tuple[str, ...] = ()  # modules spelt like it, when no source claims it

    @property
    def notices(self) -> tuple[Notice, ...]:
        if len(self.owners) < 2:
            return ()
        first, others = self.owners[0], self.owners[1:]
        named = ", ".join(f"{o.package} ({o.origin})" for o in others)
        return (
            Notice(
                NoticeCode.MODULE_IN_SEVERAL_PACKAGES,
                f"Answered from {first.package} ({first.origin}); the module is also in "
                f"{named}. Pass package= to choose.",
            ),
        )


def module_atom(ident: Identifier) -> str | None:
    """The module as `.app` files write it: `Elixir.Jason`, `ets`; None without a module."""
    if not ident.module:
        return None
    return ident.module if ident.erlang else f"Elixir.{ident.module}"


def choose(atom: str, tables: Sequence[tuple[Origin, ModuleTable]]) -> tuple[Owner, ...]:
    """Every app claiming `atom`, the sources in order (pure)."""
    owners: dict[str, Owner] = {}
    for origin, table in tables:
        for app in sorted(table):
            if atom in table[app]:
                owners.setdefault(app, Owner(app, origin))
    return tuple(owners.values())


def guess(ident: Identifier) -> str | None:
    """`Phoenix.LiveView` -> phoenix: the first segment snake-cased, as Hex names go."""
    if not ident.module or ident.erlang:
        return None
    first = ident.module.split(".", 1)[0]
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", first).lower()
    return name if re.fullmatch(r"[a-z][a-z0-9_]{0,63}", name) else None


def spelt_like(atom: str, known: Iterable[str], limit: int = 3) -> tuple[str, ...]:
    shown = {a.removeprefix("Elixir."): a for a in known}
    found = difflib.get_close_matches(atom.removeprefix("Elixir."), shown, n=limit, cutoff=0.66)
    return tuple(found)


class Locator:
    """Gathers the tables (cached by each `.app` file's mtime) and chooses."""

    def __init__(
        self,
        store: DocsStore,
        *,
        project_root: Path,
        elixir_home: Path | None,
    ) -> None:
        self._store = store
        self._root = project_root
        self._elixir_home = elixir_home
        self._read: dict[Path, tuple[int, frozenset[str]]] = {}

    def locate(
        self, ident: Identifier, *, otp: OtpOwners | None = None, only_otp: bool = False
    ) -> Located:
        """Who documents `ident`'s module. `otp`: module -> the OTP apps listing it (the
        project's OTP install); `only_otp`: the `erlang`/`otp` alias asked."""
        atom = module_atom(ident)
        if atom is None:
            return Located(())
        otp = otp or {}
        tables = [] if only_otp else self._tables()
        owners = choose(atom, tables)
        seen = {o.package for o in owners}
        owners += tuple(Owner(app, Origin.OTP) for app in otp.get(atom, ()) if app not in seen)
        if not only_otp:
            indexed = self._store.session().chunks.packages_with_module(ident.module or "")
            seen = {o.package for o in owners}
            owners += tuple(Owner(p, Origin.INDEXED) for p in indexed if p not in seen)
            guessed = guess(ident)
            if not owners and guessed is not None:
                owners = (Owner(guessed, Origin.GUESS),)
        if owners:
            return Located(owners)
        known = [m for _, table in tables for mods in table.values() for m in mods]
        return Located((), spelt_like(atom, [*known, *otp]))

    def _tables(self) -> list[tuple[Origin, ModuleTable]]:
        """The sources before OTP's, in the order they win."""
        own = {a.app: self._modules(a.ebin / f"{a.app}.app") for a in own_apps(self._root)}
        return [
            (Origin.LOCK, self._lock_table()),
            (Origin.PROJECT, own),
            (Origin.ELIXIR, self._elixir_table()),
        ]

    def _lock_table(self) -> ModuleTable:
        lock = find_lock(self._root)
        if lock is None:
            return {}
        try:
            entries = load_lock(lock).entries
        except (LockTooLarge, MalformedLock):
            return {}
        table: dict[str, frozenset[str]] = {}
        for key, entry in entries.items():
            built = build_version(key, self._root)
            if built is not None:
                table[entry.package or key] = self._modules(built[1])
        return table

    def _elixir_table(self) -> ModuleTable:
        table: dict[str, frozenset[str]] = {}
        for app in sorted(ELIXIR_APPS):
            found = find_elixir_lib(app, self._elixir_home)
            if found is not None:
                table[app] = self._modules(found.ebin / f"{app}.app")
        return table

    def _modules(self, app_file: Path) -> frozenset[str]:
        try:
            stamp = app_file.stat().st_mtime_ns
        except OSError:
            return frozenset()
        cached = self._read.get(app_file)
        if cached is None or cached[0] != stamp:
            cached = (stamp, app_modules(app_file))
            self._read[app_file] = cached
        return cached[1]
