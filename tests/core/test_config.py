"""Settings: defaults, malformed values fall back with one warning, secrets never shown."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from hexlocal_core.adapters.local_embedder import build_local_embedder
from hexlocal_core.config import Settings, default_database_path, default_threads


def test_defaults(tmp_path: Path) -> None:
    s = Settings.from_env({"PROJECT_ROOT": str(tmp_path)})
    assert s.ingest_timeout_ms == 25_000
    assert (s.embed_batch_size, s.embed_concurrency, s.embed_pause_ms) == (200, 2, 0)
    assert s.project_root == tmp_path.resolve()
    assert s.warnings == ()
    assert s.rerank_enabled and s.uses_local_embedder


@pytest.mark.parametrize(
    ("name", "value", "field", "default"),
    [
        ("INGEST_TIMEOUT_MS", "abc", "ingest_timeout_ms", 25_000),
        ("INGEST_TIMEOUT_MS", "-5", "ingest_timeout_ms", 25_000),
        ("EMBED_CONCURRENCY", "0", "embed_concurrency", 2),
        ("EMBED_BATCH_SIZE", "1.5", "embed_batch_size", 200),
        ("EMBED_PAUSE_MS", "-1", "embed_pause_ms", 0),
        ("EMBED_THREADS", "0", "embed_threads", default_threads()),
        ("EMBED_THREADS", "all", "embed_threads", default_threads()),
        ("HEX_API_URL", "not a url", "hex_api_url", "https://hex.pm/api"),
        ("MEMORY_CREATE_BELOW", "1.7", "memory_create_below", 0.80),
        ("MCP_LOG_LEVEL", "loud", "mcp_log_level", "info"),
        ("HEXLOCAL_OTP_ROOT", "usr/lib/erlang", "otp_root", None),  # relative to what?
    ],
)
def test_malformed_value_falls_back_with_one_warning(
    name: str, value: str, field: str, default: object, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="hexlocal.config"):
        s = Settings.from_env({name: value})
    assert getattr(s, field) == default
    assert len(s.warnings) == 1
    warning = s.warnings[0]
    assert name in warning and repr(value) in warning and repr(default) in warning
    assert [r.getMessage() for r in caplog.records] == [warning]


def test_secrets_never_shown(caplog: pytest.LogCaptureFixture) -> None:
    key, token = "sk-recognisable-SECRET-123", "ghp_recognisable_TOKEN_456"
    s = Settings.from_env({"AI_API_KEY": key, "GITHUB_TOKEN": token, "INGEST_TIMEOUT_MS": "x"})
    shown = repr(s) + str(s) + str(s.describe()) + " ".join(s.warnings) + caplog.text
    assert key not in shown and token not in shown
    assert s.ai_api_key.reveal() == key and s.github_token.reveal() == token
    assert s.describe()["AI_API_KEY"].startswith("set (")


def test_database_path_is_per_project(tmp_path: Path) -> None:
    a, b = tmp_path / "a" / "app", tmp_path / "b" / "app"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    pa, pb = default_database_path(a), default_database_path(b)
    assert pa != pb and pa.name.startswith("app-")
    assert Settings.from_env({"PROJECT_ROOT": str(a)}).database_path == pa
    assert (
        Settings.from_env({"DATABASE_PATH": str(tmp_path / "x.db")}).database_path
        == tmp_path / "x.db"
    )


@pytest.mark.parametrize("variable", ["HEX_MIRROR", "HEX_API_URL", "GITHUB_API_URL", "AI_API_URL"])
def test_url_credentials_never_reach_repr_or_warnings(variable: str) -> None:
    good = Settings.from_env({variable: "https://user:hunter2pass@mirror.test/r?token=tok3nvalue"})
    bad = Settings.from_env({variable: "ftp://user:hunter2pass@mirror.test/?token=tok3nvalue"})
    shown = repr(good) + repr(bad) + " ".join(bad.warnings)
    assert bad.warnings, "a non-http URL falls back with a warning"
    assert "hunter2pass" not in shown and "tok3nvalue" not in shown


def test_the_local_embedder_runs_on_embed_threads() -> None:
    # Defaults to the usable cores, at most 4; int8 runs that many texts side by side.
    assert 1 <= default_threads() <= 4
    assert Settings.from_env({}).embed_threads == default_threads()
    embedder = build_local_embedder(Settings.from_env({"EMBED_THREADS": "3"}))
    assert embedder.options.threads == 3
    assert embedder.options.parallel_runs == 3  # int8, the default model
    assert embedder.options.session_threads == 1
