"""The curation prompt, the JSON schema of its answer, and strict parsing of that answer.

Anything the model answers is checked before it can touch the store: an unknown action, a
target that is not one of the memories shown, a merge without text, or text that is not
JSON at all raises ModelError, and the caller keeps the submission as a new memory.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from hexlocal_core.errors import ModelError
from hexlocal_core.memory.policy import TARGETED, Action, Decision, Neighbour, Thresholds, fmt

MAX_REASON_CHARS = 500

DECISION_SCHEMA: Mapping[str, Any] = {
    "title": "memory_curation",
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": [a.value for a in Action]},
        "target_id": {"type": ["integer", "null"]},
        "text": {"type": ["string", "null"]},
        "reason": {"type": "string"},
    },
    "required": ["action", "target_id", "text", "reason"],
    "additionalProperties": False,
}

_SYSTEM = """\
You curate a store of facts about Elixir libraries that a coding assistant learned while \
working and that the docs do not say. A new submission arrives with the stored memories \
most similar to it. Choose exactly one action:
- create: the submission states a fact that none of the memories holds.
- append: memory target_id is about the same subject and the submission adds a detail; \
the submission is added to the end of that memory.
- merge: the submission and memory target_id overlap; put in "text" one rewritten memory \
that keeps every fact of both (at most {max_chars} characters).
- replace: the submission corrects memory target_id, which is now wrong; the submission \
takes its place.
- deprecate: memory target_id is obsolete (for example fixed in a later version) but worth \
keeping for history; it is marked deprecated and the submission is stored as a new memory.
- discard: the submission carries no new fact; memory target_id already says it.
Rules: discard only when the target's similarity is at least {discard_above} and the \
submission adds nothing (no new version, condition, workaround, error or detail); below \
{discard_above} never discard. Keep package names, versions, function names and error \
messages exactly as written. Never invent facts.
Answer with one JSON object only: {{"action": ..., "target_id": ..., "text": ..., \
"reason": ...}}. target_id is null for create; text is null unless the action is merge; \
reason is one short sentence."""


def messages(
    text: str,
    *,
    package: str | None,
    version: str | None,
    neighbours: Sequence[Neighbour],
    th: Thresholds,
    max_chars: int,
) -> list[dict[str, str]]:
    """System rules, then the submission and its neighbours as JSON (ids the model may use)."""
    payload = {
        "submission": {"text": text, "package": package, "version": version},
        "memories": [
            {
                "id": n.id,
                "similarity": n.similarity,
                "package": n.package,
                "version": n.version,
                "text": n.text,
            }
            for n in neighbours
        ],
    }
    system = _SYSTEM.format(discard_above=fmt(th.discard_above), max_chars=max_chars)
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": json.dumps(payload, ensure_ascii=False, indent=1)},
    ]


def parse_answer(
    raw: str, neighbours: Sequence[Neighbour], *, model: str, max_chars: int
) -> Decision:
    """The model's answer as a Decision. Raises ModelError when it cannot be trusted."""
    data = _json_object(raw)
    action = _action(data.get("action"))
    target_id = _target(data.get("target_id"), action, {n.id for n in neighbours})
    text = data.get("text")
    merged: str | None = None
    if action is Action.MERGE:
        if not isinstance(text, str) or not text.strip():
            raise ModelError("the curation model chose merge without the merged text")
        if len(text) > max_chars:
            raise ModelError(f"the merged text has {len(text)} characters; at most {max_chars}")
        merged = text.strip()
    reason = data.get("reason")
    reason_text = reason.strip()[:MAX_REASON_CHARS] if isinstance(reason, str) else ""
    return Decision(
        action,
        reason_text or f"model chose {action.value}",
        curated=True,
        target_id=target_id,
        text=merged,
        model=model,
    )


def _json_object(raw: str) -> dict[str, Any]:
    # Small models often wrap JSON in a markdown fence despite the schema.
    body = re.sub(r"^\s*```(?:json)?\s*|\s*```\s*$", "", raw or "")
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise ModelError(f"the curation model's answer is not JSON: {raw[:80]!r}") from exc
    if not isinstance(data, dict):
        raise ModelError("the curation model's answer is not a JSON object")
    return data


def _action(value: Any) -> Action:
    try:
        return Action(value)
    except ValueError as exc:
        raise ModelError(f"the curation model chose an unknown action {value!r}") from exc


def _target(value: Any, action: Action, known: set[int]) -> int | None:
    if value is None:
        if action in TARGETED:
            raise ModelError(f"the curation model chose {action.value} without a target_id")
        return None
    if action is Action.CREATE:
        return None  # a create needs no target; ignore whatever came along
    if isinstance(value, bool) or not isinstance(value, int) or value not in known:
        raise ModelError(f"target_id {value!r} is not one of the memories shown to the model")
    return value
