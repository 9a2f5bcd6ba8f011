"""Xet storage's layout of a file, as the loopback hub's CAS serves it to hf_xet.

A file is cut into 64 KiB chunks, stored uncompressed, up to 1024 chunks (64 MiB) to a
xorb; a xorb is its chunks, each after an 8-byte header (version 0, the 3-byte compressed
length, the compression scheme 0 = none, the 3-byte length). A reconstruction (Xet's V2
API) lists the terms a byte range needs (a xorb and a range of its chunks) and, per xorb,
the URL and byte range to fetch them from. Hashes are opaque to the client; a nonce keeps
one server's chunks out of another's entries in hf_xet's chunk cache.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import BinaryIO

from attrs import frozen

CHUNK = 64 * 1024  # bytes per chunk
XORB_CHUNKS = 1024  # chunks per xorb: 64 MiB, the real client's limit too
HEADER = 8  # a chunk's header in a xorb


@frozen
class Xorb:
    hash: str
    first_chunk: int  # index of its first chunk in the file
    chunks: int


def store(size: int, sha256: str, nonce: str) -> tuple[str, tuple[Xorb, ...]]:
    """A file of `size` bytes (content hash `sha256`): its Xet hash and its xorbs."""
    chunks = -(-size // CHUNK)
    xorbs = tuple(
        Xorb(
            hashlib.sha256(f"{nonce}:{sha256}:{first}".encode()).hexdigest(),
            first,
            min(XORB_CHUNKS, chunks - first),
        )
        for first in range(0, chunks, XORB_CHUNKS)
    )
    return hashlib.sha256(f"{nonce}:{sha256}".encode()).hexdigest(), xorbs


def chunk_length(size: int, index: int) -> int:
    return min(CHUNK, size - index * CHUNK)


def xorb_size(size: int, xorb: Xorb) -> int:
    last = xorb.first_chunk + xorb.chunks - 1
    return (xorb.chunks - 1) * (HEADER + CHUNK) + HEADER + chunk_length(size, last)


def reconstruction(
    cas: str, size: int, xorbs: tuple[Xorb, ...], first: int, last: int
) -> dict[str, object]:
    """Xet's V2 answer for bytes first..last (inclusive) of a file of `size` bytes."""
    first_chunk, last_chunk = first // CHUNK, last // CHUNK
    terms: list[dict[str, object]] = []
    fetch: dict[str, list[dict[str, object]]] = {}
    for xorb in xorbs:
        start = max(first_chunk, xorb.first_chunk) - xorb.first_chunk
        end = min(last_chunk + 1, xorb.first_chunk + xorb.chunks) - xorb.first_chunk
        if start >= end:
            continue
        lengths = [chunk_length(size, xorb.first_chunk + i) for i in range(start, end)]
        byte_end = end * (HEADER + CHUNK) - (CHUNK - lengths[-1]) - 1
        span = {"start": start, "end": end}
        terms.append({"hash": xorb.hash, "unpacked_length": sum(lengths), "range": span})
        ranges = [{"chunks": span, "bytes": {"start": start * (HEADER + CHUNK), "end": byte_end}}]
        fetch[xorb.hash] = [{"url": f"{cas}/xorbs/{xorb.hash}", "ranges": ranges}]
    return {"offset_into_first_range": first - first_chunk * CHUNK, "terms": terms, "xorbs": fetch}


def xorb_reader(fh: BinaryIO, size: int, xorb: Xorb) -> Callable[[int, int], bytes]:
    """Reads `n` bytes of the serialised xorb from `position`, from the file `fh`."""

    def read(position: int, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            local, within = divmod(position + len(out), HEADER + CHUNK)
            index = xorb.first_chunk + local
            length = chunk_length(size, index)
            if local >= xorb.chunks or within >= HEADER + length:
                break
            encoded = length.to_bytes(3, "little")
            if within < HEADER:
                out += (bytes([0]) + encoded + bytes([0]) + encoded)[within:]
                continue
            fh.seek(index * CHUNK + within - HEADER)
            out += fh.read(min(n - len(out), HEADER + length - within))
        return bytes(out[:n])

    return read
