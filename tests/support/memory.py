"""Builders shared by the memory tests: the service on a tmp database, and embedders whose
similarities the test chooses."""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hexlocal_core.config import Settings
from hexlocal_core.ports import ChatModel, Embedder, NoLifecycle, Vectors
from hexlocal_core.service import Hexlocal, build
from tests.support.helpers import HashingEmbedder, db


def settings_for(tmp_path: Path, **env: str) -> Settings:
    project = tmp_path / "project"
    project.mkdir(parents=True, exist_ok=True)
    values = {"PROJECT_ROOT": str(project), "DATABASE_PATH": str(tmp_path / "hexlocal.db")}
    return Settings.from_env({**values, **env})


def make_service(
    tmp_path: Path,
    *,
    embedder: Embedder | None,
    chat: ChatModel | None = None,
    env: Mapping[str, str] | None = None,
) -> Hexlocal:
    return build(
        settings_for(tmp_path, **(env or {})),
        embedder=embedder,
        reranker=None,
        chat=chat,
        registry=object(),  # type: ignore[arg-type]  # memory never asks hex.pm
        issues=None,
        load_models=False,
    )


def curated_service(tmp_path: Path, chat_url: str, *, embedder: Embedder | None) -> Hexlocal:
    """A service whose chat model (`OpenAIChat`, wired by `build` as in production) talks
    to the fake at `chat_url`."""
    env = {"AI_API_KEY": "test-key", "AI_API_URL": chat_url}
    return make_service(tmp_path, embedder=embedder, env=env)


class TableEmbedder(NoLifecycle):
    """Vectors the test picks: `place(text, sim)` puts a text at cosine `sim` from the
    anchor; any other text gets a hashed vector orthogonal to every placed one."""

    PLACED_DIMS = 2

    def __init__(self, dims: int = 32, model_id: str = "test:table") -> None:
        self._dims = dims
        self._model_id = model_id
        self.table: dict[str, np.ndarray[Any, Any]] = {}
        self.calls = 0

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dims(self) -> int:
        return self._dims

    def place(self, text: str, sim: float) -> str:
        v = np.zeros(self._dims, dtype=np.float32)
        v[0], v[1] = sim, math.sqrt(max(0.0, 1.0 - sim * sim))
        self.table[text] = v
        return text

    def vector(self, text: str) -> np.ndarray[Any, Any]:
        if text in self.table:
            return self.table[text]
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        v = np.zeros(self._dims, dtype=np.float32)
        v[self.PLACED_DIMS :] = np.random.default_rng(seed).standard_normal(
            self._dims - self.PLACED_DIMS
        )
        return v / np.linalg.norm(v)

    async def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls += 1
        return np.stack([self.vector(t) for t in texts]).astype(np.float32)

    async def embed_query(self, text: str) -> Vectors:
        return self.vector(text).reshape(1, -1)


class GatedEmbedder(HashingEmbedder):
    """A hashing embedder that stops at its (open_for + 1)-th call until `release()`."""

    def __init__(self, open_for: int, dims: int = 64) -> None:
        super().__init__(dims=dims)
        self.open_for = open_for
        self.reached = asyncio.Event()
        self._gate = asyncio.Event()

    def release(self) -> None:
        self._gate.set()

    async def embed(self, texts: Sequence[str]) -> Vectors:
        if len(self.batches) >= self.open_for:
            self.reached.set()
            await self._gate.wait()
        return await super().embed(texts)


def write_lock(project: Path, pins: dict[str, str]) -> None:
    """A mix.lock pinning each Hex package at a version."""
    lines = [
        f'  "{name}": {{:hex, :{name}, "{version}", "00", [:mix], [], "hexpm", "00"}},'
        for name, version in pins.items()
    ]
    (project / "mix.lock").write_text("%{\n" + "\n".join(lines) + "\n}\n")


def log_rows(service: Hexlocal, request_id: str | None = None) -> list[dict[str, Any]]:
    from hexlocal_core.index.sqlite.db import rows

    sql = "SELECT request_id, action, memory_id, model, reason FROM curation_log"
    if request_id is None:
        return rows(db(service), sql + " ORDER BY id")
    return rows(db(service), sql + " WHERE request_id = ? ORDER BY id", (request_id,))
