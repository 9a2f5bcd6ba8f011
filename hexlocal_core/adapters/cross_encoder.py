"""The local cross-encoder reranker (default cross-encoder/ms-marco-MiniLM-L6-v2).

Each (query, passage) pair is tokenised as a pair and truncated from the passage side, so
the query always survives whole, at the model's own input length (its position
embeddings: 512 word pieces for the default, which reads every pair the engine hands it
whole; see docs/models.md). Pairs are batched by length (usually one or two
onnxruntime runs for ten candidates, each padded only to its own longest pair) and each
yields one logit, its score. The model loads once, lazily. An output that is not one
logit per pair is a ModelError: the caller falls back to the retrieval order.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from attrs import frozen

from hexlocal_core.adapters import model_sources, onnx_build
from hexlocal_core.adapters.hub import HubConfig
from hexlocal_core.adapters.model_fetch import Fetcher, FetchState
from hexlocal_core.adapters.onnx_runtime import (
    IntArray,
    ModelSlot,
    load_tokenizer,
    open_session,
    pad,
    plan_batches,
    session_feeds,
)
from hexlocal_core.config import Settings
from hexlocal_core.errors import ModelError
from hexlocal_core.model import DownloadProgress, UsageEvent
from hexlocal_core.ports import UsageSink

log = logging.getLogger("hexlocal.adapters.cross_encoder")

# Probe pairs for the int8 agreement check: each query with passages of graded relevance.
_PROBES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "how do I make a synchronous call to a GenServer",
        (
            "GenServer.call/3 makes a synchronous call to the server and waits for its reply.",
            "GenServer.cast/2 sends an asynchronous request to the server.",
            "Supervisors start, stop and restart their children.",
            "Enum.map/2 returns a list where each element is the result of invoking fun.",
            "Plug.Conn.put_resp_header/3 adds a response header to the connection.",
            "Jason.decode!/2 raises Jason.DecodeError when the input is not valid JSON.",
        ),
    ),
    (
        "decode JSON into a map",
        (
            "Jason.decode/2 parses a JSON value from input iodata into Elixir terms.",
            "Jason.encode/2 generates JSON corresponding to input.",
            "Map.new/1 creates a map from an enumerable.",
            "Ecto.Changeset.cast/4 applies the given params as changes for the given data.",
            "Logger backends are configured in config/runtime.exs.",
            "Task.async/1 starts a task that must be awaited on.",
        ),
    ),
)


# The input length of a model whose files do not say (BERT's position embeddings).
DEFAULT_POSITIONS = 512


@frozen
class RerankerOptions:
    # None: the model's own (sentence_bert_config.json, else config.json's position
    # embeddings). The engine hands over the user's query, the title line and the first
    # 360 characters of a chunk; over the shared corpus's 20,973 chunks and the 1,021 eval
    # queries those pairs are 135 word pieces at p50, 435 at p99: a cut at 128 truncates
    # the passage of 54% of them (more than half of it in 30%: pasted errors are long
    # queries), 512 truncates 0.3%, for 1.4-1.5x the CPU per call (bench_rerank_length.py).
    max_length: int | None = None
    threads: int = 2
    max_padding: float = 0.2  # pairs are grouped by length; see onnx_runtime.plan_batches
    quantize: bool = False  # int8, used only when its ranking agrees with fp32 enough:
    min_agreement: float = 0.9  # Spearman's rho with fp32 on the probe pairs, worst query


@frozen
class _Scorer:
    session: Any  # onnxruntime.InferenceSession
    pair_tokenizer: Any  # truncates the passage only
    fallback_tokenizer: Any  # for a query too long to leave room for any passage
    max_padding: float = 0.2

    def _encode(self, query: str, passage: str) -> Any:
        try:
            return self.pair_tokenizer.encode(query, passage)
        except Exception:  # tokenizers: the query alone exceeds max_length
            return self.fallback_tokenizer.encode(query, passage)

    def run(self, query: str, passages: Sequence[str]) -> tuple[list[float], int]:
        """Scores in the passages' order, and the tokens fed.

        Pairs of similar length share one onnxruntime run, padded to its longest: one long
        candidate among short ones would otherwise make all ten pay for its length.
        """
        encodings = [self._encode(query, p) for p in passages]
        rows = [e.ids for e in encodings]
        scores = [0.0] * len(passages)
        for batch in plan_batches(rows, len(rows), len(rows) * 512, self.max_padding):
            types, _ = pad([encodings[i].type_ids for i in batch.positions])
            logits = self._logits(batch.input_ids, batch.attention_mask, types)
            for position, logit in zip(batch.positions, logits, strict=True):
                scores[position] = logit
        return scores, sum(len(r) for r in rows)

    def _logits(self, ids: IntArray, mask: IntArray, types: IntArray) -> list[float]:
        feeds = session_feeds(self.session, ids, mask, types)
        try:
            out = np.asarray(self.session.run(None, feeds)[0])
        except Exception as exc:  # onnxruntime raises untyped errors
            raise ModelError(f"the reranker failed to run: {exc}") from exc
        return _logits(out, ids.shape[0])


@frozen
class _Loaded:
    scorer: _Scorer
    files: model_sources.ModelFiles
    quantized: bool


class LocalCrossEncoder:
    """Implements `ports.Reranker` with onnxruntime; see `build_local_reranker`."""

    def __init__(
        self,
        locate: Callable[[], model_sources.ModelFiles],
        *,
        model_id: str,
        options: RerankerOptions | None = None,
        cache_dir: Path | None = None,
        usage: UsageSink | None = None,
        fetcher: Fetcher | None = None,
    ) -> None:
        self._locate = locate
        self._model_id = model_id
        self._options = options or RerankerOptions()
        self._cache_dir = cache_dir
        self._usage = usage
        self._fetcher = fetcher
        self._state: ModelSlot[_Loaded] = ModelSlot(
            self._load,
            background=self._download_and_load if fetcher and fetcher.may_download else None,
            pending=f"the reranker {model_id.removeprefix('local:')} is being downloaded",
        )

    def __repr__(self) -> str:
        return f"LocalCrossEncoder(model_id={self._model_id!r}, loaded={self.loaded})"

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def loaded(self) -> bool:
        return self._state.ready

    @property
    def files(self) -> model_sources.ModelFiles | None:
        loaded = self._state.peek()
        return loaded.files if loaded else None

    @property
    def quantized(self) -> bool:
        loaded = self._state.peek()
        return loaded.quantized if loaded else False

    @property
    def fetching(self) -> bool:
        """A background download of the model is under way."""
        return self._state.fetching

    @property
    def download_state(self) -> FetchState | None:
        return self._fetcher.state if self._fetcher is not None else None

    async def warm_up(self) -> None:
        """Load now if the model is here; if it is not, start its background download and
        return (ModelError only for a broken model or folder, or with HF_HUB_OFFLINE)."""
        await self._state.warm_up()

    async def aclose(self) -> None:
        await self._state.aclose()

    def ensure_loaded(self) -> None:
        """Idempotent and thread-safe; raises ModelError (naming the fix) when absent, and
        ModelUnavailable(pending=True) while a background download runs."""
        self._state.get()

    def wait_until_loaded(self, timeout: float | None = None) -> bool:
        """Block until a background download and load finish; True when loaded."""
        return self._state.wait(timeout)

    def _load(self) -> _Loaded:
        return self._load_files(self._locate())

    def _download_and_load(self) -> _Loaded:
        assert self._fetcher is not None
        return self._load_files(self._fetcher.fetch())

    def _load_files(self, files: model_sources.ModelFiles) -> _Loaded:
        max_length = input_length(self._options, files)
        pair = load_tokenizer(files.tokenizer_path, max_length, pairs=True)
        fallback = load_tokenizer(files.tokenizer_path, max_length)
        graph, quantized = files.onnx_path, False
        if self._options.quantize:
            graph, quantized = self._quantized(files.onnx_path, pair, fallback)
        session = open_session(graph, self._options.threads)
        scorer = _Scorer(session, pair, fallback, self._options.max_padding)
        # Warms the session up (the first run is several times slower) and checks the output.
        scorer.run("warm up", ["an unrecognised output fails here, at load"])
        log.info("reranker %s loaded from the %s", self._model_id, files.source)
        return _Loaded(scorer, files, quantized)

    def _quantized(self, graph: Path, pair: Any, fallback: Any) -> tuple[Path, bool]:
        def rank_agreement(fp32: Path, int8: Path) -> float:
            a = _Scorer(open_session(fp32, self._options.threads), pair, fallback)
            b = _Scorer(open_session(int8, self._options.threads), pair, fallback)
            return min(_rank_correlation(a.run(q, ps)[0], b.run(q, ps)[0]) for q, ps in _PROBES)

        cache = self._cache_dir or graph.parent
        int8, agreement = onnx_build.ensure_quantized(graph, cache, rank_agreement)
        if agreement >= self._options.min_agreement:
            return int8, True
        log.warning(
            "int8 reranker agrees with fp32 at %.3f < %.3f; using fp32",
            agreement,
            self._options.min_agreement,
        )
        return graph, False

    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        return await asyncio.to_thread(self.score_sync, query, list(passages))

    def score_sync(self, query: str, passages: Sequence[str]) -> list[float]:
        """Blocking score, for worker threads and benchmarks: one float per passage."""
        if not passages:
            return []
        scorer = self._state.get().scorer  # an absent model is not a failed call
        try:
            scores, tokens = scorer.run(query, passages)
        except Exception:
            self._record(0, success=False)
            raise
        self._record(tokens, success=True)
        return scores

    def _record(self, tokens: int, *, success: bool) -> None:
        if self._usage is not None:
            self._usage.record(
                UsageEvent(self._model_id, "rerank", tokens, success=success, local=True)
            )


def _logits(out: np.ndarray[Any, Any], pairs: int) -> list[float]:
    if out.shape in ((pairs, 1), (pairs,)):
        return [float(x) for x in out.reshape(pairs)]
    raise ModelError(
        f"the reranker gave output of shape {out.shape} for {pairs} pairs (expected one "
        "logit per pair); is it a single-label cross-encoder?"
    )


def _rank_correlation(a: list[float], b: list[float]) -> float:
    """Spearman's rho (no tie correction: the probe scores are continuous)."""
    ra = np.argsort(np.argsort(a)).astype(np.float64)
    rb = np.argsort(np.argsort(b)).astype(np.float64)
    if ra.std() == 0 or rb.std() == 0:
        return 1.0 if np.array_equal(ra, rb) else 0.0
    return float(np.corrcoef(ra, rb)[0, 1])


def input_length(options: RerankerOptions, files: model_sources.ModelFiles) -> int:
    """Word pieces per (query, passage) pair: the configured cut, else the model's own;
    never past the model's position embeddings (its graph cannot read further)."""
    wanted = options.max_length or files.max_length or files.positions or DEFAULT_POSITIONS
    return min(wanted, files.positions) if files.positions else wanted


def build_local_reranker(
    settings: Settings,
    usage: UsageSink | None = None,
    *,
    options: RerankerOptions | None = None,
    progress: DownloadProgress | None = None,
    hub: HubConfig | None = None,
) -> LocalCrossEncoder | None:
    """The reranker the settings ask for, or None when AI_RERANK_MODEL is off.

    Nothing is loaded here. It costs nothing when absent: the first `score` (or
    `warm_up`) that finds no offline source starts a background download (unless
    HF_HUB_OFFLINE) and raises `model_sources.ModelUnavailable(pending=True)` at once, as
    does every call until the model is loaded; the search keeps the fused order with a
    notice meanwhile. `progress(message, bytes_done, bytes_total)` hears about the
    download from its thread; `hub` defaults to `HubConfig.from_env()`.
    """
    if not settings.rerank_enabled:
        return None
    which = model_sources.Which.RERANKER
    fetcher = Fetcher(settings, which, hub or HubConfig.from_env(), progress)
    return LocalCrossEncoder(
        fetcher.find,
        model_id=f"local:{model_sources.repo_id(settings, which)}",
        options=options,
        cache_dir=settings.model_cache_dir,
        usage=usage,
        fetcher=fetcher,
    )
