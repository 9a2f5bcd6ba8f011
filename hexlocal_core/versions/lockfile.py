"""mix.lock entries: reading a lock file, bounded and cached, one bad entry at a time.

A lock is re-checked on every lookup (`mix deps.update` may change it while a server
runs, and a stale pin would answer with the docs of the wrong version), but it is only
re-parsed when it changed: the parse is cached by path, inode, size, mtime and ctime.
A file changed in the last RACY_WINDOW_NS is not cached, since a second write inside
the same timestamp tick would leave every key field as it was (git's "racy clean").

Failures are scoped as narrowly as the file allows: a file that cannot be read, is
larger than MAX_LOCK_BYTES or is not a term at all raises MalformedLock (the resolver
makes it a notice and falls through); an entry of the wrong shape is left out and
reported in `LockFile.problems`, so the other entries still pin their versions.
"""

from __future__ import annotations

import os
import stat
import threading
import time
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from attrs import field, frozen

from hexlocal_core.lru import Lru
from hexlocal_core.model import Atom, LockEntry
from hexlocal_core.untrusted import NotReadable, TooLarge, clip, read_regular, shown
from hexlocal_core.versions.terms import BigNumber, LockTooLarge, MalformedLock, parse_elixir_term

__all__ = [
    "MAX_LOCK_BYTES",
    "LockFile",
    "load_lock",
    "parse_lock",
    "parse_lock_file",
    "read_lock",
]

# Real locks are tens of KB (livebook's 67 entries: 23 KB); beyond 2 MiB is not a lock a
# person or Mix wrote. The token budget (terms.MAX_TOKENS) bounds the parse below it.
MAX_LOCK_BYTES = 2 * 1024 * 1024
CACHE_SIZE = 16  # locks of distinct projects one process may look at
RACY_WINDOW_NS = 2_000_000_000  # coarser than any timestamp granularity in use (FAT: 2 s)


@frozen
class LockFile:
    """A parsed lock: the usable entries, and why each unusable one was left out."""

    source: str
    entries: Mapping[str, LockEntry]
    problems: Mapping[str, str] = field(factory=dict)  # lock key -> message naming it


# --------------------------------------------------------------------------- entries


def parse_lock_file(text: str, *, source: str = "mix.lock") -> LockFile:
    """Parses mix.lock text; a malformed entry goes to `problems`, not into an exception.

    Raises MalformedLock only when the text is not one Elixir map literal.
    """
    term = parse_elixir_term(text, source=source)
    if not isinstance(term, dict):
        raise MalformedLock(f"{source}: expected a map %{{...}} at the top level")
    entries: dict[str, LockEntry] = {}
    problems: dict[str, str] = {}
    for key, value in term.items():
        name = key.name if isinstance(key, Atom) else key
        if not isinstance(name, str):
            problems[shown(key)] = f"{source}: a key is not a name: {shown(key)}"
            continue
        try:
            entries[name] = _entry(name, value, source)
        except MalformedLock as exc:
            problems[name] = str(exc)
    return LockFile(source, types.MappingProxyType(entries), types.MappingProxyType(problems))


def parse_lock(text: str, *, source: str = "mix.lock") -> dict[str, LockEntry]:
    """Parses mix.lock text into entries keyed by application name, strictly.

    Raises MalformedLock naming the first malformed entry (`parse_lock_file` keeps the
    good entries instead).
    """
    lock = parse_lock_file(text, source=source)
    if lock.problems:
        raise MalformedLock(next(iter(lock.problems.values())))
    return dict(lock.entries)


def _entry(name: str, value: Any, source: str) -> LockEntry:
    if not (isinstance(value, tuple) and value and isinstance(value[0], Atom)):
        raise MalformedLock(f"{source}: entry {shown(name)} is not a {{:scm, ...}} tuple")
    scm = value[0].name
    try:
        if scm == "hex":
            return _hex_entry(name, value)
        if scm == "git":
            return _git_entry(name, value)
        if scm == "path":
            return _path_entry(name, value)
    except (IndexError, TypeError, ValueError) as exc:
        raise MalformedLock(
            f"{source}: entry {shown(name)} is a malformed :{clip(scm, 60)} tuple ({exc})"
        ) from exc
    # An SCM we do not know (a Mix plugin): keep what it says, resolution treats it like git.
    return LockEntry(name=name, kind=scm, options={"raw": _plain(value[1:])})


def _hex_entry(name: str, t: tuple[Any, ...]) -> LockEntry:
    # Mix wrote 3 to 8 elements over the years:
    # {:hex, pkg, vsn, inner_checksum, managers, deps, repo, outer_checksum}
    package, version = _need(t[1], Atom, "package").name, _need(t[2], str, "version")
    options: dict[str, Any] = {}
    if len(t) > 3:
        options["checksum"] = _need(t[3], str, "checksum")
    if len(t) > 4:
        options["managers"] = [
            _need(m, Atom, "manager").name for m in _need(t[4], list, "managers")
        ]
    deps = tuple(_dep_name(d) for d in _need(t[5], list, "deps")) if len(t) > 5 else ()
    repo = _need(t[6], str, "repo") if len(t) > 6 else "hexpm"
    if len(t) > 7:
        options["outer_checksum"] = _need(t[7], str, "outer checksum")
    return LockEntry(
        name=name,
        kind="hex",
        # " 1.4.4 " is 1.4.4 to a version check; it must be the same text in a URL.
        version=version.strip(),
        package=package,
        repo=repo,
        options=options,
        deps=deps,
    )


def _git_entry(name: str, t: tuple[Any, ...]) -> LockEntry:
    # {:git, url, revision, options}
    url, ref = _need(t[1], str, "url"), _need(t[2], str, "revision")
    options = _keywords(t[3]) if len(t) > 3 else {}
    return LockEntry(name=name, kind="git", repo=url, ref=ref, options=options)


def _path_entry(name: str, t: tuple[Any, ...]) -> LockEntry:
    options = _keywords(t[2]) if len(t) > 2 else {}
    return LockEntry(name=name, kind="path", path=_need(t[1], str, "path"), options=options)


def _need(value: Any, kind: type, what: str) -> Any:
    if not isinstance(value, kind):
        raise TypeError(f"{what} should be a {kind.__name__}, found {shown(value)}")
    return value


def _dep_name(dep: Any) -> str:
    if isinstance(dep, tuple) and dep and isinstance(dep[0], Atom):
        return dep[0].name
    raise ValueError(f"a dependency should be {{:name, requirement, opts}}, found {shown(dep)}")


def _keywords(value: Any) -> dict[str, Any]:
    pairs = _need(value, list, "options")
    out: dict[str, Any] = {}
    for pair in pairs:
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], Atom)):
            raise ValueError(f"options should be a keyword list, found {shown(pair)}")
        out[pair[0].name] = _plain(pair[1])
    return out


def _plain(value: Any) -> Any:
    """Atoms become ':name' text so options stay simple JSON-friendly values."""
    if isinstance(value, Atom | BigNumber):
        return str(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(_plain(k)): _plain(v) for k, v in value.items()}
    return value


# --------------------------------------------------------------------------- reading

_Key = tuple[str, int, int, int, int, int]
_Outcome = LockFile | tuple[type[MalformedLock], str]
_cache: Lru[_Key, _Outcome] = Lru(CACHE_SIZE)
_cache_guard = threading.Lock()  # lookups run on the event loop and in worker threads


def load_lock(path: Path) -> LockFile:
    """The parsed lock at `path`, re-parsed only when the file changed.

    Raises MalformedLock (LockTooLarge for a file over MAX_LOCK_BYTES, checked before
    any byte is read).
    """
    try:
        info = os.stat(path)
    except OSError as exc:
        raise MalformedLock(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    if not stat.S_ISREG(info.st_mode):
        raise MalformedLock(f"{path}: is not a regular file, so it cannot be a mix.lock")
    if info.st_size > MAX_LOCK_BYTES:
        raise _too_large(path, info.st_size)
    key = (str(path), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    with _cache_guard:
        outcome = _cache.get(key)
    if outcome is None:
        outcome = _parse_file(path)
        if time.time_ns() - max(info.st_mtime_ns, info.st_ctime_ns) > RACY_WINDOW_NS:
            _remember(key, outcome)
    if isinstance(outcome, LockFile):
        return outcome
    error_type, message = outcome  # a fresh exception each time: no shared traceback
    raise error_type(message)


def read_lock(path: Path) -> dict[str, LockEntry]:
    """The usable entries of the lock at `path` (see `load_lock`). Raises MalformedLock."""
    return dict(load_lock(path).entries)


def _parse_file(path: Path) -> _Outcome:
    try:
        text = read_regular(path, MAX_LOCK_BYTES).decode("utf-8")
        return parse_lock_file(text, source=str(path))
    except TooLarge as exc:  # it grew between the stat and the read
        return (LockTooLarge, str(_too_large(path, exc.size)))
    except NotReadable as exc:
        return (MalformedLock, f"{path}: {exc}")
    except UnicodeDecodeError as exc:
        return (MalformedLock, f"{path}: not UTF-8 text ({exc.reason})")
    except MalformedLock as exc:
        return (type(exc), str(exc))


def _too_large(path: Path, size: int) -> LockTooLarge:
    return LockTooLarge(
        f"{path} is {size} bytes, more than the {MAX_LOCK_BYTES // (1024 * 1024)} MiB a "
        "mix.lock may have (real ones are tens of KB); ignoring it"
    )


def _remember(key: _Key, outcome: _Outcome) -> None:
    with _cache_guard:
        _cache.put(key, outcome)
