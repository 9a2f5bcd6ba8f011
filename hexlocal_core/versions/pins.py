"""Tool versions a project pins in `.tool-versions`, `mise.toml` or `.mise.toml`.

asdf and mise read the same files for every tool (elixir, erlang, ...); one reader serves
them all, and each tool brings only the rule that turns a written value into a version.
Files are read through `read_regular` (no FIFO, no device, a size cap) and parsed with
bounded cost; a file that cannot be read is a notice, never an exception.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attrs import frozen

from hexlocal_core.model import Notice
from hexlocal_core.notice_codes import NoticeCode
from hexlocal_core.untrusted import NotReadable, read_regular
from hexlocal_core.versions.location import project_dirs

__all__ = ["MAX_PIN_FILE_BYTES", "Pin", "ValueRule", "find_pin"]

MAX_PIN_FILE_BYTES = 64 * 1024  # .tool-versions and mise.toml are a few hundred bytes
# tomllib is quadratic in the depth of a dotted key (40k parts: 37 s). The dots in a
# file bound every key's depth; a real mise.toml has a few dozen (versions included).
MAX_MISE_DOTS = 2048
MAX_TOML_DIGITS = 1000  # a run of digits this long is no version, date or port
_LONG_NUMBER = re.compile(rf"\d{{{MAX_TOML_DIGITS + 1}}}")

# A written value (`1.18.4-otp-27`, `OTP-27.3`) -> the version it pins, or None (`system`).
ValueRule = Callable[[str], "str | None"]


@frozen
class Pin:
    """What the project pins for one tool: the version and its file, or neither."""

    version: str | None
    file: Path | None
    notices: tuple[Notice, ...] = ()


def _read_pin_file(path: Path, errors: str = "strict") -> str:
    """The text of a pin file. Raises ValueError (bad UTF-8, too large, not a file)."""
    try:
        return read_regular(path, MAX_PIN_FILE_BYTES).decode("utf-8", errors=errors)
    except NotReadable as exc:
        raise ValueError(f"it {exc}") from exc


def _tool_versions_pin(path: Path, tool: str, rule: ValueRule) -> tuple[str | None, bool]:
    """(version, mentioned): mentioned is True when the tool is listed even if unusable."""
    # asdf reads bytes: a stray Latin-1 byte in a comment must not hide the pin.
    for line in _read_pin_file(path, errors="replace").splitlines():
        fields = line.split("#", 1)[0].split()
        if fields[:1] == [tool]:
            pins = (rule(f) for f in fields[1:])
            return next((p for p in pins if p), None), True
    return None, False


def _load_toml(text: str) -> dict[str, Any]:
    """tomllib.loads with its two unbounded costs bounded. Raises ValueError."""
    comment_free = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))
    if comment_free.count(".") > MAX_MISE_DOTS:
        raise ValueError(f"it has more than {MAX_MISE_DOTS} dots, far more than a mise.toml")
    if _LONG_NUMBER.search(text):  # tomllib's int() would refuse it with a Python hint
        raise ValueError(f"it holds a number over {MAX_TOML_DIGITS} digits long")
    try:
        return tomllib.loads(text)
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise ValueError("it nests arrays or tables too deeply to read") from None


def _mise_pin(path: Path, tool: str, rule: ValueRule) -> tuple[str | None, bool]:
    tools = _load_toml(_read_pin_file(path)).get("tools", {})
    value = tools.get(tool) if isinstance(tools, dict) else None
    if value is None:
        return None, False
    if isinstance(value, dict):
        value = value.get("version")
    candidates = value if isinstance(value, list) else [value]
    pins = (rule(c) for c in candidates if isinstance(c, str))
    return next((p for p in pins if p), None), True


_PIN_FILES: tuple[tuple[str, Callable[[Path, str, ValueRule], tuple[str | None, bool]]], ...] = (
    (".tool-versions", _tool_versions_pin),
    ("mise.toml", _mise_pin),
    (".mise.toml", _mise_pin),
)


# The notices of each tool's pins: (the file cannot be read, it pins no usable version).
_PIN_NOTICES = {
    "elixir": (NoticeCode.ELIXIR_PIN_UNREADABLE, NoticeCode.ELIXIR_PIN_UNUSABLE),
    "erlang": (NoticeCode.ERLANG_PIN_UNREADABLE, NoticeCode.ERLANG_PIN_UNUSABLE),
}


def find_pin(project_root: Path, tool: str, rule: ValueRule, *, example: str) -> Pin:
    """The version of `tool` the project pins, looking in the project and its parents
    (nearest first) as asdf and mise do. A file that cannot be read, or that names the
    tool without a usable version (`system`, `ref:main`), is a notice and the walk goes on;
    `example` shows a usable value in that notice.
    """
    unreadable, unusable = _PIN_NOTICES[tool]
    notices: list[Notice] = []
    for directory in project_dirs(project_root):
        for filename, reader in _PIN_FILES:
            path = directory / filename
            if not path.exists():
                continue
            try:
                version, mentioned = reader(path, tool, rule)
            except ValueError as exc:  # tomllib.TOMLDecodeError is a ValueError too
                notices.append(Notice(unreadable, f"could not read {path}: {exc}"))
                continue
            if version:
                return Pin(version, path, tuple(notices))
            if mentioned:
                notices.append(
                    Notice(
                        unusable,
                        f"{path} pins {tool} without a usable version (like {example}); "
                        "ignoring it",
                    )
                )
    return Pin(None, None, tuple(notices))
