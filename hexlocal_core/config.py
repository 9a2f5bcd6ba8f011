"""Settings: the only place hexlocal reads its environment.

Every knob has a default. A malformed value never stops hexlocal: it falls back to the
default and leaves one warning naming the variable, the bad value and the default used
(`Settings.warnings`, also logged). Secrets are kept in `Secret`, which never shows its
value in `repr`, `str`, logs or errors. `server_environment` and `user_dirs` read the rest
of what `hexlocal mcp-config` needs and hand it to `client_env.py`, which decides what a
client's config carries.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from attrs import evolve, field, frozen

from hexlocal_core.client_env import UserDirs, carried
from hexlocal_core.redact import redact_url

log = logging.getLogger("hexlocal.config")

T = TypeVar("T")

# int8: 1.8x fp32's ingestion speed, the same MRR@10 within a paired interval of
# [-0.008, +0.005] over 781 eval queries (docs/decisions/0009-int8-default-embedder.md). An
# index built by fp32 keeps it until `hexlocal reindex` (`Settings.served_with`).
DEFAULT_EMBED_MODEL = "sentence-transformers/all-MiniLM-L6-v2@int8"
DEFAULT_RERANK_MODEL = "cross-encoder/ms-marco-MiniLM-L6-v2"
DEFAULT_AI_API_URL = "https://api.mistral.ai/v1"
DEFAULT_HEX_API_URL = "https://hex.pm/api"
DEFAULT_HEX_MIRROR = "https://repo.hex.pm"
DEFAULT_GITHUB_API_URL = "https://api.github.com"
# Where Erlang/OTP releases publish their doc tarballs: {base}/OTP-{vsn}/otp_doc_html_{vsn}.tar.gz
DEFAULT_OTP_DOCS_MIRROR = "https://github.com/erlang/otp/releases/download"


@frozen(repr=False)
class Secret:
    """A value that must never be printed. `reveal()` is the one way to read it."""

    _value: str

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('****')" if self._value else "Secret('')"

    __str__ = __repr__

    def __bool__(self) -> bool:
        return bool(self._value)

    def masked(self) -> str:
        if not self._value:
            return "(unset)"
        return f"set ({len(self._value)} chars)"


def _user_data_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("hexlocal", appauthor=False))


def default_database_path(project_root: Path) -> Path:
    """One index per project: a file keyed by the resolved project root."""
    root = project_root.resolve()
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", root.name or "root").strip("-")[:40] or "root"
    key = hashlib.sha256(str(root).encode()).hexdigest()[:12]
    return _user_data_dir() / "indexes" / f"{slug}-{key}.db"


def default_threads() -> int:
    """The local embedder's threads unless EMBED_THREADS says otherwise: the cores this
    process may use, at most 4, so a first ingestion leaves the editor and the compiler
    room (measured only up to 2 cores: 1 -> 2 runs side by side, docs/lab/embedder.md)."""
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        usable = os.cpu_count() or 1
    return max(1, min(usable, 4))


class _Reader:
    """Reads typed values from an env mapping, collecting warnings for malformed ones."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env
        self.warnings: list[str] = []

    def raw(self, name: str) -> str | None:
        value = self.env.get(name)
        if value is None or value.strip() == "":
            return None
        return value.strip()

    def _fallback(self, name: str, value: str, default: T, why: str) -> T:
        msg = f"{name}={value!r} is not valid ({why}); using the default {default!r}"
        self.warnings.append(msg)
        log.warning(msg)
        return default

    def string(self, name: str, default: str) -> str:
        return self.raw(name) or default

    def integer(
        self, name: str, default: int, *, minimum: int = 0, maximum: int | None = None
    ) -> int:
        value = self.raw(name)
        if value is None:
            return default
        try:
            number = int(value)
        except ValueError:
            return self._fallback(name, value, default, "not a whole number")
        if number < minimum:
            return self._fallback(name, value, default, f"must be at least {minimum}")
        if maximum is not None and number > maximum:
            return self._fallback(name, value, default, f"must be at most {maximum}")
        return number

    def number(self, name: str, default: float, *, minimum: float, maximum: float) -> float:
        value = self.raw(name)
        if value is None:
            return default
        try:
            number = float(value)
        except ValueError:
            return self._fallback(name, value, default, "not a number")
        if not (minimum <= number <= maximum):
            return self._fallback(name, value, default, f"must be between {minimum} and {maximum}")
        return number

    def url(self, name: str, default: str) -> str:
        value = self.raw(name)
        if value is None:
            return default
        if not re.match(r"^https?://[^\s/]+", value):
            # A URL can carry credentials (https://user:token@mirror): never echo them.
            return self._fallback(name, redact_url(value), default, "not an http(s) URL")
        return value.rstrip("/")

    def postgres_url(self, name: str) -> str:
        value = self.raw(name)
        if not value:
            return ""
        if not re.match(r"^postgres(ql)?://", value):
            # Like any URL it may carry a password: never echo it.
            return self._fallback(
                name, redact_url(value), "", "not a postgresql:// URL; using the SQLite file"
            )
        return value

    def choice(self, name: str, default: str, choices: tuple[str, ...]) -> str:
        value = self.raw(name)
        if value is None:
            return default
        if value.lower() not in choices:
            return self._fallback(name, value, default, f"expected one of {', '.join(choices)}")
        return value.lower()

    def flag(self, name: str, default: bool) -> bool:
        value = self.raw(name)
        if value is None:
            return default
        lowered = value.lower()
        if lowered in _TRUE or lowered in _FALSE:
            return lowered in _TRUE
        return self._fallback(name, value, default, "expected true or false")

    def absolute_path(self, name: str) -> Path | None:
        value = self.raw(name)
        if value is None:
            return None
        path = Path(value).expanduser()
        if not path.is_absolute() or "\0" in value:
            # Relative to what? A server's working directory is whatever its client chose.
            return self._fallback(name, value, None, "not an absolute path")
        return path

    def path(self, name: str, default: Callable[[], Path]) -> Path:
        value = self.raw(name)
        return Path(value).expanduser() if value else default()


@frozen
class Settings:
    """Every knob of hexlocal; docs/settings.md (generated from this module) says what each
    variable means."""

    project_root: Path
    database_path: Path
    # Team mode: a PostgreSQL database with pgvector (`postgresql://...`); empty: SQLite.
    database_url: str = field(default="", repr=redact_url)
    server_id: str = ""  # team mode: whose usage a row is (empty: host:pid)
    ingest_timeout_ms: int = 25_000
    embed_batch_size: int = 200
    embed_concurrency: int = 2
    embed_pause_ms: int = 0
    embed_threads: int = field(factory=default_threads)  # the local embedder (EMBED_THREADS)
    ai_api_key: Secret = field(factory=lambda: Secret(""))
    ai_api_url: str = field(default=DEFAULT_AI_API_URL, repr=redact_url)
    ai_embed_model: str = DEFAULT_EMBED_MODEL
    embed_model_set: bool = False  # AI_EMBED_MODEL was given, not defaulted
    ai_chat_model_small: str = "mistral-small-latest"
    ai_chat_model_large: str = "mistral-large-latest"
    ai_rerank_model: str = DEFAULT_RERANK_MODEL
    hex_api_url: str = field(default=DEFAULT_HEX_API_URL, repr=redact_url)
    hex_mirror: str = field(default=DEFAULT_HEX_MIRROR, repr=redact_url)
    otp_docs_mirror: str = field(default=DEFAULT_OTP_DOCS_MIRROR, repr=redact_url)
    github_token: Secret = field(factory=lambda: Secret(""))
    github_api_url: str = field(default=DEFAULT_GITHUB_API_URL, repr=redact_url)
    embed_model_dir: Path | None = None  # a local folder with the embedder's files
    rerank_model_dir: Path | None = None  # a local folder with the cross-encoder's files
    model_cache_dir: Path = field(factory=lambda: _user_data_dir() / "models")
    max_docs_bytes: int = 200 * 1024 * 1024  # compressed and uncompressed tarball cap
    http_timeout_s: float = 30.0
    memory_create_below: float = 0.80
    memory_discard_above: float = 0.90
    memory_duplicate_at: float = 0.97
    mcp_log_file: Path | None = None
    mcp_log_level: str = "info"
    elixir_home: Path | None = None  # where Elixir's own libs live (else found from PATH)
    otp_root: Path | None = None  # an Erlang/OTP install root (else found from the project)
    sync_on_start: bool = True  # a long-lived process (the MCP server) syncs in the background
    sync_elixir: bool = True  # `sync` indexes Elixir's own apps too (elixir, eex, ex_unit, ...)
    sync_otp: bool = True  # and the OTP applications the project uses (erts, kernel, stdlib, ...)
    # A search of a package being indexed answers by keyword once its chunks are written,
    # rather than waiting (up to INGEST_TIMEOUT_MS) for its vectors.
    answer_while_embedding: bool = True
    # The bearer token `hexlocal serve --http` requires (HEXLOCAL_HTTP_TOKEN, or the first
    # line of HEXLOCAL_HTTP_TOKEN_FILE, which keeps it out of the process environment).
    http_token: Secret = field(factory=lambda: Secret(""))
    http_token_file: Path | None = None
    # After SIGTERM, how long calls in flight may run before they are cut off.
    http_shutdown_grace_s: float = 7.0
    warnings: tuple[str, ...] = ()

    @property
    def uses_local_embedder(self) -> bool:
        # `...@int8` names the same local model's int8 graph: local too, never the cloud API.
        base = self.ai_embed_model.removesuffix("@int8")
        return base in (DEFAULT_EMBED_MODEL.removesuffix("@int8"), "local", "all-MiniLM-L6-v2")

    def served_with(self, indexed_model: str | None) -> Settings:
        """The settings to serve an index whose vectors `indexed_model` made: while
        AI_EMBED_MODEL names no model, an index built by a local one keeps it, so a change
        of the default never turns an index's vector search off. `hexlocal reindex` moves
        it to the configured model (the default when AI_EMBED_MODEL is unset)."""
        if self.embed_model_set or not indexed_model or not indexed_model.startswith("local:"):
            return self
        kept = evolve(self, ai_embed_model=indexed_model.removeprefix("local:"))
        if not kept.uses_local_embedder or kept.ai_embed_model == self.ai_embed_model:
            return self
        log.info(
            "the index was embedded by %s: kept while AI_EMBED_MODEL is unset; "
            "`hexlocal reindex` moves it to %s",
            kept.ai_embed_model,
            self.ai_embed_model,
        )
        return kept

    @property
    def database_location(self) -> str:
        """Where the index is, as it may be shown: the file, or the URL without secrets."""
        return redact_url(self.database_url) if self.database_url else str(self.database_path)

    @property
    def rerank_enabled(self) -> bool:
        return self.ai_rerank_model.lower() not in ("off", "none", "false", "0", "")

    def describe(self) -> dict[str, str]:
        """Every setting as text for `doctor`, secrets masked."""
        out: dict[str, str] = {}
        for name in _ENV_NAMES:
            value = getattr(self, name.lower())
            if isinstance(value, Secret):
                out[name] = value.masked()
            else:
                out[name] = redact_url(value) if name == "DATABASE_URL" else str(value)
        return out

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        r = _Reader(os.environ if env is None else env)
        project_root = Path(r.string("PROJECT_ROOT", os.getcwd())).expanduser().resolve()
        values: dict[str, Any] = dict(
            project_root=project_root,
            database_path=r.path("DATABASE_PATH", lambda: default_database_path(project_root)),
            database_url=r.postgres_url("DATABASE_URL"),
            server_id=r.string("HEXLOCAL_SERVER_ID", "")[:200],
            ingest_timeout_ms=r.integer("INGEST_TIMEOUT_MS", 25_000, minimum=1, maximum=3_600_000),
            embed_batch_size=r.integer("EMBED_BATCH_SIZE", 200, minimum=1, maximum=10_000),
            embed_concurrency=r.integer("EMBED_CONCURRENCY", 2, minimum=1, maximum=64),
            embed_pause_ms=r.integer("EMBED_PAUSE_MS", 0, minimum=0, maximum=600_000),
            embed_threads=r.integer("EMBED_THREADS", default_threads(), minimum=1, maximum=64),
            ai_api_key=Secret(r.raw("AI_API_KEY") or ""),
            ai_api_url=r.url("AI_API_URL", DEFAULT_AI_API_URL),
            ai_embed_model=r.string("AI_EMBED_MODEL", DEFAULT_EMBED_MODEL),
            ai_chat_model_small=r.string("AI_CHAT_MODEL_SMALL", "mistral-small-latest"),
            ai_chat_model_large=r.string("AI_CHAT_MODEL_LARGE", "mistral-large-latest"),
            ai_rerank_model=r.string("AI_RERANK_MODEL", DEFAULT_RERANK_MODEL),
            hex_api_url=r.url("HEX_API_URL", DEFAULT_HEX_API_URL),
            hex_mirror=r.url("HEX_MIRROR", DEFAULT_HEX_MIRROR),
            otp_docs_mirror=r.url("OTP_DOCS_MIRROR", DEFAULT_OTP_DOCS_MIRROR),
            github_token=Secret(r.raw("GITHUB_TOKEN") or ""),
            github_api_url=r.url("GITHUB_API_URL", DEFAULT_GITHUB_API_URL),
            embed_model_dir=_opt_path(r.raw("HEXLOCAL_EMBED_MODEL_DIR")),
            rerank_model_dir=_opt_path(r.raw("HEXLOCAL_RERANK_MODEL_DIR")),
            model_cache_dir=r.path("HEXLOCAL_MODEL_CACHE", lambda: _user_data_dir() / "models"),
            max_docs_bytes=r.integer(
                "HEXLOCAL_MAX_DOCS_BYTES", 200 * 1024 * 1024, minimum=1024, maximum=4 * 1024**3
            ),
            http_timeout_s=r.number("HEXLOCAL_HTTP_TIMEOUT_S", 30.0, minimum=0.1, maximum=600.0),
            memory_create_below=r.number("MEMORY_CREATE_BELOW", 0.80, minimum=0.0, maximum=1.0),
            memory_discard_above=r.number("MEMORY_DISCARD_ABOVE", 0.90, minimum=0.0, maximum=1.0),
            memory_duplicate_at=r.number("MEMORY_DUPLICATE_AT", 0.97, minimum=0.0, maximum=1.0),
            mcp_log_file=_opt_path(r.raw("MCP_LOG_FILE")),
            elixir_home=_opt_path(r.raw("ELIXIR_HOME")),
            otp_root=r.absolute_path("HEXLOCAL_OTP_ROOT"),
            sync_on_start=r.flag("HEXLOCAL_SYNC_ON_START", True),
            sync_elixir=r.flag("HEXLOCAL_SYNC_ELIXIR", True),
            sync_otp=r.flag("HEXLOCAL_SYNC_OTP", True),
            answer_while_embedding=r.flag("HEXLOCAL_ANSWER_WHILE_EMBEDDING", True),
            http_token=_http_token(r),
            http_token_file=_opt_path(r.raw("HEXLOCAL_HTTP_TOKEN_FILE")),
            http_shutdown_grace_s=r.number(
                "HEXLOCAL_HTTP_SHUTDOWN_GRACE_S", 7.0, minimum=1.0, maximum=3600.0
            ),
            mcp_log_level=r.choice(
                "MCP_LOG_LEVEL", "info", ("debug", "info", "warning", "error", "critical")
            ),
        )
        values["embed_model_set"] = r.raw("AI_EMBED_MODEL") is not None
        if "ai_embed_model" in overrides:
            values["embed_model_set"] = True
        values.update(overrides)
        values["warnings"] = tuple(r.warnings)
        return cls(**values)


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _opt_path(value: str | None) -> Path | None:
    return Path(value).expanduser() if value else None


def _http_token(r: _Reader) -> Secret:
    """HEXLOCAL_HTTP_TOKEN, else the file HEXLOCAL_HTTP_TOKEN_FILE names (Docker/systemd
    secrets are files). An unreadable file leaves no token, and `serve --http` refuses to
    start without one, so a typo in the path cannot silently open the server."""
    token = r.raw("HEXLOCAL_HTTP_TOKEN")
    path = _opt_path(r.raw("HEXLOCAL_HTTP_TOKEN_FILE"))
    if token is not None:
        if path is not None:
            msg = "HEXLOCAL_HTTP_TOKEN and HEXLOCAL_HTTP_TOKEN_FILE are both set; using the first"
            r.warnings.append(msg)
            log.warning(msg)
        return Secret(token)
    if path is None:
        return Secret("")
    try:
        lines = path.read_text(encoding="utf-8").strip().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        msg = f"HEXLOCAL_HTTP_TOKEN_FILE={str(path)!r} cannot be read ({why}); no HTTP token set"
        r.warnings.append(msg)
        log.warning(msg)
        return Secret("")
    return Secret(lines[0].strip() if lines else "")


_ENV_NAMES = (
    "PROJECT_ROOT",
    "DATABASE_PATH",
    "DATABASE_URL",
    "INGEST_TIMEOUT_MS",
    "EMBED_BATCH_SIZE",
    "EMBED_CONCURRENCY",
    "EMBED_PAUSE_MS",
    "AI_API_KEY",
    "AI_API_URL",
    "AI_EMBED_MODEL",
    "AI_CHAT_MODEL_SMALL",
    "AI_CHAT_MODEL_LARGE",
    "AI_RERANK_MODEL",
    "HEX_API_URL",
    "HEX_MIRROR",
    "OTP_DOCS_MIRROR",
    "GITHUB_TOKEN",
    "GITHUB_API_URL",
    "MCP_LOG_FILE",
    "MCP_LOG_LEVEL",
)

# Every variable Settings reads; the test fixture clears these so the host never leaks in.
ENV_VARIABLES = _ENV_NAMES + (
    "HEXLOCAL_EMBED_MODEL_DIR",
    "HEXLOCAL_RERANK_MODEL_DIR",
    "HEXLOCAL_MODEL_CACHE",
    "HEXLOCAL_MAX_DOCS_BYTES",
    "HEXLOCAL_HTTP_TIMEOUT_S",
    "MEMORY_CREATE_BELOW",
    "MEMORY_DISCARD_ABOVE",
    "MEMORY_DUPLICATE_AT",
    "ELIXIR_HOME",
    "HEXLOCAL_OTP_ROOT",
    "HEXLOCAL_SYNC_ON_START",
    "HEXLOCAL_SYNC_ELIXIR",
    "HEXLOCAL_SYNC_OTP",
    "HEXLOCAL_ANSWER_WHILE_EMBEDDING",
    "HEXLOCAL_HTTP_TOKEN",
    "HEXLOCAL_HTTP_TOKEN_FILE",
    "HEXLOCAL_HTTP_SHUTDOWN_GRACE_S",
    "HEXLOCAL_SERVER_ID",
    "EMBED_THREADS",
)


def server_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables an MCP server of hexlocal reads that are set in `env` (default: this
    process's): `hexlocal mcp-config` carries them into a client's config."""
    return carried(os.environ if env is None else env, ENV_VARIABLES)


def user_dirs(env: Mapping[str, str] | None = None) -> UserDirs:
    """Where MCP clients keep their user-level configs, from HOME, XDG_CONFIG_HOME and
    CODEX_HOME in `env` (default: this process's)."""
    source = os.environ if env is None else env
    home = Path(source.get("HOME") or Path.home()).expanduser()
    return UserDirs.under(
        home, config_home=source.get("XDG_CONFIG_HOME"), codex_home=source.get("CODEX_HOME")
    )
