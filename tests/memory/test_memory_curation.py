"""Curation with a chat model: every action, malformed answers, rate limits, the thresholds
the model is held to, and token usage. The model is a loopback OpenAI-compatible fake
answering from a script; similarities come from a TableEmbedder."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from attrs import define

from hexlocal_core.errors import ModelError
from hexlocal_core.index.sqlite.db import rows, scalar
from hexlocal_core.memory.policy import Action, Neighbour
from hexlocal_core.memory.prompt import parse_answer
from hexlocal_core.service import Hexlocal
from tests.fakes.fake_chat import COMPLETION_TOKENS, PROMPT_TOKENS, FakeChat
from tests.support.helpers import db
from tests.support.memory import TableEmbedder, curated_service, log_rows

pytestmark = pytest.mark.integration

BASE = "anubis_mcp 1.14.0: roots/list deadlocks the stdio transport"
NEW = "anubis_mcp 1.14.0: sampling requests also hang over stdio"
SMALL_MODEL = "mistral-small-latest"


@define
class Curation:
    service: Hexlocal
    emb: TableEmbedder
    fake: FakeChat

    async def submit(self, text: str, sim: float, **kw: Any) -> dict[str, Any]:
        """Remembers `text` placed at `sim` from the anchor; returns its final status."""
        self.emb.place(text, sim)
        (answer,) = await self.service.remember([text], **kw)
        assert await self.service.drain_memory(timeout=10)
        (status,) = self.service.remember_status([answer["request_id"]])
        return status

    async def seed(self, text: str = BASE, **kw: Any) -> int:
        """Stores the anchor memory (nothing to compare with: no model call)."""
        asked = len(self.fake.requests)
        status = await self.submit(text, 1.0, **kw)
        assert status["action"] == "create" and len(self.fake.requests) == asked
        return int(status["memory_id"])

    def memory(self, memory_id: int) -> dict[str, Any]:
        return rows(db(self.service), "SELECT * FROM memories WHERE id = ?", (memory_id,))[0]

    def count(self) -> int:
        return int(scalar(db(self.service), "SELECT count(*) FROM memories") or 0)


@pytest.fixture
async def cur(tmp_path: Path) -> AsyncIterator[Curation]:
    async with FakeChat() as fake:
        emb = TableEmbedder()
        service = curated_service(tmp_path, fake.api_url, embedder=emb)
        try:
            yield Curation(service, emb, fake)
        finally:
            await service.aclose()


def decision(action: str, target_id: int | None = None, text: str | None = None) -> dict[str, Any]:
    return {"action": action, "target_id": target_id, "text": text, "reason": f"{action} it"}


# -- each action --------------------------------------------------------------------------


async def test_create_asks_the_model_with_the_neighbours_and_the_rules(cur: Curation) -> None:
    base = await cur.seed()
    cur.fake.answer(decision("create"))

    status = await cur.submit(NEW, 0.85)

    assert (status["action"], status["curated"], status["model"]) == ("create", True, SMALL_MODEL)
    assert status["memory_id"] != base and cur.count() == 2
    assert cur.memory(status["memory_id"])["curated"] == 1
    system, user = cur.fake.messages()
    assert "at least 0.90" in system["content"] and "never discard" in system["content"]
    schema = cur.fake.requests[-1]["response_format"]["json_schema"]
    assert schema["name"] == "memory_curation" and schema["schema"]["required"]
    payload = json.loads(user["content"])
    assert payload["submission"]["text"] == NEW
    assert [(m["id"], m["similarity"]) for m in payload["memories"]] == [(base, 0.85)]


async def test_append_adds_the_fact_to_the_target(cur: Curation) -> None:
    base = await cur.seed()
    cur.fake.answer(decision("append", base))

    status = await cur.submit(NEW, 0.85, tags=["stdio"])

    assert (status["action"], status["memory_id"], status["curated"]) == ("append", base, True)
    row = cur.memory(base)
    assert row["text"] == f"{BASE}\n{NEW}" and row["curated"] == 1 and row["tags"] == '["stdio"]'
    assert cur.count() == 1
    (found,) = await cur.service.recall("sampling")  # the FTS row was rewritten
    assert found.id == base
    assert [h["action"] for h in found.history] == ["create", "append"]
    assert scalar(db(cur.service), "SELECT count(*) FROM memory_vecs") == 1


async def test_merge_rewrites_the_target_with_the_models_text(cur: Curation) -> None:
    base = await cur.seed()
    merged = "anubis_mcp 1.14.0: roots/list and sampling requests deadlock over stdio"
    cur.fake.answer(decision("merge", base, merged))

    status = await cur.submit(NEW, 0.88)

    assert (status["action"], status["memory_id"]) == ("merge", base)
    assert cur.memory(base)["text"] == merged and cur.count() == 1
    cur.emb.place("transport", 0.0)  # orthogonal to the merged text's vector
    assert await cur.service.recall("transport") == []  # only the old text said it
    assert [m.id for m in await cur.service.recall("sampling deadlock")] == [base]


async def test_replace_puts_the_submission_in_the_targets_place(cur: Curation) -> None:
    base = await cur.seed(package="anubis_mcp", version="1.14.0")
    fixed = "anubis_mcp 1.15.0 fixed the roots/list deadlock"
    cur.fake.answer(decision("replace", base))

    status = await cur.submit(fixed, 0.9, package="anubis_mcp", version="1.15.0")

    assert (status["action"], status["memory_id"]) == ("replace", base)
    row = cur.memory(base)
    assert (row["text"], row["version"]) == (fixed, "1.15.0")


async def test_deprecate_retires_the_target_and_stores_the_new_fact(cur: Curation) -> None:
    base = await cur.seed()
    newer = "roots/list works again over stdio since anubis_mcp 1.15.0"
    cur.fake.answer(decision("deprecate", base))

    status = await cur.submit(newer, 0.86)

    assert status["action"] == "deprecate" and status["memory_id"] != base
    assert cur.memory(base)["deprecated"] == 1
    assert [m.text for m in await cur.service.recall("stdio roots/list")] == [newer]
    both = await cur.service.recall("stdio roots/list", include_deprecated=True)
    assert {m.text for m in both} == {BASE, newer}
    old = next(m for m in both if m.id == base)
    assert old.deprecated and [h["action"] for h in old.history] == ["create", "deprecate"]
    new = next(m for m in both if m.id != base)
    assert f"replaces deprecated memory {base}" in new.history[0]["reason"]


async def test_discard_keeps_the_store_as_it_was(cur: Curation) -> None:
    base = await cur.seed()
    cur.fake.answer(decision("discard", base))

    status = await cur.submit("anubis_mcp 1.14.0 roots/list deadlocks on stdio", 0.95)

    assert (status["action"], status["memory_id"], status["curated"]) == ("discard", base, True)
    assert cur.count() == 1
    assert [r["action"] for r in log_rows(cur.service, status["request_id"])] == ["discard"]


async def test_a_model_create_of_the_same_text_is_discarded(cur: Curation) -> None:
    base = await cur.seed()
    cur.fake.answer(decision("create"))

    status = await cur.submit(f"{BASE.upper()}!", 0.5)  # normalised equal: similarity 1

    assert (status["action"], status["memory_id"]) == ("discard", base)
    assert "holds the same text" in status["reason"] and cur.count() == 1


# -- thresholds the model is held to --------------------------------------------------------


@pytest.mark.parametrize(("sim", "asked"), [(0.7999, 0), (0.80, 1)])
async def test_the_model_is_asked_only_from_the_create_floor_up(
    cur: Curation, sim: float, asked: int
) -> None:
    await cur.seed()
    cur.fake.answer(decision("create"))

    status = await cur.submit(NEW, sim)

    assert len(cur.fake.requests) == asked
    assert status["curated"] is bool(asked)
    if not asked:
        assert status["reason"] == "nearest similarity 0.7999 < 0.80"


@pytest.mark.parametrize(("sim", "action"), [(0.90, "discard"), (0.8999, "create")])
async def test_discard_is_honoured_only_from_the_discard_threshold_up(
    cur: Curation, sim: float, action: str
) -> None:
    base = await cur.seed()
    cur.fake.answer(decision("discard", base))

    status = await cur.submit(NEW, sim)

    assert status["action"] == action
    if action == "create":
        assert "0.8999 < 0.90: kept" in status["reason"] and status["curated"] is False
        assert cur.count() == 2


# -- failures never lose the text -----------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("Sure! I would append it.", "not JSON"),
        ('["create"]', "not a JSON object"),
        ('{"action": "explode", "target_id": null, "text": null, "reason": ""}', "unknown action"),
        ('{"action": "append", "target_id": null, "text": null, "reason": ""}', "without a target"),
        ('{"action": "append", "target_id": 999, "text": null, "reason": ""}', "not one of"),
        ('{"action": "merge", "target_id": 1, "text": "", "reason": ""}', "without the merged"),
    ],
)
async def test_a_malformed_answer_creates_uncurated_and_logs_why(
    cur: Curation, content: str, why: str
) -> None:
    await cur.seed()
    cur.fake.answer(content)

    status = await cur.submit(NEW, 0.85)

    assert (status["action"], status["curated"]) == ("create", False)
    assert "curation model failed" in status["reason"] and why in status["reason"]
    (logged,) = log_rows(cur.service, status["request_id"])
    assert logged["memory_id"] == status["memory_id"] and why in logged["reason"]
    assert cur.memory(status["memory_id"])["text"] == NEW


async def test_a_failing_chat_api_creates_uncurated(cur: Curation) -> None:
    await cur.seed()
    cur.fake.fail(400, retry_after=None)

    status = await cur.submit(NEW, 0.85)

    assert (status["action"], status["curated"]) == ("create", False)
    assert "curation model failed" in status["reason"] and cur.count() == 2


async def test_a_429_is_retried_and_the_answer_applied(cur: Curation) -> None:
    base = await cur.seed()
    cur.fake.fail(429, retry_after="0")
    cur.fake.answer(decision("append", base))

    status = await cur.submit(NEW, 0.85)

    assert (status["action"], status["curated"]) == ("append", True)
    assert len(cur.fake.requests) == 2


async def test_a_fenced_json_answer_is_accepted(cur: Curation) -> None:
    base = await cur.seed()
    cur.fake.answer("```json\n" + json.dumps(decision("append", base)) + "\n```")

    assert (await cur.submit(NEW, 0.85))["action"] == "append"


async def test_curation_calls_record_token_usage(cur: Curation) -> None:
    await cur.seed()
    cur.fake.answer(decision("create"))
    await cur.submit(NEW, 0.85)

    report = cur.service.get_token_usage()
    chats = [m for m in report.by_model if "chat" in m.kinds]

    assert [(m.model, m.calls, m.prompt_tokens, m.completion_tokens) for m in chats] == [
        (SMALL_MODEL, 1, PROMPT_TOKENS, COMPLETION_TOKENS)
    ]


# -- answer parsing (pure) ------------------------------------------------------------------

SHOWN = [Neighbour(7, "a stored fact", 0.9, same_text=False)]


@pytest.mark.parametrize(
    ("answer", "action", "target"),
    [
        ({"action": "create", "target_id": 7, "text": None, "reason": "r"}, Action.CREATE, None),
        ({"action": "append", "target_id": 7, "text": None, "reason": "r"}, Action.APPEND, 7),
        (
            {"action": "discard", "target_id": None, "text": None, "reason": "r"},
            Action.DISCARD,
            None,
        ),
        ({"action": "merge", "target_id": 7, "text": " both ", "reason": "r"}, Action.MERGE, 7),
    ],
)
def test_parse_answer_accepts_valid_decisions(
    answer: dict[str, Any], action: Action, target: int | None
) -> None:
    parsed = parse_answer(json.dumps(answer), SHOWN, model="m", max_chars=100)
    assert (parsed.action, parsed.target_id, parsed.curated, parsed.model) == (
        action,
        target,
        True,
        "m",
    )
    if action is Action.MERGE:
        assert parsed.text == "both"


@pytest.mark.parametrize(
    "answer",
    [
        {"action": "replace", "target_id": True, "text": None, "reason": "r"},
        {"action": "deprecate", "target_id": "7", "text": None, "reason": "r"},
        {"action": "merge", "target_id": 7, "text": "x" * 101, "reason": "r"},
    ],
)
def test_parse_answer_refuses_what_it_cannot_trust(answer: dict[str, Any]) -> None:
    with pytest.raises(ModelError):
        parse_answer(json.dumps(answer), SHOWN, model="m", max_chars=100)
