"""What an MCP client's config must carry for a hexlocal server, and where clients keep it.

    carried             the variables a stdio server reads that are set in an environment
    SERVER_ENV_EXTRA    what the server reads besides Settings' own (the hub, proxies, CAs)
    is_secret           a value not to be written into a config file unasked
    PATH_VARIABLES      values made absolute before they are written (clients start elsewhere)
    UserDirs            the folders clients keep their user-level configs in

`hexlocal mcp-config` is its one reader. Apart from `config.py` because it changes with the
MCP clients (what one drops of the shell's environment, where one keeps its file), not with
hexlocal's own settings; and it is given values, never the environment itself: `config.py`
stays the one module that reads that (`config.server_environment`, `config.user_dirs`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from attrs import frozen

from hexlocal_core.redact import redact_url

# Variables the MCP server reads besides Settings' own: huggingface_hub's (where models come
# from and are cached), the user dirs the default index and caches derive from, and what
# the HTTP stacks take from the environment (proxies, the CA bundle). An MCP client that
# drops the shell's environment (Codex, Gemini CLI) must be handed these in its config.
SERVER_ENV_EXTRA = (
    "HF_ENDPOINT",
    "HF_HUB_OFFLINE",
    "HF_HOME",
    "HF_HUB_CACHE",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
    "https_proxy",
    "http_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
)
# Only `serve --http` reads these; a stdio server started by a client never does.
HTTP_ONLY = ("HEXLOCAL_HTTP_TOKEN", "HEXLOCAL_HTTP_TOKEN_FILE", "HEXLOCAL_HTTP_SHUTDOWN_GRACE_S")
# Values that are credentials, whatever they look like; any other value that is a URL with
# credentials in it (a proxy with user:password) counts as one too.
SECRET_VARIABLES = frozenset({"AI_API_KEY", "GITHUB_TOKEN", "DATABASE_URL"})
# Values that are paths: a client may start the server in another directory, so a relative
# one is made absolute before it is written into a client's config.
PATH_VARIABLES = frozenset(
    {
        "PROJECT_ROOT",
        "DATABASE_PATH",
        "MCP_LOG_FILE",
        "HEXLOCAL_EMBED_MODEL_DIR",
        "HEXLOCAL_RERANK_MODEL_DIR",
        "HEXLOCAL_MODEL_CACHE",
        "ELIXIR_HOME",
        "HF_HOME",
        "HF_HUB_CACHE",
        "XDG_DATA_HOME",
        "XDG_CACHE_HOME",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
    }
)


def carried(env: Mapping[str, str], settings_variables: Iterable[str]) -> dict[str, str]:
    """The variables a stdio server of hexlocal reads that are set (non-blank) in `env`, in
    a fixed order: `settings_variables` (Settings' own, less the HTTP-only ones), then
    SERVER_ENV_EXTRA."""
    names = [n for n in settings_variables if n not in HTTP_ONLY] + list(SERVER_ENV_EXTRA)
    return {name: env[name] for name in names if env.get(name, "").strip()}


def is_secret(name: str, value: str) -> bool:
    """Whether a variable's value must not be written into a config file unasked."""
    return name in SECRET_VARIABLES or redact_url(value) != value


@frozen
class UserDirs:
    """Where MCP clients keep their user-level configs (`hexlocal mcp-config`)."""

    home: Path
    config_home: Path  # XDG_CONFIG_HOME, else ~/.config (Zed, opencode)
    codex_home: Path  # CODEX_HOME, else ~/.codex

    @classmethod
    def under(cls, home: Path, *, config_home: str | None, codex_home: str | None) -> UserDirs:
        """The folders for `home`, each overridden by its variable's value when set."""

        def folder(value: str | None, default: Path) -> Path:
            value = (value or "").strip()
            return Path(value).expanduser() if value else default

        return cls(
            home=home,
            config_home=folder(config_home, home / ".config"),
            codex_home=folder(codex_home, home / ".codex"),
        )
