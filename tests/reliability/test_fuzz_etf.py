"""Property: any bytes through the ETF decoder and the BEAM Docs reader give a term or an
`IngestError`, within a time bound; never another exception."""

from __future__ import annotations

import struct
import zlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hexlocal_core.errors import HexlocalError, IngestError
from hexlocal_core.ingest import etf
from hexlocal_core.ingest.beam import read_beam_docs

FUZZ = settings(
    max_examples=1000,
    deadline=2000,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
# A small docs_v1 term written by `term_to_binary` (Elixir 1.18), to mutate.
_DOCS = bytes.fromhex(
    "83680764000764 6f63735f7631 61016400066 56c69786972"
    "6d0000000d746578742f6d61726b646f776e"
    "74000000016d00000002656e6d0000000568656c6c6f"
    "74000000006a".replace(" ", "")
)
_TAGS = [70, 77, 80, 97, 98, 99, 100, 104, 105, 106, 107, 108, 109, 110, 111, 116, 118, 119]


def _beam(docs: bytes) -> bytes:
    atoms = struct.pack(">i", 1) + bytes([11]) + b"Elixir.Demo"
    body = b"BEAM"
    for chunk_id, data in (("AtU8", atoms), ("Docs", docs)):
        body += chunk_id.encode() + struct.pack(">I", len(data)) + data + b"\0" * (-len(data) % 4)
    return b"FOR1" + struct.pack(">I", len(body)) + body


def _decode(data: bytes) -> None:
    try:
        etf.decode(data)
    except IngestError:
        pass
    try:
        read_beam_docs(_beam(data))
    except HexlocalError:
        pass


def test_the_seed_is_a_docs_chunk() -> None:
    assert read_beam_docs(_beam(_DOCS)).module_doc == "hello"


@FUZZ
@given(st.binary(max_size=512))
def test_random_bytes(data: bytes) -> None:
    _decode(b"\x83" + data)


@FUZZ
@given(st.lists(st.one_of(st.sampled_from(_TAGS), st.integers(0, 255)), max_size=120))
def test_tag_soup(codes: list[int]) -> None:
    _decode(b"\x83" + bytes(codes))


@FUZZ
@given(
    flips=st.lists(st.tuples(st.integers(0, len(_DOCS) - 1), st.integers(0, 255)), max_size=6),
    cut=st.integers(1, len(_DOCS)),
)
def test_mutated_docs_chunk(flips: list[tuple[int, int]], cut: int) -> None:
    data = bytearray(_DOCS)
    for pos, value in flips:
        data[pos] = value
    _decode(bytes(data[:cut]))


@FUZZ
@given(body=st.binary(max_size=256), declared=st.integers(0, 2**32 - 1), level=st.integers(0, 9))
def test_compressed_terms(body: bytes, declared: int, level: int) -> None:
    size = declared if declared % 2 else len(body)  # honest and lying sizes
    _decode(b"\x83P" + struct.pack(">I", size) + zlib.compress(b"\x83" + body, level)[: 1 + size])
