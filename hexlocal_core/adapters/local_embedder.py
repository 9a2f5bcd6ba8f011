"""The local embedder: all-MiniLM-L6-v2 (or any BERT encoder) through onnxruntime.

Mean pooling over the attention mask, then L2 normalisation, exactly as sentence-transformers
does. Inputs are sorted by token length and cut into batches of similar lengths, each
padded only to its own longest text, so a batch of short chunks does not pay for a long
one; the output order is restored afterwards. Inference runs in a worker thread so the
event loop stays responsive; the model loads once per instance, lazily and thread-safely.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt
from attrs import frozen

from hexlocal_core.adapters import model_sources
from hexlocal_core.config import Settings
from hexlocal_core.errors import ConfigError, ModelError
from hexlocal_core.model import UsageEvent
from hexlocal_core.ports import UsageSink, Vectors

if TYPE_CHECKING:
    import onnxruntime
    import tokenizers

log = logging.getLogger("hexlocal.adapters.local_embedder")

DEFAULT_DIMS = 384
DEFAULT_MAX_LENGTH = 256  # all-MiniLM-L6-v2 was trained on 256-token windows
IntArray = npt.NDArray[np.int64]


@frozen
class EmbedderOptions:
    max_length: int | None = None  # None: the model's own max_seq_length, else 256
    batch_size: int = 32  # texts per onnxruntime run
    token_budget: int = 8192  # padded tokens per run: bounds memory and query latency
    max_padding: float = 0.2  # a row is not padded by more than this share of the batch width
    threads: int = 2  # onnxruntime intra-op threads


@frozen
class Batch:
    """Texts of similar length, padded to the longest of them."""

    positions: tuple[int, ...]  # where each row goes in the caller's order
    input_ids: IntArray
    attention_mask: IntArray

    @property
    def token_type_ids(self) -> IntArray:
        return np.zeros_like(self.input_ids)


# --- helpers shared with the cross-encoder ----------------------------------------------

T = TypeVar("T")


class Lazy(Generic[T]):
    """A value built once, on first use, by whichever thread asks first; others wait.

    A failed build is not remembered, so a model installed later is picked up without a
    restart (looking for absent files costs a few stat calls).
    """

    def __init__(self, build: Callable[[], T]) -> None:
        self._build = build
        self._lock = threading.Lock()
        self._value: T | None = None

    @property
    def ready(self) -> bool:
        return self._value is not None

    def peek(self) -> T | None:
        return self._value

    def get(self) -> T:
        value = self._value
        if value is not None:
            return value
        with self._lock:
            if self._value is None:
                self._value = self._build()
            return self._value


def open_session(path: Path, threads: int) -> onnxruntime.InferenceSession:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # onnxruntime's own warnings go to stderr otherwise
    # Idle worker threads would otherwise spin on both cores after each run and starve the
    # next session (query embedding, then rerank): measured on the dev set, rerank p50
    # 200 -> 140 ms with spinning off, for ~10% less bulk embedding throughput.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises untyped RuntimeErrors and Fail
        raise ModelError(f"cannot load the ONNX model {path}: {exc}") from exc


def load_tokenizer(path: Path, max_length: int, *, pairs: bool = False) -> tokenizers.Tokenizer:
    """The tokenizer with explicit truncation and no padding (the shipped file pads to 128)."""
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception on a bad file
        raise ModelError(f"cannot load the tokenizer {path}: {exc}") from exc
    strategy = "only_second" if pairs else "longest_first"
    tokenizer.enable_truncation(max_length, strategy=strategy)
    tokenizer.no_padding()
    return tokenizer


def pad(rows: Sequence[Sequence[int]]) -> tuple[IntArray, IntArray]:
    """Right-pad token id rows with 0 to the longest; returns (ids, attention mask)."""
    width = max((len(r) for r in rows), default=0)
    ids = np.zeros((len(rows), width), dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
        mask[i, : len(row)] = 1
    return ids, mask


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


# --- batching and pooling (pure) --------------------------------------------------------


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


def mean_pool(hidden: npt.NDArray[np.float32], mask: IntArray) -> npt.NDArray[np.float32]:
    """Mean of the token vectors the mask keeps, then L2 normalised (sentence-transformers)."""
    weights = mask[..., None].astype(np.float32)
    summed = (hidden * weights).sum(axis=1)
    counts = np.clip(weights.sum(axis=1), 1e-9, None)
    return normalise(summed / counts)


def normalise(vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    scaled: npt.NDArray[np.float32] = (vectors / np.clip(norms, 1e-12, None)).astype(np.float32)
    return scaled


# --- the embedder -----------------------------------------------------------------------


@frozen
class _Loaded:
    session: Any  # onnxruntime.InferenceSession
    tokenizer: Any  # tokenizers.Tokenizer
    files: model_sources.ModelFiles
    output: str


class LocalEmbedder:
    """Implements `ports.Embedder` with onnxruntime; see `build_local_embedder`."""

    def __init__(
        self,
        locate: Callable[[], model_sources.ModelFiles],
        *,
        model_id: str,
        dims: int = DEFAULT_DIMS,
        options: EmbedderOptions | None = None,
        usage: UsageSink | None = None,
    ) -> None:
        self._locate = locate
        self._model_id = model_id
        self._dims = dims
        self._options = options or EmbedderOptions()
        self._usage = usage
        self._state: Lazy[_Loaded] = Lazy(self._load)

    def __repr__(self) -> str:
        return f"LocalEmbedder(model_id={self._model_id!r}, loaded={self.loaded})"

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dims(self) -> int:
        return self._dims

    @property
    def loaded(self) -> bool:
        return self._state.ready

    @property
    def files(self) -> model_sources.ModelFiles | None:
        loaded = self._state.peek()
        return loaded.files if loaded else None

    async def load(self) -> None:
        """Load in a worker thread (it can take seconds when the graph must be built)."""
        await asyncio.to_thread(self.ensure_loaded)

    def ensure_loaded(self) -> None:
        """Idempotent and thread-safe: concurrent callers wait for one load."""
        self._state.get()

    def _load(self) -> _Loaded:
        files = self._locate()
        max_length = self._options.max_length or files.max_length or DEFAULT_MAX_LENGTH
        tokenizer = load_tokenizer(files.tokenizer_path, max_length)
        session = open_session(files.onnx_path, self._options.threads)
        loaded = _Loaded(session, tokenizer, files, _pick_output(session))
        self._check_dims(loaded)
        log.info("embedder %s loaded from the %s", self._model_id, files.source)
        return loaded

    def _check_dims(self, loaded: _Loaded) -> None:
        # A probe also warms the session up: the first run is several times slower.
        rows = [loaded.tokenizer.encode("hexlocal").ids]
        probe = run_rows(loaded.session, rows, loaded.output, self._options)
        if probe.shape[1] != self._dims:
            raise ModelError(
                f"the embedding model gives {probe.shape[1]} dimensions, expected {self._dims}"
            )

    async def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self._dims), dtype=np.float32)
        return await asyncio.to_thread(self.embed_sync, list(texts))

    async def embed_query(self, text: str) -> Vectors:
        return await self.embed([text])

    def embed_sync(self, texts: Sequence[str]) -> Vectors:
        """Blocking embed, for worker threads and benchmarks."""
        if not texts:
            return np.zeros((0, self._dims), dtype=np.float32)
        try:
            loaded = self._state.get()
            rows = [loaded.tokenizer.encode(t).ids for t in texts]
            vectors = run_rows(loaded.session, rows, loaded.output, self._options)
        except Exception:
            self._record(0, success=False)
            raise
        self._record(sum(len(r) for r in rows), success=True)
        return vectors

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids per text as the model sees them: truncated, special tokens included."""
        tokenizer = self._state.get().tokenizer
        return [list(tokenizer.encode(t).ids) for t in texts]

    def _record(self, tokens: int, *, success: bool) -> None:
        if self._usage is not None:
            self._usage.record(
                UsageEvent(self._model_id, "embed", tokens, success=success, local=True)
            )


def run_rows(
    session: onnxruntime.InferenceSession,
    rows: Sequence[Sequence[int]],
    output: str,
    options: EmbedderOptions,
) -> Vectors:
    """Embed token id rows batch by batch; row i of the result belongs to rows[i]."""
    done: list[tuple[tuple[int, ...], Vectors]] = [
        (batch.positions, _run_batch(session, batch, output))
        for batch in plan_batches(
            rows, options.batch_size, options.token_budget, options.max_padding
        )
    ]
    dims = done[0][1].shape[1] if done else 0
    out = np.zeros((len(rows), dims), dtype=np.float32)
    for positions, vectors in done:
        out[list(positions)] = vectors
    return out


def _pick_output(session: onnxruntime.InferenceSession) -> str:
    """`last_hidden_state` when present (pooled here), else the only output there is."""
    outputs = session.get_outputs()
    names: list[str] = [str(o.name) for o in outputs]
    for preferred in ("last_hidden_state", "token_embeddings", "sentence_embedding"):
        if preferred in names:
            return preferred
    if len(outputs) == 1:
        return names[0]
    raise ModelError(f"cannot tell which ONNX output holds the embeddings: {names}")


def _run_batch(session: onnxruntime.InferenceSession, batch: Batch, output: str) -> Vectors:
    feeds = session_feeds(session, batch.input_ids, batch.attention_mask, batch.token_type_ids)
    try:
        (result,) = session.run([output], feeds)
    except Exception as exc:  # onnxruntime raises untyped errors
        raise ModelError(f"the embedding model failed to run: {exc}") from exc
    result = np.asarray(result, dtype=np.float32)
    if result.ndim == 3 and result.shape[:2] == batch.input_ids.shape:
        return mean_pool(result, batch.attention_mask)
    if result.ndim == 2 and result.shape[0] == len(batch.positions):
        return normalise(result)  # an export with pooling built in
    raise ModelError(f"the embedding model gave output of unexpected shape {result.shape}")


def build_local_embedder(
    settings: Settings,
    usage: UsageSink | None = None,
    *,
    options: EmbedderOptions | None = None,
) -> LocalEmbedder:
    """The local embedder the settings ask for; nothing is loaded until first use."""
    if not settings.uses_local_embedder:
        raise ConfigError(
            f"AI_EMBED_MODEL={settings.ai_embed_model} is a cloud model; "
            "use openai_api.OpenAIEmbedder, or unset AI_EMBED_MODEL for the local model"
        )
    which = model_sources.Which.EMBEDDER

    def locate() -> model_sources.ModelFiles:
        return model_sources.resolve(settings, which)

    return LocalEmbedder(
        locate,
        model_id=f"local:{model_sources.repo_id(settings, which)}",
        options=options,
        usage=usage,
    )
