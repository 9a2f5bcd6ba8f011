"""Text from untrusted docs made safe to store and to echo.

* `decode_text`: bytes -> str where every undecodable byte becomes U+FFFD;
* `scrub`: lone surrogates (a JSON `"\\ud800"` escape decodes to one) become U+FFFD, since
  SQLite and every UTF-8 writer refuse them later, far from the cause;
* `clip`: a name echoed in a message is cut to `MAX_ECHO` characters (a tar member name
  can be megabytes long, and messages end up in tool results and database rows).
"""

from __future__ import annotations

import os
import re
import stat

MAX_ECHO = 200
_SURROGATE = re.compile("[\ud800-\udfff]")
_FFFD = "\ufffd"


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
    """`text` cut to at most `limit` characters for a message, saying how long it was."""
    if len(text) <= limit:
        return text
    suffix = f"… ({len(text)} chars)"
    return text[: max(limit - len(suffix), 0)] + suffix


def clip_repr(text: str, limit: int = MAX_ECHO) -> str:
    """A name quoted for a message: `repr` of the scrubbed text, at most `limit` characters."""
    shown = repr(scrub(text[:limit]))
    if len(text) <= limit and len(shown) <= limit:
        return shown
    suffix = f"… ({len(text)} chars)"
    return shown[: max(limit - len(suffix), 0)] + suffix


class NotRegularFile(OSError):
    """The path is a FIFO, device, socket or folder, not a regular file."""


def read_regular(path: str | os.PathLike[str], limit: int) -> bytes:
    """At most `limit + 1` bytes of a regular file (so callers can tell "too large").

    Opened non-blocking and checked with fstat before reading: opening a FIFO named
    `x.beam` or `README.md` for reading blocks until a writer appears, possibly forever.

    :raises NotRegularFile: not a regular file. :raises OSError: cannot be read.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFile(f"{clip(os.fspath(path))} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(limit + 1)
    finally:
        os.close(fd)
