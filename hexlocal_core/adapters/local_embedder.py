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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from attrs import evolve, frozen

from hexlocal_core.adapters import model_sources, onnx_build
from hexlocal_core.adapters.hub import HubConfig
from hexlocal_core.adapters.model_fetch import Fetcher, FetchState
from hexlocal_core.adapters.onnx_runtime import (
    Batch,
    IntArray,
    ModelSlot,
    load_tokenizer,
    open_session,
    plan_batches,
    session_feeds,
)
from hexlocal_core.config import Settings
from hexlocal_core.errors import ConfigError, ModelError
from hexlocal_core.model import DownloadProgress, UsageEvent
from hexlocal_core.ports import UsageSink, Vectors

if TYPE_CHECKING:
    import onnxruntime

log = logging.getLogger("hexlocal.adapters.local_embedder")

DEFAULT_DIMS = 384
DEFAULT_MAX_LENGTH = 256  # all-MiniLM-L6-v2 was trained on 256-token windows


@frozen
class EmbedderOptions:
    max_length: int | None = None  # None: the model's own max_seq_length, else 256
    # Texts per onnxruntime run. 8, not 32: on an AVX-512 machine (2 threads, plug's chunks,
    # 3 interleaved rounds) 8 was faster in every round, fp32 +9 %, int8 +11 %; on the
    # AVX2 machine measured before, 8-32 moved -6 % to +16 % with no consistent sign.
    batch_size: int = 8
    token_budget: int = 8192  # padded tokens per run: bounds memory and query latency
    max_padding: float = 0.2  # a row is not padded by more than this share of the batch width
    threads: int = 2  # onnxruntime intra-op threads
    quantize: bool = False  # run the int8 copy of the graph (`AI_EMBED_MODEL=...@int8`)
    # int8 is refused below this mean cosine to fp32 on the probe texts (measured 0.990 on
    # the sentence-transformers reference texts, worst text 0.979).
    min_agreement: float = 0.95

    # int8 embeds one text per run, `threads` runs at a time on a single-threaded session.
    # Its graph quantises activations per tensor, over the whole batch (padding included):
    # in a shared run a text's vector depends on its neighbours (cosine to the same text
    # alone: min 0.984, mean 0.992 on jason's chunks) and differs from the vector its query
    # gets, which runs alone; across the ten eval sets (781 queries, paired) that cost
    # -0.007 MRR@10. Alone in its run every text gets one vector. Side by side, the runs
    # beat batches of 8 on one two-threaded session (plug's chunks, one process, five timed
    # interleaved rounds: median 2.23 s against 2.57 s; one text per run on the two-threaded
    # session was slower than either, 2.8-3.4 s in two other runs).
    # fp32 vectors do not depend on their batch (cosine 1.00000), so fp32 keeps batches.

    @property
    def texts_per_run(self) -> int:
        return 1 if self.quantize else self.batch_size

    @property
    def session_threads(self) -> int:
        """onnxruntime intra-op threads of the session."""
        return 1 if self.quantize else self.threads

    @property
    def parallel_runs(self) -> int:
        """Runs at a time, each on a thread of its own (onnxruntime runs are thread-safe)."""
        return max(1, self.threads) if self.quantize else 1


# --- pooling (pure) ---------------------------------------------------------------------


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


# Doc-like texts the int8 graph must agree with fp32 on: prose, code, an error, a long one.
AGREEMENT_PROBES = (
    "Enum.map/2 invokes the given function for each element and returns a list of results.",
    "GenServer.call/3 makes a synchronous call to the server and waits for its reply.",
    "** (DBConnection.ConnectionError) connection not available and request was dropped "
    "from queue after 2000ms",
    "defmodule MyApp.Router do\n  use Plug.Router\n  plug :match\n  plug :dispatch\nend",
    "How do I read a request body larger than the default limit?",
    "Options: `:timeout` - the time in milliseconds to wait (default 5000); "
    "`:pool_size` - how many connections the pool keeps open.",
    " ".join(["Supervisors start, watch and restart their children"] * 40),
)


@frozen
class _Loaded:
    session: Any  # onnxruntime.InferenceSession
    tokenizer: Any  # tokenizers.Tokenizer
    files: model_sources.ModelFiles
    output: str
    graph: Path  # the graph the session runs: files.onnx_path, or its int8 copy


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
        fetcher: Fetcher | None = None,
        cache_dir: Path | None = None,
    ) -> None:
        self._locate = locate
        self._cache_dir = cache_dir  # where the int8 graph goes (default: beside fp32's)
        self._model_id = model_id
        self._dims = dims
        self._options = options or EmbedderOptions()
        self._usage = usage
        self._fetcher = fetcher
        self._state: ModelSlot[_Loaded] = ModelSlot(self._load)

    def __repr__(self) -> str:
        return f"LocalEmbedder(model_id={self._model_id!r}, loaded={self.loaded})"

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dims(self) -> int:
        return self._dims

    @property
    def options(self) -> EmbedderOptions:
        return self._options

    @property
    def loaded(self) -> bool:
        return self._state.ready

    @property
    def files(self) -> model_sources.ModelFiles | None:
        loaded = self._state.peek()
        return loaded.files if loaded else None

    @property
    def quantized(self) -> bool:
        return self._options.quantize

    @property
    def graph(self) -> Path | None:
        """The ONNX graph the loaded session runs (the int8 copy when quantised)."""
        loaded = self._state.peek()
        return loaded.graph if loaded else None

    @property
    def download_state(self) -> FetchState | None:
        """The model download's progress, when this embedder may download (else None)."""
        return self._fetcher.state if self._fetcher is not None else None

    async def warm_up(self) -> None:
        """Load now, in a worker thread: seconds to build a graph, minutes to download one.
        Raises ModelError (ModelUnavailable when absent) naming the fix."""
        await self._state.warm_up()

    async def aclose(self) -> None:
        await self._state.aclose()

    def ensure_loaded(self) -> None:
        """Blocking load: idempotent and thread-safe, concurrent callers wait for one load."""
        self._state.get()

    def _load(self) -> _Loaded:
        files = self._locate()
        max_length = self._options.max_length or files.max_length or DEFAULT_MAX_LENGTH
        tokenizer = load_tokenizer(files.tokenizer_path, max_length)
        graph = files.onnx_path
        if self._options.quantize:
            graph = self._quantized(graph, tokenizer)
        session = open_session(graph, self._options.session_threads)
        loaded = _Loaded(session, tokenizer, files, _pick_output(session), graph)
        self._check_dims(loaded)
        log.info("embedder %s loaded from the %s", self._model_id, files.source)
        return loaded

    def _quantized(self, graph: Path, tokenizer: Any) -> Path:
        """The int8 copy of `graph`, quantised (and checked against fp32) once per graph."""
        rows = [tokenizer.encode(t).ids for t in AGREEMENT_PROBES]

        def mean_cosine(fp32: Path, int8: Path) -> float:
            a, b = (self._probe(path, rows) for path in (fp32, int8))
            return float((a * b).sum(axis=1).mean())

        cache = self._cache_dir or graph.parent
        int8, agreement = onnx_build.ensure_quantized(graph, cache, mean_cosine)
        if agreement < self._options.min_agreement:
            raise ModelError(
                f"the int8 embedder agrees with fp32 at only {agreement:.3f} "
                f"(< {self._options.min_agreement}); set AI_EMBED_MODEL="
                f"{self._model_id.removeprefix('local:').removesuffix(model_sources.INT8_SUFFIX)}"
                " and run `hexlocal reindex`"
            )
        return int8

    def _probe(self, graph: Path, rows: list[list[int]]) -> Vectors:
        session = open_session(graph, self._options.session_threads)
        return run_rows(session, rows, _pick_output(session), self._options)

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
        loaded = self._state.get()  # an absent model is not a failed call: nothing recorded
        try:
            rows = _encode(loaded.tokenizer, texts)
            vectors = run_rows(loaded.session, rows, loaded.output, self._options)
        except Exception:
            self._record(0, success=False)
            raise
        self._record(sum(len(r) for r in rows), success=True)
        return vectors

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids per text as the model sees them: truncated, special tokens included."""
        tokenizer = self._state.get().tokenizer
        return [list(ids) for ids in _encode(tokenizer, texts)]

    def _record(self, tokens: int, *, success: bool) -> None:
        if self._usage is not None:
            self._usage.record(
                UsageEvent(self._model_id, "embed", tokens, success=success, local=True)
            )


def _encode(tokenizer: Any, texts: Sequence[str]) -> list[list[int]]:
    # One call into Rust for the whole list: 0.39 s against 0.43 s for plug's 547 chunks.
    return [e.ids for e in tokenizer.encode_batch(list(texts))]


def run_rows(
    session: onnxruntime.InferenceSession,
    rows: Sequence[Sequence[int]],
    output: str,
    options: EmbedderOptions,
) -> Vectors:
    """Embed token id rows batch by batch; row i of the result belongs to rows[i]."""
    batches = list(
        plan_batches(rows, options.texts_per_run, options.token_budget, options.max_padding)
    )
    done = _run_side_by_side(session, batches, output, options.parallel_runs)
    dims = done[0][1].shape[1] if done else 0
    out = np.zeros((len(rows), dims), dtype=np.float32)
    for positions, vectors in done:
        out[list(positions)] = vectors
    return out


def _run_side_by_side(
    session: onnxruntime.InferenceSession, batches: Sequence[Batch], output: str, runs: int
) -> list[tuple[tuple[int, ...], Vectors]]:
    """Every batch's vectors; batch i runs on thread i mod `runs`, the caller's thread
    among them. Returns only when every thread has ended, so no run outlives the call."""
    shares = [batches[i::runs] for i in range(min(runs, len(batches)))] or [[]]
    done: list[list[tuple[tuple[int, ...], Vectors]]] = [[] for _ in shares]
    failures: list[BaseException] = []

    def work(i: int) -> None:
        try:
            done[i] = [(b.positions, _run_batch(session, b, output)) for b in shares[i]]
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            failures.append(exc)

    helpers = [
        threading.Thread(target=work, args=(i,), name=f"hexlocal-embed-{i}", daemon=True)
        for i in range(1, len(shares))
    ]
    for helper in helpers:
        helper.start()
    work(0)
    for helper in helpers:
        helper.join()
    if failures:
        raise failures[0]
    return [pair for share in done for pair in share]


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
    progress: DownloadProgress | None = None,
    hub: HubConfig | None = None,
) -> LocalEmbedder:
    """The local embedder the settings ask for; nothing is loaded until first use.

    First use (or `warm_up`) looks in the offline sources, else downloads the model from
    the hub (HF_ENDPOINT, the standard cache), blocking that call; `progress(message,
    bytes_done, bytes_total)` hears about it from the worker thread. `hub` defaults to
    `HubConfig.from_env()`; with HF_HUB_OFFLINE set nothing is downloaded.
    """
    if not model_sources.uses_local_embedder(settings):
        raise ConfigError(
            f"AI_EMBED_MODEL={settings.ai_embed_model} is a cloud model; "
            "use openai_api.OpenAIEmbedder, or unset AI_EMBED_MODEL for the local model"
        )
    which = model_sources.Which.EMBEDDER
    fetcher = Fetcher(settings, which, hub or HubConfig.from_env(), progress)
    quantize = model_sources.wants_int8(settings)
    options = evolve(options or EmbedderOptions(threads=settings.embed_threads), quantize=quantize)
    return LocalEmbedder(
        fetcher.locate,
        model_id=model_sources.embed_model_id(settings),
        options=options,
        usage=usage,
        fetcher=fetcher,
        cache_dir=settings.model_cache_dir,
    )
