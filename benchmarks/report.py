"""docs/benchmarks.md: each benchmark's printed tables from its last run, with the machine
and the date, written by `benchmarks/run_all.py` (`make bench`), never by hand.

A run rewrites only the sections of the benchmarks it ran, so one benchmark can be measured
again (`run_all.py --only bench_parse`) without the slow ones. A failed run keeps the
previous tables under a line saying that the last run failed, rather than losing them or
passing them off as current. Sections of benchmarks that no longer exist are dropped.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from attrs import frozen

HEADER = """\
# Benchmarks

Written by `make bench` (`benchmarks/run_all.py`); do not edit it by hand. Each section is
one benchmark's output from its last run, with the machine, the date and the commit it ran
on. `python benchmarks/run_all.py --only NAME` runs one benchmark again and rewrites its
section alone. Earlier measurements, and the experiments behind each decision, are in
`docs/lab/`; the machine is usually shared, so read a figure with the load printed beside it.
"""
_SECTION = re.compile(
    r"<!-- (?P<name>bench_\w+\.py) -->\n(?P<body>.*?)<!-- /(?P=name) -->\n?", re.S
)
_FAILED = "**The last run failed"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
OUTPUT_TAIL_LINES = 80


@frozen
class Machine:
    """What a figure depends on: the CPU, how many cores, and its vector instructions (int8
    embedding is ~1.8x fp32 with AVX-512 VNNI, ~1.4x with AVX2 alone)."""

    cpu: str
    cores: int
    usable: int
    vector: str
    memory_gib: float | None

    def describe(self) -> str:
        cores = (
            f"{self.cores} cores"
            if self.usable == self.cores
            else (f"{self.usable} of {self.cores} cores")
        )
        memory = f", {self.memory_gib:.1f} GiB RAM" if self.memory_gib else ""
        return f"{self.cpu}, {cores} ({self.vector}){memory}"


@frozen
class Run:
    """One benchmark's run: its output as printed, and how it ended."""

    name: str
    summary: str
    output: str
    exit_code: int
    seconds: float
    started: datetime
    commit: str
    machine: Machine
    load_before: float


def vector_instructions(flags: Sequence[str]) -> str:
    have = set(flags)
    if "avx512_vnni" in have or "avx512vnni" in have:
        return "AVX-512 VNNI"
    if "avx512f" in have:
        return "AVX-512, no VNNI"
    if "avx2" in have:
        return "AVX2, no AVX-512"
    return "no AVX2"


def machine_from(cpuinfo: str, meminfo: str, cores: int, usable: int) -> Machine:
    """The machine as /proc/cpuinfo and /proc/meminfo describe it (empty text: unknown)."""
    model = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
    flags = re.search(r"^(?:flags|Features)\s*:\s*(.+)$", cpuinfo, re.M)
    total = re.search(r"^MemTotal:\s*(\d+)\s*kB", meminfo, re.M)
    return Machine(
        cpu=model.group(1).strip() if model else "unknown CPU",
        cores=cores,
        usable=usable,
        vector=vector_instructions(flags.group(1).split() if flags else []),
        memory_gib=int(total.group(1)) / 1024**2 if total else None,
    )


def this_machine() -> Machine:
    def read(path: str) -> str:
        try:
            return Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    cores = os.cpu_count() or 1
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        usable = cores
    return machine_from(read("/proc/cpuinfo"), read("/proc/meminfo"), cores, usable)


def commit(repo: Path) -> str:
    """The checkout's commit, `+` when it has uncommitted changes; `unknown` outside git."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=repo,
            capture_output=True,
            text=True,
        )
    except OSError:
        return "unknown"
    if head.returncode != 0:
        return "unknown"
    return head.stdout.strip() + ("+" if dirty.stdout.strip() else "")


def summary_of(script: Path) -> str:
    """The first line of a benchmark's docstring: what it measures."""
    try:
        doc = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8")))
    except (OSError, SyntaxError):
        return ""
    return doc.splitlines()[0].strip() if doc else ""


def clean(output: str) -> str:
    """The output as a reader sees it: no colour codes, no trailing blanks."""
    lines = [_ANSI.sub("", line).rstrip() for line in output.splitlines()]
    while lines and not lines[0]:
        lines.pop(0)
    return "\n".join(lines).rstrip()


def _stamp(run: Run) -> str:
    when = run.started.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"{when}, commit {run.commit}; {run.machine.describe()}; load average "
        f"{run.load_before:.1f} before; {run.seconds:.1f} s"
    )


def section(run: Run) -> str:
    """A successful run's section."""
    body = [f"## {run.name}\n"]
    if run.summary:
        body.append(f"{run.summary}\n")
    body.append(f"{_stamp(run)}.\n")
    body.append(f"```text\n{clean(run.output)}\n```")
    return "\n".join(body)


def failed_section(run: Run, previous: str | None) -> str:
    """A failed run: the previous tables kept under a line that says so, or, with none, the
    end of what the run printed."""
    note = f"{_FAILED} ({_stamp(run)}, exit {run.exit_code}).**"
    if previous is None:
        tail = "\n".join(clean(run.output).splitlines()[-OUTPUT_TAIL_LINES:])
        return f"## {run.name}\n\n{note} Nothing was measured.\n\n```text\n{tail}\n```"
    kept = [line for line in previous.splitlines() if not line.startswith(_FAILED)]
    heading, rest = kept[0], "\n".join(kept[1:]).lstrip("\n")
    note += " The tables below are from the run before it."
    return f"{heading}\n\n{note}\n\n{rest}"


def sections_of(document: str) -> dict[str, str]:
    """Each benchmark's section body in a written document, by benchmark name."""
    return {m["name"]: m["body"].rstrip("\n") for m in _SECTION.finditer(document)}


def merge(document: str, runs: Sequence[Run], names: Sequence[str]) -> str:
    """The document with the sections of `runs` rewritten and the other benchmarks' kept,
    in `names` order; benchmarks not in `names` are gone, those never run are listed."""
    kept = sections_of(document)
    for run in runs:
        previous = kept.get(run.name)
        kept[run.name] = section(run) if run.exit_code == 0 else failed_section(run, previous)
    parts = [HEADER]
    missing = [n for n in names if n not in kept]
    if missing:
        parts.append("Not measured yet: " + ", ".join(f"`{n}`" for n in missing) + ".\n")
    parts += [f"<!-- {n} -->\n{kept[n]}\n<!-- /{n} -->\n" for n in names if n in kept]
    return "\n".join(parts)


def write(path: Path, runs: Sequence[Run], names: Sequence[str]) -> None:
    current = path.read_text(encoding="utf-8") if path.exists() else ""
    path.write_text(merge(current, runs, names), encoding="utf-8")


def environment_for_tables(env: Mapping[str, str]) -> dict[str, str]:
    """A benchmark's environment when its output is captured: rich draws tables for an
    80-column terminal when it cannot ask one, so give the tables room."""
    return {**env, "COLUMNS": env.get("COLUMNS", "160"), "NO_COLOR": "1"}


def now() -> datetime:
    return datetime.now(UTC)
