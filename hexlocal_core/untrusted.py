"""Text and files that hexlocal did not write, made safe to read, store and echo.

Docs tarballs, BEAM files, a project's mix.lock and markdown, and every server reply are
untrusted input. One module says how such input is handled, for the readers and the
adapters alike:

* `scrub`: lone surrogates (a JSON `"\\ud800"` escape decodes to one) become U+FFFD, since
  SQLite and every UTF-8 writer refuse them later, far from the cause;
* `decode_text`: bytes -> str, every undecodable byte U+FFFD;
* `clip`, `clip_repr`, `shown`: a name or value echoed in a one-line message, bounded (a tar
  member name or a lock value can be megabytes, and messages end up in tool results, logs
  and database rows);
* `read_regular`: a capped read of a regular file that never blocks (a FIFO named
  `x.beam`, `mix.lock` or `README.md` would block an open for reading until a writer came).
"""

from __future__ import annotations

import os
import re
import reprlib
import stat

MAX_ECHO = 200  # the longest echoed name (package, version, path, model) a message repeats
MAX_SHOWN = 60  # characters of a file's value echoed in a message
_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029\ud800-\udfff]")
_FFFD = "\ufffd"
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def scrub(text: str) -> str:
    """`text` with every surrogate code point replaced by U+FFFD (valid text is returned as is)."""
    if text.isascii():
        return text
    return _SURROGATE.sub(_FFFD, text)


def decode_text(data: bytes) -> str:
    """UTF-8 bytes as text; each invalid byte becomes U+FFFD.

    Decoding with `surrogateescape` turns each bad byte into a lone surrogate, which
    `scrub` then replaces: one rule for bad bytes and for surrogate escapes.
    """
    return scrub(data.decode("utf-8", errors="surrogateescape"))


def clip(text: str, limit: int = MAX_ECHO) -> str:
    """One echoed name, safe in a one-line message: control characters and lone surrogates
    shown as `?`, at most `limit` characters (an ellipsis marks the cut)."""
    text = _CONTROL.sub("?", text)
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def clip_repr(text: str, limit: int = MAX_ECHO) -> str:
    """A name quoted for a message: `repr` of the scrubbed text, at most `limit` characters."""
    shown_text = repr(scrub(text[:limit]))
    if len(text) <= limit and len(shown_text) <= limit:
        return shown_text
    suffix = f"… ({len(text)} chars)"
    return shown_text[: max(limit - len(suffix), 0)] + suffix


_REPR = reprlib.Repr()
_REPR.maxstring = MAX_SHOWN
_REPR.maxother = MAX_SHOWN
_REPR.maxlevel = 3


def shown(value: object) -> str:
    """`repr(value)` short enough for a one-line message (a lock value can be megabytes)."""
    text = _REPR.repr(value)
    return text if len(text) <= MAX_SHOWN * 2 else text[: MAX_SHOWN * 2] + "..."


class NotReadable(OSError):
    """The path is absent, not a regular file, or unreadable; str() says which."""


class NotRegularFile(NotReadable):
    """The path is a FIFO, device, socket or folder, not a regular file."""


class TooLarge(NotReadable):
    """The file is bigger than the caller's cap."""

    def __init__(self, message: str, size: int) -> None:
        super().__init__(message)
        self.size = size


def read_regular(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The bytes of the regular file at `path`, at most `max_bytes` of them.

    Raises NotRegularFile for anything but a regular file, TooLarge past `max_bytes`,
    NotReadable otherwise. O_NONBLOCK makes opening a FIFO return at once; the fstat of the
    opened descriptor then refuses it, so a swap between a check and the open cannot slip a
    FIFO in.
    """
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise NotReadable(f"cannot be read ({exc.strerror or exc})") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(f"{clip(os.fspath(path))} is not a regular file")
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
    except NotReadable:
        raise
    except OSError as exc:
        raise NotReadable(f"cannot be read ({exc.strerror or exc})") from exc
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise TooLarge(f"is over the cap of {max_bytes} bytes", len(data))
    return data


def unreadable(path: os.PathLike[str] | str, exc: NotReadable) -> str:
    """`exc` as a sentence about `path` (a NotRegularFile names the path already)."""
    return str(exc) if isinstance(exc, NotRegularFile) else f"{clip(os.fspath(path))} {exc}"


__all__ = [
    "MAX_ECHO",
    "NotReadable",
    "NotRegularFile",
    "TooLarge",
    "clip",
    "clip_repr",
    "decode_text",
    "read_regular",
    "scrub",
    "shown",
    "unreadable",
]
