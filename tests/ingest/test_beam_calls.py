"""Remote calls from BEAM files: hand-built beams (the compact term encoding, each table),
the compiled acceptance project, and every beam of the shared OTP 25/27/29 installs."""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from hexlocal_core.ingest.beam_calls import (
    CallSite,
    _Reader,
    calls_from_ebins,
    read_beam_calls,
)
from hexlocal_core.ingest.beam_file import BeamSkipped
from tests.support.beams import (
    CALL_CMP,
    CALL_REVERSE,
    FUNC_INFO,
    INT,
    A,
    U,
    atoms_chunk,
    code_chunk,
    demo_beam,
    enc,
    line,
    make_beam,
)
from tests.support.paths import CORPUS, shared
from tests.support.upgrade_project import compiled_project


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (bytes([0x00]), (U, 0)),
        (bytes([0xF1]), (INT, 15)),
        (bytes([0x08 | 0x20 | A, 0x10]), (A, 0x110)),  # 11 bits
        (bytes([0x18 | U, 0x01, 0x00]), (U, 256)),  # 2 bytes follow
        (bytes([0x18 | 0x20 | U, 0x01, 0x00, 0x00]), (U, 65536)),  # 3 bytes follow
        (enc(U, 1 << 80), (U, 1 << 80)),  # the size itself is a nested `u`
        (enc(INT, 2047), (INT, 2047)),
    ],
)
def test_compact_terms_decode(data: bytes, expected: tuple[int, int]) -> None:
    reader = _Reader(data, 0)
    assert reader.operand() == expected
    assert reader.pos == len(data)


def test_calls_carry_file_line_and_caller() -> None:
    found = read_beam_calls(demo_beam())
    assert found.module == "Demo" and found.exports == {("run", 1)}
    assert found.calls == (
        CallSite("Decimal", "cmp", 2, "run/1", "lib/demo.ex", 7),
        CallSite("Decimal", "add", 2, "run/1", "lib/demo.ex", 7, fun_ref=True),
        CallSite("lists", "reverse", 1, "run/1", "lib/demo.ex", 12),
    )
    assert found.stopped is None and found.has_lines and not found.has_attributes


def test_without_a_line_table_the_calls_keep_their_caller() -> None:
    found = read_beam_calls(demo_beam(lines=False))
    assert not found.has_lines
    assert [(c.function, c.caller, c.line) for c in found.calls] == [
        ("cmp", "run/1", None),
        ("add", "run/1", None),
        ("reverse", "run/1", None),
    ]


def test_an_unknown_opcode_stops_the_walk_not_the_reader() -> None:
    code = code_chunk(FUNC_INFO, line(1), CALL_CMP, bytes([250, 0, 0]), CALL_REVERSE)
    found = read_beam_calls(demo_beam(code=code))
    assert found.stopped == "unknown_opcode"
    placed = {c.function: c.line for c in found.calls}
    assert placed == {"cmp": 7, "reverse": None}  # the import not reached has no site


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"not a beam at all", "not_beam"),
        (b"FOR1\x00\x01\x00\x00BEAM", "truncated"),
        (make_beam([(b"Code", b"")]), "no_atoms"),
        (make_beam([(b"AtU8", atoms_chunk(["Elixir.Demo"]))]), "no_imports"),
    ],
)
def test_unusable_files_are_skipped_with_a_reason(data: bytes, reason: str) -> None:
    with pytest.raises(BeamSkipped) as caught:
        read_beam_calls(data)
    assert caught.value.reason == reason


@pytest.mark.parametrize("cut", [22, 27, 34])
def test_code_cut_short_is_a_stop_reason(cut: int) -> None:
    code = code_chunk(FUNC_INFO, line(1), CALL_CMP, line(2), CALL_REVERSE)[:cut]
    found = read_beam_calls(demo_beam(code=code))
    assert found.stopped in ("truncated", "no_code_end")


# -- real beams ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shop_ebin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compiled_project(tmp_path_factory) / "_build/dev/lib/shop/ebin"


@pytest.mark.elixir
def test_the_compiled_project(shop_ebin: Path) -> None:
    scan = calls_from_ebins([shop_ebin])
    by_module = {m.module: m for m in scan.modules}
    assert by_module["Shop.Repo"].behaviours == ("Ecto.Repo",)
    assert {("transaction", 1), ("transaction", 2)} <= by_module["Shop.Repo"].exports
    orders = {(c.module, c.function, c.arity): c for c in by_module["Shop.Orders"].calls}
    assert orders[("Ecto.Changeset", "cast", 4)].line == 13
    assert orders[("Ecto.Changeset", "cast", 4)].caller == "changeset/2"
    assert orders[("Shop.Repo", "transaction", 2)].file == "lib/shop/orders.ex"
    ledger = {c.function: c for c in by_module["Shop.Ledger"].calls}
    assert ledger["add"].fun_ref and ledger["add"].line == 4 and not ledger["new"].fun_ref


@pytest.mark.elixir
def test_a_stripped_beam_keeps_its_calls(shop_ebin: Path, tmp_path: Path) -> None:
    erl = shutil.which("erl")
    if erl is None:
        pytest.skip("erl is not on PATH")
    target = tmp_path / "Elixir.Shop.Repo.beam"
    shutil.copy(shop_ebin / target.name, target)
    strip = f'{{ok,_}} = beam_lib:strip("{target}"), halt().'
    subprocess.run([erl, "-noshell", "-eval", strip], check=True, timeout=60, capture_output=True)
    assert target.read_bytes()[:2] == b"\x1f\x8b"  # strip writes it gzipped
    found = read_beam_calls(target.read_bytes())
    assert not found.has_attributes and found.behaviours == ()
    assert [c.function for c in found.calls if c.module == "Ecto.Repo.Transaction"] == [
        "transaction"
    ]


@pytest.mark.parametrize("release", ["otp-25.2.3", "otp-27.3.4.1", "otp-29.1.2"])
def test_every_otp_beam_is_walked_to_its_end(release: str, tmp_path: Path) -> None:
    tarball = shared(CORPUS / "otp" / f"{release}-install.tar.gz", "the OTP corpus")
    walked = placed = 0
    with tarfile.open(tarball) as tar:
        for member in tar:
            if not member.name.endswith(".beam"):
                continue
            data = tar.extractfile(member)
            assert data is not None
            found = read_beam_calls(io.BytesIO(data.read()).getvalue())
            assert found.stopped is None, (member.name, found.stopped)
            walked += 1
            placed += sum(1 for c in found.calls if c.line is not None)
    assert walked > 150 and placed > 20_000
