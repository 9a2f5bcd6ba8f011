"""OpenAI-compatible cloud models: `/embeddings` and `/chat/completions` over aiohttp.

Works with any server speaking that API (Mistral by default, OpenAI, a local llama.cpp).
The HTTP policy is `adapters.http`'s: 429 and 5xx answers are retried with exponential
backoff that honours a short `Retry-After`. This module adds what is the API's own: a 400
saying the batch has too many tokens splits the batch in two and retries the halves; any
final failure fails the whole call with RemoteError (an ingest never stores a partial set
of vectors). Every HTTP attempt records a UsageEvent (tokens from the response's `usage`;
0 tokens and success=False on failure).

The API key is read from `Secret.reveal()` only to build the Authorization header of each
request; it, and any credentials in AI_API_URL, are scrubbed from every text that could
reach a log, an exception, a repr or the database. A `model` the server names is untrusted:
it is kept only when it looks like a model id (`redact.valid_model_name`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from hexlocal_core.adapters.http import Failure, HttpClient, Retry, join_url
from hexlocal_core.adapters.http_body import TooLarge, read_body, read_error_text
from hexlocal_core.adapters.http_policy import RetryPolicy, parse_retry_after, reset_at
from hexlocal_core.config import Secret, Settings
from hexlocal_core.errors import RateLimited, RemoteError
from hexlocal_core.model import ChatReply, UsageEvent
from hexlocal_core.ports import NoLifecycle, UsageSink, Vectors
from hexlocal_core.redact import excerpt, redact_url, scrub, url_secrets, valid_model_name
from hexlocal_core.untrusted import clip

if TYPE_CHECKING:
    import aiohttp

__all__ = ["DEFAULT_RETRY", "OpenAIChat", "OpenAIEmbedder"]

log = logging.getLogger("hexlocal.adapters.openai_api")

# Five tries over about 7.5 s of backoff; a Retry-After up to 30 s is waited for.
DEFAULT_RETRY = RetryPolicy(attempts=5, base_s=0.5, cap_s=30.0, max_retry_after_s=30.0)
MAX_ANSWER_BYTES = 256 * 1024 * 1024  # 200 texts x 3072 dims as JSON is about 15 MB
_TOKEN_LIMIT_HINTS = ("too many tokens", "context length", "context_length", "maximum context")


class _TokenLimit(RemoteError):
    """A 400 saying the request holds too many tokens; embed() bisects on it."""


def _is_token_limit(status: int, body: str) -> bool:
    lowered = body.lower()
    return status == 400 and any(hint in lowered for hint in _TOKEN_LIMIT_HINTS)


class _Api:
    """What the embedder and the chat model share: auth, the HTTP client, errors, usage."""

    def __init__(
        self, settings: Settings, usage: UsageSink | None, retry: RetryPolicy, kind: str
    ) -> None:
        self._url = settings.ai_api_url.rstrip("/")  # requests go here (may hold credentials)
        self.base_url = redact_url(self._url)  # messages and reprs show this
        self._key: Secret = settings.ai_api_key
        self.secrets = (self._key.reveal(), *url_secrets(self._url))
        self._usage = usage
        self._retry = retry
        self._kind = kind
        self._warned_model = False
        self.http = HttpClient(
            timeout_s=settings.http_timeout_s,
            headers={"User-Agent": "hexlocal"},
            secrets=self.secrets,
        )

    def _headers(self) -> dict[str, str]:
        # Per request, never the session's defaults: a session's repr must not hold the key.
        return {"Authorization": f"Bearer {self._key.reveal()}"} if self._key else {}

    def scrub(self, text: str) -> str:
        return self.http.scrub(text)

    def record(self, model: str, prompt: int, completion: int, *, success: bool) -> None:
        if self._usage is not None:
            self._usage.record(
                UsageEvent(model, self._kind, prompt, completion, success=success, local=False)
            )

    def answered_model(self, answered: Any, configured: str) -> str:
        """The model the server says answered, when it is a plausible id; else `configured`.

        The field is the server's to fill: a proxy echoing the request's headers would put
        the key here, and from here into the index and the usage table.
        """
        if answered is None or answered == "":
            return configured
        if valid_model_name(answered, self.secrets):
            return str(answered)
        if not self._warned_model:
            self._warned_model = True
            shape = f"{len(answered)} characters" if isinstance(answered, str) else "not text"
            log.warning(
                "the API at %s named an invalid model (%s); using the configured %r",
                self.base_url,
                shape,
                configured,
            )
        return configured

    async def post(self, path: str, body: Mapping[str, Any], model: str) -> dict[str, Any]:
        """POST with retries; the parsed JSON body of the first 2xx answer.

        Each failed attempt records a failed UsageEvent under `model`; the caller records
        the success, whose token counts only it can read.
        """
        url = join_url(self._url, path)
        shown = clip(redact_url(url), 500)

        async def handle(response: aiohttp.ClientResponse) -> dict[str, Any]:
            if 200 <= response.status < 300:
                try:
                    raw = await read_body(response, MAX_ANSWER_BYTES)
                except TooLarge:
                    self.record(model, 0, 0, success=False)
                    raise RemoteError(
                        f"POST {shown} answered more than {MAX_ANSWER_BYTES} bytes"
                    ) from None
                return self.parsed(shown, raw, model)
            text = await read_error_text(response)
            self.record(model, 0, 0, success=False)
            after = parse_retry_after(response.headers.get("Retry-After"))
            raise self._status_error(shown, response.status, text, after)

        def on_failure(failure: Failure) -> Exception:
            self.record(model, 0, 0, success=False)
            if failure.kind == "timeout":
                return RemoteError(
                    f"POST {shown} timed out after {failure.elapsed_s:.1f}s "
                    f"(HEXLOCAL_HTTP_TIMEOUT_S={self.http.timeout_s:g}); the API is slow or "
                    "unreachable"
                )
            if failure.kind == "connect":
                return Retry(RemoteError(f"cannot connect to {shown} ({failure.detail})"))
            if failure.kind == "cut_short":
                return Retry(RemoteError(f"POST {shown} was cut short ({failure.detail})"))
            return RemoteError(f"POST {shown} failed: {failure.detail}")

        return await self.http.request(
            "POST",
            url,
            policy=self._retry,
            handle=handle,
            on_failure=on_failure,
            headers=self._headers(),
            json=body,
        )

    def _status_error(self, shown: str, status: int, body: str, after: float | None) -> Exception:
        """The error for a non-2xx answer; a Retry when the policy retries its status."""
        if status == 429:
            limited = RateLimited(
                f"POST {shown} answered 429 (rate limited)", reset_at=reset_at(after)
            )
            return Retry(limited, after) if self._retry.retries(429) else limited
        if self._retry.retries(status):
            return Retry(RemoteError(f"POST {shown} answered {status}"), after)
        quoted = excerpt(body, self.secrets)
        if _is_token_limit(status, body):
            return _TokenLimit(f"POST {shown} answered 400 (too many tokens): {quoted}")
        hint = " (check AI_API_KEY)" if status in (401, 403) else ""
        return RemoteError(f"POST {shown} answered {status}{hint}: {quoted}")

    def parsed(self, shown: str, body: bytes, model: str) -> dict[str, Any]:
        try:
            parsed = json.loads(body)
        except (ValueError, RecursionError):
            parsed = None
        if not isinstance(parsed, dict):
            self.record(model, 0, 0, success=False)
            raise RemoteError(f"POST {shown} answered with a body that is not a JSON object")
        return parsed

    def malformed(self, what: str, exc: BaseException) -> RemoteError:
        """An error for an answer of the wrong shape; its detail is server text, scrubbed."""
        return RemoteError(f"{what} is malformed ({clip(scrub(repr(exc), self.secrets))})")


def _usage_tokens(payload: Mapping[str, Any]) -> tuple[int, int]:
    usage = payload.get("usage")
    if not isinstance(usage, Mapping):
        return 0, 0
    prompt = _count(usage.get("prompt_tokens", usage.get("total_tokens", 0)))
    return prompt, _count(usage.get("completion_tokens", 0))


def _count(value: Any) -> int:
    """A token count from the server: a sane non-negative int, else 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if value != value or not 0 <= value < 2**53:  # NaN, negative, absurd
        return 0
    return int(value)


# --- embeddings -------------------------------------------------------------------------


class OpenAIEmbedder(NoLifecycle):
    """Implements `ports.Embedder` (and `Resource`) against `{AI_API_URL}/embeddings`.

    The model name and the dimensions are what the API answers, known after the first
    call (`probe()` makes one): until then `dims` is 0 and `model_id` the configured name.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        usage: UsageSink | None = None,
        retry: RetryPolicy | None = None,
        model: str | None = None,
    ) -> None:
        self._api = _Api(settings, usage, retry or DEFAULT_RETRY, "embed")
        self._model = model or settings.ai_embed_model
        self._batch_size = settings.embed_batch_size
        self._concurrency = settings.embed_concurrency
        self._pause_s = settings.embed_pause_ms / 1000
        self._answered_model: str | None = None
        self._dims = 0

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(url={self._api.base_url!r}, model={self.model_id!r})"

    @property
    def model_id(self) -> str:
        return self._answered_model or self._model

    async def aclose(self) -> None:
        await self._api.http.aclose()

    @property
    def dims(self) -> int:
        return self._dims

    async def probe(self) -> None:
        """Embed one short text to learn the model's name and dimensions."""
        await self.embed(["hexlocal"])

    async def embed_query(self, text: str) -> Vectors:
        return await self.embed([text])

    async def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self._dims), dtype=np.float32)
        items = list(texts)
        batches = [items[i : i + self._batch_size] for i in range(0, len(items), self._batch_size)]
        slots = _Slots(self._concurrency)
        parts = await _all_or_nothing([self._embed_batch(slots, batch) for batch in batches])
        return np.vstack([row for part in parts for row in part]).astype(np.float32)

    async def _embed_batch(self, slots: _Slots, texts: list[str]) -> list[Vectors]:
        async with slots.semaphore:
            if slots.failed:  # another batch failed: the call is lost, send nothing more
                raise RemoteError("cancelled after another batch failed")
            try:
                vectors: Vectors | None = await self._request(texts)
            except _TokenLimit:
                if len(texts) == 1:
                    slots.failed = True
                    raise RemoteError(
                        "one text is longer than the embedding model accepts, even alone; "
                        "use smaller chunks or another AI_EMBED_MODEL"
                    ) from None
                vectors = None
            except BaseException:
                slots.failed = True
                raise
            if self._pause_s:
                await asyncio.sleep(self._pause_s)  # EMBED_PAUSE_MS: each slot rests
        if vectors is not None:
            return [vectors]
        # Outside the slot, so each half waits for a slot of its own.
        middle = len(texts) // 2
        log.info("the API refused %d texts as too many tokens; splitting", len(texts))
        left = await self._embed_batch(slots, texts[:middle])
        right = await self._embed_batch(slots, texts[middle:])
        return left + right

    async def _request(self, texts: list[str]) -> Vectors:
        body = {"model": self._model, "input": texts}
        payload = await self._api.post("/embeddings", body, self.model_id)
        try:
            vectors = self._vectors(payload, len(texts))
        except RemoteError:
            self._api.record(self.model_id, 0, 0, success=False)
            raise
        prompt, _ = _usage_tokens(payload)
        self._api.record(self.model_id, prompt, 0, success=True)
        return vectors

    def _vectors(self, payload: Mapping[str, Any], expected: int) -> Vectors:
        try:
            data = sorted(payload["data"], key=lambda d: int(d.get("index", 0)))
            rows = np.array([d["embedding"] for d in data], dtype=np.float32)
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise self._api.malformed("the embeddings answer", exc) from None
        if rows.ndim != 2 or rows.shape[0] != expected or rows.shape[1] == 0:
            raise RemoteError(f"the embeddings answer has shape {rows.shape} for {expected} texts")
        if not np.isfinite(rows).all():
            raise RemoteError("the embeddings answer holds values that are not finite numbers")
        self._learn(self._api.answered_model(payload.get("model"), self._model), rows.shape[1])
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        normalised: Vectors = (rows / np.clip(norms, 1e-12, None)).astype(np.float32)
        return normalised

    def _learn(self, model: str, dims: int) -> None:
        if self._dims and dims != self._dims:
            raise RemoteError(
                f"the embeddings API changed dimensions from {self._dims} to {dims} mid-way"
            )
        self._dims, self._answered_model = dims, model


class _Slots:
    """The request slots of one embed() call, and whether one of its batches has failed."""

    def __init__(self, size: int) -> None:
        self.semaphore = asyncio.Semaphore(size)
        self.failed = False


async def _all_or_nothing(jobs: list[Awaitable[list[Vectors]]]) -> list[list[Vectors]]:
    """Run jobs concurrently; the first failure cancels the rest and is raised as is."""
    tasks = [asyncio.ensure_future(job) for job in jobs]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


# --- chat -------------------------------------------------------------------------------


class OpenAIChat(NoLifecycle):
    """Implements `ports.ChatModel` (and `Resource`) against `{AI_API_URL}/chat/completions`."""

    def __init__(
        self,
        settings: Settings,
        *,
        usage: UsageSink | None = None,
        retry: RetryPolicy | None = None,
        temperature: float | None = 0.0,
    ) -> None:
        self._api = _Api(settings, usage, retry or DEFAULT_RETRY, "chat")
        self._small = settings.ai_chat_model_small
        self._large = settings.ai_chat_model_large
        self._temperature = temperature

    def __repr__(self) -> str:
        return (
            f"OpenAIChat(url={self._api.base_url!r}, small={self._small!r}, large={self._large!r})"
        )

    @property
    def model_id(self) -> str:
        return self._small

    async def aclose(self) -> None:
        await self._api.http.aclose()

    async def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        json_schema: Mapping[str, Any] | None = None,
        large: bool = False,
    ) -> ChatReply:
        model = self._large if large else self._small
        body = self._body(model, messages, json_schema)
        payload = await self._api.post("/chat/completions", body, model)
        try:
            text = _message_text(payload)
        except RemoteError:
            self._api.record(model, 0, 0, success=False)
            raise
        prompt, completion = _usage_tokens(payload)
        # Usage goes under the configured name (a stable key for accounting); the reply
        # names the model that actually answered.
        self._api.record(model, prompt, completion, success=True)
        return ChatReply(
            text, self._api.answered_model(payload.get("model"), model), prompt, completion
        )

    def _body(
        self,
        model: str,
        messages: Sequence[Mapping[str, str]],
        json_schema: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, "messages": [dict(m) for m in messages]}
        if self._temperature is not None:
            body["temperature"] = self._temperature
        if json_schema is not None:
            # OpenAI accepts only [A-Za-z0-9_-] in the schema name.
            name = re.sub(r"[^A-Za-z0-9_-]", "_", str(json_schema.get("title") or "reply"))[:64]
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": name, "schema": dict(json_schema), "strict": True},
            }
        return body


def _message_text(payload: Mapping[str, Any]) -> str:
    try:
        content = payload["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise RemoteError("the chat answer has no choices[0].message.content") from None
    if isinstance(content, list):  # some servers answer with content parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return "" if content is None else str(content)
