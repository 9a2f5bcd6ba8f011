"""Reads over the stored chunks on SQLite: `seam.ChunkReads`, the twin of `pg/chunks.py`.

The reads both engines answer with one statement (hydration, exact lookup, titles,
evaluation) are `chunk_sql.ChunkSql`'s; here are the two retrieval arms over `chunks_fts`
(FTS5) and `chunk_vecs` (sqlite-vec), which are SQLite's own. Statements run on the
session's connection, so they run in whichever thread the caller is on (connections are
per thread, see `db.ConnectionPool`).
"""

from __future__ import annotations

from collections.abc import Sequence

import apsw
import numpy as np
import numpy.typing as npt

from hexlocal_core.index.chunk_sql import ChunkSql
from hexlocal_core.index.sqlite import fts
from hexlocal_core.index.sqlite.db import SqliteRunner
from hexlocal_core.index.sqlite.vectors import (
    CHUNK_VEC_TABLE,
    decode_vector,
    encode_vector,
    vector_tables_exist,
)
from hexlocal_core.ports import Vectors


def _marks(n: int) -> str:
    return ",".join("?" * n)


class SqliteChunkReads(ChunkSql, SqliteRunner):
    """`seam.ChunkReads` on one connection (inside its `atomic()` if one is open)."""

    def __init__(self, conn: apsw.Connection) -> None:
        self._conn = conn

    @property
    def conn(self) -> apsw.Connection:
        return self._conn

    # -- the retrieval arms ----------------------------------------------------------------

    def keyword_hits(
        self,
        match: str,
        *,
        package: str,
        depth: int,
        examples_only: bool,
        weights: tuple[float, float, float],
    ) -> list[tuple[int, float]]:
        """(chunk id, bm25 score; lower is better) for a sanitized FTS5 MATCH expression.

        The package (and examples-only) filter is inside the query, before the LIMIT, so
        the depth is never spent on other packages.
        """
        w = ", ".join(str(float(x)) for x in weights)
        sql = (
            f"SELECT c.id, bm25(chunks_fts, {w}) AS score FROM chunks_fts"
            " JOIN chunks c ON c.id = chunks_fts.rowid"
            " WHERE chunks_fts MATCH ? AND c.package = ?"
            + (" AND c.has_example = 1" if examples_only else "")
            + " ORDER BY score LIMIT ?"
        )
        found = self._conn.execute(sql, (match, package, depth))
        return [(int(r[0]), float(r[1])) for r in found]

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
        """`keyword_hits` scored with the package's own BM25 statistics (see `fts.py`).

        `phrases` are the quoted FTS5 phrases the MATCH expression ORs together. The
        package's chunk ids are one range (one transaction writes them), so FTS5 reads only
        that range of each doclist: each phrase's document frequency is a count over the
        range, the `rescore * depth` best rows by the table's BM25 are the candidates, and
        those are re-scored with the package's numbers. When the ids are not one range
        (never seen, but cheap to check) the table-wide scoring answers instead.
        """
        conn = self._conn
        match = " OR ".join(phrases)
        sql = "SELECT min(id), max(id), count(*) FROM chunks WHERE package = ?"
        lo, hi, count = next(iter(conn.execute(sql, (package,))))
        if not phrases or not fts.contiguous(lo, hi, int(count)):
            return self.keyword_hits(
                match, package=package, depth=depth, examples_only=examples_only, weights=weights
            )
        count_sql = (
            "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ? AND rowid BETWEEN ? AND ?"
        )
        df = [int(next(iter(conn.execute(count_sql, (p, lo, hi))))[0]) for p in phrases]
        w = ", ".join(str(float(x)) for x in weights)
        sql = (
            f"SELECT rowid, {fts.AUX_FUNCTION}(chunks_fts, {w}) FROM chunks_fts"
            f" WHERE chunks_fts MATCH ? AND rank MATCH 'bm25({w})' AND rowid BETWEEN ? AND ?"
            " ORDER BY rank LIMIT ?"
        )
        limit = depth * rescore * (4 if examples_only else 1)
        rows = [(int(r[0]), str(r[1])) for r in conn.execute(sql, (match, lo, hi, limit))]
        scored = fts.score_rows(rows, int(count), df)
        if examples_only:
            with_example = self._with_example([rowid for rowid, _ in scored])
            scored = [pair for pair in scored if pair[0] in with_example]
        return scored[:depth]

    def _with_example(self, ids: Sequence[int]) -> set[int]:
        found: set[int] = set()
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            sql = f"SELECT id FROM chunks WHERE has_example = 1 AND id IN ({_marks(len(part))})"
            found.update(int(r[0]) for r in self._conn.execute(sql, tuple(part)))
        return found

    def vector_hits(
        self, query_vector: Vectors, *, package: str, depth: int, examples_only: bool
    ) -> list[tuple[int, float]]:
        """(chunk id, cosine distance), nearest first, inside the package's vec0 partition."""
        sql = (
            f"SELECT rowid, distance FROM {CHUNK_VEC_TABLE}"
            " WHERE embedding MATCH ? AND k = ? AND package = ?"
            + (" AND has_example = 1" if examples_only else "")
        )
        blob = encode_vector(query_vector)
        return [(int(r[0]), float(r[1])) for r in self._conn.execute(sql, (blob, depth, package))]

    def stored_vectors(
        self, package: str, ids: Sequence[int]
    ) -> dict[int, npt.NDArray[np.float32]]:
        """The stored vectors of these chunks of the package (those that have one)."""
        # One `rowid = ?` lookup each: vec0 answers `rowid IN (...)` by scanning the whole
        # table (7 ms for 3 rows of a 12k-chunk index, against 0.05 ms).
        sql = f"SELECT embedding FROM {CHUNK_VEC_TABLE} WHERE rowid = ? AND package = ?"
        found: dict[int, npt.NDArray[np.float32]] = {}
        if not ids or not vector_tables_exist(self._conn):
            return found  # no vector written yet in this index
        for chunk_id in dict.fromkeys(ids):
            for (blob,) in self._conn.execute(sql, (chunk_id, package)):
                found[int(chunk_id)] = decode_vector(bytes(blob))
        return found


def package_vectors(conn: apsw.Connection, package: str) -> dict[int, npt.NDArray[np.float32]]:
    """Every stored chunk vector of the package (fitting tools read them all; search never)."""
    sql = f"SELECT rowid, embedding FROM {CHUNK_VEC_TABLE} WHERE package = ?"
    if not vector_tables_exist(conn):
        return {}
    return {int(r[0]): decode_vector(bytes(r[1])) for r in conn.execute(sql, (package,))}
