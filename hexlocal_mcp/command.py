"""The `hexlocal-mcp` command: the MCP server on stdio, or over HTTP with --http.

It chooses the transport and nothing else: `server.py` builds the server both share,
`stdio.py` and `http.py` carry it. Kept apart from them so that neither transport module
imports the other's entry point (no import circle between the server and HTTP).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
from collections.abc import Sequence

import anyio

from hexlocal_core.config import Settings
from hexlocal_mcp import logs, stdio
from hexlocal_mcp.server import create_server, exit_soon, server_version

log = logging.getLogger("hexlocal.mcp")

USAGE = """\
Usage: hexlocal-mcp [--help | --version | --http [--host H] [--port P] [--no-auth]]

  hexlocal's MCP server on stdio: an MCP client (Claude Code, Cursor, ...) starts it and
  talks JSON-RPC over stdin/stdout until it closes stdin. Logs go to stderr (and to
  MCP_LOG_FILE). Settings come from the environment: PROJECT_ROOT, DATABASE_PATH, ...;
  `hexlocal doctor` shows them resolved. `hexlocal serve` is the same server.

  With --http it serves the same tools over MCP's streamable HTTP at /mcp until SIGTERM,
  with a bearer token from HEXLOCAL_HTTP_TOKEN (or HEXLOCAL_HTTP_TOKEN_FILE) and an open
  GET /health; see docs/deployment.md.

Options:
  -h, --help  Show this message and exit.
  --version   Show the version and exit.
  --http      Serve over streamable HTTP instead of stdio.
  --host H    Address to bind with --http (default 127.0.0.1).
  --port P    Port to bind with --http (default 8765; 0 picks a free one).
  --no-auth   With --http on a loopback address only: no token required.
"""


def main(argv: Sequence[str] | None = None) -> None:
    """The `hexlocal-mcp` console script: serve on stdio until the client closes stdin.

    `--help` and `--version` print and exit instead: a person trying the command must not
    be left facing a silent server waiting for JSON-RPC. Any other argument is refused
    (exit 2), since the server takes its settings from the environment only.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if "--http" in args:
        raise SystemExit(_serve_http(args))
    if args:
        raise SystemExit(_answer_argv(args))
    logs.bootstrap()
    settings = Settings.from_env()
    logs.configure(settings)
    log.info("hexlocal MCP server starting (database %s)", settings.database_location)
    server = create_server(settings=settings)
    with contextlib.suppress(KeyboardInterrupt), stdio.claimed_stdio() as (in_fd, out_fd):
        anyio.run(
            functools.partial(stdio.serve, server, in_fd=in_fd, out_fd=out_fd, on_eof=exit_soon)
        )


def _serve_http(args: Sequence[str]) -> int:
    import argparse

    from hexlocal_mcp import http

    parser = argparse.ArgumentParser(prog="hexlocal-mcp", add_help=False)
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--host", default=http.DEFAULT_HOST)
    parser.add_argument("--port", type=int, default=http.DEFAULT_PORT)
    parser.add_argument("--no-auth", action="store_true")
    parsed = parser.parse_args(list(args))  # a bad argument: usage on stderr, exit 2
    if not 0 <= parsed.port <= 65535:
        parser.error(f"--port {parsed.port} is not a port (0-65535)")
    options = http.HttpOptions(host=parsed.host, port=parsed.port, no_auth=parsed.no_auth)
    return http.run(options)


def _answer_argv(args: Sequence[str]) -> int:
    """The exit code for a command line with arguments (help and version go to stdout)."""
    if args[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0
    if args[0] == "--version":
        sys.stdout.write(f"hexlocal-mcp, version {server_version()}\n")
        return 0
    shown = args[0].encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    sys.stderr.write(
        f"{USAGE.splitlines()[0]}\nError: unexpected argument {shown[:60]!r}; the server "
        "takes no arguments (settings come from the environment, see `hexlocal doctor`)\n"
    )
    return 2
