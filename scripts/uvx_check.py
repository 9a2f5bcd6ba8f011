"""The uvx form a user is given, checked and timed: `hexlocal mcp-config ... --uvx-from
<wheel>` fills uv's cache (its one run with a network) and writes `uvx --offline --from
<wheel> hexlocal-mcp`; that command must then start with every network route closed, and
about as fast as the installed `hexlocal-mcp`.

Used by scripts/fresh_venv.py (`make smoke`, which asserts the offline start) and
benchmarks/bench_client_start.py (which times each form). uv comes from the package index
(`pip install uv`) into a cached venv. The first run installs hexlocal's dependencies from
uv's configured index, as a user's does, or from the cached wheelhouse served as a
package index on loopback (`simple_index`); the offline start then finds that index gone,
as a user's laptop finds its index unreachable, and every proxy closed.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

# A closed port: any request uv makes for an index fails at once.
NO_NETWORK = "http://127.0.0.1:9"
PROTOCOL = "2025-06-18"


class UvxError(Exception):
    """A step of the uvx form failed; the message says which and what uv said."""


def uv_tools(cache: Path, python: str) -> Path:
    """A cached venv with uv in it (from the package index); its bin folder."""
    venv = cache / "uv-tools"
    done = venv / ".complete"
    if not done.exists():
        subprocess.run([python, "-m", "venv", str(venv)], check=True, capture_output=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "uv"]
        subprocess.run(pip, check=True, capture_output=True, timeout=600)
        done.touch()
    return venv / "bin"


def uv_env(
    base: Mapping[str, str], uv_bin: Path, uv_cache: Path, python: str, index: str | None
) -> dict[str, str]:
    """A shell with uv on PATH, its cache in `uv_cache`, the interpreter pinned (the
    wheelhouse is for this Python; uv would otherwise pick one, or download one), and
    `index` as its package index (None: uv's configured one)."""
    env = dict(base)
    env["PATH"] = f"{uv_bin}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
    env.update(UV_CACHE_DIR=str(uv_cache), UV_PYTHON=python, UV_PYTHON_DOWNLOADS="never")
    if index is not None:
        env["UV_DEFAULT_INDEX"] = index
    return env


def offline(env: Mapping[str, str]) -> dict[str, str]:
    """The same shell with every proxy closed: any request uv makes fails at once. The
    index URL is kept: uv's cache is keyed by it, as a user's stays the same offline."""
    closed = dict(env)
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy"):
        closed[name] = NO_NETWORK
    closed.pop("NO_PROXY", None)
    closed.pop("no_proxy", None)
    return closed


@contextmanager
def simple_index(house: Path) -> Iterator[str]:
    """The wheelhouse as a PEP 503 package index on loopback, while the block runs."""
    root = Path(tempfile.mkdtemp(prefix="hexlocal-index-"))
    (root / "files").symlink_to(house)
    projects: dict[str, list[str]] = {}
    for wheel in sorted(house.glob("*.whl")):
        name = re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()
        projects.setdefault(name, []).append(wheel.name)
    for name, files in projects.items():
        page = root / "simple" / name / "index.html"
        page.parent.mkdir(parents=True)
        links = "".join(f'<a href="../../files/{f}">{f}</a>\n' for f in files)
        page.write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    finally:
        server.shutdown()
        server.server_close()
        shutil.rmtree(root, ignore_errors=True)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def end_headers(self) -> None:
        # As the real index's pages once their max-age (10 minutes) is over: uv must ask
        # again on each start, so a start without network shows what it does then.
        self.send_header("Cache-Control", "max-age=0, must-revalidate")
        super().end_headers()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def generated_command(hexlocal: Path, wheel: Path, env: Mapping[str, str], cwd: Path) -> list[str]:
    """`hexlocal mcp-config claude-code --uvx-from <wheel>`: the command it writes (its
    uv cache filled on the way)."""
    done = subprocess.run(
        [str(hexlocal), "mcp-config", "claude-code", "--uvx-from", str(wheel)],
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    if done.returncode != 0:
        raise UvxError(f"mcp-config --uvx-from exited {done.returncode}: {done.stderr[-600:]}")
    entry = json.loads(done.stdout)["mcpServers"]["hexlocal"]
    command = [entry["command"], *entry["args"]]
    if "--offline" not in command:
        raise UvxError(f"the uvx form is not offline: {command}")
    return command


def initialize_s(
    command: list[str], env: Mapping[str, str], cwd: Path, timeout: float = 120
) -> float:
    """Seconds from spawn to the MCP initialize answer (the start a client waits for)."""
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "hexlocal-smoke", "version": "0"},
        },
    }
    errors = tempfile.TemporaryFile(mode="w+")
    started = time.perf_counter()
    proc = subprocess.Popen(
        command,
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errors,
        text=True,
        start_new_session=True,  # uvx runs the server as its child: both end together
    )
    assert proc.stdin is not None and proc.stdout is not None
    watchdog = threading.Timer(timeout, _kill_group, (proc,))  # a hung start ends the read
    watchdog.start()
    try:
        proc.stdin.write(json.dumps(hello) + "\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        while line and '"id":1' not in line.replace(" ", ""):
            line = proc.stdout.readline()  # a notification before the answer
        seconds = time.perf_counter() - started
    finally:
        watchdog.cancel()
        proc.stdin.close()  # the server's signal to shut down
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            pass
        _kill_group(proc)
    if '"result"' not in line:
        errors.seek(0)
        said = errors.read().strip()[-600:]
        raise UvxError(f"`{' '.join(command)}` gave no initialize answer: {said}")
    return seconds


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
