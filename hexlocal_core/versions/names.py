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
        suggestion = re.sub(r"[^a-z0-9_]+", "_", clean.lower()).strip("_")
        hint = f"; did you mean {suggestion!r}?" if PACKAGE_NAME.match(suggestion) else ""
        raise UserInputError(
            f"{clean[:40]!r} is not a Hex package name: use lowercase letters, digits and "
            f"underscores, starting with a letter (the OTP app name, not the module){hint}"
        )
    return clean
