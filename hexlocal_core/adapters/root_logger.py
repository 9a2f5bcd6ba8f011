"""Calling a library that configures logging behind the caller's back."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator


@contextlib.contextmanager
def root_logger_untouched() -> Iterator[None]:
    """quantize_dynamic gives advice with module-level `logging.warning`, which prints it on
    every user's first run and, on a root logger with no handler, calls `basicConfig`: a
    stderr handler on the root logger for the rest of the process. While it runs, a handler
    that writes nothing keeps `basicConfig` away, and a filter drops what is logged on the
    root logger itself (hexlocal's and other libraries' named loggers are not touched)."""
    root = logging.getLogger()
    guard = logging.NullHandler()
    advice = logging.Filter("hexlocal.never")  # passes no record logged on the root logger
    root.addHandler(guard)
    root.addFilter(advice)
    try:
        yield
    finally:
        root.removeFilter(advice)
        root.removeHandler(guard)
