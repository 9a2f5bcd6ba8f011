"""Property test of the MCP argument layer: any arguments, to any tool, get a clear answer.

Hypothesis draws arguments for every tool: each parameter keeps its valid value or takes
a hostile one (lone surrogates, control characters, huge and negative integers, NaN,
deep lists and objects, megabyte strings, wrong types), plus unknown extra arguments.
Every call goes through the in-memory fastmcp Client to the real server and service
(HashingEmbedder, the fake hex.pm, GitHub on a refused loopback port). Each reply must be
a result or an error whose message is one line; never an "internal error" (a non-domain
exception), never a traceback, never a hang (each call is bounded).

The server runs on an event loop in a thread of its own, because hypothesis drives a
plain function: each example submits its call to that loop and waits (bounded).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
from collections.abc import Coroutine, Iterator
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any, TypeVar

import pytest
from fastmcp import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp_types import TextContent

from hexlocal_core.adapters.github import GitHubIssues
from hexlocal_core.config import Settings
from hexlocal_core.service import Hexlocal, build
from hexlocal_mcp.server import create_server
from hexlocal_mcp.tools import TOOLS
from tests.fakes.fake_hex import FakeHex, client_for, settings_for
from tests.support.helpers import HashingEmbedder
from tests.support.tool_calls import VALID_ARGS

pytestmark = pytest.mark.integration

T = TypeVar("T")

EXAMPLES_PER_TOOL = int(
    os.environ.get("HEXLOCAL_FUZZ_EXAMPLES", "300")
)  # 10 tools: 3,000 calls in all
CALL_BOUND_S = 20.0  # per call; a hostile argument must never make the server work for long
LEAKS = ("internal error", "Traceback", "Exception")

# -- hostile values ------------------------------------------------------------------------

every_char = st.characters(codec=None, exclude_categories=())  # surrogates and controls too
texts = st.one_of(
    st.text(every_char, max_size=40),
    st.text(st.sampled_from("\ud800\udc00\ud83d\x00\x1b\n\t \"'\\*()^:-+~|<>"), max_size=20),
    st.sampled_from(["", " ", "jason", "Jason.decode/2", "1.4.4", "x" * 100_000]),
    st.integers(min_value=1, max_value=2_000).map(lambda n: "é" * n),
)
numbers = st.one_of(
    st.integers(),
    st.integers(min_value=-(10**60), max_value=10**60),
    st.sampled_from([0, -1, 21, 51, 2**63, 10**400, -(10**400)]),
    st.floats(allow_nan=True, allow_infinity=True),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
# Keys without surrogates: the SDK client cannot encode such a key to send it (a surrogate
# key over stdio is the transport's case, tests/reliability/test_jsonrpc_stdio.py).
keys = st.text(st.characters(codec="utf-8"), max_size=20)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=3)),
    max_leaves=12,
)


def _deep_list(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


# The in-memory client itself refuses to serialise past ~250 levels; deeper lines over
# stdio are the transport's job (tests/reliability/test_jsonrpc_stdio.py).
deep = st.integers(min_value=50, max_value=200).map(_deep_list)
hostile = st.one_of(values, deep, st.lists(texts, max_size=200))


def parameters(tool: str) -> list[str]:
    spec = next(s for s in TOOLS if s.name == tool)
    names = [n for n in inspect.signature(spec.fn).parameters if n != "ctx"]
    return ["from" if n == "from_" else n for n in names]


def arguments(tool: str) -> st.SearchStrategy[dict[str, Any]]:
    """The tool's valid base call with some parameters replaced, dropped or added."""

    @st.composite
    def build_args(draw: st.DrawFn) -> dict[str, Any]:
        args = dict(VALID_ARGS[tool])
        for name in parameters(tool):
            choice = draw(st.sampled_from(("keep", "hostile", "hostile", "drop")))
            if choice == "hostile":
                args[name] = draw(hostile)
            elif choice == "drop":
                args.pop(name, None)
        if draw(st.booleans()) and draw(st.booleans()):
            args[draw(keys)] = draw(values)  # an argument the tool does not have
        return args

    return build_args()


# -- a server on its own loop ----------------------------------------------------------------


class LoopThread:
    """An event loop in a daemon thread; `run` submits a coroutine and waits (bounded)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class Harness:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.fake = FakeHex()
        self.client: Client[Any] | None = None

    async def start(self) -> None:
        await self.fake.start()
        config = settings_for(
            self.fake,
            self.tmp_path,
            ai_rerank_model="off",
            github_api_url="http://127.0.0.1:9",  # refused at once: no network, no waiting
            ingest_timeout_ms=2_000,
        )

        def factory(s: Settings = config) -> Hexlocal:
            return build(
                s,
                embedder=HashingEmbedder(),
                reranker=None,
                registry=client_for(s),
                issues=GitHubIssues(s, retry_delay_s=0.01),
                load_models=False,
            )

        self.client = Client(create_server(factory))
        await self.client.__aenter__()
        ready = await self.client.call_tool("search_docs", VALID_ARGS["search_docs"])
        assert not ready.is_error

    async def stop(self) -> None:
        if self.client is not None:
            await self.client.__aexit__(None, None, None)
        await self.fake.stop()

    async def call(self, tool: str, args: dict[str, Any]) -> tuple[bool, str]:
        assert self.client is not None
        result = await self.client.call_tool(tool, args, raise_on_error=False)
        text = "\n".join(b.text for b in result.content if isinstance(b, TextContent))
        return result.is_error, text


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LoopThread, Harness]]:
    loop = LoopThread()
    h = Harness(tmp_path_factory.mktemp("fuzz"))
    loop.run(h.start(), 120)
    try:
        yield loop, h
    finally:
        loop.run(h.stop(), 60)
        loop.close()


def judge(is_error: bool, text: str) -> str | None:
    if any(leak in text for leak in LEAKS):
        return f"leaked internals: {text[:300]}"
    if is_error and ("\n" in text.strip() or len(text) > 2_000):
        return f"the error is not one short line ({len(text)} chars): {text[:300]!r}"
    return None


@pytest.mark.parametrize("tool", [spec.name for spec in TOOLS])
def test_any_arguments_get_a_clear_answer(tool: str, harness: tuple[LoopThread, Harness]) -> None:
    loop, h = harness

    @settings(
        max_examples=EXAMPLES_PER_TOOL,
        deadline=None,  # the bound is CALL_BOUND_S per call, enforced below
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(args=arguments(tool))
    def one_call(args: dict[str, Any]) -> None:
        try:
            is_error, text = loop.run(h.call(tool, args), CALL_BOUND_S)
        except FutureTimeout:
            pytest.fail(f"{tool} took over {CALL_BOUND_S} s on {str(args)[:300]}")
        problem = judge(is_error, text)
        assert problem is None, f"{tool}({str(args)[:300]}): {problem}"

    one_call()
