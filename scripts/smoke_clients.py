"""The MCP clients people use, each asked with its own commands whether it reaches hexlocal
and sees its tools, without a model key (`make clients`, run by CI after `make smoke`).

The clients that come from npm are installed into a private prefix (npm through its
configured registry). Everything else lives in a temp dir: HOME, the XDG dirs, CODEX_HOME,
a Mix project. Each client's entry is written by `hexlocal mcp-config CLIENT --write` of
this checkout's venv, with MCP_LOG_FILE set so the server's first log line says which
index it opened: that proves the entry's env reached the server, and (the index file is
named after the project) that it runs for the right project. Per client:

  claude-code  .mcp.json, the folder trusted and the server approved in its settings files:
               `claude mcp get hexlocal` says Connected, and the stream-json control
               request `mcp_status` (the Agent SDK's) lists the tools; then the
               `claude mcp add-json --scope user` command mcp-config prints, from a second
               project with no .mcp.json
  codex        ~/.codex/config.toml: `codex mcp list --json` shows it; its app-server
               (JSON-RPC over stdio) starts a thread in the project and
               `mcpServerStatus/list` returns the tools
  gemini       .gemini/settings.json, the folder trusted: `gemini mcp list` says Connected;
               its interactive `/mcp list` (in a pseudo-terminal; a placeholder key, no
               prompt is ever sent) lists the tools
  opencode     opencode.json: `opencode mcp list` says connected, which opencode only says
               once the server answered tools/list

    python scripts/smoke_clients.py [--only NAME,...] [--keep] [--json FILE]

Exit 1 when any check fails; every step is bounded by a timeout.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO))

from smoke_drivers import (  # noqa: E402
    Failed,
    JsonLines,
    mcp_tools,
    node_major,
    npm_install,
    run,
    strip_ansi,
    terminal_session,
    versions,
)

PACKAGES = {
    "claude-code": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
    "gemini": "@google/gemini-cli",
    "opencode": "opencode-ai",
}
NPM_TIMEOUT_S = 600.0
STEP_TIMEOUT_S = 90.0
# What the clients' commands inherit from the caller; the rest is set here, so no key or
# setting of the host reaches them.
PASSED_ENV = ("PATH", "LANG", "LC_ALL", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR")
FAKE_TOKEN = "smoke-not-a-token"  # shows how each client's entry carries a secret


@dataclass
class Step:
    client: str
    check: str
    ok: bool
    seconds: float
    detail: str = ""


@dataclass
class Report:
    steps: list[Step] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    install_s: float = 0.0

    @property
    def ok(self) -> bool:
        return bool(self.steps) and all(s.ok for s in self.steps)


class Smoke:
    def __init__(self, work: Path, prefix: Path, python: Path, report: Report) -> None:
        self.work = work
        self.bin = prefix / "node_modules" / ".bin"
        self.python = python
        self.report = report
        self.home = work / "home"
        self.project = work / "my_app"
        self.tools: set[str] = set()
        self.logs: dict[str, Path] = {}  # client -> the MCP_LOG_FILE of its last entry
        for folder in (self.home, self.project, work / "logs"):
            folder.mkdir(parents=True)
        (self.project / "mix.exs").write_text("defmodule MyApp.MixProject do\nend\n")

    # --------------------------------------------------------------------- plumbing

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
        env.update(
            HOME=str(self.home),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_DATA_HOME=str(self.home / ".local" / "share"),
            XDG_CACHE_HOME=str(self.home / ".cache"),
            CODEX_HOME=str(self.home / ".codex"),
            TERM="xterm-256color",
            HF_HUB_OFFLINE="1",
            HEXLOCAL_SYNC_ON_START="false",
            GITHUB_TOKEN=FAKE_TOKEN,
            # No update checks, telemetry or other traffic the checks do not need.
            DISABLE_AUTOUPDATER="1",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            OPENCODE_DISABLE_AUTOUPDATE="1",
            NO_UPDATE_NOTIFIER="1",
        )
        env.update(extra)
        return env

    def step(self, client: str, check: str, fn: Callable[[], str]) -> bool:
        started = time.perf_counter()
        try:
            detail, ok = fn(), True
        except Exception as exc:  # noqa: BLE001 - any surprise is this check's failure
            detail, ok = (
                f"{type(exc).__name__}: {exc}" if not isinstance(exc, Failed) else str(exc),
                False,
            )
        seconds = round(time.perf_counter() - started, 1)
        self.report.steps.append(Step(client, check, ok, seconds, detail))
        mark = "ok" if ok else "FAILED"
        print(f"{client:12} {check:34} {mark:6} {seconds:5.1f} s  {detail[:200]}", flush=True)
        return ok

    def mcp_config(self, client: str, *args: str, cwd: Path | None = None) -> str:
        log = self.work / "logs" / f"{'-'.join([client, *(a.lstrip('-') for a in args)])}.log"
        done = run(
            [str(self.python.parent / "hexlocal"), "mcp-config", client, *args],
            env=self.env(MCP_LOG_FILE=str(log)),
            cwd=cwd or self.project,
            timeout=STEP_TIMEOUT_S,
        )
        if done.rc != 0:
            raise Failed(f"mcp-config exited {done.rc}: {done.err.strip()[-400:]}")
        self.logs[client] = log
        return done.out.strip()

    def expect_log(self, client: str, project: Path) -> str:
        """The server's first log line names the index of `project`: its env arrived."""
        from hexlocal_core.config import default_database_path

        os.environ["XDG_DATA_HOME"] = self.env()["XDG_DATA_HOME"]
        expected = default_database_path(project)
        log = self.logs[client]
        text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        if f"(database {expected})" not in text:
            starts = [line for line in text.splitlines() if "server starting" in line]
            raise Failed(
                f"no server start on {expected} in {log.name}: {starts[-1:] or text[-300:]}"
            )
        return f"the server ran for {project.name}, env carried"

    def client(
        self, name: str, *args: str, cwd: Path | None = None, both: bool = False, **env: str
    ) -> str:
        done = run(
            [str(self.bin / name), *args],
            env=self.env(**env),
            cwd=cwd or self.project,
            timeout=STEP_TIMEOUT_S,
        )
        if done.rc != 0:
            raise Failed(f"`{name} {' '.join(args)}` exited {done.rc}: {done.tail()}")
        # Some clients print their lists on stderr (Gemini CLI's `mcp list`).
        return strip_ansi(done.out + ("\n" + done.err if both else ""))

    def same_tools(self, seen: set[str]) -> str:
        if seen != self.tools:
            missing, extra = sorted(self.tools - seen), sorted(seen - self.tools)
            raise Failed(f"tools differ: missing {missing}, unexpected {extra}")
        return f"{len(seen)} tools: {', '.join(sorted(seen))}"

    # ----------------------------------------------------------------------- checks

    def baseline(self) -> str:
        """hexlocal's own tools/list, which every client must show."""
        command = [str(self.python.parent / "hexlocal-mcp")]
        env = self.env(PROJECT_ROOT=str(self.project))
        self.tools = mcp_tools(command, env, self.project, STEP_TIMEOUT_S)
        if not self.tools:
            raise Failed("hexlocal-mcp listed no tools")
        return f"{len(self.tools)} tools"

    def claude(self) -> None:
        name = "claude-code"
        self.trust_claude(self.project)
        if not self.step(name, "mcp-config --write", lambda: self.mcp_config(name, "--write")):
            return
        self.step(name, "claude mcp get hexlocal", lambda: self.connected("claude", "Connected"))
        self.step(name, "stream-json mcp_status tools", lambda: self.claude_tools(self.project))
        self.step(name, "server log", lambda: self.expect_log(name, self.project))
        second = self.work / "other_app"
        second.mkdir()
        (second / "mix.exs").write_text("defmodule OtherApp.MixProject do\nend\n")
        self.trust_claude(second)
        args = ("--add-json", "--scope", "user")

        def add_json() -> str:
            line = self.mcp_config(name, *args, cwd=second).strip()
            parts = shlex.split(line)  # one shell line, as a user pastes it
            if parts[:3] != ["claude", "mcp", "add-json"]:
                raise Failed(f"not a claude command: {line[:120]}")
            return self.client("claude", *parts[1:], cwd=second).strip()

        if self.step(name, "claude mcp add-json --scope user", add_json):
            self.step(name, "user scope: tools", lambda: self.claude_tools(second))
            self.step(name, "user scope: server log", lambda: self.expect_log(name, second))

    def trust_claude(self, project: Path) -> None:
        """What accepting Claude Code's folder-trust dialog and approving the project's
        .mcp.json server write: `hasTrustDialogAccepted` in ~/.claude.json, and
        `enabledMcpjsonServers` in the project's .claude/settings.local.json."""
        state_file = self.home / ".claude.json"
        state = json.loads(state_file.read_text()) if state_file.exists() else {}
        state.setdefault("projects", {})[str(project.resolve())] = {"hasTrustDialogAccepted": True}
        state_file.write_text(json.dumps(state))
        settings = project / ".claude" / "settings.local.json"
        settings.parent.mkdir(exist_ok=True)
        settings.write_text(json.dumps({"enabledMcpjsonServers": ["hexlocal"]}))

    def connected(self, binary: str, word: str, *args: str) -> str:
        out = self.client(binary, *(args or ("mcp", "get", "hexlocal")), both=True)
        lines = [line.strip() for line in out.splitlines() if "hexlocal" in line or word in line]
        if not any(word in line for line in lines):
            raise Failed(f"no {word!r}: {' | '.join(lines)[:300] or out[-300:]}")
        return next((line for line in lines if word in line), "")

    def claude_tools(self, project: Path) -> str:
        """The Agent SDK's `mcp_status` control request: no prompt, so no model call."""
        command = [str(self.bin / "claude"), "-p", "--verbose"]
        command += ["--input-format", "stream-json", "--output-format", "stream-json"]
        with JsonLines(command, self.env(), project) as session:
            session.send(
                {
                    "type": "control_request",
                    "request_id": "init",
                    "request": {"subtype": "initialize"},
                }
            )
            session.wait_for(lambda m: m.get("type") == "control_response", STEP_TIMEOUT_S)
            deadline = time.monotonic() + STEP_TIMEOUT_S
            status: dict[str, Any] = {}
            for attempt in range(10_000):
                session.send(
                    {
                        "type": "control_request",
                        "request_id": f"s{attempt}",
                        "request": {"subtype": "mcp_status"},
                    }
                )
                reply = session.wait_for(_control_reply(f"s{attempt}"), STEP_TIMEOUT_S)
                servers = reply["response"]["response"].get("mcpServers") or []
                status = next((s for s in servers if s.get("name") == "hexlocal"), {})
                if status.get("status") not in (None, "pending") or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
        if status.get("status") != "connected":
            raise Failed(f"hexlocal is {status.get('status')}: {json.dumps(status)[:300]}")
        return self.same_tools({tool["name"] for tool in status.get("tools") or []})

    def codex(self) -> None:
        name = "codex"
        if not self.step(name, "mcp-config --write", lambda: self.mcp_config(name, "--write")):
            return

        def listed() -> str:
            servers = json.loads(self.client("codex", "mcp", "list", "--json"))
            entry = next((s for s in servers if s.get("name") == "hexlocal"), None)
            if entry is None or not entry.get("enabled"):
                raise Failed(f"not listed as enabled: {json.dumps(servers)[:300]}")
            transport = entry["transport"]
            return f"{transport['command']}, env_vars {transport.get('env_vars')}"

        self.step(name, "codex mcp list --json", listed)
        self.step(name, "app-server mcpServerStatus/list", self.codex_tools)
        self.step(name, "server log", lambda: self.expect_log(name, self.project))

    def codex_tools(self) -> str:
        with JsonLines([str(self.bin / "codex"), "app-server"], self.env(), self.project) as rpc:
            rpc.call("initialize", {"clientInfo": {"name": "hexlocal-smoke", "version": "0"}})
            rpc.send({"method": "initialized"})
            # A thread is a session in the project: servers start there, as in the TUI.
            thread = rpc.call("thread/start", {"cwd": str(self.project), "ephemeral": True})
            params = {
                "threadId": thread["thread"]["id"],
                "serverName": "hexlocal",
                "detail": "toolsAndAuthOnly",
            }
            deadline = time.monotonic() + STEP_TIMEOUT_S
            while True:
                data = rpc.call("mcpServerStatus/list", params).get("data") or []
                server = next((s for s in data if s.get("name") == "hexlocal"), {})
                if server.get("tools") or server.get("toolsError"):
                    break
                if time.monotonic() > deadline:
                    raise Failed(
                        f"no tools within {STEP_TIMEOUT_S:.0f} s: {json.dumps(data)[:300]}"
                    )
                time.sleep(0.5)
        if server.get("toolsError"):
            raise Failed(f"tool discovery failed: {server['toolsError']}")
        return self.same_tools(set(server["tools"]))

    def gemini(self) -> None:
        name = "gemini"
        trusted = self.home / ".gemini" / "trustedFolders.json"
        trusted.parent.mkdir(parents=True, exist_ok=True)
        trusted.write_text(json.dumps({str(self.project.resolve()): "TRUST_FOLDER"}))
        if not self.step(name, "mcp-config --write", lambda: self.mcp_config(name, "--write")):
            return
        self.step(
            name, "gemini mcp list", lambda: self.connected("gemini", "Connected", "mcp", "list")
        )
        self.step(name, "interactive /mcp list tools", self.gemini_tools)
        self.step(name, "server log", lambda: self.expect_log(name, self.project))

    def gemini_tools(self) -> str:
        ready = re.compile(r"hexlocal - Ready \((\d+) tools?\)")
        env = self.env(GEMINI_API_KEY="placeholder-never-sent")
        screen = terminal_session(
            [str(self.bin / "gemini")],
            env,
            self.project,
            typed="/mcp list",
            done=lambda text: bool(ready.search(text)),
            timeout=STEP_TIMEOUT_S,
        )
        found = ready.search(screen)
        if not found:
            raise Failed(f"no 'hexlocal - Ready' in /mcp list: {screen[-400:]!r}")
        tail = screen[found.start() :]
        return self.same_tools(set(re.findall(r"mcp_hexlocal_(\w+)", tail)))

    def opencode(self) -> None:
        name = "opencode"
        if not self.step(name, "mcp-config --write", lambda: self.mcp_config(name, "--write")):
            return
        self.step(
            name,
            "opencode mcp list (tools/list ok)",
            lambda: self.connected("opencode", "connected", "mcp", "list"),
        )
        self.step(name, "server log", lambda: self.expect_log(name, self.project))


def _control_reply(request_id: str) -> Callable[[Mapping[str, Any]], bool]:
    def matches(message: Mapping[str, Any]) -> bool:
        response = message.get("response") or {}
        return (
            message.get("type") == "control_response" and response.get("request_id") == request_id
        )

    return matches


# ---------------------------------------------------------------------------- setup


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated clients (default: all)")
    parser.add_argument("--prefix", type=Path, help="npm prefix (default: a cache folder)")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir")
    parser.add_argument("--json", type=Path, help="also write the report as JSON here")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    chosen = args.only.split(",") if args.only else list(PACKAGES)
    unknown = set(chosen) - set(PACKAGES)
    if unknown:
        parser.error(f"unknown clients: {', '.join(sorted(unknown))}")
    python = Path(os.environ.get("PYTHON", REPO / ".venv" / "bin" / "python")).absolute()
    if not (python.parent / "hexlocal").is_file():
        parser.error(f"{python.parent / 'hexlocal'} not found; run `make setup` first")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hexlocal-smoke"
    prefix = (args.prefix or cache / "mcp-clients").absolute()
    report = Report()
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="hexlocal-clients-"))
    try:
        if node_major() < 20:
            raise Failed("Node.js 20 or newer is needed (Gemini CLI's minimum)")
        print(f"npm install into {prefix} ...", flush=True)
        report.install_s = npm_install(prefix, [PACKAGES[c] for c in chosen], NPM_TIMEOUT_S)
        report.versions = versions(prefix, {c: PACKAGES[c] for c in chosen})
        print(f"installed in {report.install_s:.1f} s: {report.versions}", flush=True)
        smoke = Smoke(work, prefix, python, report)
        if smoke.step("hexlocal", "tools/list", smoke.baseline):
            checks = {
                "claude-code": smoke.claude,
                "codex": smoke.codex,
                "gemini": smoke.gemini,
                "opencode": smoke.opencode,
            }
            for client in chosen:
                checks[client]()
    except Failed as exc:
        report.steps.append(Step("setup", "prerequisites", False, 0.0, str(exc)))
        print(f"FAILED: {exc}", flush=True)
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    total = time.perf_counter() - started
    failed = [f"{s.client}: {s.check}" for s in report.steps if not s.ok]
    print(f"total {total:.1f} s (npm install {report.install_s:.1f} s)")
    print("clients: OK" if report.ok else f"clients: FAILED ({'; '.join(failed)})")
    if args.json:
        args.json.write_text(json.dumps(asdict(report), indent=2) + "\n", encoding="utf-8")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
