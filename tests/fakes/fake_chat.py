"""A fake OpenAI-compatible chat API on 127.0.0.1 that answers from a script.

    POST /v1/chat/completions   the next scripted step, else the default answer

A step is either a 200 whose assistant message is the given content (JSON of a curation
decision, or garbage), or an HTTP error status (429 carries `Retry-After`). Every request
body is recorded. Aim the real `adapters.openai_api.OpenAIChat` at it with
AI_API_URL=`api_url` (and any AI_API_KEY).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from aiohttp import web
from attrs import define, field, frozen

from tests.fakes.loopback import AsyncServerContext, root_url, serve

PROMPT_TOKENS = 120
COMPLETION_TOKENS = 30


@frozen
class Step:
    content: str | None = None
    status: int = 200
    retry_after: str | None = None


@define
class FakeChat(AsyncServerContext):
    """The fake server. `async with FakeChat() as fake`, then aim AI_API_URL at `api_url`."""

    host: str = "127.0.0.1"
    script: list[Step] = field(factory=list)
    requests: list[dict[str, Any]] = field(factory=list)
    default: str = json.dumps(
        {"action": "create", "target_id": None, "text": None, "reason": "a new fact"}
    )
    _runner: web.AppRunner | None = None

    @property
    def api_url(self) -> str:
        return root_url(self._runner, "FakeChat") + "/v1"

    def answer(self, decision: Mapping[str, Any] | str) -> None:
        """Queues one 200 answer: a decision (sent as JSON) or raw content."""
        content = decision if isinstance(decision, str) else json.dumps(decision)
        self.script.append(Step(content=content))

    def fail(self, status: int, *, retry_after: str | None = "0", times: int = 1) -> None:
        self.script.extend(Step(status=status, retry_after=retry_after) for _ in range(times))

    def messages(self, index: int = -1) -> list[dict[str, str]]:
        """The messages of a recorded request."""
        return list(self.requests[index]["messages"])

    async def start(self) -> FakeChat:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._complete)
        self._runner = await serve(app, self.host)
        return self

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _complete(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        step = self.script.pop(0) if self.script else Step(content=self.default)
        if step.status != 200:
            headers = {"Retry-After": step.retry_after} if step.retry_after is not None else {}
            error = {"error": {"message": "injected fault", "code": step.status}}
            return web.json_response(error, status=step.status, headers=headers)
        return web.json_response(
            {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "model": body.get("model", "fake-model"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": step.content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": PROMPT_TOKENS,
                    "completion_tokens": COMPLETION_TOKENS,
                    "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
                },
            }
        )
