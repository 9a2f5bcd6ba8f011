"""A dependency's files in the project's `deps/`: which version they are, the local file a
docs source link points at, and the usage rules the package ships for coding agents.

`mix deps.get` unpacks each Hex dependency into `deps/<app>/` with a `hex_metadata.config`
naming its version; an umbrella keeps `deps/` beside the lock at its root. Everything here
reads files only (bounded, never following a link out of the dependency's folder) and
answers None or nothing when a file is absent or odd: a local file is a convenience on top
of the published docs, never a reason to fail.

Usage rules (`usage-rules.md`, and `usage-rules/*.md` for sub-rules) are the convention of
the `usage_rules` package: guidance a package's authors write for agents ("always preload
before ...", "never call X in a loop"). They are indexed with the package at the locked
version, under refs no ExDoc page takes (`usage-rules.md`, `usage-rules/<name>.md`).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from hexlocal_core.ingest.beam_file import real_path
from hexlocal_core.model import DocItem, DocType, SourceKind
from hexlocal_core.untrusted import NotReadable, read_regular
from hexlocal_core.versions import find_lock, find_mix_root

log = logging.getLogger("hexlocal.ingest.deps_folder")

MAX_METADATA_BYTES = 256 * 1024
MAX_RULE_BYTES = 512 * 1024  # usage-rules.md files are a few KB
MAX_RULE_FILES = 64
MAX_PATH_SEGMENTS = 32
USAGE_RULES_FILE = "usage-rules.md"
USAGE_RULES_DIR = "usage-rules"
# (ref, prefix) pairs that select every usage-rules chunk of a package (`ids_by_ref`).
USAGE_RULE_REFS = ((USAGE_RULES_FILE, USAGE_RULES_FILE + "#"), (USAGE_RULES_DIR + "/",) * 2)

_HEX_VERSION = re.compile(rb'\{\s*<<"version">>\s*,\s*<<"([^"]{1,64})">>\s*\}')
# `#L312`, `#L312-L320` (GitHub, Gitea), `#L312-320`, `#312` (some forges).
_LINE_FRAGMENT = re.compile(r"^L?(\d{1,7})(?:-L?\d{1,7})?$")
_H1 = re.compile(r"^ {0,3}#[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$", re.MULTILINE)


def deps_dir(project_root: Path) -> Path | None:
    """`deps/` of the project: beside the lock (an umbrella's root), else the Mix root's."""
    lock = find_lock(project_root)
    for base in (lock.parent if lock is not None else None, find_mix_root(project_root)):
        if base is not None and (base / "deps").is_dir():
            return base / "deps"
    return None


def dep_version(dep: Path) -> str | None:
    """The version `mix deps.get` unpacked into `dep` (from `hex_metadata.config`), or None
    for a folder without one (a git or path dependency, or not fetched)."""
    try:
        data = read_regular(dep / "hex_metadata.config", MAX_METADATA_BYTES)
    except (NotReadable, OSError):
        return None
    m = _HEX_VERSION.search(data)
    return m.group(1).decode("utf-8", errors="replace").strip() if m else None


def local_source(source_url: str | None, dep: Path) -> str | None:
    """The file under `dep` that a docs source link points at, `lib/ecto/repo.ex:312` (with
    its line when the link names one), relative to `dep`; None when no such file exists.

    Forges spell the path differently (`/blob/v3.12.5/lib/x.ex`, `/-/blob/...`,
    `/src/branch/...`): the longest tail of the URL's path that is a file in `dep` wins,
    so no forge needs its own rule."""
    if not source_url:
        return None
    try:
        parts = urlsplit(source_url)
    except ValueError:
        return None
    segments = [unquote(s) for s in parts.path.split("/") if s][-MAX_PATH_SEGMENTS:]
    if any(s in (".", "..") or "\\" in s or "\x00" in s for s in segments):
        return None
    root = real_path(dep)
    if root is None:
        return None
    for start in range(len(segments)):
        relative = "/".join(segments[start:])
        if _is_file_inside(root / relative, root):
            line = _LINE_FRAGMENT.match(parts.fragment or "")
            return f"{relative}:{line.group(1)}" if line else relative
    return None


def usage_rule_items(dep: Path, package: str, version: str) -> tuple[DocItem, ...]:
    """The usage rules `dep` ships, one item per file (the main file first), marked as
    usage rules; nothing when it ships none."""
    root = real_path(dep)
    if root is None:
        return ()
    files: list[Path] = [dep / USAGE_RULES_FILE]
    rules = dep / USAGE_RULES_DIR
    if rules.is_dir():
        try:
            found = sorted(p for p in rules.iterdir() if p.suffix.lower() == ".md")
        except OSError:
            found = []
        files.extend(found[:MAX_RULE_FILES])
    items: list[DocItem] = []
    for path in files:
        text = _read_rule(path, root)
        if text is None or not text.strip():
            continue
        ref = path.relative_to(dep).as_posix()
        items.append(
            DocItem(
                package=package,
                version=version,
                ref=ref,
                title=_rule_title(package, ref, text),
                doc_type=DocType.EXTRAS,
                markdown=text,
                hexdocs_url="",
                source_url=None,
                source=SourceKind.USAGE_RULES,
            )
        )
    return tuple(items)


def is_usage_rule_ref(ref: str) -> bool:
    return ref.startswith((USAGE_RULES_FILE, USAGE_RULES_DIR + "/"))


def _rule_title(package: str, ref: str, text: str) -> str:
    heading = _H1.search(text)
    if heading and heading.group(1).strip():
        return heading.group(1).strip()[:200]
    if ref == USAGE_RULES_FILE:
        return f"{package} usage rules"
    return f"{package} usage rules: {Path(ref).stem}"


def _read_rule(path: Path, root: Path) -> str | None:
    if not _is_file_inside(path, root):
        return None
    try:
        return read_regular(path, MAX_RULE_BYTES).decode("utf-8")
    except (NotReadable, OSError, UnicodeDecodeError) as exc:
        log.debug("skipping usage rules %s: %s", path, exc)
        return None


def _is_file_inside(path: Path, root: Path) -> bool:
    """A regular file whose real path stays inside `root` (a link out of the dependency's
    folder is not the dependency's file)."""
    resolved = real_path(path)
    return resolved is not None and resolved.is_relative_to(root) and resolved.is_file()
