"""Bounded ways to drive a client process for scripts/smoke_clients.py: run to completion,
talk JSON lines over its stdio, or type into it through a pseudo-terminal; and the
clients' install into a private npm prefix.

Every process starts in a session of its own and is killed with its whole group when it
runs out of time or the caller is done, so the MCP servers a client started never
outlive the check.
"""

from __future__ import annotations

import json
import os
import pty
import queue
import re
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][A-Z0-9]")


class Failed(Exception):
    """A check failed; the message says what the client answered."""


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def kill_group(proc: subprocess.Popen[Any] | int) -> None:
    pid = proc if isinstance(proc, int) else proc.pid
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@dataclass
class Done:
    rc: int
    out: str
    err: str

    def tail(self, lines: int = 8) -> str:
        text = strip_ansi((self.out + "\n" + self.err).strip())
        return " | ".join(text.splitlines()[-lines:])


def run(
    cmd: Sequence[str], *, env: Mapping[str, str], cwd: Path, timeout: float, stdin: str = ""
) -> Done:
    """Runs to completion; on timeout the whole process group is killed (rc 124)."""
    proc = subprocess.Popen(
        list(cmd),
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
        return Done(124, out, err + f"\n(timed out after {timeout:.0f} s)")
    finally:
        kill_group(proc)  # what the command left running (a server it started)
    return Done(proc.returncode, out, err)


class JsonLines:
    """A process that speaks one JSON value per line on stdin/stdout."""

    def __init__(self, cmd: Sequence[str], env: Mapping[str, str], cwd: Path) -> None:
        self._proc = subprocess.Popen(
            list(cmd),
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        self._lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                continue  # a client's stray output line; the protocol's are JSON
            if isinstance(message, dict):
                self._lines.put(message)
        self._lines.put(None)

    def send(self, message: Mapping[str, Any]) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(message) + "\n")
        self._proc.stdin.flush()

    def wait_for(self, match: Callable[[dict[str, Any]], bool], timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no answer within {timeout:.0f} s")
            try:
                message = self._lines.get(timeout=left)
            except queue.Empty:
                continue
            if message is None:
                raise ConnectionError(f"the process exited ({self._proc.poll()})")
            if match(message):
                return message

    def call(self, method: str, params: Mapping[str, Any], timeout: float = 90.0) -> Any:
        """A JSON-RPC request (no "jsonrpc" member, as Codex's app-server speaks it)."""
        self._next_id += 1
        ident = self._next_id
        self.send({"id": ident, "method": method, "params": params})
        reply = self.wait_for(lambda m: m.get("id") == ident and "method" not in m, timeout)
        if "error" in reply:
            raise ConnectionError(f"{method}: {json.dumps(reply['error'])[:300]}")
        return reply.get("result")

    def __enter__(self) -> JsonLines:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._proc.stdin is not None:
            try:
                self._proc.stdin.close()
            except OSError:
                pass
        try:
            self._proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
        kill_group(self._proc)


def mcp_tools(cmd: Sequence[str], env: Mapping[str, str], cwd: Path, timeout: float) -> set[str]:
    """An MCP server's tool names: initialize, then tools/list, over stdio."""
    with JsonLines(cmd, env, cwd) as server:
        hello = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "hexlocal-smoke", "version": "0"},
        }
        server.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello})
        server.wait_for(lambda m: m.get("id") == 1, timeout)
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        server.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
        listed = server.wait_for(lambda m: m.get("id") == 2, timeout)
    return {tool["name"] for tool in listed.get("result", {}).get("tools", [])}


def terminal_session(
    cmd: Sequence[str],
    env: Mapping[str, str],
    cwd: Path,
    *,
    typed: str,
    done: Callable[[str], bool],
    timeout: float,
    retype_s: float = 6.0,
) -> str:
    """Runs an interactive program in a pseudo-terminal, types `typed`, then Enter a moment
    later (text and Enter in one write read as a paste), again every `retype_s` while
    `done(screen)` is false (what is typed before the program reads its input is lost),
    and returns the screen text, escapes stripped. The program and its children are
    killed at the end."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: a session leader with the terminal as its stdio
        try:
            os.chdir(cwd)
            os.execve(cmd[0], list(cmd), dict(env))
        finally:
            os._exit(127)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    next_type = time.monotonic() + retype_s
    enter_at: float | None = None
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    data = os.read(fd, 65536)
                except OSError:
                    break  # the program exited
                if not data:
                    break
                chunks.append(data)
            screen = strip_ansi(b"".join(chunks).decode("utf-8", "replace"))
            if done(screen):
                time.sleep(0.5)  # the rest of the answer (the tool list follows the header)
                chunks.append(_drain(fd))
                break
            now = time.monotonic()
            if enter_at is not None and now >= enter_at:
                os.write(fd, b"\r")
                enter_at = None
            elif now >= next_type:
                os.write(fd, typed.encode())
                enter_at, next_type = now + 1.0, now + retype_s
    finally:
        kill_group(pid)
        os.close(fd)
        os.waitpid(pid, 0)
    return strip_ansi(b"".join(chunks).decode("utf-8", "replace"))


def _drain(fd: int) -> bytes:
    out = b""
    while select.select([fd], [], [], 0.3)[0]:
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        out += data
    return out


# --------------------------------------------------------------------- the clients


def npm_install(prefix: Path, packages: Sequence[str], timeout: float) -> float:
    """The clients into a private prefix (npm's own registry settings apply); seconds."""
    npm = shutil.which("npm")
    if npm is None:
        raise Failed("npm is not installed (Node.js 20 or newer is needed)")
    prefix.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    done = run(
        [
            npm,
            "install",
            "--prefix",
            str(prefix),
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            *(f"{p}@latest" for p in packages),
        ],
        env=dict(os.environ),
        cwd=prefix,
        timeout=timeout,
    )
    if done.rc != 0:
        raise Failed(f"npm install exited {done.rc}: {done.tail()}")
    return round(time.perf_counter() - started, 1)


def versions(prefix: Path, packages: Mapping[str, str]) -> dict[str, str]:
    found = {}
    for client, package in packages.items():
        manifest = prefix / "node_modules" / package / "package.json"
        if manifest.is_file():
            found[client] = json.loads(manifest.read_text())["version"]
    return found


def node_major() -> int:
    node = shutil.which("node")
    if node is None:
        return 0
    done = run([node, "--version"], env=dict(os.environ), cwd=Path.cwd(), timeout=30)
    match = re.match(r"v(\d+)", done.out.strip())
    return int(match.group(1)) if match else 0
