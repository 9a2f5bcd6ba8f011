"""The MCP server as a client really runs it: `hexlocal serve` (this checkout's, run as
`python -m hexlocal_cli serve` with the repository on PYTHONPATH) spawned over stdio and
driven by the official `mcp` SDK client, against the fake hex.pm serving a real tarball,
with the real default build (local embedder; reranker off).

A tiny shim between client and server copies the server's stdout to a file, so the test
can check that stdout carried JSON-RPC and nothing else (one stray print breaks clients).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.fakes.fake_hex import FakeHex
from tests.support.mcp_servers import PACKAGE, VERSION, server_env
from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.integration

SHIM = """\
import subprocess, sys
with open(sys.argv[1], "wb") as tee:
    child = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE)
    out = sys.stdout.buffer
    while chunk := child.stdout.read1(65536):
        out.write(chunk)
        out.flush()
        tee.write(chunk)
        tee.flush()
    sys.exit(child.wait())
"""


async def test_serve_over_stdio_cites_hexdocs(fake_hex: FakeHex, tmp_path: Path) -> None:
    shim = tmp_path / "tee_shim.py"
    shim.write_text(SHIM)
    tee = tmp_path / "stdout.jsonl"
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(shim), str(tee), sys.executable, "-m", "hexlocal_cli", "serve"],
        env=server_env(fake_hex, tmp_path),
        cwd=str(REPO_ROOT),
    )
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                assert init.server_info.name == "hexlocal"
                names = {tool.name for tool in (await session.list_tools()).tools}
                assert {"search_docs", "get_docs", "remember", "recall"} <= names
                result = await session.call_tool(
                    "search_docs",
                    {"package": PACKAGE, "query": "checkout a worker"},
                    read_timeout_seconds=180,
                )
    errors = (tmp_path / "stderr.log").read_text()
    assert not result.is_error, (result.content, errors[-2000:])
    data = result.structured_content
    assert data is not None, result.content
    assert (data["version"], data["version_source"]) == (VERSION, "mix.lock")
    hits = {hit["ref"]: hit for hit in data["results"]}
    assert "NimblePool.html#checkout!/4" in hits, list(hits)
    cited = hits["NimblePool.html#checkout!/4"]
    assert cited["hexdocs_url"].startswith("https://")
    assert cited["hexdocs_url"].endswith(f"/{VERSION}/NimblePool.html#checkout!/4")
    assert len(fake_hex.requests_to(f"/repo/docs/{PACKAGE}-{VERSION}.tar.gz")) == 1

    lines = [line for line in tee.read_text().splitlines() if line.strip()]
    assert lines, "the server wrote nothing to stdout"
    for line in lines:
        message = json.loads(line)  # a stray print would fail here
        assert message.get("jsonrpc") == "2.0", line
    assert "hexlocal service ready" in (tmp_path / "mcp.log").read_text()
