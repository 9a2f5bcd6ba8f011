"""Read a HexDocs docs tarball held in memory, refusing anything hostile.

The tarball comes straight from the network, so it is untrusted input:

* it is never written to disk: files come back as a ``{path: bytes}`` dict;
* only regular files are accepted; links, devices and FIFOs refuse the whole archive
  (a docs tarball has no reason to contain them), and so do absolute paths and ``..``;
* the uncompressed size is capped *while* decompressing. The cap counts every byte the
  gzip stream yields (file data, tar headers, padding, skipped members), so neither a
  gzip bomb nor a lying tar header nor a huge PAX/long-name header can make us allocate
  more than ``max_bytes`` (plus one read buffer).

Elixir's own docs (elixir, eex, ...) are packed with ``./`` prefixes and directory
entries; both are normalised away.
"""

from __future__ import annotations

import logging
import tarfile
import zlib
from collections.abc import Callable

from hexlocal_core.cancel import checkpoint
from hexlocal_core.errors import IngestError, UnsafeArchive
from hexlocal_core.untrusted import clip_repr

log = logging.getLogger("hexlocal.ingest.tarball")

_GZIP_MAGIC = b"\x1f\x8b"
_READ_SIZE = 64 * 1024
# zlib wbits for "gzip header and trailer required".
_GZIP_WBITS = 16 + zlib.MAX_WBITS
# hex.pm serves one gzip member; RFC 1952 allows more, but empty members yield no bytes
# for the size cap to count, so 128k of them once cost 80 s without tripping it.
MAX_GZIP_MEMBERS = 64
# The largest real docs tarball (Elixir's own) has a few thousand files.
MAX_MEMBERS = 100_000
# PATH_MAX: a longer member name is hostile, not documentation.
MAX_NAME_CHARS = 4096


def is_parser_input(path: str) -> bool:
    """The files the ExDoc parser reads: pages, per-page markdown, search/sidebar JS, llms.txt.

    Everything else (fonts, images, epub, .build) is skipped to save memory; it still
    counts against the size cap because it still has to be decompressed to be skipped.
    """
    if path.endswith((".html", ".md")):
        return True
    if path.startswith("dist/") and path.endswith(".js"):
        return True
    return path == "llms.txt"


class _CappedGunzip:
    """A read-only file object yielding the decompressed bytes of a gzip blob.

    Decompression happens `size` bytes at a time (``max_length``), and the running total
    is checked on every call, so a bomb is refused after at most ``cap`` bytes of output.
    Concatenated gzip members (allowed by RFC 1952) are followed.
    """

    def __init__(self, data: bytes, cap: int, what: str) -> None:
        self._data = memoryview(data)
        self._pos = 0
        self._cap = cap
        self._what = what
        self._out = 0
        self._z = zlib.decompressobj(_GZIP_WBITS)
        self._pending = b""  # input handed to zlib but not yet consumed (unconsumed_tail)
        self._members = 1

    @property
    def complete(self) -> bool:
        """True when the last gzip member ended cleanly (its CRC and length checked)."""
        return self._z.eof and not self._pending and self._pos >= len(self._data)

    def drain(self) -> None:
        """Decompress (and drop) whatever follows the tar end marker, up to the cap."""
        while self._step(_READ_SIZE):
            pass

    def read(self, size: int = -1) -> bytes:
        want = _READ_SIZE if size is None or size < 0 else max(size, 1)
        parts: list[bytes] = []
        got = 0
        while got < want:
            piece = self._step(want - got)
            if not piece:
                break
            parts.append(piece)
            got += len(piece)
        return b"".join(parts)

    def _step(self, limit: int) -> bytes:
        """Decompress at most `limit` bytes; b"" at the end of the input.

        Linear in the input: a finished member hands over only its unused bytes (at most
        one read buffer), never a copy of everything after it, and the member count is
        capped because empty members yield no bytes for the size cap to count.
        """
        while True:
            checkpoint()
            if self._z.eof:
                rest = self._z.unused_data + self._pending
                self._pending = b""
                if not rest and self._pos < len(self._data):
                    rest = self._take()
                if not rest.strip(b"\x00") and self._zeros_to_end():
                    return b""  # trailing zero padding after the last member is harmless
                self._members += 1
                if self._members > MAX_GZIP_MEMBERS:
                    raise UnsafeArchive(
                        f"{self._what} holds more than {MAX_GZIP_MEMBERS} gzip members; "
                        "refused as a possible decompression bomb"
                    )
                self._z = zlib.decompressobj(_GZIP_WBITS)
                self._pending = rest
            if not self._pending:
                if self._pos >= len(self._data):
                    return b""
                self._pending = self._take()
            try:
                out = self._z.decompress(self._pending, limit)
            except zlib.error as exc:
                raise IngestError(f"{self._what} is not a valid gzip stream ({exc})") from exc
            self._pending = self._z.unconsumed_tail
            if out:
                self._out += len(out)
                if self._out > self._cap:
                    raise UnsafeArchive(
                        f"{self._what} expands beyond the {self._cap} byte limit; "
                        "refused as a possible decompression bomb"
                    )
                return out

    def _take(self) -> bytes:
        end = min(self._pos + _READ_SIZE, len(self._data))
        piece = bytes(self._data[self._pos : end])
        self._pos = end
        return piece

    def _zeros_to_end(self) -> bool:
        """Whether only zero bytes remain (consumed if so). Runs at most once per archive:
        either the input ends here, or the non-zero bytes make the next member fail."""
        if self._data[self._pos :].tobytes().strip(b"\x00"):
            return False
        self._pos = len(self._data)
        return True


def _normalise(name: str, what: str) -> str:
    """The member path without `./` prefixes; refuses absolute paths and `..` components."""
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise UnsafeArchive(f"{what} contains an absolute path: {clip_repr(name)}")
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafeArchive(f"{what} contains a path escaping the archive: {clip_repr(name)}")
    return "/".join(parts)


def _check_kind(member: tarfile.TarInfo, path: str, what: str) -> None:
    if member.issym() or member.islnk():
        raise UnsafeArchive(
            f"{what} contains a link ({clip_repr(path)} -> {clip_repr(member.linkname)})"
        )
    if member.isdev():
        raise UnsafeArchive(f"{what} contains a device or FIFO entry: {clip_repr(path)}")
    if not member.isreg() and not member.isdir():
        raise UnsafeArchive(f"{what} contains an unsupported entry type for {clip_repr(path)}")


def _read_member(tf: tarfile.TarFile, member: tarfile.TarInfo, path: str, what: str) -> bytes:
    fileobj = tf.extractfile(member)
    if fileobj is None:  # pragma: no cover - isreg() members always have a file object
        raise IngestError(f"{what}: cannot read {clip_repr(path)}")
    parts: list[bytes] = []
    while True:
        checkpoint()
        piece = fileobj.read(_READ_SIZE)
        if not piece:
            break
        parts.append(piece)
    data = b"".join(parts)
    if len(data) != member.size:
        raise IngestError(f"{what} is truncated inside {clip_repr(path)}")
    return data


def read_docs_tarball(
    data: bytes,
    *,
    max_bytes: int,
    package: str | None = None,
    keep: Callable[[str], bool] | None = is_parser_input,
) -> dict[str, bytes]:
    """The regular files of a docs tarball, keyed by normalised relative path.

    `max_bytes` caps the whole uncompressed tar stream. `keep` selects which files are
    returned (default: what the ExDoc parser reads; None keeps every regular file).
    Raises `UnsafeArchive` for traversal, links, devices or a size bomb, and
    `IngestError` for bytes that are not a complete gzip-compressed tar archive.
    """
    what = f"the docs tarball of {package}" if package else "the docs tarball"
    if max_bytes <= 0:
        raise ValueError("max_bytes must be positive")
    if not data.startswith(_GZIP_MAGIC):
        raise IngestError(f"{what} is not gzip-compressed (first bytes {data[:4]!r})")
    stream = _CappedGunzip(data, max_bytes, what)
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tf:  # type: ignore[call-overload]
            for count, member in enumerate(tf, 1):
                checkpoint()
                if count > MAX_MEMBERS:
                    raise UnsafeArchive(f"{what} holds more than {MAX_MEMBERS} entries; refused")
                if len(member.name) > MAX_NAME_CHARS:
                    raise UnsafeArchive(
                        f"{what} holds an entry name of {len(member.name)} characters "
                        f"({clip_repr(member.name, 60)}); refused"
                    )
                path = _normalise(member.name, what)
                _check_kind(member, path, what)
                if member.isdir() or not path:
                    continue
                if keep is not None and not keep(path):
                    continue  # tarfile skips its data, still through the capped stream
                if path in files:
                    log.warning("%s lists %s twice; the later copy wins", what, clip_repr(path))
                files[path] = _read_member(tf, member, path, what)
        stream.drain()  # read to the gzip trailer so truncation and CRC errors surface
    except tarfile.TarError as exc:
        raise IngestError(f"{what} is not a readable tar archive ({exc})") from exc
    except EOFError as exc:
        raise IngestError(f"{what} is truncated ({exc})") from exc
    if not stream.complete:
        raise IngestError(f"{what} is truncated: the gzip stream ends early")
    log.debug("%s: %d files kept", what, len(files))
    return files
