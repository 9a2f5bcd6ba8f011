"""The query-set format (see shared/eval/README.md), read strictly.

One JSON object per line: `{id, kind, package, version?, query, expect, note?}` where
`expect` is exactly one of `{"ref": R}`, `{"page": P}` or `{"any_ref": [R, ...]}`. A
malformed line is a `UserInputError` naming the file, the line and the fix: a query set
that silently drops lines would report scores over fewer queries than it claims.

Kinds are the shapes of question an agent asks, scored separately because they fail
differently: `concept` (a question in prose), `task` (a how-do-I in the user's own words,
avoiding the doc's terms), `error` (a pasted error message, noise included) and `symbol`
(a pasted identifier, option or mix task name).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from attrs import frozen

from hexlocal_core.errors import UserInputError

KINDS = ("concept", "task", "error", "symbol")
FORMS = ("ref", "page", "any_ref")
_ALLOWED_KEYS = frozenset({"id", "kind", "package", "version", "query", "expect", "note"})


@frozen
class Expectation:
    """What counts as relevant: `form` is ref | page | any_ref; `targets` its refs or page."""

    form: str
    targets: tuple[str, ...]

    def describe(self) -> str:
        if self.form == "any_ref":
            return "any of " + ", ".join(self.targets)
        return f"{self.form} {self.targets[0]}"

    def to_dict(self) -> dict[str, Any]:
        if self.form == "any_ref":
            return {"any_ref": list(self.targets)}
        return {self.form: self.targets[0]}


@frozen
class EvalQuery:
    id: str
    kind: str  # one of KINDS
    package: str
    query: str
    expect: Expectation
    version: str | None = None  # None: whatever version is indexed
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "package": self.package,
            "version": self.version,
            "query": self.query,
            "expect": self.expect.to_dict(),
        }


def _text(obj: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str | None:
    value = obj.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise UserInputError(f"{where}: `{key}` must be a non-empty string")
    return value


def _expectation(raw: Any, where: str) -> Expectation:
    if not isinstance(raw, Mapping) or len(raw) != 1 or next(iter(raw)) not in FORMS:
        raise UserInputError(
            f"{where}: `expect` must be exactly one of {{ref}}, {{page}} or {{any_ref}}"
        )
    form, value = next(iter(raw.items()))
    values = value if form == "any_ref" else [value]
    if not isinstance(values, list) or not values:
        raise UserInputError(f"{where}: `any_ref` must be a non-empty list of refs")
    if not all(isinstance(v, str) and v.strip() for v in values):
        raise UserInputError(f"{where}: every expected ref must be a non-empty string")
    if form == "page" and "#" in values[0]:
        raise UserInputError(f"{where}: a `page` has no `#` part; use `ref` for a section")
    return Expectation(form, tuple(values))


def parse_query(obj: Any, where: str) -> EvalQuery:
    """One query from its decoded JSON object; `where` names the line in messages."""
    if not isinstance(obj, Mapping):
        raise UserInputError(f"{where}: each line must be a JSON object")
    unknown = set(obj) - _ALLOWED_KEYS
    if unknown:
        raise UserInputError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    kind = _text(obj, "kind", where)
    if kind not in KINDS:
        raise UserInputError(f"{where}: `kind` must be one of {', '.join(KINDS)}, not {kind!r}")
    return EvalQuery(
        id=str(_text(obj, "id", where)),
        kind=kind,
        package=str(_text(obj, "package", where)),
        query=str(_text(obj, "query", where)),
        expect=_expectation(obj.get("expect"), where),
        version=_text(obj, "version", where, required=False),
        note=str(obj.get("note") or ""),
    )


def parse_queries(lines: Iterable[str], source: str = "<queries>") -> tuple[EvalQuery, ...]:
    """Queries from JSONL text; blank lines are skipped, ids must be unique."""
    out: list[EvalQuery] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{source} line {number}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserInputError(f"{where}: not valid JSON ({exc.msg})") from exc
        query = parse_query(obj, where)
        if query.id in seen:
            raise UserInputError(f"{where}: the id {query.id!r} is used twice; ids must be unique")
        seen.add(query.id)
        out.append(query)
    if not out:
        raise UserInputError(f"{source} holds no queries")
    return tuple(out)


def load_queries(path: Path) -> tuple[EvalQuery, ...]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserInputError(f"cannot read the query file {path}: {exc.strerror or exc}") from exc
    return parse_queries(text.splitlines(), str(path))
