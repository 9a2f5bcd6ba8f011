"""The MCP server as a separate process: its environment (a project locking nimble_pool,
the fake hex.pm, the checkout under test on PYTHONPATH), and the HTTP transport's
port, bearer token, health wait and client."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import httpx2
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.fakes.fake_hex import FakeHex
from tests.support.paths import REPO_ROOT
from tests.support.waiting import eventually

PACKAGE = "nimble_pool"
VERSION = "1.1.0"
LOCK = (
    '%{\n  "nimble_pool": {:hex, :nimble_pool, "1.1.0", '
    '"af2e4e6b34197db81f7aad230c1118eac993acc0dae6bc83bac0126d4ae0813a", [:mix], [], '
    '"hexpm", "2fb6de9cb7d0c4ab6d5fba2b3a2a1f3c4d5e6f708192a3b4c5d6e7f8091a2b3c"},\n}\n'
)


def server_env(fake: FakeHex, tmp_path: Path) -> dict[str, str]:
    project = tmp_path / "project"
    project.mkdir()
    (project / "mix.lock").write_text(LOCK)
    keep = ("HEXLOCAL_MODEL_CACHE", "XDG_DATA_HOME", "XDG_CACHE_HOME", "HOME", "PATH")
    env = {name: os.environ[name] for name in keep if name in os.environ}
    env.update(
        PYTHONPATH=str(REPO_ROOT),  # the checkout under test, not whatever is installed
        HF_HUB_OFFLINE="1",
        HEX_API_URL=fake.api_url,
        HEX_MIRROR=fake.mirror_url,
        PROJECT_ROOT=str(project),
        DATABASE_PATH=str(tmp_path / "index.db"),
        AI_RERANK_MODEL="off",
        INGEST_TIMEOUT_MS="120000",
        MCP_LOG_FILE=str(tmp_path / "mcp.log"),
        MCP_LOG_LEVEL="debug",
    )
    return env


TOKEN = "test-token-0123456789-abcdefghij"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Running:
    def __init__(self, process: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.process = process
        self.base = f"http://127.0.0.1:{port}"
        self.log = log

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]


async def wait_healthy(running: Running, timeout: float = 60.0) -> httpx2.Response:
    """The server's /health answering 200; fails at once when the process has exited."""
    async with httpx2.AsyncClient() as client:

        async def healthy() -> httpx2.Response | None:
            assert running.process.poll() is None, running.stderr()
            try:
                response = await client.get(f"{running.base}/health")
            except httpx2.TransportError:
                return None
            return response if response.status_code == 200 else None

        return await eventually(
            healthy,
            what=f"{running.base}/health answering 200",
            timeout=timeout,
            every=0.2,
            detail=running.stderr,
        )


def mcp_http_client(token: str | None) -> httpx2.AsyncClient:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return create_mcp_http_client(headers=headers)
