"""Property: any bytes through the call reader give a `ModuleCalls` or `BeamSkipped`, in
bounded time; never another exception. Hostile Code, Line, ImpT and LitT chunks and
whole-file mutations of a well-formed beam."""

from __future__ import annotations

import gzip

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hexlocal_core.ingest.beam_calls import ModuleCalls, read_beam_calls
from hexlocal_core.ingest.beam_file import BeamSkipped
from tests.support.beams import demo_beam, replace_chunk

FUZZ = settings(
    max_examples=500,
    deadline=2000,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
SEED = demo_beam()


def _read(data: bytes) -> None:
    try:
        found = read_beam_calls(data)
    except BeamSkipped:
        return
    assert isinstance(found, ModuleCalls)
    assert all(c.line is None or c.line >= 0 for c in found.calls)


@FUZZ
@given(st.binary(max_size=2048))
def test_random_code(data: bytes) -> None:
    _read(replace_chunk(SEED, b"Code", b"\x00\x00\x00\x10" + b"\x00" * 16 + data))


@FUZZ
@given(
    st.sampled_from([b"Line", b"ImpT", b"ExpT", b"LitT", b"AtU8", b"Attr"]), st.binary(max_size=512)
)
def test_random_tables(chunk: bytes, data: bytes) -> None:
    _read(replace_chunk(SEED, chunk, data))


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(SEED) - 1), st.integers(0, 255)), max_size=16))
def test_mutated_files(edits: list[tuple[int, int]]) -> None:
    data = bytearray(SEED)
    for at, value in edits:
        data[at] = value
    _read(bytes(data))
    _read(gzip.compress(bytes(data)))


def test_nested_extended_operands_stop_cleanly() -> None:
    # move {typed {typed {typed ...}}}: a chain no compiler writes must not recurse
    chain = bytes([64]) + bytes([0x57]) * 100_000
    found = read_beam_calls(replace_chunk(SEED, b"Code", b"\x00\x00\x00\x10" + b"\0" * 16 + chain))
    assert found.stopped == "bad_operand"


def test_a_gzip_bomb_is_refused() -> None:
    bomb = gzip.compress(b"\0" * (80 * 1024 * 1024))
    try:
        read_beam_calls(bomb)
    except BeamSkipped as exc:
        assert exc.reason == "bad_gzip"
    else:
        raise AssertionError("an 80 MB inflated beam was read")
