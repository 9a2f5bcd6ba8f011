"""Property: any bytes through the ETF decoder and the BEAM Docs reader give a term or an
`IngestError` (a `HexlocalError` from the reader), within a time bound; never another
exception. Random bytes, soups of the tags the decoder knows, mutations of well-formed
Docs terms (plain and compressed), and compressed terms whose declared size lies."""

from __future__ import annotations

import struct
import zlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hexlocal_core.errors import HexlocalError, IngestError
from hexlocal_core.ingest import etf
from hexlocal_core.ingest.beam import read_beam_docs
from hexlocal_core.ingest.etf import BitBinary, ImproperList
from hexlocal_core.model import Atom
from tests.support.etf import encode

FUZZ = settings(
    max_examples=1000,
    deadline=2000,  # ms per case: generous on a shared 2-core machine
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
# A small docs_v1 term written by `term_to_binary` (Elixir 1.18): Erlang's own bytes.
_DOCS = bytes.fromhex(
    "83680764000764 6f63735f7631 61016400066 56c69786972"
    "6d0000000d746578742f6d61726b646f776e"
    "74000000016d00000002656e6d0000000568656c6c6f"
    "74000000006a".replace(" ", "")
)
_TAGS = [70, 77, 80, 97, 98, 99, 100, 104, 105, 106, 107, 108, 109, 110, 111, 116, 118, 119]


TRUE = Atom("true")


def _sample_chunk() -> bytes:
    """A Docs-shaped term with every tag the decoder knows, uncompressed."""
    term = (
        Atom("docs_v1"),
        2,
        Atom("elixir"),
        b"text/markdown",
        {b"en": b"Module docs with `code`.\n\n    iex> 1 + 1\n    2\n"},
        {Atom("since"): b"1.0.0", Atom("deprecated"): b"Use other/1"},
        [
            (
                (Atom("function"), Atom("map"), 2),
                7,
                [b"map(enumerable, fun)"],
                {b"en": b"Maps."},
                {},
            ),
            (
                (Atom("type"), Atom("t"), 0),
                -70000,
                [],
                Atom("none"),
                {Atom("opaque"): Atom("true")},
            ),
            ((Atom("callback"), Atom("init"), 1), 2**70, [], Atom("hidden"), {}),
        ],
        ImproperList((1.5, BitBinary(b"\x80", 1)), [104, 105]),
        [b"x" * 300],
    )
    return encode(term)


SAMPLE = _sample_chunk()
SAMPLE_COMPRESSED = b"\x83P" + struct.pack(">I", len(SAMPLE) - 1) + zlib.compress(SAMPLE[1:])


SAMPLE = _sample_chunk()
SAMPLE_COMPRESSED = b"\x83P" + struct.pack(">I", len(SAMPLE) - 1) + zlib.compress(SAMPLE[1:])
SEEDS = (SAMPLE, SAMPLE_COMPRESSED, _DOCS)


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
        etf.decode_at(etf.term_body(data), 0, max_terms=1000)
    except IngestError:
        pass
    try:
        read_beam_docs(_beam(data))
    except HexlocalError:
        pass


def test_the_seeds_are_what_they_claim() -> None:
    assert read_beam_docs(_beam(_DOCS)).module_doc == "hello"
    assert etf.decode(SAMPLE) == etf.decode(SAMPLE_COMPRESSED)


@st.composite
def mutated(draw: st.DrawFn, base: bytes) -> bytes:
    data = bytearray(base)
    for _ in range(draw(st.integers(1, 6))):
        pos = draw(st.integers(0, len(data) - 1))
        action = draw(st.sampled_from(["flip", "set", "cut", "insert", "delete"]))
        if action == "flip":
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif action == "set":
            data[pos] = draw(st.sampled_from([0, 1, 0x7F, 0x80, 0xFF, *_TAGS]))
        elif action == "cut":
            del data[max(pos, 1) :]
        elif action == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=5))
        elif len(data) > 2:
            del data[pos]
        if len(data) < 2:
            break
    return bytes(data)


@FUZZ
@given(st.binary(max_size=512))
def test_random_bytes(data: bytes) -> None:
    _decode(data)
    _decode(b"\x83" + data)


@FUZZ
@given(st.lists(st.one_of(st.sampled_from(_TAGS), st.integers(0, 255)), max_size=120))
def test_tag_soup(codes: list[int]) -> None:
    _decode(b"\x83" + bytes(codes))


@FUZZ
@given(st.sampled_from(SEEDS).flatmap(mutated))
def test_mutated_docs_terms(data: bytes) -> None:
    _decode(data)


@FUZZ
@given(body=st.binary(max_size=256), declared=st.integers(0, 2**32 - 1), level=st.integers(0, 9))
def test_compressed_terms(body: bytes, declared: int, level: int) -> None:
    size = declared if declared % 2 else len(body)  # honest and lying sizes
    _decode(b"\x83P" + struct.pack(">I", size) + zlib.compress(b"\x83" + body, level)[: 1 + size])
