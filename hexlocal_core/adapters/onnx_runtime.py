"""What both local ONNX models share: one load per instance, the session, the tokenizer,
batching by length, and the `Resource` lifecycle.

`ModelSlot` holds a loaded model. It is built once, on first use, by whichever thread asks
first (others wait); a failed build is not remembered, so a model installed later is
picked up without a restart. `aclose` drops the session; a later call loads it again.
Inference runs in the event loop's default executor (`asyncio.to_thread`), so the loop
stays responsive and concurrent callers (EMBED_CONCURRENCY) run side by side as before.

Sessions are opened with intra-op spinning off: idle worker threads would otherwise spin
on both cores after each run and starve the next session (query embedding, then rerank).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

import numpy as np
import numpy.typing as npt
from attrs import frozen

from hexlocal_core.errors import ModelError, ModelUnavailable

if TYPE_CHECKING:
    import onnxruntime
    import tokenizers

log = logging.getLogger("hexlocal.adapters.onnx_runtime")

IntArray = npt.NDArray[np.int64]
T = TypeVar("T")


class ModelSlot(Generic[T]):
    """A value built once, on first use, by whichever thread asks first; others wait.

    With `background` (the reranker): when `build` finds the model absent
    (ModelUnavailable), `background` (download, then build) starts in a daemon thread and
    this and every later call raise ModelUnavailable(pending=True) at once until it is
    ready, so a search never waits for a download it can do without. A failed background
    build is remembered for `retry_after_s`.

    Implements `ports.Resource`: `warm_up()` builds it now in a worker thread (for the
    reranker: starts the download), `aclose()` forgets it (the next use builds it again).
    """

    def __init__(
        self,
        build: Callable[[], T],
        *,
        background: Callable[[], T] | None = None,
        pending: str = "the model is being downloaded",
        retry_after_s: float = 300.0,
    ) -> None:
        self._build = build
        self._background = background
        self._pending = pending
        self._retry_after_s = retry_after_s
        self._lock = threading.Lock()
        self._value: T | None = None
        self._worker: threading.Thread | None = None
        self._failed: tuple[float, ModelError] | None = None

    @property
    def ready(self) -> bool:
        return self._value is not None

    @property
    def fetching(self) -> bool:
        return self._worker is not None and self._worker.is_alive()

    def peek(self) -> T | None:
        return self._value

    def get(self) -> T:
        value = self._value
        if value is not None:
            return value
        with self._lock:
            if self._value is not None:
                return self._value
            if self.fetching:
                raise ModelUnavailable(self._pending, pending=True)
            try:
                self._value = self._build()
                return self._value
            except ModelUnavailable:
                if self._background is None:
                    raise
            self._start_background()
            raise ModelUnavailable(self._pending, pending=True)

    def _start_background(self) -> None:
        if self._failed is not None:
            at, error = self._failed
            if time.monotonic() - at < self._retry_after_s:
                raise ModelUnavailable(str(error)) from error
        self._worker = threading.Thread(target=self._run_background, daemon=True)
        self._worker.start()

    def _run_background(self) -> None:
        assert self._background is not None
        try:
            value = self._background()
        except ModelError as exc:
            log.warning("%s", exc)
            self._failed = (time.monotonic(), exc)
            return
        except Exception as exc:  # a thread must not die with an unhandled exception
            log.exception("background model build failed")
            self._failed = (time.monotonic(), ModelError(f"{type(exc).__name__}: {exc}"))
            return
        self._failed = None
        self.put(value)

    def put(self, value: T) -> None:
        """Install a value built elsewhere (the background download); the first one wins."""
        with self._lock:
            if self._value is None:
                self._value = value

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a background build (tests, `models pull`); True when ready."""
        worker = self._worker
        if worker is not None:
            worker.join(timeout)
        return self.ready

    async def warm_up(self) -> None:
        try:
            await asyncio.to_thread(self.get)
        except ModelUnavailable as exc:
            if not exc.pending:
                raise

    async def aclose(self) -> None:
        with self._lock:
            self._value = None  # onnxruntime frees the session with its last reference


# --- sessions and tokenizers ------------------------------------------------------------


def open_session(path: Path, threads: int) -> onnxruntime.InferenceSession:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # onnxruntime's own warnings go to stderr otherwise
    # Measured on the dev set: rerank p50 200 -> 140 ms with spinning off, for ~10% less
    # bulk embedding throughput.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises untyped RuntimeErrors and Fail
        raise ModelError(f"cannot load the ONNX model {path}: {exc}") from exc


def load_tokenizer(path: Path, max_length: int, *, pairs: bool = False) -> tokenizers.Tokenizer:
    """The tokenizer with explicit truncation and no padding (the shipped file pads to 128).

    `pairs`: truncate the second text only, so a (query, passage) pair keeps the query.
    """
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception on a bad file
        raise ModelError(f"cannot load the tokenizer {path}: {exc}") from exc
    strategy = "only_second" if pairs else "longest_first"
    tokenizer.enable_truncation(max_length, strategy=strategy)
    tokenizer.no_padding()
    return tokenizer


def session_feeds(
    session: onnxruntime.InferenceSession, ids: IntArray, mask: IntArray, types: IntArray
) -> dict[str, IntArray]:
    """Only the inputs the graph declares (some exports have no token_type_ids)."""
    available = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    names = [i.name for i in session.get_inputs()]
    missing = [n for n in names if n not in available]
    if missing:
        raise ModelError(f"the ONNX model wants inputs hexlocal does not know: {missing}")
    return {n: available[n] for n in names}


# --- batching (pure) --------------------------------------------------------------------


@frozen
class Batch:
    """Texts of similar length, padded to the longest of them."""

    positions: tuple[int, ...]  # where each row goes in the caller's order
    input_ids: IntArray
    attention_mask: IntArray

    @property
    def token_type_ids(self) -> IntArray:
        return np.zeros_like(self.input_ids)


def pad(rows: Sequence[Sequence[int]]) -> tuple[IntArray, IntArray]:
    """Right-pad token id rows with 0 to the longest; returns (ids, attention mask)."""
    width = max((len(r) for r in rows), default=0)
    ids = np.zeros((len(rows), width), dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
        mask[i, : len(row)] = 1
    return ids, mask


def plan_batches(
    rows: Sequence[Sequence[int]], batch_size: int, token_budget: int, max_padding: float = 0.2
) -> Iterator[Batch]:
    """Longest first; a batch ends at `batch_size` rows, at `token_budget` padded tokens, or
    before a row that would be more than `max_padding` padding (compute spent on nothing)."""
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]), reverse=True)
    start = 0
    while start < len(order):
        width = max(len(rows[order[start]]), 1)  # the first of a batch is its longest
        limit = max(1, min(batch_size, token_budget // width))
        shortest = width * (1.0 - max_padding)
        end = start + 1
        while end < len(order) and end - start < limit and len(rows[order[end]]) >= shortest:
            end += 1
        chosen = order[start:end]
        ids, mask = pad([rows[i] for i in chosen])
        yield Batch(positions=tuple(chosen), input_ids=ids, attention_mask=mask)
        start = end
