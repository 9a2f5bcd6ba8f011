"""Property: any bytes through read_docs_tarball give files or a hexlocal error, quickly.

Random bytes, gzip of random bytes, and real small tarballs with bytes flipped, cut or
appended (the mutations a broken mirror or an attacker produces).
"""

from __future__ import annotations

import gzip
import io
import tarfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hexlocal_core.errors import HexlocalError
from hexlocal_core.ingest.tarball import read_docs_tarball

FUZZ = settings(
    max_examples=1000,
    deadline=2000,  # ms per case: generous on a shared 2-core machine
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)


def _tarball(names: list[str], body: bytes) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for name in names:
            info = tarfile.TarInfo(name or "x")
            info.size = len(body)
            tf.addfile(info, io.BytesIO(body))
    return gzip.compress(raw.getvalue(), mtime=0)


_SEED = _tarball(["index.html", "dist/search_data-A.js", "Mod.md"], b"searchData={}")


def _read(data: bytes) -> None:
    try:
        files = read_docs_tarball(data, max_bytes=1024 * 1024)
    except HexlocalError:
        return
    assert all(isinstance(k, str) and isinstance(v, bytes) for k, v in files.items())


@FUZZ
@given(st.binary(max_size=2048))
def test_random_bytes(data: bytes) -> None:
    _read(data)
    _read(b"\x1f\x8b" + data)


@FUZZ
@given(st.binary(max_size=4096))
def test_gzip_of_random_bytes(data: bytes) -> None:
    _read(gzip.compress(data, mtime=0))


@FUZZ
@given(
    flips=st.lists(
        st.tuples(st.integers(0, len(_SEED) - 1), st.integers(0, 255)), min_size=0, max_size=8
    ),
    cut=st.integers(0, len(_SEED)),
    tail=st.binary(max_size=64),
)
def test_mutated_real_tarball(flips: list[tuple[int, int]], cut: int, tail: bytes) -> None:
    data = bytearray(_SEED)
    for pos, value in flips:
        data[pos] = value
    _read(bytes(data[:cut]) + tail)


@settings(FUZZ, max_examples=400)
@given(
    names=st.lists(st.text(max_size=40), min_size=1, max_size=4),
    body=st.binary(max_size=64),
)
def test_hostile_member_names(names: list[str], body: bytes) -> None:
    try:
        data = _tarball(names, body)
    except (ValueError, UnicodeError):  # names tarfile itself cannot write
        return
    _read(data)
