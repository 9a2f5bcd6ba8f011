"""The ETF decoder: hand-encoded tables, every hostile case, Erlang's own bytes, round trips.

Any bytes giving a term or an `IngestError` (fuzzing) is tests/reliability/test_fuzz_etf.py."""

from __future__ import annotations

import shutil
import struct
import subprocess
import tracemalloc
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hexlocal_core.errors import IngestError
from hexlocal_core.ingest import etf
from hexlocal_core.ingest.etf import BitBinary, ImproperList, decode
from hexlocal_core.model import Atom
from tests.support.etf import encode

# --- hand-encoded tables ------------------------------------------------------------------

ROUND_TRIP = [
    ("small integer", b"\x83a\x07", 7),
    ("integer negative", b"\x83b\xff\xff\xff\xfe", -2),
    ("new float", b"\x83F" + struct.pack(">d", 1.5), 1.5),
    ("old float", b"\x83c" + b"1.50000000000000000000e+00".ljust(31, b"\0"), 1.5),
    ("atom latin-1", b"\x83d\x00\x03ok\xe9", Atom("oké")),
    ("small atom latin-1", b"\x83s\x02ok", Atom("ok")),
    ("atom utf-8", b"\x83v\x00\x05h\xc3\xa9\xc3\xa9", Atom("héé")),
    ("small atom utf-8", b"\x83w\x07docs_v1", Atom("docs_v1")),
    ("small tuple", b"\x83h\x02a\x01a\x02", (1, 2)),
    ("empty tuple", b"\x83h\x00", ()),
    ("large tuple", b"\x83i\x00\x00\x00\x01j", ([],)),
    ("nil", b"\x83j", []),
    ("string", b"\x83k\x00\x03abc", [97, 98, 99]),
    ("list", b"\x83l\x00\x00\x00\x02a\x01a\x02j", [1, 2]),
    ("improper list", b"\x83l\x00\x00\x00\x01a\x01a\x02", ImproperList((1,), 2)),
    ("binary", b"\x83m\x00\x00\x00\x02hi", b"hi"),
    ("empty binary", b"\x83m\x00\x00\x00\x00", b""),
    ("bit binary", b"\x83M\x00\x00\x00\x01\x03\xe0", BitBinary(b"\xe0", 3)),
    ("bit binary, full last byte", b"\x83M\x00\x00\x00\x01\x08\xe0", b"\xe0"),
    ("small big", b"\x83n\x02\x00\x00\x01", 256),
    ("small big negative", b"\x83n\x01\x01\x05", -5),
    ("large big", b"\x83o\x00\x00\x00\x09\x00" + b"\x00" * 8 + b"\x01", 2**64),
    ("map", b"\x83t\x00\x00\x00\x01w\x02enm\x00\x00\x00\x01x", {Atom("en"): b"x"}),
    ("map with binary key", b"\x83t\x00\x00\x00\x01m\x00\x00\x00\x02ena\x01", {b"en": 1}),
    ("nested", b"\x83h\x01l\x00\x00\x00\x01h\x01jj", ([([],)],)),
]


@pytest.mark.parametrize(("name", "data", "expected"), ROUND_TRIP, ids=[r[0] for r in ROUND_TRIP])
def test_decodes_hand_encoded_terms(name: str, data: bytes, expected: Any) -> None:
    assert decode(data) == expected


def test_compressed_term_inflates() -> None:
    body = b"m" + struct.pack(">I", 1000) + b"x" * 1000
    data = b"\x83P" + struct.pack(">I", len(body)) + zlib.compress(body)
    assert decode(data) == b"x" * 1000


def test_nan_text_is_refused_in_old_floats() -> None:
    with pytest.raises(IngestError, match="finite"):
        decode(b"\x83c" + b"nan".ljust(31, b"\0"))


def test_encoder_and_decoder_agree_on_a_docs_shaped_term() -> None:
    term: Any = (
        Atom("docs_v1"),
        ImproperList((1,), 2),
        Atom("elixir"),
        b"text/markdown",
        {b"en": "héllo".encode()},
        {Atom("since"): b"1.0.0"},
        [((Atom("function"), Atom("map"), 2), 10, [b"map(e, f)"], Atom("none"), {})],
    )
    for compressed in (False, True):
        assert decode(encode(term, compressed=compressed)) == term


# --- hostile input --------------------------------------------------------------------------

BIG = struct.pack(">I", 0xFFFFFFFF)
ONE_DEFLATED = zlib.compress(b"a\x01")  # the body of the term 1
HOSTILE = [
    ("empty", b"", "shorter"),
    ("version only", b"\x83", "shorter"),
    ("wrong version", b"\x82a\x01", "version byte"),
    ("unknown tag (pid)", b"\x83X", "unsupported tag 88"),
    ("atom cache ref", b"\x83R\x00", "unsupported tag 82"),
    ("truncated integer", b"\x83b\x00\x01", "needs 4 bytes"),
    ("binary longer than input", b"\x83m" + BIG + b"abc", "needs 4294967295 bytes"),
    ("list count beyond input", b"\x83l" + BIG + b"j", "list declares"),
    ("large tuple beyond input", b"\x83i" + BIG, "tuple declares"),
    ("map count beyond input", b"\x83t" + BIG + b"jj", "map declares"),
    ("string longer than input", b"\x83k\xff\xff", "needs 65535 bytes"),
    ("large big beyond the cap", b"\x83o" + BIG + b"\x00", "big integer of 4294967295 bytes"),
    ("big sign byte", b"\x83n\x01\x02\x01", "sign byte"),
    ("atom not utf-8", b"\x83w\x01\xff", "not valid utf-8"),
    ("old float garbage", b"\x83c" + b"x" * 31, "bad FLOAT"),
    ("bitstring zero bits", b"\x83M\x00\x00\x00\x01\x00\x01", "bits"),
    ("bitstring nine bits", b"\x83M\x00\x00\x00\x01\x09\x01", "bits"),
    ("trailing bytes", b"\x83a\x01a\x02", "trailing"),
    ("list key in a map", b"\x83t\x00\x00\x00\x01l\x00\x00\x00\x01a\x01ja\x01", "map key"),
    ("compressed without size", b"\x83P\x00\x00", "missing its size"),
    ("compressed above the cap", b"\x83P" + BIG + b"x", "above the"),
    ("compressed not zlib", b"\x83P\x00\x00\x00\x02garbage", "not valid zlib"),
    (
        "compressed size lies (short)",
        b"\x83P\x00\x00\x00\x09" + zlib.compress(b"a\x01"),
        "declared",
    ),
    ("compressed stream cut", b"\x83P\x00\x00\x00\x02" + zlib.compress(b"a\x01")[:-4], "declared"),
    ("compressed then junk", b"\x83P\x00\x00\x00\x02" + ONE_DEFLATED + b"!", "trailing"),
    ("nested compression", b"\x83h\x01P\x00\x00\x00\x02" + zlib.compress(b"a\x01"), "tag 80"),
]


@pytest.mark.parametrize(("name", "data", "message"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_refuses_hostile_input(name: str, data: bytes, message: str) -> None:
    with pytest.raises(IngestError, match=message):
        decode(data)


def test_depth_is_bounded() -> None:
    deep = b"\x83" + b"h\x01" * 5000 + b"j"
    with pytest.raises(IngestError, match="nests deeper"):
        decode(deep)
    assert decode(b"\x83" + b"h\x01" * 50 + b"j", max_depth=50) is not None


def test_a_zlib_bomb_stops_at_the_declared_size() -> None:
    bomb = zlib.compress(b"\0" * (64 * 1024 * 1024), 9)  # 64 MiB of zeros in ~64 KiB
    data = b"\x83P" + struct.pack(">I", 1024) + bomb
    tracemalloc.start()
    try:
        with pytest.raises(IngestError, match="declared 1024 bytes"):
            decode(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024


def test_the_uncompressed_cap_is_a_parameter() -> None:
    data = encode(b"x" * 5000, compressed=True)
    with pytest.raises(IngestError, match="above the 4096 cap"):
        decode(data, max_uncompressed=4096)


# --- bytes written by Erlang itself -----------------------------------------------------

ERLANG_TERMS = [
    ("-1", -1),
    ("123456789012345678901234567890", 123456789012345678901234567890),
    ("-Bitwise.bsl(1, 2100)", -(1 << 2100)),
    ("1.0e-300", 1.0e-300),
    (':"héllo"', Atom("héllo")),
    ("[1 | 2]", ImproperList((1,), 2)),
    ("'abc'", [97, 98, 99]),
    ("<<1::3>>", BitBinary(b"\x20", 3)),
    ('%{"en" => "doc", :since => "1.0"}', {b"en": b"doc", Atom("since"): b"1.0"}),
    ("List.to_tuple(Enum.to_list(1..300))", tuple(range(1, 301))),
    ('{:docs_v1, nil, String.duplicate("ab", 500)}', (Atom("docs_v1"), Atom("nil"), b"ab" * 500)),
]
# Options: plain, compressed, and minor_version 0 (old FLOAT text, latin-1 ATOM tags).
ERLANG_OPTIONS = ["[]", "[compressed: 6]", "[minor_version: 0]"]


@pytest.mark.elixir
def test_decodes_what_erlang_encodes() -> None:
    if shutil.which("elixir") is None:
        pytest.skip("elixir is not on PATH: cannot ask Erlang to encode terms")
    script = "; ".join(
        f"IO.puts(Base.encode16(:erlang.term_to_binary({src}, {options})))"
        for src, _ in ERLANG_TERMS
        for options in ERLANG_OPTIONS
    )
    run = subprocess.run(
        ["elixir", "-e", script], capture_output=True, text=True, check=True, timeout=60
    )
    encoded = [bytes.fromhex(line) for line in run.stdout.split()]
    expected = [value for _, value in ERLANG_TERMS for _ in ERLANG_OPTIONS]
    assert len(encoded) == len(expected)
    for data, value in zip(encoded, expected, strict=True):
        assert decode(data) == value
    tags = {data[1] for data in encoded}
    assert {etf.COMPRESSED, etf.FLOAT, etf.ATOM, etf.NEW_FLOAT, etf.LARGE_BIG} <= tags | {
        data[2] for data in encoded
    }


# --- properties: what the encoder writes, the decoder reads -------------------------------


terms = st.recursive(
    st.integers(-(2**80), 2**80)
    | st.floats(allow_nan=False)
    | st.binary(max_size=20)
    | st.text(max_size=10).map(Atom),
    lambda children: (
        st.lists(children, max_size=4)
        | st.lists(children, max_size=4).map(tuple)
        | st.dictionaries(
            st.binary(max_size=4) | st.text(max_size=4).map(Atom), children, max_size=3
        )
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=1000, database=None)
@given(terms, st.booleans())
def test_round_trips_generated_terms(term: Any, compressed: bool) -> None:
    assert decode(encode(term, compressed=compressed)) == term


def test_limits_are_documented_constants() -> None:
    assert etf.MAX_DEPTH >= 20
    assert etf.MAX_UNCOMPRESSED >= 1024 * 1024


# --- one term inside a larger one ------------------------------------------------------------


@pytest.mark.parametrize("compressed", [False, True])
def test_decode_at_reads_one_inner_term(compressed: bool) -> None:
    outer = [(Atom("attribute"), 7, Atom("opaque"), (Atom("tid"), Atom("any"), []))]
    body = etf.term_body(encode(outer, compressed=compressed))
    inner = encode((Atom("tid"), Atom("any"), []))[1:]
    start = body.index(inner)
    term, end = etf.decode_at(body, start)
    assert term == (Atom("tid"), Atom("any"), [])
    assert end == start + len(inner)


@pytest.mark.parametrize(
    ("data", "pos"),
    [
        (encode([1, 2, 3]), 99),  # past the end
        (encode([1, 2, 3]), -1),
        (encode(list(range(100))), 0),  # more terms than the budget below
        (bytes([131, 80]) + b"\xff\xff\xff\xff" + b"x", 0),  # declares 4 GiB
        (b"\x00\x01", 0),  # no version byte
    ],
)
def test_decode_at_refuses(data: bytes, pos: int) -> None:
    with pytest.raises(IngestError):
        etf.decode_at(etf.term_body(data), pos, max_terms=50)
