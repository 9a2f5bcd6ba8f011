"""SIGKILL an ingesting process at 20 random points: the database is never damaged, no
package is half-written, and the next start resumes and completes the job.

See `tests/support/crash_trials.py` for the procedure; `benchmarks/bench_crash.py` runs
more trials and prints a table. The delays are seeded, so a failure names a trial that
can be replayed.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.support import crash_trials
from tests.support.harness import StandaloneHex

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

TRIALS = 20
SEED = 20261129


async def test_sigkill_during_ingest_never_half_writes(tmp_path: Path, corpus: Path) -> None:
    with StandaloneHex() as hex_pm:
        base = await crash_trials.prepare(tmp_path, hex_pm.env)
        trials = [
            await crash_trials.run_trial(base, tmp_path, i, delay)
            for i, delay in enumerate(crash_trials.delays(TRIALS, base.ingest_s, SEED))
        ]
    failed = [t for t in trials if not t.ok]
    assert failed == [], failed
    # The kills spread over the run: some before the write, some inside the transaction
    # (when the file holds a half-written WAL), and most left a job row to resume.
    phases = Counter(t.phase for t in trials)
    assert sum(n for p, n in phases.items() if p != "done") >= TRIALS // 2, phases
    assert any(t.after_kill == crash_trials.OLD for t in trials), phases
    assert sum(t.resumed for t in trials) >= TRIALS // 2, trials
