"""A fake OpenAI-compatible API on 127.0.0.1 (random port) for the cloud adapters.

    POST /v1/embeddings         deterministic unit vectors, seeded by each text's hash
    POST /v1/chat/completions   the next scripted reply (JSON or garbage), else "{}"

Every request is recorded (headers, body, start and end times) with the high-water mark
of requests in flight. Failures are scripted per route, consumed in order: a status with
optional Retry-After and delay. `max_inputs` / `max_tokens` make a too-large embeddings
batch answer 400 "Too many tokens", as Mistral does. Responses carry a `usage` field:
prompt tokens are `count_tokens(text)` (whitespace words + 1) summed over the inputs.

    async with FakeOpenAI(dims=8) as fake:
        settings = Settings.from_env({"AI_API_URL": fake.url, "AI_API_KEY": "sk-test"})
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
from aiohttp import web
from attrs import define, field, frozen

from tests.fakes.loopback import AsyncServerContext, root_url, serve

BODY = web.RequestKey("body", dict[str, Any])
CHAT_PROMPT_TOKENS = 42
CHAT_COMPLETION_TOKENS = 7


def count_tokens(text: str) -> int:
    """The fake's token count for one input (what its `usage` reports)."""
    return len(text.split()) + 1


def fake_vector(text: str, dims: int) -> npt.NDArray[np.float32]:
    """The unit vector the fake answers for `text`."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
    vector = np.random.default_rng(seed).standard_normal(dims)
    return (vector / np.linalg.norm(vector)).astype(np.float32)


@frozen
class Recorded:
    path: str
    headers: Mapping[str, str]
    body: Any
    started: float
    finished: float


@frozen
class Scripted:
    """One scripted answer after `delay` seconds: `status` with `body` (an error body by
    default) or `raw` (sent byte for byte as JSON, to control its escapes), or, for a 200
    with neither, the normal answer arriving late."""

    status: int
    retry_after: str | None = None
    delay: float = 0.0
    body: Any = None
    raw: str | None = None


@define
class FakeOpenAI(AsyncServerContext):
    dims: int = 8
    model: str = "fake-embed-v1"  # what the embeddings route answers as its model
    latency: float = 0.0  # every embeddings request takes this long (to build concurrency)
    max_inputs: int | None = None  # a batch with more inputs answers 400 too many tokens
    max_tokens: int | None = None  # likewise for summed count_tokens
    # A hostile or broken server: answers name as their `model` the request's own
    # Authorization header (the key), or this string when set.
    echo_authorization: bool = False
    answer_model: str | None = None
    host: str = "127.0.0.1"
    requests: list[Recorded] = field(factory=list)
    chat_replies: list[str] = field(factory=list)
    max_in_flight: int = 0
    _scripts: dict[str, list[Scripted]] = field(factory=dict)
    _in_flight: int = 0
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return root_url(self._runner, "FakeOpenAI") + "/v1"

    def script(self, route: str, *answers: Scripted) -> None:
        """Queue answers for `route` ("embeddings" or "chat/completions") before normal ones."""
        self._scripts.setdefault(route, []).extend(answers)

    def fail(
        self, route: str, status: int, *, times: int = 1, retry_after: str | None = None
    ) -> None:
        self.script(route, *(Scripted(status, retry_after) for _ in range(times)))

    def reply(self, *contents: str) -> None:
        """Queue chat replies (the assistant message content), used in order."""
        self.chat_replies.extend(contents)

    def to(self, route: str) -> list[Recorded]:
        return [r for r in self.requests if r.path == f"/v1/{route}"]

    async def start(self) -> FakeOpenAI:
        app = web.Application(middlewares=[self._record])
        app.router.add_post("/v1/embeddings", self._embeddings)
        app.router.add_post("/v1/chat/completions", self._chat)
        self._runner = await serve(app, self.host)
        return self

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    @web.middleware
    async def _record(self, request: web.Request, handler: Any) -> web.StreamResponse:
        started = time.monotonic()
        body: Any = None
        self._in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            body = await request.json()
            request[BODY] = body if isinstance(body, dict) else {}
            scripted = self._next_scripted(request.path.removeprefix("/v1/"))
            if scripted is not None:
                await asyncio.sleep(scripted.delay)
                if scripted.status != 200 or scripted.body is not None or scripted.raw:
                    return self._scripted(scripted)
            response: web.StreamResponse = await handler(request)
            return response
        finally:
            self._in_flight -= 1
            self.requests.append(
                Recorded(request.path, dict(request.headers), body, started, time.monotonic())
            )

    def _next_scripted(self, route: str) -> Scripted | None:
        queue = self._scripts.get(route)
        return queue.pop(0) if queue else None

    def _scripted(self, scripted: Scripted) -> web.Response:
        headers = {"Retry-After": scripted.retry_after} if scripted.retry_after else {}
        if scripted.raw is not None:
            return web.Response(
                text=scripted.raw,
                status=scripted.status,
                headers=headers,
                content_type="application/json",
            )
        body = scripted.body or {"error": {"message": "injected fault", "code": scripted.status}}
        return web.json_response(body, status=scripted.status, headers=headers)

    async def _embeddings(self, request: web.Request) -> web.Response:
        body = request[BODY]
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        tokens = sum(count_tokens(t) for t in inputs)
        if self._too_large(len(inputs), tokens):
            message = f"Too many tokens in batch. Max is {self.max_tokens}, got {tokens}."
            error = {"object": "error", "message": message, "type": "invalid_request_error"}
            return web.json_response(error, status=400)
        if self.latency:
            await asyncio.sleep(self.latency)
        data = [
            {"object": "embedding", "index": i, "embedding": fake_vector(t, self.dims).tolist()}
            for i, t in enumerate(inputs)
        ]
        data.reverse()  # the API does not promise order; clients must sort by index
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        model = self._answered_model(request, self.model)
        return web.json_response({"object": "list", "model": model, "data": data, "usage": usage})

    def _answered_model(self, request: web.Request, model: Any) -> Any:
        if self.echo_authorization:
            return request.headers.get("Authorization", "")
        return self.answer_model if self.answer_model is not None else model

    def _too_large(self, inputs: int, tokens: int) -> bool:
        return (self.max_inputs is not None and inputs > self.max_inputs) or (
            self.max_tokens is not None and tokens > self.max_tokens
        )

    async def _chat(self, request: web.Request) -> web.Response:
        body = request[BODY]
        content = self.chat_replies.pop(0) if self.chat_replies else "{}"
        usage = {
            "prompt_tokens": CHAT_PROMPT_TOKENS,
            "completion_tokens": CHAT_COMPLETION_TOKENS,
            "total_tokens": CHAT_PROMPT_TOKENS + CHAT_COMPLETION_TOKENS,
        }
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop",
        }
        model = self._answered_model(request, body.get("model"))
        answer = {"object": "chat.completion", "model": model, "choices": [choice]}
        return web.json_response({**answer, "usage": usage})
