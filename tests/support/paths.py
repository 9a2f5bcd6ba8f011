"""Where the tests find the checkout and the shared data, and what a missing piece means.

The shared data (`../shared`, or `HEXLOCAL_SHARED`) holds the real corpus most tests read.
Locally a test that needs a missing piece is skipped with the path it looked at; under CI
(`CI=true`) it fails instead: a green CI run must have tested everything, not skipped a
third of the suite because a folder was not laid beside the checkout.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("HEXLOCAL_SHARED", REPO_ROOT.parent / "shared"))
CORPUS = SHARED / "corpus"
HEXDOCS = CORPUS / "hexdocs"
HEXAPI = CORPUS / "hexapi"
MIXLOCK = CORPUS / "mixlock"
OTP_CORPUS = CORPUS / "otp"
REFERENCE = SHARED / "reference"
SHARED_EVAL = SHARED / "eval"
MODEL_CACHE = REPO_ROOT / ".hexlocal-cache" / "models"


def in_ci() -> bool:
    """CI services set CI=true (GitHub Actions, this project's .ci/run runner)."""
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def missing_shared(what: str, path: Path) -> NoReturn:
    """Skips the test (locally) or fails it (under CI), naming what is missing and where."""
    message = (
        f"{what} not found at {path}: lay the shared data at {SHARED}"
        " (or point HEXLOCAL_SHARED at it)"
    )
    if in_ci():
        pytest.fail(f"{message}; under CI a missing piece of shared data fails the run")
    pytest.skip(message)


def shared(path: Path, what: str) -> Path:
    """`path` (inside the shared data) when it exists, else `missing_shared`."""
    if not path.exists():
        missing_shared(what, path)
    return path
