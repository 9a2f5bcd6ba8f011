"""client_env: what a client's config carries, from the values config.py read."""

from __future__ import annotations

from pathlib import Path

from hexlocal_core.client_env import UserDirs, carried, is_secret
from hexlocal_core.config import ENV_VARIABLES, server_environment, user_dirs


def test_carried_keeps_set_variables_in_order_without_the_http_only_ones() -> None:
    env = {
        "HF_HOME": "/hf",
        "AI_API_KEY": "k",
        "HEXLOCAL_HTTP_TOKEN": "t",  # only `serve --http` reads it
        "EMBED_BATCH_SIZE": "  ",  # blank: not set
        "PATH": "/bin",  # not hexlocal's
    }
    assert carried(env, ENV_VARIABLES) == {"AI_API_KEY": "k", "HF_HOME": "/hf"}
    assert server_environment(env) == carried(env, ENV_VARIABLES)


def test_a_secret_is_named_as_one_or_carries_credentials_in_a_url() -> None:
    assert is_secret("GITHUB_TOKEN", "plain")
    assert is_secret("HTTPS_PROXY", "http://user:pw@proxy:3128")
    assert not is_secret("HTTPS_PROXY", "http://proxy:3128")


def test_user_dirs_default_under_home_unless_their_variables_say(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert UserDirs.under(home, config_home=" ", codex_home=None) == UserDirs(
        home, home / ".config", home / ".codex"
    )
    env = {"HOME": str(home), "CODEX_HOME": str(tmp_path / "codex")}
    assert user_dirs(env) == UserDirs(home, home / ".config", tmp_path / "codex")
