"""Kill an ingesting process with SIGKILL at random points; check the database after.

Shared by `tests/reliability/test_crash_safety.py` (20 trials) and
`benchmarks/bench_crash.py` (more).

A base database holds an OLD version of the package and one bystander package. Each trial
copies it, starts `ingest_worker` on the NEW version, waits until the worker has started
its ingest, sleeps a random delay inside the measured ingest duration (stratified, so
the trials spread over the whole run, the write transaction included), kills it, then:

1. checks the file: `PRAGMA integrity_check`, and no package half-written (see
   `support.consistency`): the package holds OLD's chunks or all of NEW's (NEW 'partial'
   when the kill came while its vectors were being added), the bystander intact;
2. starts a service on it (`service.start()` resumes the job row left 'running'), and
   checks the job completed: NEW indexed whole and complete, no job row left 'running'.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
import sys
import time
from pathlib import Path

from attrs import frozen

from hexlocal_core.config import Settings
from hexlocal_core.index.sqlite.db import connect
from tests.support.harness import REPO_ROOT, consistency, service_for
from tests.support.helpers import HashingEmbedder

PACKAGE = "ecto"
OLD, NEW = "3.12.5", "3.14.2"
BYSTANDER = ("jason", "1.4.4")
WORKER = "tests.support.ingest_worker"
START_TIMEOUT_S = 30.0
RESUME_TIMEOUT_S = 120.0


@frozen
class Base:
    """The database every trial starts from, and what a complete ingest looks like."""

    db: Path
    env: dict[str, str]  # HEX_API_URL / HEX_MIRROR of the standalone fake hex.pm
    chunks: dict[str, int]  # version -> chunk count when complete
    bystander_chunks: int
    ingest_s: float  # measured: worker start of ingest -> exit


@frozen
class Trial:
    index: int
    delay_s: float
    phase: str  # the last phase the worker announced before the kill
    after_kill: str  # version of PACKAGE found after the kill ("" when absent)
    problems: tuple[str, ...]  # after the kill; must be empty
    resumed: bool  # service.start() resumed the interrupted job row
    final_version: str
    final_problems: tuple[str, ...]  # after the next run; must be empty
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.problems and not self.final_problems and self.final_version == NEW


def settings_for_db(db: Path, env: dict[str, str]) -> Settings:
    project = db.parent / "project"
    project.mkdir(exist_ok=True)
    return Settings.from_env(
        {
            **env,
            "DATABASE_PATH": str(db),
            "PROJECT_ROOT": str(project),
            "AI_RERANK_MODEL": "off",
            "HEXLOCAL_HTTP_TIMEOUT_S": "10",
        }
    )


async def prepare(workdir: Path, env: dict[str, str]) -> Base:
    """Builds the base database and measures one complete worker run."""
    db = workdir / "base.db"
    service = service_for(settings_for_db(db, env), HashingEmbedder())
    try:
        await service.ingest(PACKAGE, OLD)
        await service.ingest(*BYSTANDER)
        indexed = {p.name: p for p in service.list_packages()}
        old, bystander = indexed.get(PACKAGE), indexed.get(BYSTANDER[0])
    finally:
        await service.aclose()
    assert old is not None and bystander is not None
    _checkpoint(db)
    probe = workdir / "measure.db"
    shutil.copy(db, probe)
    proc = await _spawn(probe, env)
    try:
        started = await _wait_started(proc)
        await asyncio.wait_for(proc.wait(), START_TIMEOUT_S + RESUME_TIMEOUT_S)
        ingest_s = time.perf_counter() - started
        out = (await proc.stdout.read()).decode() if proc.stdout else ""
    finally:
        await _reap(proc)
    if proc.returncode != 0 or "done" not in out:
        raise RuntimeError(f"the measuring run failed ({proc.returncode}): {out[-2000:]}")
    new_chunks = _chunks_of(probe)
    return Base(db, env, {OLD: old.chunk_count, NEW: new_chunks}, bystander.chunk_count, ingest_s)


def delays(n: int, total_s: float, seed: int) -> list[float]:
    """One delay per trial, each uniform in its own 1/n slice of the run (then shuffled)."""
    rng = random.Random(seed)
    slices = [(k + rng.random()) * total_s / n for k in range(n)]
    rng.shuffle(slices)
    return slices


async def run_trial(base: Base, workdir: Path, index: int, delay_s: float) -> Trial:
    t0 = time.perf_counter()
    trial_dir = workdir / f"trial-{index:03d}"
    trial_dir.mkdir()
    db = trial_dir / "index.db"
    shutil.copy(base.db, db)
    proc = await _spawn(db, base.env)
    try:
        await _wait_started(proc)
        await asyncio.sleep(delay_s)
        if proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
        await asyncio.wait_for(proc.wait(), 10)
        out = (await proc.stdout.read()).decode() if proc.stdout else ""
    finally:
        await _reap(proc)
    # `_wait_started` consumed the "phase started" line: the worker got at least that far.
    phases = ["started"] + [
        line.split()[1] for line in out.splitlines() if line.startswith("phase ")
    ]
    after = _after_kill(base, db)
    resumed, final = await _next_run(base, db)
    final_problems = _check(base, db, expect=NEW)
    shutil.rmtree(trial_dir, ignore_errors=True)
    return Trial(
        index=index,
        delay_s=round(delay_s, 3),
        phase=_furthest(phases, done="done" in out),
        after_kill=after[0],
        problems=after[1],
        resumed=resumed,
        final_version=final,
        final_problems=final_problems,
        seconds=round(time.perf_counter() - t0, 2),
    )


# The worker's phases in the order they happen. "downloading" covers download and parse;
# "writing" is announced just before the chunks' transaction and "transaction" from inside
# it, so either may be printed first; "embedding" adds the vectors, slice by slice.
PHASES = ("none", "started", "downloading", "writing", "transaction", "committed", "embedding")


def _furthest(phases: list[str], *, done: bool) -> str:
    if done:
        return "done"
    known = [p for p in phases if p in PHASES]
    return max(known, key=PHASES.index) if known else "none"


# -- checks -----------------------------------------------------------------------------------


def _after_kill(base: Base, db: Path) -> tuple[str, tuple[str, ...]]:
    version = _version_of(db)
    return version, _check(base, db, expect=None)


def _check(base: Base, db: Path, *, expect: str | None) -> tuple[str, ...]:
    problems = list(consistency(db))
    conn = connect(db, readonly=True)
    try:
        found = {
            name: (version, count)
            for name, version, count in conn.execute(
                "SELECT name, version, chunk_count FROM packages"
            )
        }
        statuses = dict(conn.execute("SELECT name, status FROM packages").fetchall())
        running = conn.execute("SELECT count(*) FROM ingest_jobs WHERE status = 'running'")
        still_running = running.fetchall()[0][0]
    finally:
        conn.close()
    version, count = found.get(PACKAGE, ("", 0))
    if version not in base.chunks or base.chunks[version] != count:
        problems.append(f"{PACKAGE}: {version or 'absent'} with {count} chunks")
    if expect is not None and version != expect:
        problems.append(f"{PACKAGE}: {version} after the next run, not {expect}")
    if expect is not None and statuses.get(PACKAGE) != "complete":
        problems.append(f"{PACKAGE}: {statuses.get(PACKAGE)} after the next run, not complete")
    if version == OLD and statuses.get(PACKAGE) != "complete":
        problems.append(f"{PACKAGE}: the OLD version is no longer complete")
    if found.get(BYSTANDER[0]) != (BYSTANDER[1], base.bystander_chunks):
        problems.append(f"{BYSTANDER[0]} changed: {found.get(BYSTANDER[0])}")
    if expect is not None and still_running:
        problems.append(f"{still_running} ingest_jobs rows still 'running'")
    return tuple(problems)


async def _next_run(base: Base, db: Path) -> tuple[bool, str]:
    """What a restarted server does: resume interrupted jobs; ingest if none was recorded."""
    service = service_for(settings_for_db(db, base.env), HashingEmbedder())
    try:
        await service.start()
        (status,) = service.ingestion_status(PACKAGE)
        resumed = status.state == "running"  # a job of this process
        if resumed:
            # Joins the resumed job (one job per package) and collects its result.
            await asyncio.wait_for(service.ingest(PACKAGE, status.version), RESUME_TIMEOUT_S)
        elif _version_of(db) != NEW or status.state != "indexed":
            # Killed before the job row was written: nothing to resume, so ingest anew.
            await service.ingest(PACKAGE, NEW)
    finally:
        await service.aclose()
    return resumed, _version_of(db)


def _version_of(db: Path) -> str:
    conn = connect(db, readonly=True)
    try:
        for (version,) in conn.execute("SELECT version FROM packages WHERE name = ?", (PACKAGE,)):
            return str(version)
        return ""
    finally:
        conn.close()


def _chunks_of(db: Path) -> int:
    conn = connect(db, readonly=True)
    try:
        sql = "SELECT chunk_count FROM packages WHERE name = ? AND version = ?"
        for (count,) in conn.execute(sql, (PACKAGE, NEW)):
            return int(count)
        raise RuntimeError(f"{PACKAGE} {NEW} is not in {db}")
    finally:
        conn.close()


def _checkpoint(db: Path) -> None:
    """Fold the WAL into the main file, so copying that one file copies the database."""
    conn = connect(db)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


# -- the worker process -----------------------------------------------------------------------


async def _spawn(db: Path, env: dict[str, str]) -> asyncio.subprocess.Process:
    project = db.parent / "project"
    project.mkdir(exist_ok=True)
    child_env = {
        **{k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "XDG_DATA_HOME")},
        **env,
        "DATABASE_PATH": str(db),
        "PROJECT_ROOT": str(project),
        "AI_RERANK_MODEL": "off",
        "PYTHONPATH": str(REPO_ROOT),
    }
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        WORKER,
        PACKAGE,
        NEW,
        cwd=REPO_ROOT,
        env=child_env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )


async def _wait_started(proc: asyncio.subprocess.Process) -> float:
    """Returns when the worker announced its start (imports done, service built)."""
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), START_TIMEOUT_S)
    if not line.startswith(b"phase started"):
        raise RuntimeError(f"the worker did not start: {line!r}")
    return time.perf_counter()


async def _reap(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.kill()
        await proc.wait()
