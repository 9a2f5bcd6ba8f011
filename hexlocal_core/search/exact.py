"""Exact lookup: a query that *is* an identifier (`Mod`, `Mod.fun/2`, `c:cb/1`, `t:t/0`)
puts that item's chunks first, straight from the index, for any version."""

from __future__ import annotations

import re

import apsw
from attrs import frozen

_IDENT = re.compile(
    r"""^\s*
    (?:(?P<kind>[ct]):)?                       # c: callback, t: type
    (?P<module>(?:[A-Z][\w]*\.)*[A-Z][\w]*)?   # Elixir module path
    (?:\.?(?P<fun>[a-z_][\w]*[?!]?))?          # function / callback / type name
    (?:/(?P<arity>\d{1,3}))?                   # arity
    \s*$""",
    re.VERBOSE,
)


@frozen
class Identifier:
    module: str | None
    function: str | None
    arity: int | None
    kind: str | None  # "callback" | "type" | None

    @property
    def is_module(self) -> bool:
        return self.function is None


def parse_identifier(query: str) -> Identifier | None:
    """An identifier the query is exactly, or None. `Mod.fun` without arity also counts."""
    text = query.strip()
    if not text or len(text) > 200 or " " in text:
        return None
    m = _IDENT.match(text)
    if not m:
        return None
    module, fun, arity, kind = m.group("module"), m.group("fun"), m.group("arity"), m.group("kind")
    if module is None and fun is None:
        return None
    if module is None and arity is None and kind is None:
        return None  # a lone lower-case word is prose, not an identifier
    if module and fun is None and ("." in text.rstrip(".") and text.endswith(".")):
        return None
    kinds = {"c": "callback", "t": "type"}
    return Identifier(module, fun, int(arity) if arity else None, kinds.get(kind or ""))


def exact_chunk_ids(
    conn: apsw.Connection, package: str, ident: Identifier, *, limit: int = 20
) -> list[int]:
    """Chunk ids of the identified item (its own ref first, then its heading sub-items)."""
    where = ["package = ?"]
    params: list[object] = [package]
    if ident.module:
        where.append("module = ?")
        params.append(ident.module)
    if ident.is_module:
        where.append(
            "doc_type NOT IN ('function','macro','callback','macrocallback','type','opaque')"
        )
    else:
        where.append("function = ?")
        params.append(ident.function)
        if ident.arity is not None:
            where.append("arity = ?")
            params.append(ident.arity)
        if ident.kind == "callback":
            where.append("doc_type IN ('callback','macrocallback')")
        elif ident.kind == "type":
            where.append("doc_type IN ('type','opaque')")
    # The item's own ref first, then its heading sub-items, in document order.
    if ident.is_module:
        order = "CASE WHEN ref = ? THEN 0 ELSE 1 END, id"
        params.append(f"{ident.module}.html")
    else:
        order = "CASE WHEN instr(substr(ref, instr(ref, '#') + 1), '-') > 0 THEN 1 ELSE 0 END, id"
    sql = f"SELECT id FROM chunks WHERE {' AND '.join(where)} ORDER BY {order} LIMIT ?"
    params.append(limit)
    return [int(r[0]) for r in conn.execute(sql, tuple(params))]


def similar_titles(
    conn: apsw.Connection, package: str, ident: Identifier, *, limit: int = 5
) -> list[str]:
    """Documented identifiers near one that is not: same name at other arities or in other
    modules, else the module's own functions. For a `not_found` notice that helps."""
    if ident.function:
        sql = (
            "SELECT DISTINCT title FROM chunks WHERE package = ? AND function = ?"
            " AND instr(ref, '#') > 0 AND instr(substr(ref, instr(ref, '#') + 1), '-') = 0"
            " ORDER BY module = ? DESC, title LIMIT ?"
        )
        found = [r[0] for r in conn.execute(sql, (package, ident.function, ident.module, limit))]
        if found:
            return found
    if ident.module:
        sql = (
            "SELECT DISTINCT title FROM chunks WHERE package = ? AND module = ?"
            " AND instr(substr(ref, instr(ref, '#') + 1), '-') = 0 ORDER BY id LIMIT ?"
        )
        return [r[0] for r in conn.execute(sql, (package, ident.module, limit))]
    return []
