"""Downloading a model repo's files from the Hugging Face hub, with huggingface_hub.

The only module that touches the hub over the network. It lists the repo once at the
revision asked for (`GET {endpoint}/api/models/{repo}/revision/{rev}`, which also gives
file sizes for progress), then fetches each wanted file with `hf_hub_download` (`HEAD
{endpoint}/{repo}/resolve/{rev}/{file}`, then the bytes: a plain `GET` for a small file,
or through `hf_xet` from Xet storage when the HEAD names a Xet hash, as it does for the
real hub's weights) into the standard hub cache, where `try_to_load_from_cache` finds it
afterwards. huggingface_hub writes each file to a unique temporary name and renames it
into place, so an interrupted or short download never leaves a file a later run takes
as complete. A renamed repo is followed through the hub's redirect.

huggingface_hub reads HF_ENDPOINT, HF_HOME and HF_HUB_OFFLINE once, at import; hexlocal
reads them at call time (`HubConfig.from_env`) and passes endpoint and cache explicitly.

Its own retries can keep a stalled request going for minutes (60 s HEAD timeouts with
backoff, hf_xet's 300 s reads), so the download runs in a daemon thread watched here: no
new bytes for `stall_timeout_s` ends the wait with a ModelError. Progress reaches the
watch through `_Bar`, which huggingface_hub and hf_xet's reporter drive as if it were
tqdm. An abandoned Xet transfer is cancelled (huggingface_hub's own abort for Ctrl-C); a
plain one ends at huggingface_hub's read timeout. Either way its temporary file goes.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, cast

from attrs import frozen

from hexlocal_core.errors import ModelError
from hexlocal_core.model import DownloadProgress

log = logging.getLogger("hexlocal.adapters.hub")


_TRUE = ("1", "true", "yes", "on")


@frozen
class HubConfig:
    """Where and how to reach the hub; `from_env` reads the variables huggingface_hub uses."""

    cache_dir: Path  # the hub cache (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/...)
    endpoint: str | None = None  # HF_ENDPOINT; None: huggingface_hub's default
    offline: bool = False  # HF_HUB_OFFLINE: never touch the network
    request_timeout_s: float = 10.0  # the listing and each HEAD
    stall_timeout_s: float = 120.0  # no new bytes for this long ends the download

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
    progress: DownloadProgress | None = None,
    *,
    revision: str = "main",
) -> dict[str, Path]:
    """Fetch the files of the first plan the repo satisfies at `revision` (a branch, a tag
    or a commit hash); returns filename -> path in the hub cache.

    Raises ModelError naming the repo and the endpoint on any failure (absent repo,
    revision or file, HTTP error, unreachable host, redirect loop, short body, stall).
    """
    if config.offline:
        raise ModelError(f"cannot download {repo}: HF_HUB_OFFLINE forbids network access")
    job = _Download(repo, revision, plans, config, progress or _no_progress)
    worker = threading.Thread(target=job.run, name=f"hub-download {repo}", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(timeout=min(0.2, config.stall_timeout_s))
        if worker.is_alive() and job.idle_s() > config.stall_timeout_s:
            job.abandon()
            raise ModelError(
                f"downloading {repo} from {config.endpoint_text} stalled (no data for "
                f"{config.stall_timeout_s:g} s); check the network, proxy or HF_ENDPOINT"
            )
    if job.error is not None:
        raise job.error
    return job.paths


def _no_progress(message: str, done: int, total: int) -> None:
    return None


class _Download:
    """One repo's download, run in a worker thread; the waiter reads its fields.

    Bytes are counted per file, from the bars huggingface_hub opens for it: a file's
    progress is the furthest any of its bars got (bytes written, or bytes received when
    hf_xet's transfer runs ahead of its writes), never more than the file's listed size,
    and a finished file counts its size once. Any new byte, on any bar, is liveness.
    """

    def __init__(
        self,
        repo: str,
        revision: str,
        plans: Sequence[RepoPlan],
        config: HubConfig,
        progress: DownloadProgress,
    ) -> None:
        self.repo = repo
        self.revision = revision
        self.plans = plans
        self.config = config
        self.progress = progress
        self.error: ModelError | None = None
        self.paths: dict[str, Path] = {}
        self._lock = threading.Lock()
        self._abandoned = False
        self._last_progress = time.monotonic()
        self._sizes: dict[str, int] = {}
        self._total = 0
        self._finished = 0  # bytes of the files already fetched
        self._current = ""
        self._current_done = 0  # the current file's furthest bar, capped at its size

    def run(self) -> None:
        try:
            self._run()
        except ModelError as exc:
            self.error = exc
        except Exception as exc:  # huggingface_hub, httpx2 and hf_xet raise many types
            self.error = ModelError(describe_failure(exc, self.repo, self.config, self.revision))
            self.error.__cause__ = exc

    def idle_s(self) -> float:
        return time.monotonic() - self._last_progress

    def abandon(self) -> None:
        """The waiter gave up: report nothing more, and stop a Xet transfer now."""
        with self._lock:
            self._abandoned = True
        _XET.cancel_transfers()

    def _run(self) -> None:
        listed = self._listing()
        wanted = self._choose(listed)
        self._total = sum(self._sizes.get(f, 0) for f in wanted)
        for filename in wanted:
            with self._lock:
                self._current, self._current_done = filename, 0
            self._report(f"downloading {self.repo}: {filename}")
            path = self._fetch(filename)
            self.paths[filename] = path
            with self._lock:
                self._finished += self._sizes.get(filename) or path.stat().st_size
                self._current_done = 0
        self._report(f"downloaded {self.repo}")

    def _listing(self) -> list[str]:
        from huggingface_hub import HfApi

        api = HfApi(endpoint=self.config.endpoint)
        info = api.model_info(
            self.repo,
            revision=self.revision,
            files_metadata=True,
            timeout=self.config.request_timeout_s,
        )
        siblings = info.siblings or []
        self._sizes = {s.rfilename: s.size or 0 for s in siblings}
        self._touch()
        return [s.rfilename for s in siblings]

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
        """One file; once more when another download's stall cancelled its Xet transfer
        (hf_xet can only cancel every transfer of the process at once)."""
        cancels = _XET.cancels
        try:
            return self._hf_hub_download(filename)
        except Exception:
            if self._abandoned or _XET.cancels == cancels:
                raise
            log.info("a Xet transfer of %s was cancelled by another download; again", filename)
        return self._hf_hub_download(filename)

    def _hf_hub_download(self, filename: str) -> Path:
        from huggingface_hub import hf_hub_download

        path = hf_hub_download(
            self.repo,
            filename,
            revision=self.revision,
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

    def _touch(self) -> None:
        self._last_progress = time.monotonic()

    def moved(self, bar: _Bar, step: int) -> None:
        """A bar of the current file counted `step` bytes (negative: huggingface_hub
        rewound a resumed file the server sent again from its start)."""
        if step > 0:
            self._touch()
        with self._lock:
            reached = max(bar.n, bar.transferred)
            size = self._sizes.get(self._current, 0)
            if size:
                reached = min(reached, size)
            if reached <= self._current_done:
                return
            self._current_done = reached
        self._report(f"downloading {self.repo}: {self._current}")

    def _report(self, message: str) -> None:
        self._touch()
        with self._lock:
            if self._abandoned:
                return
            done = self._finished + self._current_done
        try:
            self.progress(message, done, max(self._total, done))
        except Exception:  # a broken progress display must not break the download
            log.debug("progress callback failed", exc_info=True)


class _Bar:
    """tqdm, as far as huggingface_hub and hf_xet's reporter use it: counts bytes for
    `_Download`, shows nothing, and never raises (hf_xet prints an exception from its
    progress callback on stderr and stops reporting, which would starve the stall watch).

    `update` counts bytes written to the file; `update_transfer` bytes received (on the
    Xet path the two differ: chunks arrive, then the file is reconstructed). Having
    `update_transfer` makes huggingface_hub's Xet reporter drive this one bar for both,
    rather than open a second bar for the transfer.
    """

    owner: ClassVar[_Download]
    _lock: ClassVar[threading.RLock] = threading.RLock()

    def __init__(
        self,
        iterable: Any = None,
        desc: str | None = None,
        total: float | None = None,
        *args: Any,
        initial: float = 0,
        **kwargs: Any,
    ) -> None:
        self.iterable = iterable
        self.desc = desc or ""
        self.total = total
        self.n = int(initial or 0)
        self.transferred = self.n
        self.postfix = ""
        self.transfer_postfix = ""
        self.unit = str(kwargs.get("unit", "it"))
        self.disable = False
        self.closed = False
        self.started = time.monotonic()

    def update(self, n: float | None = 1) -> bool | None:
        step = int(n or 0)
        self.n += step
        self._moved(step)
        return None

    def update_transfer(self, n: float | None = 1) -> None:
        step = int(n or 0)
        self.transferred += step
        self._moved(step)

    def _moved(self, step: int) -> None:
        try:
            self.owner.moved(self, step)
        except Exception:  # never into huggingface_hub's or hf_xet's loop
            log.debug("counting progress failed", exc_info=True)

    def reset(self, total: float | None = None) -> None:
        self.n = self.transferred = 0
        if total is not None:
            self.total = total

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        self.postfix = str(s)

    def set_transfer_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        self.transfer_postfix = str(s)

    def set_postfix(
        self, ordered_dict: Mapping[str, Any] | None = None, refresh: bool = True, **kwargs: Any
    ) -> None:
        items = {**(ordered_dict or {}), **kwargs}
        self.postfix = ", ".join(f"{k}={v}" for k, v in items.items())

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        self.desc = desc or ""

    def set_description_str(self, desc: str | None = None, refresh: bool = True) -> None:
        self.desc = desc or ""

    @property
    def format_dict(self) -> dict[str, Any]:
        elapsed = time.monotonic() - self.started
        rate = self.n / elapsed if elapsed > 0 and self.n > 0 else None
        return {
            "n": self.n,
            "total": self.total,
            "elapsed": elapsed,
            "rate": rate,
            "unit": self.unit,
            "prefix": self.desc,
            "postfix": self.postfix,
        }

    def refresh(self, nolock: bool = False, lock_args: Any = None) -> None:
        return None

    def clear(self, nolock: bool = False) -> None:
        return None

    def display(self, msg: str | None = None, pos: int | None = None) -> None:
        return None

    def unpause(self) -> None:
        return None

    def close(self) -> None:
        self.closed = True

    def __iter__(self) -> Iterator[Any]:
        for item in self.iterable or ():
            yield item
            self.update(1)

    def __enter__(self) -> _Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @classmethod
    def get_lock(cls) -> threading.RLock:
        return cls._lock

    @classmethod
    def set_lock(cls, lock: Any) -> None:
        return None

    @classmethod
    def write(cls, s: str, file: Any = None, end: str = "\n", nolock: bool = False) -> None:
        log.debug("%s", s)  # tqdm prints it; nothing prints here


class _XetCancels:
    """Cancelling hf_xet transfers, counted so a download whose transfer was cancelled
    for another one's sake can tell and start again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.cancels = 0

    def cancel_transfers(self) -> None:
        if "hf_xet" not in sys.modules:  # no Xet transfer ever ran in this process
            return
        try:
            from huggingface_hub.utils import _xet
        except ImportError:
            return
        abort = getattr(_xet, "abort_xet_session", None)
        if abort is None:
            return
        with self._lock:
            self.cancels += 1
        try:
            abort()
        except Exception:  # best effort: the transfer then ends at hf_xet's own timeout
            log.debug("cancelling Xet transfers failed", exc_info=True)


_XET = _XetCancels()


def describe_failure(
    exc: BaseException, repo: str, config: HubConfig, revision: str = "main"
) -> str:
    """One line naming the repo, the endpoint and what went wrong; the caller adds the fix."""
    import httpx2
    from huggingface_hub import errors as hf

    where = config.endpoint_text
    status = _status_of(exc)
    if isinstance(exc, hf.RevisionNotFoundError):
        reason = f"{where} has no revision {revision!r} of {repo}"
    elif isinstance(exc, hf.RepositoryNotFoundError):
        reason = (
            f"{where} has no model repository {repo} (HTTP {status}; if it was renamed, "
            "name it by its new name)"
        )
    elif isinstance(exc, hf.RemoteEntryNotFoundError):
        reason = f"{where} has no such file in {repo} (HTTP {status})"
    elif isinstance(exc, hf.HfHubHTTPError):
        reason = f"{where} answered HTTP {status} for {repo}"
    elif isinstance(exc, httpx2.TooManyRedirects):
        reason = f"{where} redirected the requests for {repo} in a loop ({_root_cause(exc)})"
    elif isinstance(exc, OSError) and "Consistency check failed" in str(exc):
        reason = f"a file of {repo} arrived cut short from {where} (nothing was kept)"
    elif isinstance(exc, hf.LocalEntryNotFoundError | ConnectionError | httpx2.TransportError):
        reason = f"cannot reach {where} for {repo} ({_root_cause(exc)})"
    else:
        reason = f"downloading {repo} from {where} failed: {type(exc).__name__}: {exc}"
        return reason.splitlines()[0]
    return f"downloading {repo} failed: {reason}"


def _root_cause(exc: BaseException) -> str:
    while exc.__cause__ is not None:
        exc = exc.__cause__
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _status_of(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    code = getattr(response, "status_code", None)
    return str(code) if code is not None else "?"
