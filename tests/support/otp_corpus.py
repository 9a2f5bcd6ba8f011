"""The shared corpus's real Erlang/OTP files (`../shared/corpus/otp/`), extracted for a test
session: installs of OTP 25 (`.chunk` files), 27 and 29 (docs in the beams) and the OTP 27
ExDoc HTML tree. Without the corpus a test skips (locally) or fails (under CI)."""

from __future__ import annotations

import json
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import OTP_CORPUS, shared

OTP25, OTP27, OTP29 = "otp-25.2.3", "otp-27.3.4.1", "otp-29.1.2"
HTML27 = "otp_doc_html_27.3.4.1"
# application -> its folder in the installs (erts sits under lib/ there) and in the HTML tree
APPS25 = {"erts": "erts-13.1.5", "kernel": "kernel-8.5.3", "stdlib": "stdlib-4.2"}
APPS25["crypto"] = "crypto-5.1.2"
APPS27 = {"erts": "erts-15.2.7", "kernel": "kernel-10.2.7.1", "stdlib": "stdlib-6.2.2.1"}
APPS29 = {"erts": "erts-17.1.1", "kernel": "kernel-11.0.4", "stdlib": "stdlib-8.1.1"}


def extract(
    factory: pytest.TempPathFactory, name: str, wanted: Callable[[str], bool] | None = None
) -> Path:
    """`<name>.tar.gz` of the corpus extracted under a fresh tmp dir (only the members
    `wanted` accepts); `shared`'s rule when the corpus is not there."""
    tarball = shared(OTP_CORPUS / f"{name}.tar.gz", "the OTP corpus")
    dest = factory.mktemp(name.replace(".", "_"))
    with tarfile.open(tarball) as tar:
        members = [m for m in tar.getmembers() if wanted is None or wanted(m.name)]
        tar.extractall(dest, members=members, filter="data")
    return dest


def install(factory: pytest.TempPathFactory, release: str) -> Path:
    """The install root of one release (`<tmp>/otp-27.3.4.1`)."""
    return extract(factory, f"{release}-install") / release


def html_dir(html_root: Path, app: str) -> Path:
    """An application's ExDoc folder in the OTP 27 HTML tree."""
    folder = APPS27[app]
    return html_root / (folder if app == "erts" else f"lib/{folder}") / "doc" / "html"


def search_items(html_root: Path, app: str) -> list[dict[str, Any]]:
    """ExDoc's search data of one application (`dist/search_data-*.js`)."""
    (path,) = (html_dir(html_root, app) / "dist").glob("search_data-*.js")
    text = path.read_text(encoding="utf-8")
    items: list[dict[str, Any]] = json.loads(text[text.index("=") + 1 :])["items"]
    return items
