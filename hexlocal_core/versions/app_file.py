"""An application's `.app` file, read as the Erlang term it is: `{application, Name, Props}`.

One reader for every use: the `vsn` (a compiled app's version), the `modules` (which app
owns `:ets`, which package `Jason.Decoder`) and the applications it starts. The files are
written by tools (`mix compile`, OTP's build; `%%` comments, any spacing) and parsed by
`erlang_terms.py`, bounded by the file cap and the parser's token budget. An unreadable
or odd file raises ValueError from `read_app_spec`; the lookups that only want one part
(`read_app_vsn`, `app_modules`) answer None or nothing instead.
"""

from __future__ import annotations

import logging
from pathlib import Path

from attrs import frozen

from hexlocal_core.model import Atom
from hexlocal_core.untrusted import NotReadable, clip, read_regular, unreadable
from hexlocal_core.versions.erlang_terms import MalformedTerm, parse_erlang_terms

__all__ = ["MAX_APP_FILE_BYTES", "AppSpec", "app_modules", "read_app_spec", "read_app_vsn"]

log = logging.getLogger("hexlocal.versions")

MAX_APP_FILE_BYTES = 1024 * 1024  # .app files are a few KB; Elixir's lists ~250 modules
# What an app starts before it: required, included and optional applications.
_STARTED = ("applications", "included_applications", "optional_applications")


@frozen
class AppSpec:
    """The parts of an `.app` file hexlocal uses."""

    name: str
    vsn: str | None
    modules: tuple[str, ...] = ()  # the module atoms as written: `Elixir.Jason`, `ets`
    applications: tuple[str, ...] = ()  # started before it, in order, each once


def read_app_spec(path: Path) -> AppSpec:
    """The `{application, Name, Props}` term of an `.app` file. Raises ValueError (the
    message says why) for a file that is unreadable, too large or not such a term."""
    try:
        text = read_regular(path, MAX_APP_FILE_BYTES).decode("utf-8", errors="replace")
    except NotReadable as exc:
        raise ValueError(unreadable(path, exc)) from exc
    try:
        terms = parse_erlang_terms(text)
    except MalformedTerm as exc:
        raise ValueError(f"{clip(str(path))} is not an Erlang term file: {exc}") from exc
    spec = terms[0] if terms else None
    if not (
        isinstance(spec, tuple)
        and len(spec) == 3
        and spec[0] == Atom("application")
        and isinstance(spec[1], Atom)
        and isinstance(spec[2], list)
    ):
        raise ValueError(f"{clip(str(path))} holds no {{application, Name, [...]}} term")
    pairs = (p for p in spec[2] if isinstance(p, tuple) and len(p) == 2)
    props = {p[0].name: p[1] for p in pairs if isinstance(p[0], Atom)}
    vsn = props.get("vsn")
    return AppSpec(
        name=spec[1].name,
        # A string (or charlist) as Mix and OTP write it; an atom is read as its name.
        vsn=vsn if isinstance(vsn, str) else vsn.name if isinstance(vsn, Atom) else None,
        modules=_names(props.get("modules")),
        applications=tuple(dict.fromkeys(a for key in _STARTED for a in _names(props.get(key)))),
    )


def read_app_vsn(app_file: Path) -> str | None:
    """The `vsn` of an `.app` file, or None when it is absent, unreadable or has none."""
    try:
        return read_app_spec(app_file).vsn
    except ValueError as exc:
        log.debug("no vsn: %s", exc)
        return None


def app_modules(app_file: Path) -> frozenset[str]:
    """The module atoms `{modules, [...]}` lists; none for an unreadable or odd file."""
    try:
        return frozenset(read_app_spec(app_file).modules)
    except ValueError as exc:
        log.debug("no modules: %s", exc)
        return frozenset()


def _names(value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(v.name for v in value if isinstance(v, Atom))
