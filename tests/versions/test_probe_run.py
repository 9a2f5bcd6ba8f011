"""Probes of the user's tools (`elixir`, `erl`) leave no file in the project and no process
behind: on timeout, cancellation, too much output, and the server being killed outright.

The fakes are real scripts run by a real shell; the last test runs the real `elixir`.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hexlocal_core.versions import probes
from hexlocal_core.versions.probe_run import run_probe
from tests.support.paths import REPO_ROOT
from tests.support.waiting import wait_until

pytestmark = pytest.mark.skipif(os.name != "posix", reason="process groups and /proc")

# Writes its own pid and a child's to `pids`, then hangs like a BEAM that never answers.
HANGING = """#!/bin/sh
echo $$ >> "{pids}"
sleep 60 &
echo $! >> "{pids}"
echo started
wait
"""


def _state(pid: int) -> str:
    """The process's state letter, or "gone"; a zombie ("Z") is dead, only unreaped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return "gone"


def _alive(pids: list[int]) -> list[int]:
    return [p for p in pids if _state(p) not in ("gone", "Z", "X")]


def _wait_dead(pids: list[int], seconds: float = 5.0) -> list[int]:
    """The pids still alive after `seconds` (an empty list is the good answer)."""
    wait_until(
        lambda: not _alive(pids),
        what="the probe's processes end",
        timeout=seconds,
        detail=lambda: _alive(pids),
    )
    return []


def _wait_pids(path: Path, count: int, seconds: float = 10.0) -> list[int]:
    def written() -> list[int]:
        pids = [int(p) for p in path.read_text().split()] if path.exists() else []
        return pids if len(pids) >= count else []

    return wait_until(written, what=f"the fake writes {count} pids to {path}", timeout=seconds)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The server's working directory is the user's project, as when an editor starts it."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "mix.exs").write_text("defmodule App.MixProject do\nend\n")
    monkeypatch.chdir(root)
    yield root
    assert sorted(p.name for p in root.iterdir()) == ["mix.exs"], "the probe wrote here"


def _script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def _probe_dirs(tmp: Path) -> list[Path]:
    return sorted(tmp.glob("hexlocal-probe-*"))


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the probes' own directories go, so a test can see them come and go."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    return tmp


async def test_a_hanging_probe_is_stopped_with_its_children(
    project: Path, tmp_path: Path, private_tmp: Path
) -> None:
    pids_file = tmp_path / "pids"
    erl = _script(tmp_path / "bin" / "erl", HANGING.format(pids=pids_file))
    started = time.monotonic()
    run = await run_probe([str(erl)], timeout_s=0.5)
    assert time.monotonic() - started < 3
    assert not run.ok and run.returncode is None
    assert run.problem is not None and "took longer than 0.5 s" in run.problem
    assert _wait_dead(_wait_pids(pids_file, 2)) == []
    assert _probe_dirs(private_tmp) == []


async def test_a_cancelled_probe_is_stopped_with_its_children(
    project: Path, tmp_path: Path, private_tmp: Path
) -> None:
    pids_file = tmp_path / "pids"
    erl = _script(tmp_path / "bin" / "erl", HANGING.format(pids=pids_file))
    task = asyncio.create_task(run_probe([str(erl)], timeout_s=60))
    pids = await asyncio.to_thread(_wait_pids, pids_file, 2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _wait_dead(pids) == []
    assert _probe_dirs(private_tmp) == []


async def test_a_probe_runs_outside_the_project_without_crash_dumps(
    project: Path, tmp_path: Path, private_tmp: Path
) -> None:
    tool = _script(
        tmp_path / "bin" / "elixir",
        '#!/bin/sh\npwd\necho "$ERL_CRASH_DUMP|$ERL_CRASH_DUMP_SECONDS"\nread line || echo eof\n',
    )
    run = await run_probe([str(tool)], timeout_s=10)
    assert run.ok
    cwd, dump, stdin = run.stdout.splitlines()
    assert Path(cwd).parent == private_tmp and Path(cwd) != project
    assert dump == f"{os.devnull}|0"
    assert stdin == "eof"  # stdin is /dev/null: a probe waiting for input cannot hang on it
    assert _probe_dirs(private_tmp) == []


async def test_a_chatty_probe_is_cut_off(project: Path, tmp_path: Path) -> None:
    tool = _script(tmp_path / "bin" / "erl", "#!/bin/sh\nexec yes hexlocal\n")
    run = await run_probe([str(tool)], timeout_s=10, max_output=4096)
    assert run.problem is not None and "more than 4096 bytes" in run.problem


async def test_a_missing_or_failing_tool_is_an_answer_not_an_exception(
    project: Path, tmp_path: Path
) -> None:
    failing = _script(tmp_path / "bin" / "erl", "#!/bin/sh\necho partial\nexit 3\n")
    run = await run_probe([str(failing)], timeout_s=10)
    assert (run.ok, run.returncode, run.stdout) == (False, 3, "partial\n")
    missing = await run_probe([str(tmp_path / "bin" / "absent")], timeout_s=10)
    assert not missing.ok and missing.returncode == 127


# A stand-in server: runs one probe and is killed while the probe runs.
_SERVER = """
import asyncio, sys
from hexlocal_core.versions.probe_run import run_probe
from hexlocal_core.versions.probes import elixir_on_path
async def main():
    if sys.argv[1] == "elixir":
        await elixir_on_path()
    else:
        await run_probe([sys.argv[1]], timeout_s=60)
asyncio.run(main())
"""


def _start_server(argument: str, cwd: Path, tmp: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "TMPDIR": str(tmp)}
    return subprocess.Popen(
        [sys.executable, "-c", _SERVER, argument],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # as a client runs it; killpg below reaches only the server
    )


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_probe_dies_with_a_killed_server(
    project: Path, tmp_path: Path, private_tmp: Path, sig: signal.Signals
) -> None:
    pids_file = tmp_path / "pids"
    erl = _script(tmp_path / "bin" / "erl", HANGING.format(pids=pids_file))
    server = _start_server(str(erl), project, private_tmp)
    try:
        pids = _wait_pids(pids_file, 2)
        os.killpg(server.pid, sig)  # the whole group of the server, as a client does
        server.wait(timeout=10)
    finally:
        server.kill()
    assert _wait_dead(pids) == []
    assert _wait_gone(private_tmp) == []


def _wait_gone(tmp: Path, seconds: float = 5.0) -> list[Path]:
    wait_until(
        lambda: not _probe_dirs(tmp),
        what="the probe's private folders are removed",
        timeout=seconds,
        detail=lambda: _probe_dirs(tmp),
    )
    return []


def _processes_in(*dirs: Path) -> list[int]:
    """Live processes but this one whose working directory is under one of `dirs`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if any(cwd.startswith(str(d)) for d in dirs) and _state(int(entry.name)) not in (
            "gone",
            "Z",
            "X",
        ):
            found.append(int(entry.name))
    return found


def _beams_in(*dirs: Path) -> list[int]:
    pids = _processes_in(*dirs)
    for pid in pids:
        try:
            if b"beam" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pids
        except OSError:
            continue
    return []


def _wait_for_beam(*dirs: Path, seconds: float = 10.0) -> list[int]:
    """The processes of a BEAM started in `dirs`; none when it ended before it was seen."""
    try:
        return wait_until(
            lambda: _beams_in(*dirs), what="a BEAM starts", timeout=seconds, every=0.005
        )
    except pytest.fail.Exception:
        return []


@pytest.mark.elixir
@pytest.mark.parametrize("whole_group", [True, False], ids=["group", "server-only"])
@pytest.mark.parametrize("delay_s", [0.0, 0.1])
def test_killing_the_server_mid_elixir_version_leaves_no_dump(
    project: Path, private_tmp: Path, delay_s: float, whole_group: bool
) -> None:
    """Killed alone, the server closes the BEAM's stdout before it prints its banner: the
    BEAM then crashes, and wrote erl_crash.dump into the project (3 of 12 kills before)."""
    if probes.shutil.which("elixir") is None:
        pytest.skip("no elixir on PATH")
    server = _start_server("elixir", project, private_tmp)
    try:
        beam = _wait_for_beam(private_tmp, project)
        if not beam:
            pytest.skip("elixir --version ended before its BEAM could be seen")
        time.sleep(delay_s)
        if whole_group:
            os.killpg(server.pid, signal.SIGKILL)
        else:
            server.kill()
        server.wait(timeout=10)
    finally:
        server.kill()
    assert _wait_dead(beam) == []
    # The watcher may still be removing the probe's directory; it ends within moments.
    assert _wait_dead(_processes_in(private_tmp, project)) == []
    assert _wait_gone(private_tmp) == []
    time.sleep(0.5)  # a BEAM that crashed writes its dump after it lost its pipe
    assert not (project / "erl_crash.dump").exists()
