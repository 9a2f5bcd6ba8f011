"""Running a tool of the user's machine (`elixir`, `erl`, `mix`) so that it can neither
leave files in the project nor outlive hexlocal.

A BEAM killed at the wrong moment writes `erl_crash.dump` into its working directory,
which for a server started by an editor is the user's project. So every probe:

* runs in a private temporary directory (removed afterwards), never the project;
* has `ERL_CRASH_DUMP=/dev/null` and `ERL_CRASH_DUMP_SECONDS=0` (no dump is attempted);
* leads a session and process group of its own, so a signal meant for hexlocal's group
  (a client stopping its server) does not reach it half-way, and hexlocal ends it by
  killing that whole group: on timeout, on cancellation, on any exception;
* cannot outlive hexlocal, however hexlocal ends (SIGKILL included): on POSIX it starts
  under a small `sh` guard whose watcher holds the read end of a pipe only hexlocal
  writes to; when that pipe closes (hexlocal closes it after the probe, or the kernel does
  when hexlocal dies) the watcher kills the probe's group, stray grandchildren included.

Output is capped and read under one deadline; the answer is a value, never an exception.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import tempfile
from collections.abc import Mapping, Sequence

from attrs import frozen

__all__ = ["MAX_PROBE_OUTPUT", "PROBE_ENV", "ProbeRun", "run_probe"]

log = logging.getLogger("hexlocal.versions.probe")

MAX_PROBE_OUTPUT = 64 * 1024  # `elixir --version` prints ~100 bytes, a root dir ~30
REAP_TIMEOUT_S = 5.0
PROBE_ENV: Mapping[str, str] = {"ERL_CRASH_DUMP": os.devnull, "ERL_CRASH_DUMP_SECONDS": "0"}

# $1 is the probe's private directory, the rest its argv. fd 0 is the guard pipe: moved
# to fd 3 for the watcher, which at the pipe's EOF removes the directory (hexlocal may
# be dead and unable to) and kills the whole process group (`kill -9 0`). The probe
# replaces the shell (same pid, so its exit status is the shell's) with fd 3 closed and
# stdin on /dev/null. The watcher's output goes to /dev/null so it never holds the
# probe's output pipe open.
_GUARD = (
    'dir=$1; shift; exec 3<&0 </dev/null; (read -r _ <&3; rm -rf -- "$dir"; kill -9 0) '
    '>/dev/null 2>&1 & exec "$@" 3<&-'
)


@frozen
class ProbeRun:
    """What a probe printed and how it ended; `problem` says why it gave no answer."""

    stdout: str
    returncode: int | None  # None: it could not start, or was stopped
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None and self.returncode == 0


class _TooMuchOutput(Exception):
    pass


async def _read_capped(stream: asyncio.StreamReader, cap: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while data := await stream.read(16 * 1024):
        size += len(data)
        if size > cap:
            raise _TooMuchOutput
        chunks.append(data)
    return b"".join(chunks)


async def _finish(proc: asyncio.subprocess.Process, cap: int) -> tuple[bytes, int]:
    assert proc.stdout is not None  # opened with stdout=PIPE
    out = await _read_capped(proc.stdout, cap)
    return out, await proc.wait()


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    # The probe leads its own group (start_new_session), so its pid is the group id.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()


async def _drain(proc: asyncio.subprocess.Process) -> None:
    """Reads the output pipe to its end and reaps the process, so both close now."""
    if proc.stdout is not None:
        while await proc.stdout.read(64 * 1024):
            pass
    await proc.wait()


async def _stop(proc: asyncio.subprocess.Process) -> None:
    _kill_group(proc)
    try:  # SIGKILL cannot be caught: only a process we may not signal survives it
        await asyncio.wait_for(_drain(proc), REAP_TIMEOUT_S)
    except TimeoutError:
        log.warning("probe %s survived SIGKILL; leaving it", proc.pid)


async def _start(
    argv: Sequence[str], cwd: str, env: Mapping[str, str]
) -> asyncio.subprocess.Process:
    if os.name != "posix":  # no sessions, no sh: the temp cwd and the env still apply
        return await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
    return await asyncio.create_subprocess_exec(
        "/bin/sh",
        "-c",
        _GUARD,
        "hexlocal-probe",
        cwd,
        *argv,
        cwd=cwd,
        env=dict(env),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        start_new_session=True,
    )


async def run_probe(
    argv: Sequence[str],
    *,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    max_output: int = MAX_PROBE_OUTPUT,
) -> ProbeRun:
    """Runs `argv` as the module docstring says and returns what it printed to stdout.

    `env` is the probe's environment (None: hexlocal's own); the crash-dump variables
    are always added. Stops the probe after `timeout_s` seconds or `max_output` bytes.
    Cancellation kills the probe's group and propagates.
    """
    child_env = {**(os.environ if env is None else env), **PROBE_ENV}
    workdir = tempfile.mkdtemp(prefix="hexlocal-probe-")
    try:
        try:
            proc = await _start(argv, workdir, child_env)
        except OSError as exc:
            return ProbeRun("", None, f"could not start {argv[0]}: {exc.strerror or exc}")
        return await _supervise(proc, argv[0], timeout_s, max_output)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


async def _supervise(
    proc: asyncio.subprocess.Process, name: str, timeout_s: float, max_output: int
) -> ProbeRun:
    try:
        out, code = await asyncio.wait_for(_finish(proc, max_output), timeout_s)
    except TimeoutError:
        await _stop(proc)
        return ProbeRun("", None, f"{name} took longer than {timeout_s:g} s; stopped it")
    except _TooMuchOutput:
        await _stop(proc)
        return ProbeRun("", None, f"{name} printed more than {max_output} bytes; stopped it")
    except asyncio.CancelledError:
        # Reaped here, not left to the GC, so its pipes close with it. A second cancel
        # while it dies (milliseconds after SIGKILL) leaves the reaping to asyncio.
        with contextlib.suppress(asyncio.CancelledError):
            await _stop(proc)
        raise
    except BaseException:  # interrupted: never leave the probe running
        _kill_group(proc)
        raise
    finally:
        if proc.stdin is not None:  # EOF for the watcher: it sweeps what is left
            proc.stdin.close()
    return ProbeRun(out.decode("utf-8", errors="replace"), code)
