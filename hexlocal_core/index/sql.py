"""The SQL both engines share: how each spells it, and how a shared statement runs.

A statement written once is written with `?` marks in SQL both engines read; `Dialect`
holds what they spell differently (the mark, a list parameter, bytewise order, ...), and
each engine has its own (`sqlite/db.py`, `pg/db.py`). Statements whose shape differs (the
keyword and vector arms, DDL, locking, upserts) stay in their engine.

The shared statements sit beside the engines' modules they serve, one for one:
`store_sql.py`, `chunk_sql.py`, `memory_sql.py`, `ops_sql.py`. Each holds classes of
the seam's methods written once over `SqlRunner`; an engine's class inherits them, says
how a statement runs (`_rows`, `_run`) and adds what is its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

from attrs import frozen

Row = tuple[Any, ...]


@frozen
class Dialect:
    """What the engines spell differently in a statement they share."""

    mark: str  # a parameter, as the driver wants it
    position: str  # the 1-based position of a substring, 0 when absent
    bytewise: str  # after a text column in ORDER BY: bytewise order
    any_true: str  # the aggregate that is true when the condition holds for any row
    arrays: bool  # a list is one array parameter, not one mark per value
    unlimited: int | None  # LIMIT's "no limit"

    def sql(self, text: str) -> str:
        """`text` (written with `?` marks) as this engine's driver reads it."""
        return text if self.mark == "?" else text.replace("?", self.mark)

    def limit(self, n: int) -> int | None:
        """A negative limit means none, as the seam's callers pass it."""
        return n if n >= 0 else self.unlimited

    def one_of(self, column: str, values: Sequence[Any], kind: str) -> tuple[str, list[Any]]:
        """A condition: `column` equals one of `values` (of SQL type `kind`), and its
        parameters."""
        if self.arrays:
            return f"{column} = ANY(?::{kind}[])", [list(values)]
        return f"{column} IN ({','.join('?' * len(values))})", list(values)

    def none_of(self, column: str, values: Sequence[Any], kind: str) -> tuple[str, list[Any]]:
        if self.arrays:
            return f"{column} <> ALL(?::{kind}[])", [list(values)]
        return f"{column} NOT IN ({','.join('?' * len(values))})", list(values)

    @property
    def sub_item(self) -> str:
        """True when a chunk's ref names a heading sub-item (`Mod.html#fun/2-examples`):
        its anchor (all of the ref without a `#`) has a `-`."""
        at = self.position
        return f"({at}(substr(ref, {at}(ref, '#') + 1), '-') > 0)"

    @property
    def has_anchor(self) -> str:
        return f"{self.position}(ref, '#') > 0"


class SqlRunner:
    """Shared statements over an engine: a subclass says how one runs (`_rows`, `_run`)."""

    dialect: ClassVar[Dialect]

    def _rows(self, sql: str, params: Sequence[Any]) -> list[Row]:
        """The rows of one statement, already in the driver's spelling."""
        raise NotImplementedError

    def _run(self, sql: str, params: Sequence[Any]) -> None:
        raise NotImplementedError

    def _select(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return self._rows(self.dialect.sql(sql), params)

    def _value(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """The first column of the first row, or None."""
        found = self._select(sql, params)
        return found[0][0] if found else None

    def _write(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._run(self.dialect.sql(sql), params)


def utcnow() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
