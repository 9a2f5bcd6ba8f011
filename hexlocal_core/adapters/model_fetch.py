"""Getting a model onto this machine: the offline sources first, else the hub.

`Fetcher.locate()` is what the adapters call on first need: `model_sources.resolve`
(local folder, hub cache, PyPI package), and only when none has the model a download
into the hub cache, then `resolve` again so the files are read exactly as a cached model
would be. HF_HUB_OFFLINE means no download, ever: a ModelUnavailable naming the fix.

A failed download is remembered for `retry_after_s`: a search must not wait for an
unreachable hub again on every call. `pull` is `hexlocal models pull`: always asks the hub.
"""

from __future__ import annotations

import threading
import time

from attrs import frozen

from hexlocal_core.adapters import hub as hub_api
from hexlocal_core.adapters.hub import HubConfig
from hexlocal_core.adapters.model_sources import (
    HUB_PLANS,
    PYPI_INSTALL,
    ModelFiles,
    Which,
    repo_id,
    resolve,
    revision_of,
)
from hexlocal_core.config import Settings
from hexlocal_core.errors import ModelError, ModelUnavailable
from hexlocal_core.model import DownloadProgress

RETRY_AFTER_S = 300.0


@frozen
class FetchState:
    """The latest word on a download, for faces that poll (MCP progress notices)."""

    running: bool
    message: str = ""
    done: int = 0  # bytes
    total: int = 0  # bytes; 0 when unknown
    error: str = ""


class Fetcher:
    """One model's files: found offline, or downloaded once; see the module docstring."""

    def __init__(
        self,
        settings: Settings,
        which: Which,
        hub: HubConfig,
        progress: DownloadProgress | None = None,
        *,
        retry_after_s: float = RETRY_AFTER_S,
    ) -> None:
        self.settings = settings
        self.which = which
        self.hub = hub
        self._progress = progress
        self._retry_after_s = retry_after_s
        self._lock = threading.Lock()  # one download of this model at a time
        self._failed: tuple[float, str] | None = None
        self._state = FetchState(running=False)

    @property
    def repo(self) -> str:
        return repo_id(self.settings, self.which)

    @property
    def may_download(self) -> bool:
        return not self.hub.offline

    @property
    def state(self) -> FetchState:
        return self._state

    def find(self) -> ModelFiles:
        """Offline sources only; ModelUnavailable when none has the model."""
        return resolve(self.settings, self.which, hub=self.hub)

    def locate(self) -> ModelFiles:
        """Offline sources, else (unless HF_HUB_OFFLINE) a download. Blocks while fetching."""
        try:
            return self.find()
        except ModelUnavailable:
            if not self.may_download:
                raise
        return self.fetch()

    def fetch(self, *, remember_failure: bool = True) -> ModelFiles:
        """Download into the hub cache, then resolve from it."""
        with self._lock:
            recent = self._recent_failure() if remember_failure else None
            if recent is not None:
                raise ModelUnavailable(recent)
            try:
                return self._download()
            except ModelError as exc:
                message = f"{exc}; {download_fix(self.which)}"
                self._failed = (time.monotonic(), message)
                self._state = FetchState(running=False, error=message)
                raise ModelUnavailable(message) from exc

    def _download(self) -> ModelFiles:
        self._state = FetchState(running=True, message=f"downloading {self.repo}")
        repo = self.repo
        hub_api.download(repo, HUB_PLANS, self.hub, self._report, revision=revision_of(repo))
        files = resolve(self.settings, self.which, hub=self.hub)
        self._state = FetchState(running=False, message=f"downloaded {self.repo}")
        self._failed = None
        return files

    def _report(self, message: str, done: int, total: int) -> None:
        self._state = FetchState(running=True, message=message, done=done, total=total)
        if self._progress is not None:
            self._progress(message, done, total)

    def _recent_failure(self) -> str | None:
        if self._failed is None:
            return None
        at, message = self._failed
        return message if time.monotonic() - at < self._retry_after_s else None


def download_fix(which: Which) -> str:
    """The fix after a failed download (never "run the download again")."""
    offline = f"`{PYPI_INSTALL}`" if which is Which.EMBEDDER else "AI_RERANK_MODEL=off"
    return f"check the network, proxy or HF_ENDPOINT (offline: {offline})"


def pull(
    settings: Settings,
    which: Which,
    *,
    hub: HubConfig | None = None,
    progress: DownloadProgress | None = None,
) -> ModelFiles:
    """`hexlocal models pull`: download now (the cache makes a second pull cheap)."""
    config = hub or HubConfig.from_env()
    if config.offline:
        raise ModelError(
            f"cannot download {repo_id(settings, which)}: HF_HUB_OFFLINE forbids network "
            "access; unset it (or set HF_HUB_OFFLINE=0) for this command"
        )
    return Fetcher(settings, which, config, progress).fetch(remember_failure=False)
