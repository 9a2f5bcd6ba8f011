"""`make bench` writes docs/benchmarks.md: each benchmark's tables with the machine, the date
and the commit; a run rewrites only the benchmarks it ran; a failure never passes old
tables off as current. Run against throwaway benchmarks (no timing is asserted)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from benchmarks import report, run_all

VNNI_CPU = """\
processor	: 0
model name	: AMD EPYC 9R14
flags		: fpu sse2 avx avx2 avx512f avx512bw avx512_vnni avx_vnni
"""
AVX2_CPU = """\
processor	: 0
model name	: Intel(R) Xeon(R) CPU E5-2686 v4 @ 2.30GHz
flags		: fpu sse2 avx avx2 fma
"""
MEMINFO = "MemTotal:        8029204 kB\nMemFree:  1 kB\n"

TABLE_BENCH = '''\
"""Throwaway benchmark: prints one table."""
from rich.console import Console
from rich.table import Table

table = Table(title="speed")
table.add_column("row")
table.add_column("tokens/s", justify="right")
table.add_row("int8", "{value}")
Console().print(table)
'''
FAILING_BENCH = '''\
"""Throwaway benchmark that fails."""
print("half a table")
raise SystemExit(3)
'''


@pytest.mark.parametrize(
    ("cpuinfo", "cpu", "vector"),
    [
        (VNNI_CPU, "AMD EPYC 9R14", "AVX-512 VNNI"),
        (AVX2_CPU, "Intel(R) Xeon(R) CPU E5-2686 v4 @ 2.30GHz", "AVX2, no AVX-512"),
        ("", "unknown CPU", "no AVX2"),
    ],
)
def test_the_machine_is_read_from_proc(cpuinfo: str, cpu: str, vector: str) -> None:
    machine = report.machine_from(cpuinfo, MEMINFO, cores=4, usable=2)
    assert (machine.cpu, machine.vector) == (cpu, vector)
    assert machine.describe() == f"{cpu}, 2 of 4 cores ({vector}), 7.7 GiB RAM"


def _run(name: str, output: str, exit_code: int = 0, day: int = 4) -> report.Run:
    return report.Run(
        name=name,
        summary=f"What {name} measures.",
        output=output,
        exit_code=exit_code,
        seconds=12.34,
        started=datetime(2026, 12, day, 10, 30, tzinfo=UTC),
        commit="abc1234",
        machine=report.machine_from(VNNI_CPU, MEMINFO, cores=2, usable=2),
        load_before=1.25,
    )


NAMES = ["bench_a.py", "bench_b.py", "bench_c.py"]


def test_a_section_carries_the_machine_date_commit_and_output() -> None:
    doc = report.merge("", [_run("bench_a.py", "\x1b[1m| row | 12 |\x1b[0m\n")], NAMES)
    assert doc.startswith("# Benchmarks")
    assert "## bench_a.py" in doc and "What bench_a.py measures." in doc
    assert "2026-12-04 10:30 UTC, commit abc1234; AMD EPYC 9R14, 2 cores (AVX-512 VNNI)" in doc
    assert "load average 1.2 before; 12.3 s" in doc
    assert "```text\n| row | 12 |\n```" in doc  # colour codes gone
    assert "Not measured yet: `bench_b.py`, `bench_c.py`." in doc


def test_a_run_rewrites_its_own_section_and_keeps_the_others() -> None:
    first = report.merge("", [_run("bench_a.py", "a one"), _run("bench_c.py", "c one")], NAMES)
    second = report.merge(first, [_run("bench_c.py", "c two", day=5)], NAMES)
    assert "a one" in second and "c two" in second and "c one" not in second
    assert second.index("## bench_a.py") < second.index("## bench_c.py")
    assert report.merge(second, [], NAMES) == second  # nothing ran: nothing changes


def test_a_failed_run_keeps_the_last_tables_and_says_so() -> None:
    good = report.merge("", [_run("bench_a.py", "good table")], NAMES)
    failed = report.merge(good, [_run("bench_a.py", "traceback", exit_code=1, day=6)], NAMES)
    body = report.sections_of(failed)["bench_a.py"]
    assert "good table" in body and "traceback" not in body
    assert "**The last run failed (2026-12-06 10:30 UTC" in body and "exit 1" in body
    assert "from the run before it" in body
    # A second failure replaces the note rather than stacking another.
    again = report.merge(failed, [_run("bench_a.py", "x", exit_code=2, day=7)], NAMES)
    assert report.sections_of(again)["bench_a.py"].count("The last run failed") == 1
    # ... and a success clears it.
    fixed = report.merge(again, [_run("bench_a.py", "new table", day=8)], NAMES)
    assert "failed" not in report.sections_of(fixed)["bench_a.py"]


def test_a_failed_first_run_shows_what_it_printed() -> None:
    doc = report.merge("", [_run("bench_b.py", "line\n" * 200 + "boom", exit_code=3)], NAMES)
    body = report.sections_of(doc)["bench_b.py"]
    assert "Nothing was measured" in body and body.rstrip().endswith("boom\n```")
    assert body.count("line") == report.OUTPUT_TAIL_LINES - 1


def test_a_removed_benchmark_loses_its_section() -> None:
    doc = report.merge("", [_run("bench_a.py", "a"), _run("bench_b.py", "b")], NAMES)
    assert "## bench_b.py" not in report.merge(doc, [], ["bench_a.py"])


def test_run_all_writes_the_tables_it_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    here = tmp_path / "benchmarks"
    here.mkdir()
    (here / "bench_table.py").write_text(TABLE_BENCH.format(value="21,973"), encoding="utf-8")
    (here / "bench_broken.py").write_text(FAILING_BENCH, encoding="utf-8")
    doc = tmp_path / "benchmarks.md"
    assert run_all.main(["--only", "table", "--doc", str(doc)], here=here) == 0
    assert "21,973" in capsys.readouterr().out  # streamed while it ran
    text = doc.read_text(encoding="utf-8")
    table = report.sections_of(text)["bench_table.py"]
    assert "Throwaway benchmark: prints one table." in table
    assert re.search(r"int8\s+│\s+21,973", table)  # rich's table, drawn wide enough
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC, commit \S+; .+ cores \(", table)
    assert "Not measured yet: `bench_broken.py`." in text
    # The broken one: exit 1 overall, its output recorded, the table's section untouched.
    (here / "bench_table.py").write_text(TABLE_BENCH.format(value="1"), encoding="utf-8")
    assert run_all.main(["--only", "broken", "--doc", str(doc)], here=here) == 1
    again = report.sections_of(doc.read_text(encoding="utf-8"))
    assert again["bench_table.py"] == table
    assert "half a table" in again["bench_broken.py"] and "exit 3" in again["bench_broken.py"]
