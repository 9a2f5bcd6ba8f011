"""OpenAI-compatible cloud models: `/embeddings` and `/chat/completions` over aiohttp.

Works with any server speaking that API (Mistral by default, OpenAI, a local llama.cpp).
429 and 5xx answers are retried with exponential backoff that honours `Retry-After`; a
400 saying the batch has too many tokens splits the batch in two and retries the halves.
Any final failure fails the whole call with RemoteError: an ingest never stores a partial
set of vectors. Every HTTP attempt records a UsageEvent (tokens from the response's
`usage`; 0 tokens and success=False on failure).

The API key is read from `Secret.reveal()` only to build the Authorization header; it is
scrubbed from any text that could reach a log, an exception or a repr.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np
from attrs import field, frozen, validators

from hexlocal_core.config import Secret, Settings
from hexlocal_core.errors import RateLimited, RemoteError
from hexlocal_core.model import ChatReply, UsageEvent
from hexlocal_core.ports import UsageSink, Vectors

if TYPE_CHECKING:
    import aiohttp

log = logging.getLogger("hexlocal.adapters.openai_api")

_TOKEN_LIMIT_HINTS = ("too many tokens", "context length", "context_length", "maximum context")


@frozen
class RetryPolicy:
    """How failed requests are retried. Tests inject a tiny base and a recording sleep."""

    attempts: int = field(default=5, validator=validators.ge(1))  # tries, the first included
    base_s: float = 0.5  # first backoff; doubles on each retry
    cap_s: float = 30.0  # the longest single wait, Retry-After included
    sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep, repr=False)

    def wait_s(self, retry: int, retry_after: float | None) -> float:
        """Seconds to wait before retry number `retry` (0-based)."""
        if retry_after is not None:
            return min(self.cap_s, max(0.0, retry_after))
        return min(self.cap_s, self.base_s * 2.0**retry)


class _TokenLimit(RemoteError):
    """A 400 saying the request holds too many tokens; embed() bisects on it."""


def parse_retry_after(value: str | None) -> float | None:
    """`Retry-After` as seconds from now: delta-seconds or an HTTP date."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _is_token_limit(status: int, body: str) -> bool:
    lowered = body.lower()
    return status == 400 and any(hint in lowered for hint in _TOKEN_LIMIT_HINTS)


@frozen
class _Reply:
    status: int
    body: str
    retry_after: float | None


class _Api:
    """The HTTP core shared by the embedder and the chat model: auth, retries, errors, usage."""

    def __init__(
        self, settings: Settings, usage: UsageSink | None, retry: RetryPolicy, kind: str
    ) -> None:
        self.base_url = _without_credentials(settings.ai_api_url.rstrip("/"))
        self._url = settings.ai_api_url.rstrip("/")
        self._key: Secret = settings.ai_api_key
        self._timeout_s = settings.http_timeout_s
        self._usage = usage
        self._retry = retry
        self._kind = kind

    def session(self, connections: int) -> aiohttp.ClientSession:
        import aiohttp

        # One session per call: the ports have no close hook, and a session must not
        # outlive the event loop it was made in.
        return aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=self._timeout_s),
            connector=aiohttp.TCPConnector(limit=connections),
            headers=self._headers(),
        )

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "User-Agent": "hexlocal"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key.reveal()}"
        return headers

    def scrub(self, text: str) -> str:
        secret = self._key.reveal()
        return text.replace(secret, "****") if secret else text

    def record(self, model: str, prompt: int, completion: int, *, success: bool) -> None:
        if self._usage is not None:
            self._usage.record(
                UsageEvent(model, self._kind, prompt, completion, success=success, local=False)
            )

    async def post(
        self, session: aiohttp.ClientSession, path: str, body: Mapping[str, Any], model: str
    ) -> dict[str, Any]:
        """POST with retries; the parsed JSON body of the first 2xx answer.

        Each failed attempt records a failed UsageEvent under `model`; the caller records
        the success, whose token counts only it can read.
        """
        url = f"{self.base_url}{path}"  # for messages; requests go to self._url
        last, reply = f"POST {url} was not attempted", None
        for retry in range(self._retry.attempts):
            reply = await self._attempt(session, f"{self._url}{path}", url, body, model)
            if reply is None:  # connection refused or reset: worth another try
                last = f"cannot connect to {url}"
            elif 200 <= reply.status < 300:
                return self.parsed(url, reply.body, model)
            else:
                self.record(model, 0, 0, success=False)
                last = self._check_retryable(url, reply)
            if retry + 1 < self._retry.attempts:
                wait = self._retry.wait_s(retry, reply.retry_after if reply else None)
                log.warning("%s; retry %d in %.2fs", last, retry + 1, wait)
                await self._retry.sleep(wait)
        raise self._final_error(last, reply)

    async def _attempt(
        self,
        session: aiohttp.ClientSession,
        target: str,
        url: str,
        body: Mapping[str, Any],
        model: str,
    ) -> _Reply | None:
        import aiohttp

        started = time.monotonic()
        try:
            async with session.post(target, json=body) as resp:
                text = await resp.text()
                return _Reply(resp.status, text, parse_retry_after(resp.headers.get("Retry-After")))
        except TimeoutError:
            self.record(model, 0, 0, success=False)
            elapsed = time.monotonic() - started
            raise RemoteError(
                f"POST {url} timed out after {elapsed:.1f}s (HEXLOCAL_HTTP_TIMEOUT_S="
                f"{self._timeout_s:g}); the API is slow or unreachable"
            ) from None
        except aiohttp.ClientError as exc:
            self.record(model, 0, 0, success=False)
            log.warning("POST %s failed: %s", url, self.scrub(type(exc).__name__))
            return None

    def _check_retryable(self, url: str, reply: _Reply) -> str:
        """A description of a retryable failure; raises at once for the others."""
        excerpt = self.scrub(reply.body[:300])
        if reply.status == 429 or reply.status >= 500:
            return f"POST {url} answered {reply.status}"
        if _is_token_limit(reply.status, reply.body):
            raise _TokenLimit(f"POST {url} answered 400 (too many tokens): {excerpt}")
        hint = " (check AI_API_KEY)" if reply.status in (401, 403) else ""
        raise RemoteError(f"POST {url} answered {reply.status}{hint}: {excerpt}")

    def _final_error(self, last: str, reply: _Reply | None) -> RemoteError:
        message = f"{last}; gave up after {self._retry.attempts} attempts"
        if reply is not None and reply.status == 429:
            reset = None
            if reply.retry_after is not None:
                reset = (datetime.now(UTC) + timedelta(seconds=reply.retry_after)).isoformat()
            return RateLimited(f"{message} (rate limited)", reset_at=reset)
        return RemoteError(message)

    def parsed(self, url: str, body: str, model: str) -> dict[str, Any]:
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            self.record(model, 0, 0, success=False)
            raise RemoteError(f"POST {url} answered with a body that is not a JSON object")
        return parsed


def _without_credentials(url: str) -> str:
    """The URL as shown in messages: no user:password@, no query (either may hold a key)."""
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _usage_tokens(payload: Mapping[str, Any]) -> tuple[int, int]:
    usage = payload.get("usage")
    if not isinstance(usage, Mapping):
        return 0, 0
    prompt = usage.get("prompt_tokens", usage.get("total_tokens", 0))
    completion = usage.get("completion_tokens", 0)
    return (int(prompt or 0), int(completion or 0))


# --- embeddings -------------------------------------------------------------------------


class OpenAIEmbedder:
    """Implements `ports.Embedder` against `{AI_API_URL}/embeddings`.

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
        self._api = _Api(settings, usage, retry or RetryPolicy(), "embed")
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
        async with self._api.session(self._concurrency) as session:
            parts = await _all_or_nothing(
                [self._embed_batch(session, slots, batch) for batch in batches]
            )
        return np.vstack([row for part in parts for row in part]).astype(np.float32)

    async def _embed_batch(
        self, session: aiohttp.ClientSession, slots: _Slots, texts: list[str]
    ) -> list[Vectors]:
        async with slots.semaphore:
            if slots.failed:  # another batch failed: the call is lost, send nothing more
                raise RemoteError("cancelled after another batch failed")
            try:
                vectors: Vectors | None = await self._request(session, texts)
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
        left = await self._embed_batch(session, slots, texts[:middle])
        right = await self._embed_batch(session, slots, texts[middle:])
        return left + right

    async def _request(self, session: aiohttp.ClientSession, texts: list[str]) -> Vectors:
        body = {"model": self._model, "input": texts}
        payload = await self._api.post(session, "/embeddings", body, self.model_id)
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
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise RemoteError(f"the embeddings answer is malformed ({exc!r})") from None
        if rows.ndim != 2 or rows.shape[0] != expected or rows.shape[1] == 0:
            raise RemoteError(f"the embeddings answer has shape {rows.shape} for {expected} texts")
        self._learn(str(payload.get("model") or self._model), rows.shape[1])
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


class OpenAIChat:
    """Implements `ports.ChatModel` against `{AI_API_URL}/chat/completions`."""

    def __init__(
        self,
        settings: Settings,
        *,
        usage: UsageSink | None = None,
        retry: RetryPolicy | None = None,
        temperature: float | None = 0.0,
    ) -> None:
        self._api = _Api(settings, usage, retry or RetryPolicy(), "chat")
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

    async def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        json_schema: Mapping[str, Any] | None = None,
        large: bool = False,
    ) -> ChatReply:
        model = self._large if large else self._small
        body = self._body(model, messages, json_schema)
        async with self._api.session(1) as session:
            payload = await self._api.post(session, "/chat/completions", body, model)
        try:
            text = _message_text(payload)
        except RemoteError:
            self._api.record(model, 0, 0, success=False)
            raise
        prompt, completion = _usage_tokens(payload)
        # Usage goes under the configured name (a stable key for accounting); the reply
        # names the model that actually answered.
        self._api.record(model, prompt, completion, success=True)
        return ChatReply(text, str(payload.get("model") or model), prompt, completion)

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
