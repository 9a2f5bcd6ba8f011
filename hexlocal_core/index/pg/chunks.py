"""Reads over the stored chunks on PostgreSQL: `seam.ChunkReads`, the twin of
`sqlite/chunks.py`.

The reads both engines answer with one statement are `chunk_sql.ChunkSql`'s; here are
the two retrieval arms, with the same answers as SQLite's, in the same order.

The keyword arm is BM25 over the package's rows (`pg/fts.py`): one statement returns
every row of the package matching any phrase with each phrase's weighted frequency, so
the package filter is applied before anything is ranked and no depth is spent on other
packages. `keyword_hits` takes N and the document frequencies from the whole table, as
FTS5's own bm25() does; `package_keyword_hits` from the package, as `sqlite/fts.py` does,
but over every matching row rather than FTS5's best `rescore * depth`: exact, so
`rescore` is not needed. The average document length is the table's in both, as SQLite's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from attrs import frozen

from hexlocal_core.index.chunk_sql import ChunkSql
from hexlocal_core.index.pg import fts, vectors
from hexlocal_core.index.pg.db import Executor, PgRunner
from hexlocal_core.ports import Vectors


@frozen
class _Candidates:
    rows: list[fts.Candidate]
    package_documents: int  # N of the package
    table_documents: int  # N of the table
    avgdl: float  # the table's average row length, as FTS5's


class PgChunkReads(ChunkSql, PgRunner):
    """`seam.ChunkReads` over a session (statements run inside its `atomic()` if open)."""

    def __init__(self, ex: Executor) -> None:
        self._ex = ex

    # -- the retrieval arms --------------------------------------------------------------

    def keyword_hits(
        self,
        match: str,
        *,
        package: str,
        depth: int,
        examples_only: bool,
        weights: tuple[float, float, float],
    ) -> list[tuple[int, float]]:
        """(chunk id, -bm25; lower is better) for FTS5 MATCH text, N and document
        frequencies from the whole table (FTS5's bm25()); [] when nothing is searchable."""
        query = fts.parse_match(match)
        if query is None or depth <= 0:
            return []
        found = self._candidates(query, package, weights)
        if not found.rows:
            return []
        return fts.rank(
            query,
            found.rows,
            documents=found.table_documents,
            df=self._table_frequencies(query),
            avgdl=found.avgdl,
            examples_only=examples_only,
            depth=depth,
        )

    def package_keyword_hits(
        self,
        phrases: Sequence[str],
        *,
        package: str,
        depth: int,
        examples_only: bool,
        weights: tuple[float, float, float],
        rescore: int = 1,
    ) -> list[tuple[int, float]]:
        """`keyword_hits` with the package's own N and document frequencies.

        Every row of the package matching a phrase is scored, so `rescore` (how deep
        SQLite re-scores FTS5's table-wide order) has nothing to widen here.
        """
        query = fts.parse_match(" OR ".join(phrases))
        if query is None or depth <= 0:
            return []
        found = self._candidates(query, package, weights)
        if not found.rows:
            return []
        return fts.rank(
            query,
            found.rows,
            documents=max(found.package_documents, len(found.rows)),
            df=None,  # counted over the rows: every row of the package matching a phrase
            avgdl=found.avgdl,
            examples_only=examples_only,
            depth=depth,
        )

    def _candidates(
        self, query: fts.Query, package: str, weights: tuple[float, float, float]
    ) -> _Candidates:
        """Every row of the package matching any phrase, with each phrase's frequency,
        and the counts BM25 needs (one statement: the counts are uncorrelated subqueries,
        evaluated once)."""
        rank_weights, scale = fts.rank_weights(weights)
        freq = ", ".join(
            f"ts_rank_cd(%(w)s::real[], tsv, %(p{i})s::tsquery, 0)"
            for i in range(len(query.phrases))
        )
        statement = (
            "SELECT id, token_count, has_example,"
            " (SELECT chunk_count FROM packages WHERE name = %(package)s),"
            " (SELECT sum(chunk_count) FROM packages), (SELECT sum(token_count) FROM packages),"
            f" {freq} FROM chunks WHERE package = %(package)s AND tsv @@ %(any)s::tsquery"
        )
        params = _phrase_params(query) | {
            "w": rank_weights,
            "package": package,
            "any": query.any_tsquery(),
        }
        found = self._ex.fetchall(statement, params)
        if not found:
            return _Candidates([], 0, 0, 0.0)
        _, _, _, in_package, in_table, tokens, *_ = found[0]
        return _Candidates(
            [
                fts.Candidate(
                    int(r[0]), int(r[1]), bool(r[2]), tuple(float(f) * scale for f in r[6:])
                )
                for r in found
            ],
            int(in_package or 0),
            int(in_table or 0),
            float(tokens or 0) / float(in_table) if in_table else 0.0,
        )

    def _table_frequencies(self, query: fts.Query) -> list[int]:
        counts = ", ".join(
            f"count(*) FILTER (WHERE tsv @@ %(p{i})s::tsquery)" for i in range(len(query.phrases))
        )
        statement = f"SELECT {counts} FROM chunks WHERE tsv @@ %(any)s::tsquery"
        row = self._ex.fetchone(statement, _phrase_params(query) | {"any": query.any_tsquery()})
        return [int(n) for n in row or ()]

    def stored_vectors(self, package: str, ids: Sequence[int]) -> dict[int, np.ndarray[Any, Any]]:
        """The stored vectors of these chunks of the package (those that have one)."""
        with self._ex.connection() as conn:
            return vectors.stored(conn, package, ids)

    def vector_hits(
        self, query_vector: Vectors, *, package: str, depth: int, examples_only: bool
    ) -> list[tuple[int, float]]:
        """(chunk id, cosine distance), nearest first, in the package's own table."""
        with self._ex.connection() as conn:
            return vectors.nearest(
                conn, package, query_vector, depth=depth, examples_only=examples_only
            )


def _phrase_params(query: fts.Query) -> dict[str, object]:
    return {f"p{i}": phrase.tsquery() for i, phrase in enumerate(query.phrases)}
