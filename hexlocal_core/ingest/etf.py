"""A defensive decoder for Erlang's External Term Format (the bytes of `term_to_binary/1`).

Written here rather than taken from PyPI because BEAM files are untrusted input: every
declared length is checked against the bytes that remain before anything is allocated,
nesting depth is bounded, and a compressed term (tag 80) declares its size up front, which
is capped and then enforced while inflating. Any malformed input raises `IngestError`,
never another exception.

Erlang values map to Python as follows:

    integer                     int
    float                       float
    atom                        Atom (true/false/nil stay atoms: the decoder does not guess)
    tuple                       tuple
    proper list, [] and STRING  list (a STRING is a list of byte-valued ints, as in Erlang)
    improper list               ImproperList(items, tail)
    binary                      bytes
    bitstring                   BitBinary(data, bits)
    map                         dict (keys must be hashable: lists and maps as keys are refused)

Pids, ports, references and funs are refused: no docs chunk contains them.
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Callable
from typing import TypeAlias

from attrs import frozen

from hexlocal_core.cancel import checkpoint
from hexlocal_core.errors import IngestError
from hexlocal_core.model import Atom

VERSION = 131
MAX_DEPTH = 100  # Docs chunks nest about 8 deep; 100 levels use ~200 Python frames
MAX_UNCOMPRESSED = 64 * 1024 * 1024  # Kernel's Docs chunk inflates to well under 1 MiB
# A budget of decoded terms (each costs a Python object, ~60 bytes): a compressed list of
# NILs once inflated 61 KB into 60M empty lists and 4.9 GB. Elixir 1.18's 388 Docs chunks
# decode to at most 0.53 terms per input byte, so 16 per byte leaves 30x room.
TERMS_PER_BYTE = 16
TERMS_BASE = 4096
MAX_TERMS = 4_000_000
MAX_BIG_BYTES = 1024  # bignums in docs are rare and small; a 4 GB one is an attack

# Tags (erts/emulator/beam/external.h).
NEW_FLOAT = 70
BIT_BINARY = 77
COMPRESSED = 80
SMALL_INTEGER = 97
INTEGER = 98
FLOAT = 99
ATOM = 100
SMALL_TUPLE = 104
LARGE_TUPLE = 105
NIL = 106
STRING = 107
LIST = 108
BINARY = 109
SMALL_BIG = 110
LARGE_BIG = 111
MAP = 116
ATOM_UTF8 = 118
SMALL_ATOM_UTF8 = 119
SMALL_ATOM = 115


@frozen
class BitBinary:
    """A bitstring whose last byte holds only `bits` (1-8) significant bits."""

    data: bytes
    bits: int


@frozen
class ImproperList:
    """A list whose tail is not `[]`: `[a, b | tail]`."""

    items: tuple[Term, ...]
    tail: Term


Term: TypeAlias = (
    "int | float | Atom | bytes | BitBinary | ImproperList | tuple[Term, ...] "
    "| list[Term] | dict[Term, Term]"
)


def decode(
    data: bytes,
    *,
    max_uncompressed: int = MAX_UNCOMPRESSED,
    max_depth: int = MAX_DEPTH,
    max_terms: int | None = None,
) -> Term:
    """Decode one complete term (version byte first); trailing bytes are an error.

    At most `max_terms` terms are decoded (default: `TERMS_PER_BYTE` per input byte plus
    `TERMS_BASE`, never above `MAX_TERMS`), counted on the input as given, so a small
    compressed term cannot inflate into millions of objects.

    :raises IngestError: the bytes are not one well-formed term within the limits.
    """
    if max_terms is None:
        max_terms = min(MAX_TERMS, TERMS_PER_BYTE * len(data) + TERMS_BASE)
    if len(data) < 2:
        raise IngestError("ETF: input is shorter than a version byte and a tag")
    if data[0] != VERSION:
        raise IngestError(f"ETF: version byte is {data[0]}, expected {VERSION}")
    if data[1] == COMPRESSED:
        body = _inflate(data, max_uncompressed)
    else:
        body = data[1:]
    return _Decoder(body, max_depth, max_terms).decode_all()


def term_body(data: bytes, *, max_uncompressed: int = MAX_UNCOMPRESSED) -> bytes:
    """The encoded term after the version byte, inflated when compressed: what `decode_at`
    reads, for a caller that looks for one small term inside a large one.

    :raises IngestError: no version byte, or a compressed term beyond the caps.
    """
    if len(data) < 2 or data[0] != VERSION:
        raise IngestError("ETF: input does not start with a version byte")
    return _inflate(data, max_uncompressed) if data[1] == COMPRESSED else data[1:]


def decode_at(
    body: bytes, pos: int, *, max_depth: int = MAX_DEPTH, max_terms: int = TERMS_BASE
) -> tuple[Term, int]:
    """Decode the one term that starts at `pos` of a `term_body`; returns it and the offset
    just past it. At most `max_terms` terms are decoded.

    :raises IngestError: the bytes at `pos` are not a well-formed term within the limits.
    """
    if not 0 <= pos < len(body):
        raise IngestError(f"ETF: offset {pos} is outside the {len(body)} bytes of the term")
    decoder = _Decoder(body, max_depth, max_terms)
    decoder.pos = pos
    return decoder.term(0), decoder.pos


def _inflate(data: bytes, limit: int) -> bytes:
    """Inflate a compressed term, trusting neither the declared size nor the stream."""
    if len(data) < 6:
        raise IngestError("ETF: compressed term is missing its size")
    (size,) = struct.unpack_from(">I", data, 2)
    if size > limit:
        raise IngestError(f"ETF: compressed term declares {size} bytes, above the {limit} cap")
    inflater = zlib.decompressobj()
    try:
        # max_length stops a zlib bomb at size + 1 bytes, whatever the stream claims.
        out = inflater.decompress(data[6:], size + 1)
    except zlib.error as exc:
        raise IngestError(f"ETF: compressed term is not valid zlib ({exc})") from exc
    if len(out) != size or not inflater.eof:
        raise IngestError(f"ETF: compressed term inflates to other than its declared {size} bytes")
    if inflater.unused_data:
        raise IngestError("ETF: trailing bytes after the compressed stream")
    return out


class _Decoder:
    """Reads terms from `data` at `pos`; each read checks the bytes it needs are there."""

    def __init__(self, data: bytes, max_depth: int, max_terms: int) -> None:
        self.data = data
        self.pos = 0
        self.max_depth = max_depth
        self.terms_left = max_terms
        self.max_terms = max_terms
        self.handlers: dict[int, Callable[[int], Term]] = {
            SMALL_INTEGER: lambda _d: self.take(1)[0],
            INTEGER: lambda _d: self.unpack(">i", 4),
            NEW_FLOAT: self.new_float,
            FLOAT: self.old_float,
            ATOM: lambda _d: self.atom(2, "latin-1"),
            SMALL_ATOM: lambda _d: self.atom(1, "latin-1"),
            ATOM_UTF8: lambda _d: self.atom(2, "utf-8"),
            SMALL_ATOM_UTF8: lambda _d: self.atom(1, "utf-8"),
            SMALL_TUPLE: self.small_tuple,
            LARGE_TUPLE: self.large_tuple,
            NIL: lambda _d: [],
            STRING: lambda _d: self.string(),
            LIST: self.list_term,
            BINARY: lambda _d: self.take(self.unpack(">I", 4)),
            BIT_BINARY: self.bit_binary,
            SMALL_BIG: lambda _d: self.big(self.take(1)[0]),
            LARGE_BIG: lambda _d: self.big(self.unpack(">I", 4)),
            MAP: self.map_term,
        }

    def decode_all(self) -> Term:
        term = self.term(0)
        if self.pos != len(self.data):
            raise IngestError(f"ETF: {len(self.data) - self.pos} trailing bytes after the term")
        return term

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            raise IngestError(
                f"ETF: needs {n} bytes at offset {self.pos}, only {len(self.data) - self.pos} left"
            )
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def unpack(self, fmt: str, size: int) -> int:
        value: int = struct.unpack(fmt, self.take(size))[0]
        return value

    def expect_room(self, count: int, min_bytes_each: int, what: str) -> None:
        """Refuse a declared element count that the remaining bytes cannot possibly hold."""
        if count * min_bytes_each > len(self.data) - self.pos:
            raise IngestError(f"ETF: {what} declares {count} elements, more than the bytes left")

    def spend(self, terms: int) -> None:
        self.terms_left -= terms
        if self.terms_left < 0:
            raise IngestError(
                f"ETF: more than {self.max_terms} terms, the budget for an input this size; "
                "refused as a possible decompression bomb"
            )

    def term(self, depth: int) -> Term:
        if depth > self.max_depth:
            raise IngestError(f"ETF: term nests deeper than {self.max_depth}")
        self.spend(1)
        checkpoint()
        tag = self.take(1)[0]
        handler = self.handlers.get(tag)
        if handler is None:
            raise IngestError(f"ETF: unsupported tag {tag} at offset {self.pos - 1}")
        return handler(depth)

    def string(self) -> list[Term]:
        data = self.take(self.unpack(">H", 2))
        self.spend(len(data))  # a STRING is a list: one element per byte
        return list(data)

    def new_float(self, _depth: int) -> float:
        value: float = struct.unpack(">d", self.take(8))[0]
        return value

    def old_float(self, _depth: int) -> float:
        # 31 bytes of "%.20e" text, NUL padded; float() also accepts "nan"/"inf", which
        # Erlang never writes, so those are refused.
        text = self.take(31).split(b"\0", 1)[0]
        try:
            value = float(text.decode("ascii"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise IngestError(f"ETF: bad FLOAT text {text!r}") from exc
        if not math.isfinite(value):
            raise IngestError(f"ETF: FLOAT text {text!r} is not a finite number")
        return value

    def atom(self, length_size: int, encoding: str) -> Atom:
        length = self.unpack(">B" if length_size == 1 else ">H", length_size)
        raw = self.take(length)
        try:
            return Atom(raw.decode(encoding))
        except UnicodeDecodeError as exc:
            raise IngestError(f"ETF: atom is not valid {encoding}") from exc

    # Containers loop rather than use comprehensions: each comprehension is one more Python
    # frame per nesting level, and the depth bound is about frames.
    def small_tuple(self, depth: int) -> tuple[Term, ...]:
        return self.elements(self.take(1)[0], depth, "tuple")

    def large_tuple(self, depth: int) -> tuple[Term, ...]:
        return self.elements(self.unpack(">I", 4), depth, "tuple")

    def elements(self, count: int, depth: int, what: str) -> tuple[Term, ...]:
        self.expect_room(count, 1, what)
        items: list[Term] = []
        for _ in range(count):
            items.append(self.term(depth + 1))
        return tuple(items)

    def list_term(self, depth: int) -> Term:
        items = self.elements(self.unpack(">I", 4), depth, "list")
        tail = self.term(depth + 1)
        if tail == []:
            return list(items)
        return ImproperList(items, tail)

    def bit_binary(self, _depth: int) -> Term:
        length = self.unpack(">I", 4)
        bits = self.take(1)[0]
        if not 1 <= bits <= 8 or (length == 0 and bits != 8):
            raise IngestError(f"ETF: bitstring has {bits} bits in its last byte")
        data = self.take(length)
        return data if bits == 8 else BitBinary(data, bits)

    def big(self, n: int) -> int:
        if n > MAX_BIG_BYTES:
            raise IngestError(f"ETF: big integer of {n} bytes, above the {MAX_BIG_BYTES} cap")
        sign = self.take(1)[0]
        if sign > 1:
            raise IngestError(f"ETF: big integer sign byte is {sign}")
        magnitude = int.from_bytes(self.take(n), "little")
        return -magnitude if sign else magnitude

    def map_term(self, depth: int) -> dict[Term, Term]:
        count = self.unpack(">I", 4)
        self.expect_room(count, 2, "map")
        out: dict[Term, Term] = {}
        for _ in range(count):
            key = self.term(depth + 1)
            value = self.term(depth + 1)
            try:
                out[key] = value
            except TypeError as exc:  # a list or map as a key: valid Erlang, unhashable here
                raise IngestError("ETF: map key is a list or map, which is not supported") from exc
        return out
