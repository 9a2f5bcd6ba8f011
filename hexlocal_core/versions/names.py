"""Which names hexlocal accepts: Hex package names, and the apps that ship with Elixir."""

from __future__ import annotations

import re

from hexlocal_core.errors import UserInputError

__all__ = ["ELIXIR_APPS", "MAX_NAME_LENGTH", "validate_package_name"]

# Elixir's own doc sets: not Hex packages, their version is the project's Elixir.
ELIXIR_APPS = frozenset({"elixir", "eex", "ex_unit", "iex", "logger", "mix"})
PACKAGE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
MAX_NAME_LENGTH = 64


def validate_package_name(name: str) -> str:
    """Returns the name if it is a valid Hex package name; raises UserInputError otherwise."""
    if not isinstance(name, str) or not name.strip():
        raise UserInputError("a package name is required, like 'jason' or 'phoenix_live_view'")
    clean = name.strip()
    if len(clean) > MAX_NAME_LENGTH:
        raise UserInputError(f"package names are at most {MAX_NAME_LENGTH} characters long")
    if not PACKAGE_NAME.match(clean):
        hint = _hint(clean)
        raise UserInputError(
            f"{clean[:40]!r} is not a Hex package name: use lowercase letters, digits and "
            f"underscores, starting with a letter (the OTP app name, not the module){hint}"
        )
    return clean


# `jason 1.4.4`, `jason@1.4.4`, `jason-1.4.4`: a name and a version in one argument.
_WITH_VERSION = re.compile(r"^(?P<name>[\w.-]+?)(?:\s+|@|-)v?(?P<version>\d+\.\d+\.\d+\S*)$")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _snake(text: str) -> str:
    """`LiveView` -> `live_view`, `phoenix-live-view` -> `phoenix_live_view`."""
    return re.sub(r"[^a-z0-9_]+", "_", _CAMEL.sub("_", text).lower()).strip("_")


def _hint(given: str) -> str:
    """What the caller probably meant: a name with its version split off, or the app name
    of a module (`Phoenix.HTML` -> `phoenix_html` or `phoenix`), or the name made valid."""
    text = re.sub(r"^(?::|Elixir\.)", "", given)
    with_version = _WITH_VERSION.match(text)
    if with_version and PACKAGE_NAME.match(name := _snake(with_version["name"])):
        return (
            f"; did you mean package {name!r} at version {with_version['version']!r}? "
            "(the version is an argument of its own)"
        )
    modules = [part for part in text.split(".") if part[:1].isupper()]
    if modules:
        options = ["_".join(_snake(m) for m in modules), _snake(modules[0])]
    else:
        options = [_snake(text)]
    valid = [repr(o) for o in dict.fromkeys(options) if PACKAGE_NAME.match(o)]
    return f"; did you mean {' or '.join(valid)}?" if valid else ""
