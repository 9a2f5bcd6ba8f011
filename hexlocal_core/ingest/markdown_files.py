"""The project's own docs: markdown files under the project root, one DocItem per file.

By default `README.md`, `docs/` and `guides/` are read; folders are walked for `.md`,
`.markdown`, `.livemd` and `.cheatmd` files (the extras ExDoc accepts), leaving out hidden
folders, `_build`, `deps` and `node_modules`. Each item's markdown is the file's exact text:
bytes are decoded as strict UTF-8 and nothing is normalised (line endings, BOM). Files that
are too large, not UTF-8, unreadable, or outside the project root (through `..` or a
symlink) are skipped and counted.
"""

from __future__ import annotations

import logging
import os
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

from attrs import frozen

from hexlocal_core.model import DocItem, DocType, SourceKind
from hexlocal_core.untrusted import NotRegularFile, TooLarge, read_regular

log = logging.getLogger("hexlocal.ingest.markdown_files")

PROJECT_PACKAGE = "__project__"
PROJECT_VERSION = "local"
MAX_FILE_BYTES = 2 * 1024 * 1024
DEFAULT_PATHS = (Path("README.md"), Path("docs"), Path("guides"))
EXTENSIONS = frozenset({".md", ".markdown", ".livemd", ".cheatmd"})
SKIP_DIRS = frozenset({"_build", "deps", "node_modules"})
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_FENCE_CLOSE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*$")  # a closing fence has no info string
_H1 = re.compile(r"^ {0,3}#[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")


@frozen
class MarkdownItems:
    items: tuple[DocItem, ...]
    skipped: dict[str, int]  # reason -> count: too_large, not_utf8, unreadable, not_regular,
    # outside_project


def collect_markdown(project_root: Path, paths: Sequence[Path] | None = None) -> list[DocItem]:
    """One item per markdown file under `paths` (relative to `project_root`, or absolute
    inside it); the defaults when `paths` is None. Skips are logged; see `scan_markdown`."""
    return list(scan_markdown(project_root, paths).items)


def scan_markdown(project_root: Path, paths: Sequence[Path] | None = None) -> MarkdownItems:
    """`collect_markdown` with the skip counts."""
    root = project_root.resolve()
    skipped: Counter[str] = Counter()
    items: list[DocItem] = []
    seen: set[Path] = set()
    for path in _markdown_files(root, DEFAULT_PATHS if paths is None else paths, skipped):
        if path in seen:
            continue
        seen.add(path)
        item = _item(root, path, skipped)
        if item is not None:
            items.append(item)
    if skipped:
        log.info("project docs: %d files read, skipped %s", len(items), dict(skipped))
    return MarkdownItems(tuple(items), dict(skipped))


def _markdown_files(root: Path, paths: Sequence[Path], skipped: Counter[str]) -> Iterator[Path]:
    """Resolved files, in the order of `paths`, each folder's files in name order."""
    for given in paths:
        path = given if given.is_absolute() else root / given
        if not path.exists():
            continue  # absent defaults (no guides/) are normal, not a skip
        resolved = path.resolve()
        if not resolved.is_relative_to(root):
            skipped["outside_project"] += 1
            continue
        if resolved.is_dir():
            yield from _walk(root, resolved, skipped)
        elif resolved.is_file():
            yield resolved


def _walk(root: Path, folder: Path, skipped: Counter[str]) -> Iterator[Path]:
    found: list[Path] = []
    # os.walk does not follow symlinked folders; symlinked files are checked below.
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in SKIP_DIRS)
        for name in filenames:
            if name.startswith(".") or Path(name).suffix.lower() not in EXTENSIONS:
                continue
            resolved = (Path(dirpath) / name).resolve()
            if not resolved.is_relative_to(root):
                skipped["outside_project"] += 1
                continue
            found.append(resolved)
    yield from sorted(found)


def _item(root: Path, path: Path, skipped: Counter[str]) -> DocItem | None:
    text = _read_text(path, skipped)
    if text is None:
        return None
    return DocItem(
        package=PROJECT_PACKAGE,
        version=PROJECT_VERSION,
        ref=path.relative_to(root).as_posix(),
        title=first_heading(text) or path.name,
        doc_type=DocType.EXTRAS,
        markdown=text,
        hexdocs_url="",
        source_url=path.as_uri(),
        source=SourceKind.PROJECT,
    )


def _read_text(path: Path, skipped: Counter[str]) -> str | None:
    try:
        raw = read_regular(path, MAX_FILE_BYTES)  # never past the cap; a FIFO never blocks
    except NotRegularFile:
        skipped["not_regular"] += 1
        return None
    except TooLarge:
        skipped["too_large"] += 1
        return None
    except OSError as exc:
        log.debug("cannot read %s: %s", path, exc)
        skipped["unreadable"] += 1
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        skipped["not_utf8"] += 1
        return None


def first_heading(text: str) -> str | None:
    """The text of the first `# ` heading outside fenced code, or None."""
    fence: str | None = None
    for line in text.split("\n"):
        line = line.rstrip("\r")
        if fence is not None:
            closed = _FENCE_CLOSE.match(line)
            if closed and closed.group(1)[0] == fence[0] and len(closed.group(1)) >= len(fence):
                fence = None
            continue
        opened = _FENCE.match(line)
        if opened:
            fence = opened.group(1)
            continue
        heading = _H1.match(line)
        if heading and heading.group(1).strip():
            return heading.group(1).strip()
    return None
