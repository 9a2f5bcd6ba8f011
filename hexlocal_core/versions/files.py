"""Reading the project's small text files without trusting them.

A project directory is not ours: `mix.lock`, `mise.toml`, `.tool-versions` or a `*.app`
can be a FIFO (opening it blocks until a writer comes), a device (`/dev/zero` never ends)
or far larger than any real one. Every probe reads through `read_regular`, which opens
without blocking, refuses anything but a regular file and never reads past a cap.
"""

from __future__ import annotations

import os
import reprlib
import stat
from pathlib import Path

__all__ = ["NotReadable", "TooLarge", "clip", "read_regular", "shown"]

_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
MAX_SHOWN = 60  # characters of a file's value echoed in a message


class NotReadable(OSError):
    """The path is absent, not a regular file, or unreadable; str() says which."""


class TooLarge(NotReadable):
    """The file is bigger than the caller's cap."""

    def __init__(self, message: str, size: int) -> None:
        super().__init__(message)
        self.size = size


def read_regular(path: Path, max_bytes: int) -> bytes:
    """The bytes of the regular file at `path`, at most `max_bytes` of them.

    Raises NotReadable (TooLarge when it holds more than `max_bytes`). O_NONBLOCK makes
    opening a FIFO return at once; the fstat of the opened descriptor then refuses it,
    so a swap between a check and the open cannot slip a FIFO in.
    """
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise NotReadable(f"cannot be read ({exc.strerror or exc})") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotReadable("is not a regular file")
        if info.st_size > max_bytes:
            raise TooLarge(f"is {info.st_size} bytes, over the cap of {max_bytes}", info.st_size)
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        remaining = max_bytes + 1  # one byte more tells a file that grew since the fstat
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        data = b"".join(chunks)
    except NotReadable:  # an OSError too: let it through unchanged
        raise
    except OSError as exc:
        raise NotReadable(f"cannot be read ({exc.strerror or exc})") from exc
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise TooLarge(f"is over the cap of {max_bytes} bytes", len(data))
    return data


_REPR = reprlib.Repr()
_REPR.maxstring = MAX_SHOWN
_REPR.maxother = MAX_SHOWN
_REPR.maxlevel = 3


def shown(value: object) -> str:
    """`repr(value)` short enough for a one-line message (a lock value can be megabytes)."""
    text = _REPR.repr(value)
    return text if len(text) <= MAX_SHOWN * 2 else text[: MAX_SHOWN * 2] + "..."


def clip(text: str, limit: int = MAX_SHOWN) -> str:
    """`text` cut to `limit` characters for a message."""
    return text if len(text) <= limit else text[:limit] + "..."
