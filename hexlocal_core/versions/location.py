"""Where a project's files are: the Mix project root and the mix.lock governing it.

PROJECT_ROOT may be any folder inside a Mix project (`lib/my_app/live`), an umbrella
child (`apps/web`) or the project itself. Every lookup walks up from it, nearest first,
and stops at a boundary so an unrelated lock above the checkout is never taken for the
project's: a VCS root, the user's home directory or the filesystem root (the boundary
itself is still looked at, as asdf and mise do for their pin files).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["MAX_WALK_UP", "VCS_MARKERS", "find_lock", "find_mix_root", "project_dirs"]

MAX_WALK_UP = 32  # a backstop only: the boundaries above end every real walk sooner
VCS_MARKERS = (".git", ".hg", ".svn", ".jj")


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a symlink loop: use the path as written
        return path.absolute()


def _home() -> Path | None:
    try:
        return _resolved(Path.home())
    except (KeyError, RuntimeError):  # no HOME and no passwd entry
        return None


def project_dirs(project_root: Path) -> Iterator[Path]:
    """`project_root`, then its parents, ending with the first boundary (see module doc)."""
    here, home = _resolved(project_root), _home()
    for level, directory in enumerate((here, *here.parents)):
        yield directory
        if level >= MAX_WALK_UP or directory == home:
            return
        if any(os.path.lexists(directory / marker) for marker in VCS_MARKERS):
            return


def find_mix_root(project_root: Path) -> Path | None:
    """The nearest directory from `project_root` upwards that holds a mix.exs."""
    return next((d for d in project_dirs(project_root) if (d / "mix.exs").is_file()), None)


def find_lock(project_root: Path) -> Path | None:
    """The mix.lock governing `project_root`, or None.

    `project_root`'s own lock always counts. Above it, a lock counts only beside a
    mix.exs: a subfolder (`lib/foo`) reaches its project's lock, and an umbrella child
    (`apps/x`, which has mix.exs but no lock: Mix points it at `../../mix.lock`) passes
    `apps/`, which has no mix.exs, on its way to the umbrella root's.

    Anything named mix.lock is returned, even a FIFO or a directory: the reader refuses
    it with a message, which says more than silently finding nothing.
    """
    for level, directory in enumerate(project_dirs(project_root)):
        lock = directory / "mix.lock"
        if os.path.lexists(lock) and (level == 0 or (directory / "mix.exs").is_file()):
            return lock
    return None
