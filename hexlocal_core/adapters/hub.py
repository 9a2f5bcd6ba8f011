"""Downloading a model repo's files from the Hugging Face hub, with huggingface_hub.

The only module that touches the hub over the network. It lists the repo once
(`GET {endpoint}/api/models/{repo}/revision/{rev}`, which also gives file sizes for
progress), then fetches each wanted file with `hf_hub_download` (`HEAD` then `GET
{endpoint}/{repo}/resolve/{rev}/{file}`) into the standard hub cache, where
`try_to_load_from_cache` finds it afterwards. huggingface_hub writes each file to a
unique temporary name and renames it into place, so an interrupted or short download
never leaves a corrupt file in the cache.

huggingface_hub reads HF_ENDPOINT, HF_HOME and HF_HUB_OFFLINE once, at import; hexlocal
reads them at call time (`HubConfig.from_env`) and passes endpoint and cache explicitly.

Its own retries can keep a stalled request going for minutes (60 s HEAD timeouts with
backoff), so the download runs in a daemon thread watched here: no progress for
`stall_timeout_s` ends the wait with a ModelError (the thread's partial file is discarded
by huggingface_hub when it finally gives up).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from attrs import frozen

from hexlocal_core.errors import ModelError

log = logging.getLogger("hexlocal.adapters.hub")

# progress(message, bytes done, bytes total): total 0 when the hub did not say. Called from
# a worker thread; the CLI prints it on stderr, the MCP server relays it as progress.
ProgressFn = Callable[[str, int, int], None]

_TRUE = ("1", "true", "yes", "on")


@frozen
class HubConfig:
    """Where and how to reach the hub; `from_env` reads the variables huggingface_hub uses."""

    cache_dir: Path  # the hub cache (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/...)
    endpoint: str | None = None  # HF_ENDPOINT; None: huggingface_hub's default
    offline: bool = False  # HF_HUB_OFFLINE: never touch the network
    revision: str = "main"
    request_timeout_s: float = 10.0  # the listing and each HEAD
    stall_timeout_s: float = 120.0  # no progress for this long ends the download

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> HubConfig:
        env = os.environ if env is None else env
        values: dict[str, Any] = {
            "cache_dir": hub_cache_dir(env),
            "endpoint": (env.get("HF_ENDPOINT") or "").strip().rstrip("/") or None,
            "offline": (env.get("HF_HUB_OFFLINE") or "").strip().lower() in _TRUE,
        }
        values.update(overrides)
        return cls(**values)

    @property
    def endpoint_text(self) -> str:
        return self.endpoint or "the Hugging Face hub"


def hub_cache_dir(env: Mapping[str, str]) -> Path:
    """The folder huggingface_hub itself would use, by the same precedence."""
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "hub"
    xdg = env.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(xdg).expanduser() / "huggingface" / "hub"


@frozen
class RepoPlan:
    """Which files to fetch: every `required` one, and each `optional` one the repo has."""

    required: tuple[str, ...]
    optional: tuple[str, ...] = ()

    def pick(self, listed: Sequence[str]) -> tuple[str, ...]:
        return self.required + tuple(f for f in self.optional if f in listed)


def download(
    repo: str,
    plans: Sequence[RepoPlan],
    config: HubConfig,
    progress: ProgressFn | None = None,
) -> dict[str, Path]:
    """Fetch the files of the first plan the repo satisfies; returns filename -> path.

    Raises ModelError naming the repo and the endpoint on any failure (absent repo or
    file, HTTP error, unreachable host, short body, stall).
    """
    if config.offline:
        raise ModelError(f"cannot download {repo}: HF_HUB_OFFLINE forbids network access")
    job = _Download(repo, plans, config, progress or _no_progress)
    worker = threading.Thread(target=job.run, name=f"hub-download {repo}", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(timeout=min(0.2, config.stall_timeout_s))
        idle = time.monotonic() - job.last_progress
        if worker.is_alive() and idle > config.stall_timeout_s:
            job.abort.set()
            raise ModelError(
                f"downloading {repo} from {config.endpoint_text} stalled (no data for "
                f"{config.stall_timeout_s:g} s); check the network, proxy or HF_ENDPOINT"
            )
    if job.error is not None:
        raise job.error
    return job.paths


def _no_progress(message: str, done: int, total: int) -> None:
    return None


class _Aborted(Exception):
    """Raised inside huggingface_hub's read loop once the waiter gave up."""


class _Download:
    """One repo's download, run in a worker thread; the waiter reads its fields."""

    def __init__(
        self, repo: str, plans: Sequence[RepoPlan], config: HubConfig, progress: ProgressFn
    ) -> None:
        self.repo = repo
        self.plans = plans
        self.config = config
        self.progress = progress
        self.abort = threading.Event()
        self.last_progress = time.monotonic()
        self.error: ModelError | None = None
        self.paths: dict[str, Path] = {}
        self._done = 0
        self._total = 0
        self._current = ""

    def run(self) -> None:
        try:
            self._run()
        except ModelError as exc:
            self.error = exc
        except Exception as exc:  # huggingface_hub and httpx raise many types
            self.error = ModelError(describe_failure(exc, self.repo, self.config))
            self.error.__cause__ = exc

    def _run(self) -> None:
        listed, sizes = self._listing()
        wanted = self._choose(listed)
        self._total = sum(sizes.get(f, 0) for f in wanted)
        for filename in wanted:
            self._current = filename
            self._report(f"downloading {self.repo}: {filename}")
            self.paths[filename] = self._fetch(filename)
        self._report(f"downloaded {self.repo}")

    def _listing(self) -> tuple[list[str], dict[str, int]]:
        from huggingface_hub import HfApi

        api = HfApi(endpoint=self.config.endpoint)
        info = api.model_info(
            self.repo,
            revision=self.config.revision,
            files_metadata=True,
            timeout=self.config.request_timeout_s,
        )
        siblings = info.siblings or []
        self.touch()
        return [s.rfilename for s in siblings], {s.rfilename: s.size or 0 for s in siblings}

    def _choose(self, listed: list[str]) -> tuple[str, ...]:
        for plan in self.plans:
            if all(f in listed for f in plan.required):
                return plan.pick(listed)
        wanted = " or ".join(" + ".join(p.required) for p in self.plans)
        raise ModelError(
            f"{self.repo} on {self.config.endpoint_text} has none of the files hexlocal "
            f"can use ({wanted})"
        )

    def _fetch(self, filename: str) -> Path:
        from huggingface_hub import hf_hub_download

        path = hf_hub_download(
            self.repo,
            filename,
            revision=self.config.revision,
            cache_dir=str(self.config.cache_dir),
            endpoint=self.config.endpoint,
            etag_timeout=self.config.request_timeout_s,
            tqdm_class=cast(Any, self._bar_class()),
        )
        return Path(path)

    def _bar_class(self) -> type[_Bar]:
        job = self

        class Bar(_Bar):
            owner = job

        return Bar

    def touch(self) -> None:
        self.last_progress = time.monotonic()

    def advance(self, n: int) -> None:
        if self.abort.is_set():
            raise _Aborted(f"the download of {self.repo} was abandoned")
        self._done += n
        self._report(f"downloading {self.repo}: {self._current}")

    def _report(self, message: str) -> None:
        self.touch()
        try:
            self.progress(message, self._done, max(self._total, self._done))
        except Exception:  # a broken progress display must not break the download
            log.debug("progress callback failed", exc_info=True)


class _Bar:
    """Stands in for tqdm in huggingface_hub's read loop: counts bytes for `_Download`."""

    owner: _Download

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.owner.touch()

    def update(self, n: float | None = 1) -> None:
        self.owner.advance(int(n or 0))

    def close(self) -> None:
        return None

    def __enter__(self) -> _Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def describe_failure(exc: BaseException, repo: str, config: HubConfig) -> str:
    """One line naming the repo, the endpoint and what went wrong; the caller adds the fix."""
    from huggingface_hub import errors as hf

    where = config.endpoint_text
    status = _status_of(exc)
    if isinstance(exc, hf.RevisionNotFoundError):
        reason = f"{where} has no revision {config.revision!r} of {repo}"
    elif isinstance(exc, hf.RepositoryNotFoundError):
        reason = f"{where} has no model repository {repo} (HTTP {status})"
    elif isinstance(exc, hf.RemoteEntryNotFoundError):
        reason = f"{where} has no such file in {repo} (HTTP {status})"
    elif isinstance(exc, hf.HfHubHTTPError):
        reason = f"{where} answered HTTP {status} for {repo}"
    elif isinstance(exc, OSError) and "Consistency check failed" in str(exc):
        reason = f"a file of {repo} arrived cut short from {where} (nothing was kept)"
    elif isinstance(exc, hf.LocalEntryNotFoundError | ConnectionError) or _transport(exc):
        reason = f"cannot reach {where} for {repo} ({_root_cause(exc)})"
    else:
        reason = f"downloading {repo} from {where} failed: {type(exc).__name__}: {exc}"
        return reason.splitlines()[0]
    return f"downloading {repo} failed: {reason}"


def _transport(exc: BaseException) -> bool:
    import httpx2

    return isinstance(exc, httpx2.TransportError)


def _root_cause(exc: BaseException) -> str:
    while exc.__cause__ is not None:
        exc = exc.__cause__
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _status_of(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    code = getattr(response, "status_code", None)
    return str(code) if code is not None else "?"
