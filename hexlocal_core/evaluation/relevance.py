"""Which stored chunks answer a query, decided from item refs (never row ids).

The rules (shared/eval/README.md), for a target ref R:

* R has a `#` (a function, a section): the chunk's ref equals R, or is a heading sub-item
  of it, i.e. starts with R + "-" (`Plug.Conn.html#put_resp_header/3-examples`).
* R has no `#` (a module or guide page): only the page's own doc counts, i.e. ref equals
  R or starts with R + "#module-". Its functions and types do not.
* page P: any chunk of the page, i.e. the ref before `#` equals P.

The rules exist twice on purpose: `ref_matches` (pure, for hits and tests) and
`relevant_ids` (SQL on the stored refs, which also detects expectations that resolve to
nothing). Tests run one table through both. Prefixes are compared with `substr`, not
LIKE, because `_` (a LIKE wildcard) is everywhere in Elixir refs.
"""

from __future__ import annotations

from collections.abc import Sequence

import apsw

from hexlocal_core.evaluation.queries import Expectation

MODULE_DOC = "#module-"


def _prefix(target: str, form: str) -> str:
    if form == "page":
        return target + "#"
    return target + ("-" if "#" in target else MODULE_DOC)


def ref_matches(ref: str, expect: Expectation) -> bool:
    """Whether a chunk whose item ref is `ref` answers the expectation."""
    return any(ref == t or ref.startswith(_prefix(t, expect.form)) for t in expect.targets)


def _where(expect: Expectation) -> tuple[str, list[object]]:
    clauses: list[str] = []
    params: list[object] = []
    for target in expect.targets:
        prefix = _prefix(target, expect.form)
        clauses.append("(ref = ? OR substr(ref, 1, ?) = ?)")
        params.extend([target, len(prefix), prefix])
    return "(" + " OR ".join(clauses) + ")", params


def relevant_ids(conn: apsw.Connection, package: str, expect: Expectation) -> frozenset[int]:
    """Ids of the package's stored chunks that answer the expectation (empty: BROKEN)."""
    where, params = _where(expect)
    sql = f"SELECT id FROM chunks WHERE package = ? AND {where}"
    return frozenset(int(r[0]) for r in conn.execute(sql, (package, *params)))


def refs_of(conn: apsw.Connection, ids: Sequence[int]) -> dict[int, str]:
    """The stored ref of each chunk id (for describing a candidate pool)."""
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    sql = f"SELECT id, ref FROM chunks WHERE id IN ({marks})"
    return {int(r[0]): str(r[1]) for r in conn.execute(sql, tuple(ids))}
