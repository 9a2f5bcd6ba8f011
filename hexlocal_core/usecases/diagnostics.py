"""Where the local models' downloads stand, for faces that report progress while a call
waits (the MCP server turns it into progress notifications inside the call budget).

The adapters that may download (local embedder, cross-encoder) expose `download_state`;
the ports do not declare it (a cloud or test embedder downloads nothing), so it is read
here by name and turned into a core value.
"""

from __future__ import annotations

from collections.abc import Mapping

from attrs import frozen


@frozen
class ModelDownload:
    """One model's latest download word (see `adapters.model_fetch.FetchState`)."""

    which: str  # "embedder" | "reranker"
    running: bool
    message: str = ""
    done: int = 0  # bytes
    total: int = 0  # bytes; 0 when unknown
    error: str = ""


def model_downloads(models: Mapping[str, object | None]) -> tuple[ModelDownload, ...]:
    """The download state of each model that has one (`which` -> the adapter or None)."""
    found = []
    for which, model in models.items():
        state = getattr(model, "download_state", None)
        if state is None:
            continue
        found.append(
            ModelDownload(
                which=which,
                running=bool(getattr(state, "running", False)),
                message=str(getattr(state, "message", "")),
                done=int(getattr(state, "done", 0)),
                total=int(getattr(state, "total", 0)),
                error=str(getattr(state, "error", "")),
            )
        )
    return tuple(found)


def model_missing(model: object | None) -> str | None:
    """The error of the model's last download when it failed and none runs: the model is
    not coming until something changes (the network, a pull, a local folder)."""
    state = getattr(model, "download_state", None)
    if state is None or getattr(state, "running", False):
        return None
    error = getattr(state, "error", "")
    return error if isinstance(error, str) and error else None
