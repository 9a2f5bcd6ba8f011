"""What an OTP application's `.app` file lists: its modules (which app owns `:ets`, which
package `Jason.Decoder`), and the applications it starts.

`.app` files are Erlang terms written by tools (`mix compile`, OTP's build) with `%%`
comments; a regex over the `{modules, [...]}` and `{applications, [...]}` entries reads
them without an Erlang term parser, bounded by the file cap and the list's length. Atoms
come quoted (`'Elixir.Jason'`) or bare (`ets`). An unreadable or odd file lists nothing.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from hexlocal_core.untrusted import NotReadable, read_regular

log = logging.getLogger("hexlocal.versions")

MAX_APP_FILE_BYTES = 1024 * 1024  # .app files are a few KB; Elixir's lists ~250 modules
MAX_LISTED = 20_000  # entries read from one list
_COMMENT = re.compile(r"%[^\n]*")
_ATOM = re.compile(r"'((?:[^'\\]|\\.){1,255})'|([a-z][A-Za-z0-9_@]{0,254})")


def app_modules(app_file: Path) -> frozenset[str]:
    """The module atoms `{modules, [...]}` lists, as written (`Elixir.Jason`, `ets`)."""
    return frozenset(_listed(app_file, "modules"))


def app_applications(app_file: Path) -> tuple[str, ...]:
    """The applications `{applications, [...]}` starts first, in order (what it runs on)."""
    return tuple(dict.fromkeys(_listed(app_file, "applications")))


def _listed(app_file: Path, key: str) -> list[str]:
    text = _read(app_file)
    if text is None:
        return []
    m = re.search(r"\{\s*" + key + r"\s*,\s*\[", text)
    if m is None:
        return []
    end = text.find("]", m.end())
    if end < 0:
        return []
    body = text[m.end() : end]
    out: list[str] = []
    for atom in _ATOM.finditer(body):
        out.append(atom.group(1) if atom.group(1) is not None else atom.group(2))
        if len(out) >= MAX_LISTED:
            break
    return out


def _read(app_file: Path) -> str | None:
    try:
        data = read_regular(app_file, MAX_APP_FILE_BYTES)
    except (NotReadable, OSError) as exc:
        log.debug("ignoring %s: %s", app_file, exc)
        return None
    return _COMMENT.sub("", data.decode("utf-8", errors="replace"))
