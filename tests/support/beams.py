"""Hand-built BEAM files: the IFF container, Docs chunks (docs_v1 terms) and the tables a
call reader walks (atoms, code in the compact term encoding, imports, lines, literals)."""

from __future__ import annotations

import struct
import zlib
from typing import Any

from hexlocal_core.model import Atom
from tests.support.etf import encode

# -- the container and Docs chunks ------------------------------------------------------------


def make_beam(chunks: list[tuple[bytes, bytes]]) -> bytes:
    body = b"BEAM"
    for chunk_id, data in chunks:
        body += chunk_id + struct.pack(">I", len(data)) + data + b"\0" * (-len(data) % 4)
    return b"FOR1" + struct.pack(">I", len(body)) + body


def split_beam(data: bytes) -> list[tuple[bytes, bytes]]:
    chunks, pos = [], 12
    while pos + 8 <= len(data):
        (size,) = struct.unpack_from(">I", data, pos + 4)
        chunks.append((data[pos : pos + 4], data[pos + 8 : pos + 8 + size]))
        pos += 8 + (size + 3) // 4 * 4
    return chunks


def replace_chunk(data: bytes, chunk_id: bytes, new: bytes | None) -> bytes:
    """Rewrite the IFF with one chunk replaced (or dropped when `new` is None)."""
    chunks = [(cid, new if cid == chunk_id else body) for cid, body in split_beam(data)]
    return make_beam([(cid, body) for cid, body in chunks if body is not None])


def atoms(module: str) -> bytes:
    name = module.encode()
    return struct.pack(">i", 1) + bytes([len(name)]) + name


def en(text: str) -> dict[bytes, bytes]:
    return {b"en": text.encode()}


def entry(
    kind: str, name: str, arity: int, doc: Any, *, sig: list[str] | None = None, **meta: Any
) -> tuple[Any, ...]:
    metadata = {Atom(k): (v.encode() if isinstance(v, str) else v) for k, v in meta.items()}
    signatures = [s.encode() for s in (sig or [])]
    return ((Atom(kind), Atom(name), arity), 1, signatures, doc, metadata)


def docs_term(
    module_doc: Any, entries: list[Any], fmt: bytes = b"text/markdown", **meta: Any
) -> Any:
    metadata = {Atom(k): v.encode() for k, v in meta.items()}
    return (Atom("docs_v1"), 1, Atom("elixir"), fmt, module_doc, metadata, entries)


def beam(module: str, term: Any) -> bytes:
    return make_beam([(b"AtU8", atoms(module)), (b"Code", b"\0" * 16), (b"Docs", encode(term))])


# -- code, imports, lines and literals: what the call reader walks ------------------------------

U, INT, A, Z = 0, 1, 2, 7  # compact term tags


def enc(tag: int, value: int) -> bytes:
    """The compact term encoding, as beam_asm writes it."""
    if value < 16:
        return bytes([(value << 4) | tag])
    if value < 2048:
        return bytes([((value >> 3) & 0xE0) | tag | 0x08, value & 0xFF])
    data = value.to_bytes((value.bit_length() + 8) // 8, "big")
    if len(data) <= 8:
        return bytes([((len(data) - 2) << 5) | 0x18 | tag]) + data
    return bytes([0xF8 | tag]) + enc(U, len(data) - 9) + data


def table(rows: list[tuple[int, int, int]]) -> bytes:
    return struct.pack(">I", len(rows)) + b"".join(struct.pack(">III", *r) for r in rows)


ATOMS = ["Elixir.Demo", "run", "Elixir.Decimal", "cmp", "lists", "reverse", "add", "Demo.ex"]


def atoms_chunk(names: list[str]) -> bytes:
    return struct.pack(">i", len(names)) + b"".join(bytes([len(n)]) + n.encode() for n in names)


def code_chunk(*instructions: bytes) -> bytes:
    header = struct.pack(">IIIII", 16, 0, 178, 4, 1)
    return header + b"".join(instructions) + bytes([3])  # int_code_end


def line_chunk(items: list[tuple[int, int]], names: list[str]) -> bytes:
    body = b""
    current = 0
    for file_index, line in items:
        if file_index != current:
            body += enc(A, file_index)
            current = file_index
        body += enc(INT, line)
    body += b"".join(struct.pack(">H", len(n)) + n.encode() for n in names)
    return struct.pack(">5I", 0, 0, len(items), len(items), len(names)) + body


def fun_literals(mfa: tuple[str, str, int]) -> bytes:
    module, function, arity = mfa
    term = (
        b"\x83\x71"
        + b"".join(bytes([119, len(a)]) + a.encode() for a in (module, function))
        + bytes([97, arity])
    )
    raw = struct.pack(">I", 1) + struct.pack(">I", len(term)) + term
    return struct.pack(">I", len(raw)) + zlib.compress(raw)


FUNC_INFO = bytes([2]) + enc(A, 1) + enc(A, 2) + enc(U, 1)  # Demo.run/1
CALL_CMP = bytes([7]) + enc(U, 2) + enc(U, 0)  # call_ext 2, import 0 (Decimal.cmp/2)
CALL_REVERSE = bytes([78]) + enc(U, 1) + enc(U, 1)  # call_ext_only 1, import 1
MOVE_FUN = bytes([64]) + enc(Z, 4) + enc(U, 0) + enc(3, 0)  # move {literal,0} x0


def demo_beam(*, code: bytes | None = None, lines: bool = True) -> bytes:
    chunks = [
        (b"AtU8", atoms_chunk(ATOMS)),
        (
            b"Code",
            code or code_chunk(FUNC_INFO, line(1), CALL_CMP, MOVE_FUN, line(2), CALL_REVERSE),
        ),
        (b"ImpT", table([(3, 4, 2), (5, 6, 1)])),
        (b"ExpT", table([(2, 1, 2)])),
        (b"LitT", fun_literals(("Elixir.Decimal", "add", 2))),
    ]
    if lines:
        chunks.append((b"Line", line_chunk([(1, 7), (1, 12)], ["lib/demo.ex"])))
    return make_beam(chunks)


def line(index: int) -> bytes:
    return bytes([153]) + enc(U, index)
