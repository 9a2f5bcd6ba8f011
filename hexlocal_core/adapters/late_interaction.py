"""A late-interaction judge: implements `ports.Reranker` with a BERT encoder's token states.

The query and each passage are encoded apart (one onnxruntime run for all of them, padded
to the longest), every non-padding token's state is L2-normalised, and a passage scores
the mean, over the query's tokens, of each one's best cosine to one of its tokens (MaxSim).
Unlike a cross-encoder, whose head starts from nothing, this starts from what the
embedding model already knows, so a short fine-tune on the docs moves it rather than
building it (docs/lab/anchor-text-and-judge.md). The model loads once, lazily.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
from attrs import frozen

from hexlocal_core.adapters.onnx_runtime import load_tokenizer, open_session, pad, session_feeds
from hexlocal_core.errors import ModelError

log = logging.getLogger("hexlocal.adapters.late_interaction")

Matrix = npt.NDArray[np.float32]


@frozen
class JudgeOptions:
    query_length: int = 64  # word pieces of the query, as trained
    passage_length: int = 128  # word pieces of each passage, as trained
    threads: int = 2


@frozen
class JudgeFiles:
    onnx_path: Path
    tokenizer_path: Path


def maxsim(query: Matrix, passage: Matrix) -> float:
    """Mean over the query's (normalised) token vectors of the best cosine to a passage
    token; rows are tokens, padding already removed."""
    if not len(query) or not len(passage):
        return 0.0
    return float((query @ passage.T).max(axis=1).mean())


def normalised(states: Matrix, mask: npt.NDArray[np.int64]) -> list[Matrix]:
    """Each row's non-padding token states, unit length."""
    out = []
    for row, keep in zip(states, mask, strict=True):
        kept = row[keep.astype(bool)]
        norms = np.linalg.norm(kept, axis=1, keepdims=True)
        out.append((kept / np.maximum(norms, 1e-12)).astype(np.float32))
    return out


class _Encoder:
    def __init__(self, files: JudgeFiles, options: JudgeOptions) -> None:
        self.session = open_session(files.onnx_path, options.threads)
        self.query_tokenizer = load_tokenizer(files.tokenizer_path, options.query_length)
        self.passage_tokenizer = load_tokenizer(files.tokenizer_path, options.passage_length)

    def states(self, query: str, passages: Sequence[str]) -> tuple[list[Matrix], int]:
        rows = [self.query_tokenizer.encode(query).ids]
        rows += [e.ids for e in self.passage_tokenizer.encode_batch(list(passages))]
        ids, mask = pad(rows)
        feeds = session_feeds(self.session, ids, mask, np.zeros_like(ids))
        try:
            out = np.asarray(self.session.run(None, feeds)[0], dtype=np.float32)
        except Exception as exc:  # onnxruntime raises untyped errors
            raise ModelError(f"the judge failed to run: {exc}") from exc
        if out.ndim != 3 or out.shape[:2] != ids.shape:
            raise ModelError(f"the judge gave token states of shape {out.shape}, not {ids.shape}")
        return normalised(out, mask), int(mask.sum())


class LateInteractionJudge:
    """Scores (query, passage) pairs by MaxSim over the encoder's token states."""

    def __init__(
        self, files: JudgeFiles, *, model_id: str, options: JudgeOptions | None = None
    ) -> None:
        self._files = files
        self._model_id = model_id
        self._options = options or JudgeOptions()
        self._encoder: _Encoder | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LateInteractionJudge(model_id={self._model_id!r})"

    @property
    def model_id(self) -> str:
        return self._model_id

    def ensure_loaded(self) -> None:
        with self._lock:
            if self._encoder is None:
                self._encoder = _Encoder(self._files, self._options)
                log.info("judge %s loaded from %s", self._model_id, self._files.onnx_path)

    async def warm_up(self) -> None:
        await asyncio.to_thread(self.ensure_loaded)

    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        return await asyncio.to_thread(self.score_sync, query, list(passages))

    def score_sync(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        self.ensure_loaded()
        assert self._encoder is not None
        states, _ = self._encoder.states(query, passages)
        return [maxsim(states[0], p) for p in states[1:]]

    async def aclose(self) -> None:
        with self._lock:
            self._encoder = None
