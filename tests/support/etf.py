"""A small Erlang term encoder (`term_to_binary/1` in Python): round trips of the decoder,
and the Docs chunks of hand-built beams."""

from __future__ import annotations

import struct
import zlib
from typing import Any

from hexlocal_core.ingest.etf import BitBinary, ImproperList
from hexlocal_core.model import Atom


def encode(term: Any, *, compressed: bool = False) -> bytes:
    """`term_to_binary/1` for the Python shapes the decoder returns (str means an atom)."""
    body = _enc(term)
    if compressed:
        return bytes([131, 80]) + struct.pack(">I", len(body)) + zlib.compress(body)
    return bytes([131]) + body


def _enc(term: Any) -> bytes:
    if isinstance(term, Atom | str):
        name = (term.name if isinstance(term, Atom) else term).encode()
        if len(name) < 256:
            return bytes([119, len(name)]) + name
        return b"v" + struct.pack(">H", len(name)) + name
    if isinstance(term, bool):
        raise TypeError("write booleans as Atom('true')")
    if isinstance(term, int):
        return _enc_int(term)
    if isinstance(term, float):
        return b"F" + struct.pack(">d", term)
    if isinstance(term, bytes):
        return b"m" + struct.pack(">I", len(term)) + term
    if isinstance(term, BitBinary):
        return b"M" + struct.pack(">IB", len(term.data), term.bits) + term.data
    if isinstance(term, tuple):
        head = bytes([104, len(term)]) if len(term) < 256 else b"i" + struct.pack(">I", len(term))
        return head + b"".join(_enc(t) for t in term)
    if isinstance(term, list):
        if not term:
            return b"j"
        return b"l" + struct.pack(">I", len(term)) + b"".join(_enc(t) for t in term) + b"j"
    if isinstance(term, ImproperList):
        items = b"".join(_enc(t) for t in term.items)
        return b"l" + struct.pack(">I", len(term.items)) + items + _enc(term.tail)
    if isinstance(term, dict):
        pairs = b"".join(_enc(k) + _enc(v) for k, v in term.items())
        return b"t" + struct.pack(">I", len(term)) + pairs
    raise TypeError(f"cannot encode {term!r}")


def _enc_int(n: int) -> bytes:
    if 0 <= n < 256:
        return bytes([97, n])
    if -(2**31) <= n < 2**31:
        return b"b" + struct.pack(">i", n)
    magnitude = abs(n).to_bytes((abs(n).bit_length() + 7) // 8, "little")
    sign = 1 if n < 0 else 0
    if len(magnitude) < 256:
        return bytes([110, len(magnitude), sign]) + magnitude
    return b"o" + struct.pack(">IB", len(magnitude), sign) + magnitude
