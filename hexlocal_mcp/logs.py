"""Logging for the MCP server: stderr always, plus MCP_LOG_FILE when it is set.

Over stdio, stdout belongs to the protocol: a single stray line there breaks the client.
So every logger hexlocal and its libraries write to (hexlocal, fastmcp, mcp) gets the
same two handlers and nothing else, and none of them propagates to the root logger,
where another library's handler could point at stdout.
"""

from __future__ import annotations

import logging
import sys

from hexlocal_core.config import Settings

LOGGERS = ("hexlocal", "fastmcp", "mcp", "uvicorn")  # uvicorn: `serve --http`
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

log = logging.getLogger("hexlocal.mcp")


def bootstrap() -> None:
    """Send warnings to stderr before Settings exist (Settings itself logs bad values)."""
    _install([_stderr_handler()], logging.WARNING)


def configure(settings: Settings) -> None:
    """Stderr and the optional log file, both at MCP_LOG_LEVEL."""
    level = logging.getLevelName(settings.mcp_log_level.upper())
    handlers: list[logging.Handler] = [_stderr_handler()]
    file_handler = _file_handler(settings)
    if file_handler is not None:
        handlers.append(file_handler)
    _install(handlers, level)
    if file_handler is not None:
        # Settings logged these while only stderr was listening; the file should keep them.
        for warning in settings.warnings:
            file_handler.handle(
                log.makeRecord(log.name, logging.WARNING, __file__, 0, warning, (), None)
            )


def _install(handlers: list[logging.Handler], level: int) -> None:
    for name in LOGGERS:
        logger = logging.getLogger(name)
        for old in list(logger.handlers):
            logger.removeHandler(old)
            old.close()
        for handler in handlers:
            logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate = False


def _stderr_handler() -> logging.Handler:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(FORMAT))
    return handler


def _file_handler(settings: Settings) -> logging.Handler | None:
    path = settings.mcp_log_file
    if path is None:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(path, encoding="utf-8")
    except OSError as exc:
        # A bad log path must not keep the server from starting; say so where it shows.
        log.warning("MCP_LOG_FILE=%s cannot be opened (%s); logging to stderr only", path, exc)
        return None
    handler.setFormatter(logging.Formatter(FORMAT))
    return handler
