"""The README stays a user's page and says what the code does: under 200 lines, its
commands are real commands, its settings are real settings, and the numbers it gives for
the search pipeline are the code's own (it once said "top 15" while the arms took 30)."""

from __future__ import annotations

import re

import click

from hexlocal_cli.main import cli
from hexlocal_core.bounds import MAX_LIMIT
from hexlocal_core.config import ENV_VARIABLES
from hexlocal_core.search.tuning import ARM_DEPTH, POOL, RRF_K, SearchTuning
from tests.support.paths import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_is_under_200_lines() -> None:
    assert len(README.splitlines()) < 200


def test_every_command_shown_exists() -> None:
    blocks = "\n".join(re.findall(r"^```sh\n(.*?)^```", README, re.M | re.S))
    shown = set(re.findall(r"^hexlocal ([a-z][a-z-]*)", blocks, re.M))
    ctx = click.Context(cli)
    assert isinstance(cli, click.Group)
    assert shown and shown <= set(cli.list_commands(ctx))


def test_every_setting_named_exists() -> None:
    named = set(re.findall(r"`((?:AI|HEX|HEXLOCAL|DATABASE|PROJECT|MCP)_[A-Z_]+)`", README))
    assert named and named <= set(ENV_VARIABLES)


def test_the_pipeline_numbers_are_the_codes() -> None:
    tuning = SearchTuning()
    facts = [
        f"return their best {ARM_DEPTH} chunks",
        f"reciprocal rank (k = {RRF_K})",
        f"toward the first fusion's top {tuning.feedback_depth}",
        f"re-orders the first {tuning.learned_depth} fused candidates",
        f"the pool is cut at {POOL}",
        f"up to {MAX_LIMIT} with `limit`",
    ]
    flat = " ".join(README.split())
    assert [fact for fact in facts if fact not in flat] == []
