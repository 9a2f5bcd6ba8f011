"""Merging one server's entry into an MCP client's config file, never clobbering it.

A client's file holds the user's other servers and settings, often comments (VS Code and
Zed read JSON with comments), so the file is edited as text: only the hexlocal entry is
inserted or replaced, everything else keeps its bytes. Each edit is then checked by
parsing the result, which must equal the old document with the one entry set; a file
that does not parse, or an edit that would not check, is refused and left untouched.
A file that changes is first copied to `<name>.<timestamp>.bak`, then replaced
atomically (a temp file in the same folder, then a rename).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from attrs import frozen

# A client config is a few KB; anything far larger is not one, and is not read whole.
MAX_CONFIG_BYTES = 4 * 1024 * 1024
_WS = " \t\r\n"


class ConfigFileError(Exception):
    """An existing config file cannot be merged safely; it was left as it was."""


@frozen
class Written:
    path: Path
    changed: bool
    backup: Path | None


# ------------------------------------------------------------------------- reading


def read_text(path: Path) -> str | None:
    """The file's text, None when it does not exist; refuses what is not a config."""
    if not path.exists():
        return None
    if not path.is_file():
        raise ConfigFileError(f"{path} is not a file")
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise ConfigFileError(f"{path} is over {MAX_CONFIG_BYTES // 2**20} MB: not a client config")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigFileError(f"{path} is not UTF-8 text ({exc.reason})") from exc


# ---------------------------------------------------------------------------- JSON


def blank_comments(text: str) -> tuple[str, bool]:
    """`text` with its // and /* */ comments, trailing commas and BOM turned into spaces,
    every offset and newline kept (so parse errors keep their line and column), and
    whether there were any."""
    out = list(text)
    found = False
    pending_comma: int | None = None
    i, n = 0, len(text)
    if text.startswith("\ufeff"):
        out[0] = " "
        i = 1
    while i < n:
        c = text[i]
        if c == '"':
            i = _string_end(text, i)
            pending_comma = None
            continue
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out[i:end] = " " * (end - i)
            found, i = True, end
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise ConfigFileError(f"a /* comment is never closed (line {_line(text, i)})")
            for k in range(i, end + 2):
                out[k] = "\n" if text[k] == "\n" else " "
            found, i = True, end + 2
            continue
        if c == ",":
            pending_comma = i
        elif c in "}]":
            if pending_comma is not None:
                out[pending_comma] = " "
                found = True
            pending_comma = None
        elif c not in _WS:
            pending_comma = None
        i += 1
    return "".join(out), found


def _string_end(text: str, start: int) -> int:
    """The offset just past the JSON string that opens at `start`."""
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return i + 1
        i += 1
    raise ConfigFileError(f"a string is never closed (line {_line(text, start)})")


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def load_json(path: Path, text: str, *, comments: bool) -> dict[str, Any]:
    """The document as a dict; `comments`: the client itself reads JSON with comments."""
    blanked, found = blank_comments(text)
    if found and not comments:
        raise ConfigFileError(
            f"{path} has comments or trailing commas, which this client does not read; "
            "remove them first"
        )
    if not blanked.strip():
        return {}
    try:
        doc = json.loads(blanked)
    except json.JSONDecodeError as exc:
        raise ConfigFileError(
            f"{path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc
    if not isinstance(doc, dict):
        raise ConfigFileError(f"{path} holds a JSON {type(doc).__name__}, not an object")
    return doc


def set_json_entry(
    path: Path, text: str | None, keys: tuple[str, str], entry: Any, *, comments: bool
) -> str:
    """The file's text with `doc[keys[0]][keys[1]] = entry`, every other byte kept."""
    container, name = keys
    text = text or ""
    doc = load_json(path, text, comments=comments)
    holder = doc.get(container)
    if holder is not None and not isinstance(holder, dict):
        raise ConfigFileError(f"{path}: {container!r} is a {type(holder).__name__}, not an object")
    expected = {**doc, container: {**(holder or {}), name: entry}}
    if not text.strip():
        return json.dumps(expected, indent=2, ensure_ascii=False) + "\n"
    blanked, _ = blank_comments(text)
    unit = _indent_unit(text)
    root = _skip_ws(blanked, 0)
    members = _members(blanked, root)
    if container not in members:
        new = _insert_member(text, blanked, root, members, container, {name: entry}, unit, 1)
    else:
        start, end = members[container]
        inner = _members(blanked, start)
        if name in inner:
            value_start, value_end = inner[name]
            dumped = _dump(entry, unit, 2)
            new = text[:value_start] + dumped + text[value_end:]
        else:
            new = _insert_member(text, blanked, start, inner, name, entry, unit, 2)
    if load_json(path, new, comments=comments) != expected:
        raise ConfigFileError(f"{path}: the edit did not check out; add the entry by hand")
    return new


def _skip_ws(blanked: str, at: int) -> int:
    while at < len(blanked) and blanked[at] in _WS:
        at += 1
    return at


def _members(blanked: str, open_at: int) -> dict[str, tuple[int, int]]:
    """An object's members (the last of duplicate keys wins, as in json) -> value span."""
    decoder = json.JSONDecoder()
    spans: dict[str, tuple[int, int]] = {}
    i = _skip_ws(blanked, open_at + 1)
    while blanked[i] != "}":
        key, i = decoder.raw_decode(blanked, i)
        i = _skip_ws(blanked, i) + 1  # past the colon
        start = _skip_ws(blanked, i)
        _, end = decoder.raw_decode(blanked, start)
        spans[key] = (start, end)
        i = _skip_ws(blanked, end)
        if blanked[i] == ",":
            i = _skip_ws(blanked, i + 1)
    return spans


def _insert_member(
    text: str,
    blanked: str,
    open_at: int,
    members: Mapping[str, tuple[int, int]],
    key: str,
    value: Any,
    unit: str,
    depth: int,
) -> str:
    """Inserts `"key": value` first in the object opening at `open_at`."""
    member = f"{json.dumps(key)}: {_dump(value, unit, depth)}"
    close = _skip_ws(blanked, open_at + 1)
    if not members and not text[open_at + 1 : close].strip():
        outer = unit * (depth - 1)
        return f"{text[: open_at + 1]}\n{unit * depth}{member}\n{outer}{text[close:]}"
    if not members:  # only comments inside: they stay, after the new member
        return f"{text[: open_at + 1]}\n{unit * depth}{member}{text[open_at + 1 :]}"
    return f"{text[: open_at + 1]}\n{unit * depth}{member},{text[open_at + 1 :]}"


def _dump(value: Any, unit: str, depth: int) -> str:
    dumped = json.dumps(value, indent=unit, ensure_ascii=False)
    return dumped.replace("\n", "\n" + unit * depth)


def _indent_unit(text: str) -> str:
    match = re.search(r'^([ \t]+)["/]', text, re.MULTILINE)
    return match.group(1) if match else "  "


# ---------------------------------------------------------------------------- TOML


def set_toml_table(path: Path, text: str | None, keys: tuple[str, str], block: str) -> str:
    """The file's text with the table `[keys[0].keys[1]]` (and its subtables) replaced by
    `block`, which is appended; any other line is kept."""
    text = text or ""
    old = _load_toml(path, text)
    container, name = keys
    kept = _without_tables(text, keys)
    new = kept.rstrip("\n") + ("\n\n" if kept.strip() else "") + block
    try:
        merged = tomllib.loads(new)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigFileError(
            f"{path} defines {container}.{name} in a form hexlocal does not rewrite (an inline "
            f"table or dotted keys): remove it, or edit it by hand ({exc})"
        ) from exc
    servers = dict(old.get(container) or {})
    servers[name] = tomllib.loads(block)[container][name]
    if merged != {**old, container: servers}:
        raise ConfigFileError(f"{path}: the edit did not check out; add the entry by hand")
    return new


def _load_toml(path: Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigFileError(f"{path} is not valid TOML: {exc}") from exc


_HEADER = re.compile(r"^\s*\[(\[)?([^\[\]]+)\]\]?\s*(#.*)?$")


def _without_tables(text: str, keys: tuple[str, str]) -> str:
    """`text` without the lines of every table whose key starts with `keys`."""
    out: list[str] = []
    dropping = False
    for line in text.splitlines(keepends=True):
        header = _HEADER.match(line)
        if header:
            dropping = _table_path(header.group(2))[:2] == list(keys)
        if not dropping:
            out.append(line)
    return "".join(out)


def _table_path(key: str) -> list[str]:
    """The dotted key of a table header as a list ('a."b.c"' -> ['a', 'b.c'])."""
    try:
        doc: Any = tomllib.loads(f"[{key}]\n")
    except tomllib.TOMLDecodeError:
        return []
    path: list[str] = []
    while isinstance(doc, dict) and len(doc) == 1:
        ((step, doc),) = doc.items()
        path.append(step)
    return path


def toml_string(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's, but DEL must be escaped too)."""
    return json.dumps(value).replace("\x7f", "\\u007f")


# --------------------------------------------------------------------------- write


def write(path: Path, new: str, old: str | None, *, private: bool) -> Written:
    """Writes `new` atomically, after copying an existing file to a timestamped backup.
    A symlinked config (dotfiles) is written through to its target. `private`: the file
    holds secrets, so it is made readable by its owner only."""
    target = path.resolve() if path.is_symlink() else path
    if old is not None and old == new:
        if private:
            target.chmod(0o600)
        return Written(path, changed=False, backup=None)
    backup = None
    mode = 0o600 if private else 0o644
    if old is not None:
        backup = _backup(target)
        mode = 0o600 if private else target.stat().st_mode & 0o777
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(new)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, mode)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return Written(path, changed=True, backup=backup)


def _backup(target: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    backup = target.with_name(f"{target.name}.{stamp}.bak")
    counter = 1
    while backup.exists():
        counter += 1
        backup = target.with_name(f"{target.name}.{stamp}-{counter}.bak")
    shutil.copy2(target, backup)
    return backup
