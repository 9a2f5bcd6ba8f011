"""The BEAM file as a container, for every reader of compiled code (docs, call sites).

A `.beam` file is an IFF container: `FOR1`, a 4-byte size, `BEAM`, then chunks of a 4-byte
id, a 4-byte size and the data, each padded to 4 bytes. Every size is checked against the
file; a file is read only when it is regular and, through a link, inside its folder.
"""

from __future__ import annotations

import struct
from pathlib import Path

from hexlocal_core.cancel import checkpoint
from hexlocal_core.errors import IngestError
from hexlocal_core.untrusted import NotRegularFile, TooLarge, clip, read_regular

MAX_BEAM_BYTES = 64 * 1024 * 1024  # the largest OTP/Elixir beams are a few MiB


class BeamSkipped(IngestError):
    """A `.beam` file yields no docs; `reason` is the key it is counted under."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def real_path(path: Path) -> Path | None:
    """`path` with its links followed, or None when it does not exist or loops."""
    try:
        return path.resolve(strict=True)
    except (OSError, RuntimeError):
        return None


def read_capped(path: Path, limit: int, root: Path | None = None) -> bytes:
    """The bytes of a regular file inside `root` (the resolved ebin), at most `limit`.

    A FIFO named `x.beam` once blocked ingestion forever: the file is opened non-blocking
    and must be a regular file; a symlink may point only inside `root`.
    """
    if root is not None and path.is_symlink():
        target = real_path(path)
        if target is None or not target.is_relative_to(root):
            raise BeamSkipped("outside_tree", f"{clip(str(path))} links outside {root}")
    try:
        return read_regular(path, limit)  # never more than the cap, whatever the file claims
    except NotRegularFile as exc:
        raise BeamSkipped("not_regular", str(exc)) from exc
    except TooLarge as exc:
        raise BeamSkipped("too_large", f"{clip(str(path))} is larger than {limit} bytes") from exc
    except OSError as exc:
        raise BeamSkipped("unreadable", f"{clip(str(path))}: {exc}") from exc


def chunks_of(data: bytes) -> dict[str, bytes]:
    """Chunk id -> data (the first of each id), every size checked against the file."""
    if len(data) < 12 or data[:4] != b"FOR1" or data[8:12] != b"BEAM":
        raise BeamSkipped("not_beam", "not a BEAM file (no FOR1...BEAM header)")
    (form_size,) = struct.unpack_from(">I", data, 4)
    if form_size + 8 > len(data):
        raise BeamSkipped("truncated", f"BEAM declares {form_size + 8} bytes, file has {len(data)}")
    end = form_size + 8
    pos = 12
    chunks: dict[str, bytes] = {}
    while pos + 8 <= end:
        checkpoint()
        chunk_id = data[pos : pos + 4].decode("latin-1")
        (size,) = struct.unpack_from(">I", data, pos + 4)
        start = pos + 8
        if start + size > end:
            raise BeamSkipped("truncated", f"chunk {chunk_id!r} runs past the end of the file")
        chunks.setdefault(chunk_id, data[start : start + size])
        pos = start + (size + 3) // 4 * 4
    return chunks


def module_name(utf8_atoms: bytes | None, latin1_atoms: bytes | None) -> str:
    """The module is the first atom of the atom table."""
    table, encoding = (utf8_atoms, "utf-8") if utf8_atoms is not None else (latin1_atoms, "latin-1")
    if table is None or len(table) < 5:
        raise BeamSkipped("no_atoms", "BEAM file has no atom table")
    (count,) = struct.unpack_from(">i", table, 0)
    if count == 0:
        raise BeamSkipped("no_atoms", "BEAM atom table is empty")
    # OTP 28 writes a negative count when atom lengths use the compact encoding.
    length, start = (table[4], 5) if count > 0 else _compact_length(table)
    raw = table[start : start + length]
    if len(raw) != length or length == 0:
        raise BeamSkipped("no_atoms", "BEAM atom table is truncated")
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        raise BeamSkipped("no_atoms", "BEAM module name is not valid text") from exc


def _compact_length(table: bytes) -> tuple[int, int]:
    """A compact-term `u` integer at offset 4: one byte below 16, two bytes below 2048."""
    first = table[4]
    if first & 0x08 == 0:
        return first >> 4, 5
    if first & 0x10 == 0 and len(table) > 5:
        return ((first & 0xE0) << 3) | table[5], 6
    raise BeamSkipped("no_atoms", "BEAM atom table uses an unknown length encoding")
