"""The OpenAI-compatible adapters against a loopback fake API."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import numpy as np
import pytest

from hexlocal_core.adapters.http import HttpClient
from hexlocal_core.adapters.http_policy import RetryPolicy
from hexlocal_core.adapters.openai_api import OpenAIChat, OpenAIEmbedder
from hexlocal_core.config import Settings
from hexlocal_core.errors import RateLimited, RemoteError
from hexlocal_core.model import UsageEvent
from hexlocal_core.ports import ChatModel, Embedder
from tests.fakes.fake_openai import (
    CHAT_COMPLETION_TOKENS,
    CHAT_PROMPT_TOKENS,
    FakeOpenAI,
    Scripted,
    count_tokens,
    fake_vector,
)

KEY = "sk-test-6f1c0ffee-secret"


class Usage:
    def __init__(self) -> None:
        self.events: list[UsageEvent] = []

    def record(self, event: UsageEvent) -> None:
        self.events.append(event)


class Sleeps:
    """A RetryPolicy.sleep that records the waits and returns at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture(autouse=True)
async def _closed_after(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[None]:
    """Every adapter made in a test has its session closed after it, as `build()`'s
    composition root closes them (`aclose`); the tests need not each say so."""
    made: list[HttpClient] = []
    original = HttpClient.__init__

    def recording(self: HttpClient, **kwargs: Any) -> None:
        original(self, **kwargs)
        made.append(self)

    monkeypatch.setattr(HttpClient, "__init__", recording)
    yield
    for http in made:
        await http.aclose()


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(dims=8) as server:
        yield server


def settings_for(fake: FakeOpenAI, **env: str) -> Settings:
    return Settings.from_env({"AI_API_URL": fake.url, "AI_API_KEY": KEY, **env})


def embedder_for(
    fake: FakeOpenAI, usage: Usage | None = None, sleeps: Sleeps | None = None, **env: str
) -> OpenAIEmbedder:
    retry = RetryPolicy(
        attempts=4, base_s=0.25, cap_s=10.0, max_retry_after_s=10.0, sleep=sleeps or Sleeps()
    )
    return OpenAIEmbedder(settings_for(fake, **env), usage=usage, retry=retry)


def expected(texts: list[str], dims: int = 8) -> np.ndarray[Any, Any]:
    return np.vstack([fake_vector(t, dims) for t in texts])


TEXTS = [f"text number {i} " + "word " * i for i in range(7)]


# --- embeddings -------------------------------------------------------------------------


async def test_batches_keep_order_and_learn_model_and_dims(fake: FakeOpenAI) -> None:
    embedder = embedder_for(fake, EMBED_BATCH_SIZE="3", AI_EMBED_MODEL="text-embedding-3-small")
    assert isinstance(embedder, Embedder)
    assert (embedder.dims, embedder.model_id) == (0, "text-embedding-3-small")

    vectors = await embedder.embed(TEXTS)

    assert [len(r.body["input"]) for r in fake.to("embeddings")] == [3, 3, 1]
    np.testing.assert_allclose(vectors, expected(TEXTS), atol=1e-6)
    assert vectors.dtype == np.float32
    assert (embedder.dims, embedder.model_id) == (8, "fake-embed-v1")
    assert fake.to("embeddings")[0].headers["Authorization"] == f"Bearer {KEY}"


async def test_probe_learns_dims_and_empty_input_makes_no_request(fake: FakeOpenAI) -> None:
    embedder = embedder_for(fake)
    assert (await embedder.embed([])).shape == (0, 0)
    assert fake.requests == []
    await embedder.probe()
    assert embedder.dims == 8
    assert (await embedder.embed([])).shape == (0, 8)
    query = await embedder.embed_query("GenServer.call/3")
    np.testing.assert_allclose(query, expected(["GenServer.call/3"]), atol=1e-6)


async def test_concurrency_bound_is_honoured() -> None:
    async with FakeOpenAI(dims=4, latency=0.05) as fake:
        embedder = embedder_for(fake, EMBED_BATCH_SIZE="1", EMBED_CONCURRENCY="2")
        vectors = await embedder.embed([f"t{i}" for i in range(8)])
    assert len(fake.to("embeddings")) == 8
    assert fake.max_in_flight == 2
    assert vectors.shape == (8, 4)


async def test_pause_spaces_requests_of_one_slot(fake: FakeOpenAI) -> None:
    embedder = embedder_for(fake, EMBED_BATCH_SIZE="1", EMBED_CONCURRENCY="1", EMBED_PAUSE_MS="60")
    await embedder.embed(["a", "b", "c"])
    starts = [r.started for r in fake.to("embeddings")]
    assert all(later - earlier >= 0.06 for earlier, later in zip(starts, starts[1:], strict=False))


async def test_429_with_retry_after_then_success(fake: FakeOpenAI) -> None:
    usage, sleeps = Usage(), Sleeps()
    fake.fail("embeddings", 429, retry_after="7")
    embedder = embedder_for(fake, usage, sleeps)

    vectors = await embedder.embed(["one", "two"])

    np.testing.assert_allclose(vectors, expected(["one", "two"]), atol=1e-6)
    assert sleeps.waits == [7.0]  # Retry-After, not the 0.25 s backoff
    assert len(fake.to("embeddings")) == 2
    assert [(e.success, e.prompt_tokens) for e in usage.events] == [(False, 0), (True, 4)]


async def test_a_retry_after_longer_than_honoured_fails_at_once(fake: FakeOpenAI) -> None:
    sleeps = Sleeps()
    fake.fail("embeddings", 429, retry_after="3600")
    with pytest.raises(RateLimited) as info:
        await embedder_for(fake, sleeps=sleeps).embed(["one"])
    # Not a capped wait followed by a retry the server said it would refuse: one request,
    # no sleep, and the time the server named.
    assert sleeps.waits == [] and len(fake.to("embeddings")) == 1
    assert str(info.value) == f"POST {fake.url}/embeddings answered 429 (rate limited)"
    assert info.value.reset_at is not None
    reset = datetime.strptime(info.value.reset_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert timedelta(minutes=59) < reset - datetime.now(UTC) <= timedelta(hours=1)


async def test_5xx_retried_with_exponential_backoff(fake: FakeOpenAI) -> None:
    sleeps = Sleeps()
    fake.fail("embeddings", 500)
    fake.fail("embeddings", 503)
    fake.fail("embeddings", 502)
    vectors = await embedder_for(fake, sleeps=sleeps).embed(["x"])
    assert sleeps.waits == [0.25, 0.5, 1.0]
    assert len(fake.to("embeddings")) == 4
    np.testing.assert_allclose(vectors, expected(["x"]), atol=1e-6)


async def test_an_http_date_retry_after_is_honoured(fake: FakeOpenAI) -> None:
    sleeps = Sleeps()
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=3), usegmt=True)
    fake.fail("embeddings", 503, retry_after=when)
    await embedder_for(fake, sleeps=sleeps).embed(["x"])
    [wait] = sleeps.waits
    assert 1.0 < wait <= 3.0  # the date's one-second resolution, not the 0.25 s backoff
    assert len(fake.to("embeddings")) == 2


async def test_a_dropped_connection_is_retried(fake: FakeOpenAI) -> None:
    # Held past the timeout once: a timeout is final for the API (a slow model is not
    # helped by asking again) ...
    sleeps = Sleeps()
    fake.script("embeddings", Scripted(200, delay=2.0))
    with pytest.raises(RemoteError, match="timed out"):
        await embedder_for(fake, sleeps=sleeps, HEXLOCAL_HTTP_TIMEOUT_S="0.2").embed(["x"])
    assert sleeps.waits == []
    # ... but a refused connection is retried (see test_unreachable_server_fails_after_retries).


async def test_token_limit_bisects_the_batch() -> None:
    texts = [f"chunk {i}" for i in range(8)]
    async with FakeOpenAI(dims=8, max_inputs=2) as fake:
        usage = Usage()
        vectors = await embedder_for(fake, usage, EMBED_BATCH_SIZE="8").embed(texts)
    sizes = [len(r.body["input"]) for r in fake.to("embeddings")]
    assert sizes == [8, 4, 2, 2, 4, 2, 2]
    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)
    succeeded = [e for e in usage.events if e.success]
    assert sum(e.prompt_tokens for e in succeeded) == sum(count_tokens(t) for t in texts)
    assert sum(not e.success for e in usage.events) == 3  # the three refused batches


async def test_one_text_over_the_limit_fails(fake: FakeOpenAI) -> None:
    fake.max_tokens = 5
    with pytest.raises(RemoteError, match="longer than the embedding model accepts"):
        await embedder_for(fake).embed(["short", "this one has far too many words in it"])


async def test_final_failure_aborts_the_whole_call(fake: FakeOpenAI) -> None:
    usage = Usage()
    fake.fail("embeddings", 500, times=10)
    embedder = embedder_for(fake, usage, EMBED_BATCH_SIZE="2", EMBED_CONCURRENCY="1")
    with pytest.raises(RemoteError) as info:
        await embedder.embed(TEXTS)
    assert str(info.value) == f"POST {fake.url}/embeddings answered 500; gave up after 4 attempts"
    # The first batch exhausted its attempts; no later batch was sent.
    assert len(fake.to("embeddings")) == 4
    assert [e.success for e in usage.events] == [False] * 4


async def test_a_failing_batch_among_successful_ones_fails_the_call(fake: FakeOpenAI) -> None:
    fake.script("embeddings", Scripted(200), Scripted(400, body={"message": "bad input"}))
    embedder = embedder_for(fake, EMBED_BATCH_SIZE="2", EMBED_CONCURRENCY="1")
    with pytest.raises(RemoteError, match="answered 400: .*bad input"):
        await embedder.embed(TEXTS)
    assert len(fake.to("embeddings")) == 2  # batches 3 and 4 never ran


async def test_429_exhausted_is_rate_limited(fake: FakeOpenAI) -> None:
    sleeps = Sleeps()
    fake.fail("embeddings", 429, times=4, retry_after="2")
    with pytest.raises(RateLimited) as info:
        await embedder_for(fake, sleeps=sleeps).embed(["x"])
    assert info.value.reset_at is not None
    assert len(fake.to("embeddings")) == 4 and sleeps.waits == [2.0, 2.0, 2.0]
    assert str(info.value).endswith("answered 429 (rate limited); gave up after 4 attempts")


async def test_malformed_answer_is_a_remote_error(fake: FakeOpenAI) -> None:
    fake.script("embeddings", Scripted(200, body={"data": [{"index": 0, "embedding": [1.0]}]}))
    with pytest.raises(RemoteError, match="shape"):
        await embedder_for(fake).embed(["a", "b"])


async def test_timeout_names_the_url_not_the_key(fake: FakeOpenAI) -> None:
    fake.script("embeddings", Scripted(200, delay=2.0))
    embedder = embedder_for(fake, HEXLOCAL_HTTP_TIMEOUT_S="0.2")
    with pytest.raises(RemoteError) as info:
        await embedder.embed(["slow"])
    message = str(info.value)
    assert f"POST {fake.url}/embeddings timed out" in message
    assert KEY not in message


async def test_unreachable_server_fails_after_retries() -> None:
    async with FakeOpenAI() as fake:
        url = fake.url  # the port is closed once the fake stops
    sleeps = Sleeps()
    embedder = OpenAIEmbedder(
        Settings.from_env({"AI_API_URL": url, "AI_API_KEY": KEY}),
        retry=RetryPolicy(attempts=3, base_s=0.01, sleep=sleeps),
    )
    with pytest.raises(RemoteError) as info:
        await embedder.embed(["x"])
    assert str(info.value).startswith(f"cannot connect to {url}/embeddings")
    assert str(info.value).endswith("; gave up after 3 attempts")
    assert sleeps.waits == [0.01, 0.02]


async def test_key_never_in_logs_errors_or_reprs(
    fake: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    usage = Usage()
    # A server that echoes the key back in its error body must not leak it either.
    fake.fail("embeddings", 503)
    fake.script("embeddings", Scripted(401, body={"error": f"invalid key {KEY}"}))
    embedder = embedder_for(fake, usage)
    with pytest.raises(RemoteError) as info:
        await embedder.embed(["x"])
    chat = OpenAIChat(settings_for(fake), usage=usage)
    fake.fail("chat/completions", 403)
    with pytest.raises(RemoteError) as chat_info:
        await chat.complete([{"role": "user", "content": "hi"}])

    assert "check AI_API_KEY" in str(info.value) and "****" in str(info.value)
    texts = [str(info.value), str(chat_info.value), repr(info.value), repr(embedder), repr(chat)]
    texts += [caplog.text, repr(usage.events), repr(settings_for(fake))]
    assert caplog.text  # the retry was logged
    for text in texts:
        assert KEY not in text


def test_credentials_in_the_url_are_never_shown() -> None:
    settings = Settings.from_env({"AI_API_URL": "https://user:pa55@api.example/v1?key=k3y"})
    shown = repr(OpenAIEmbedder(settings)) + repr(OpenAIChat(settings))
    assert "api.example/v1" in shown
    assert "pa55" not in shown and "k3y" not in shown


async def test_no_key_sends_no_authorization(fake: FakeOpenAI) -> None:
    embedder = OpenAIEmbedder(Settings.from_env({"AI_API_URL": fake.url}))
    await embedder.embed(["x"])
    assert "Authorization" not in fake.to("embeddings")[0].headers


# --- chat -------------------------------------------------------------------------------

SCHEMA = {
    "title": "curation decision",
    "type": "object",
    "properties": {"action": {"type": "string"}},
    "required": ["action"],
    "additionalProperties": False,
}


async def test_chat_json_schema_path(fake: FakeOpenAI) -> None:
    usage = Usage()
    chat = OpenAIChat(settings_for(fake, AI_CHAT_MODEL_SMALL="small-1"), usage=usage)
    assert isinstance(chat, ChatModel)
    fake.reply(json.dumps({"action": "create"}))
    messages = [{"role": "system", "content": "decide"}, {"role": "user", "content": "fact"}]

    reply = await chat.complete(messages, json_schema=SCHEMA)

    assert json.loads(reply.text) == {"action": "create"}
    assert (reply.model, reply.prompt_tokens, reply.completion_tokens) == (
        "small-1",
        CHAT_PROMPT_TOKENS,
        CHAT_COMPLETION_TOKENS,
    )
    body = fake.to("chat/completions")[0].body
    assert body["model"] == "small-1" and body["messages"] == messages
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "curation_decision", "schema": SCHEMA, "strict": True},
    }
    assert usage.events == [
        UsageEvent("small-1", "chat", CHAT_PROMPT_TOKENS, CHAT_COMPLETION_TOKENS, local=False)
    ]


async def test_chat_large_model_and_garbage_passed_through(fake: FakeOpenAI) -> None:
    chat = OpenAIChat(settings_for(fake, AI_CHAT_MODEL_LARGE="large-2"))
    fake.reply("this is not { json")
    reply = await chat.complete([{"role": "user", "content": "x"}], large=True)
    assert reply.text == "this is not { json"  # parsing is the caller's business
    body = fake.to("chat/completions")[0].body
    assert body["model"] == "large-2" and "response_format" not in body


async def test_chat_failure_records_usage_and_raises(fake: FakeOpenAI) -> None:
    usage = Usage()
    chat = OpenAIChat(
        settings_for(fake, AI_CHAT_MODEL_SMALL="small-1"),
        usage=usage,
        retry=RetryPolicy(attempts=2, base_s=0.0),
    )
    fake.fail("chat/completions", 500, times=2)
    with pytest.raises(RemoteError, match="chat/completions answered 500; gave up after 2"):
        await chat.complete([{"role": "user", "content": "x"}])
    assert usage.events == [UsageEvent("small-1", "chat", 0, success=False)] * 2
    assert len(fake.to("chat/completions")) == 2


async def test_malformed_chat_answer_is_a_failure(fake: FakeOpenAI) -> None:
    usage = Usage()
    chat = OpenAIChat(settings_for(fake, AI_CHAT_MODEL_SMALL="small-1"), usage=usage)
    fake.script("chat/completions", Scripted(200, body={"choices": []}))
    with pytest.raises(RemoteError, match="no choices"):
        await chat.complete([{"role": "user", "content": "x"}])
    assert usage.events == [UsageEvent("small-1", "chat", 0, success=False)]


# --- lifecycle, untrusted answers, credentials in the URL -------------------------------


async def test_one_session_serves_every_call_until_aclose(fake: FakeOpenAI) -> None:
    embedder = embedder_for(fake, EMBED_BATCH_SIZE="1")
    await embedder.aclose()  # never opened: nothing to do
    await embedder.embed(["a", "b", "c"])
    session = embedder._api.http.session()
    await embedder.embed(["d"])
    assert embedder._api.http.session() is session
    await embedder.aclose()
    await embedder.aclose()
    assert session.closed and not embedder._api.http.open
    await embedder.embed(["e"])  # used again: a new session
    assert embedder._api.http.session() is not session


async def test_a_hostile_model_field_is_not_kept(
    fake: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    usage = Usage()
    fake.echo_authorization = True  # the answer names "Bearer <key>" as its model
    embedder = embedder_for(fake, usage, AI_EMBED_MODEL="mistral-embed")
    await embedder.embed(["x"])
    await embedder.embed(["y"])
    chat = OpenAIChat(settings_for(fake, AI_CHAT_MODEL_SMALL="small-1"), usage=usage)
    reply = await chat.complete([{"role": "user", "content": "hi"}])

    assert embedder.model_id == "mistral-embed" and embedder.dims == 8
    assert reply.model == "small-1"
    assert {e.model for e in usage.events} == {"mistral-embed", "small-1"}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2  # once per adapter, not per batch
    assert "named an invalid model (" in warnings[0] and "using the configured" in warnings[0]
    assert KEY not in caplog.text and KEY[3:] not in caplog.text


@pytest.mark.parametrize(
    "model", ["x" * 201, "two words", "bad\nname", KEY, f"m-{KEY[4:16]}", 42, ["a"]]
)
async def test_every_invalid_model_falls_back(fake: FakeOpenAI, model: object) -> None:
    fake.answer_model = model  # type: ignore[assignment]
    embedder = embedder_for(fake, AI_EMBED_MODEL="mistral-embed")
    await embedder.embed(["x"])
    assert embedder.model_id == "mistral-embed"


async def test_a_plausible_model_field_is_kept(fake: FakeOpenAI) -> None:
    fake.answer_model = "mistral-embed-2312"
    embedder = embedder_for(fake, AI_EMBED_MODEL="mistral-embed")
    await embedder.embed(["x"])
    assert embedder.model_id == "mistral-embed-2312"


@pytest.mark.parametrize(
    "raw",
    [
        '{"error": "invalid key ' + KEY.replace("-", "\\u002d") + '"}',
        '{"error": "invalid key ' + "".join(f"\\u{ord(c):04x}" for c in KEY) + '"}',
        '{"error": "see https:\\/\\/x\\/keys ' + KEY.replace("-", "\\u002D") + '"}',
        '{"error": "' + "p" * 280 + " " + KEY + '"}',  # the 300-character cut inside the key
        '{"error": "' + "p" * 284 + " " + KEY + '"}',  # only the key's prefix before the cut
    ],
)
async def test_escaped_and_cut_echoes_of_the_key_are_scrubbed(fake: FakeOpenAI, raw: str) -> None:
    fake.script("embeddings", Scripted(401, raw=raw))
    with pytest.raises(RemoteError) as info:
        await embedder_for(fake).embed(["x"])
    message = str(info.value)
    assert "check AI_API_KEY" in message and "****" in message
    for piece in (KEY, KEY[3:], KEY[:8], KEY[-8:], KEY[6:14]):
        assert piece not in message, (piece, message)


async def test_credentials_in_the_url_are_used_and_masked(
    fake: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    host = fake.url.removeprefix("http://")
    url = f"http://aiuser:aipass99@{host}?api_key=aiquery99"
    embedder = embedder_for(fake, AI_API_URL=url)
    await embedder.embed(["x"])
    request = fake.to("embeddings")[0]
    assert request.headers["Authorization"] == f"Bearer {KEY}"  # the key wins over userinfo
    fake.fail("embeddings", 503)
    fake.script("embeddings", Scripted(400, body={"error": "aipass99 aiquery99 rejected"}))
    with pytest.raises(RemoteError) as info:
        await embedder.embed(["y"])
    assert str(info.value).startswith(f"POST http://****@{host}/embeddings?api_key=**** answered")
    for text in (str(info.value), repr(embedder), caplog.text):
        assert "aipass99" not in text and "aiquery99" not in text, text
