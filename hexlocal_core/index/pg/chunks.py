"""Reads over the stored chunks on PostgreSQL: `seam.ChunkReads`, the twin of `chunks.py`.

Same answers as the SQLite statements, in the same order: text is ordered `COLLATE "C"`
(SQLite's BINARY: bytewise), and the two `SELECT DISTINCT title` reads say which row's
order a title takes (PostgreSQL will not order a DISTINCT by a column it does not
return): document order is a title's first chunk, and a title is in the preferred module
when any of its chunks is.

The keyword arm is BM25 over the package's rows (`pg/fts.py`): one statement returns
every row of the package matching any phrase with each phrase's weighted frequency, so
the package filter is applied before anything is ranked and no depth is spent on other
packages. `keyword_hits` takes N and the document frequencies from the whole table, as
FTS5's own bm25() does; `package_keyword_hits` from the package, as `index/bm25.py` does,
but over every matching row rather than FTS5's best `rescore * depth`: exact, so
`rescore` is not needed. The average document length is the table's in both, as SQLite's.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from attrs import frozen

from hexlocal_core.index.chunks import (
    CHUNK_COLUMNS,
    ChunkRow,
    ItemQuery,
    PackageStats,
    chunk_row,
)
from hexlocal_core.index.pg import fts, vectors
from hexlocal_core.index.pg.db import Executor
from hexlocal_core.model import embedding_text
from hexlocal_core.ports import Vectors

# The ref's anchor (all of it without a `#`) has a `-`: a heading sub-item
# (`Mod.html#fun/2-examples`), as `chunks._SUB_ITEM` says it.
SUB_ITEM = "(strpos(substr(ref, strpos(ref, '#') + 1), '-') > 0)"


def hydrate(ex: Executor, ids: Sequence[int]) -> list[ChunkRow]:
    """Rows for the ids, in the order given; ids not stored are left out."""
    if not ids:
        return []
    found = ex.fetchall(
        f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE id = ANY(%s::bigint[])", (list(ids),)
    )
    by_id = {int(r[0]): chunk_row(r) for r in found}
    return [by_id[i] for i in ids if i in by_id]


def embedding_rows(ex: Executor, package: str) -> list[tuple[int, str, str, bool]]:
    """(id, embed_hash, the text embedded, has_example) of a package's chunks, in id order,
    as `chunks.embedding_rows` reads them from SQLite."""
    found = ex.fetchall(
        "SELECT id, embed_hash, title, signature, content, has_example FROM chunks"
        " WHERE package = %s ORDER BY id",
        (package,),
    )
    return [(int(r[0]), str(r[1]), embedding_text(r[2], r[3], r[4]), bool(r[5])) for r in found]


@frozen
class _Candidates:
    rows: list[fts.Candidate]
    package_documents: int  # N of the package
    table_documents: int  # N of the table
    avgdl: float  # the table's average row length, as FTS5's


class PgChunkReads:
    """`seam.ChunkReads` over a session (statements run inside its `atomic()` if open)."""

    def __init__(self, ex: Executor) -> None:
        self._ex = ex

    def hydrate(self, ids: Sequence[int]) -> list[ChunkRow]:
        return hydrate(self._ex, ids)

    def locate(self, ids: Sequence[int]) -> dict[int, tuple[str, str]]:
        """(ref, page) of each chunk id, in one query."""
        unique = list(dict.fromkeys(ids))
        if not unique:
            return {}
        found = self._ex.fetchall(
            "SELECT id, ref, page FROM chunks WHERE id = ANY(%s::bigint[])", (unique,)
        )
        return {int(r[0]): (str(r[1]), str(r[2])) for r in found}

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

    # -- exact lookup --------------------------------------------------------------------

    def exact_ids(self, package: str, item: ItemQuery, *, limit: int) -> list[int]:
        """Chunk ids of the item (its own ref first, then its heading sub-items, in order)."""
        where = ["package = %s"]
        params: list[object] = [package]
        if item.module:
            where.append("module = %s")
            params.append(item.module)
        if item.function is not None:
            where.append("function = %s")
            params.append(item.function)
            if item.arity is not None:
                where.append("arity = %s")
                params.append(item.arity)
        if item.doc_types:
            where.append("doc_type = ANY(%s::text[])")
            params.append(list(item.doc_types))
        if item.not_doc_types:
            where.append("doc_type <> ALL(%s::text[])")
            params.append(list(item.not_doc_types))
        if item.function is None:
            order = "CASE WHEN ref = %s THEN 0 ELSE 1 END, id"
            params.append(f"{item.module}.html")
        else:
            order = f"CASE WHEN {SUB_ITEM} THEN 1 ELSE 0 END, id"
        statement = f"SELECT id FROM chunks WHERE {' AND '.join(where)} ORDER BY {order} LIMIT %s"
        params.append(_limit(limit))
        return [int(r[0]) for r in self._ex.fetchall(statement, params)]

    def titles_named(
        self, package: str, function: str, prefer_module: str | None, limit: int
    ) -> list[str]:
        """Titles of the items called `function` (any module or arity), `prefer_module`'s
        first."""
        statement = (
            "SELECT title FROM chunks WHERE package = %s AND function = %s"
            f" AND strpos(ref, '#') > 0 AND NOT {SUB_ITEM}"
            " GROUP BY title ORDER BY bool_or(module = %s) DESC NULLS LAST,"
            ' title COLLATE "C" LIMIT %s'
        )
        found = self._ex.fetchall(statement, (package, function, prefer_module, _limit(limit)))
        return [str(r[0]) for r in found]

    def titles_in_module(self, package: str, module: str, limit: int) -> list[str]:
        """Titles of a module's items (not their heading sub-items), in document order."""
        statement = (
            "SELECT title FROM chunks WHERE package = %s AND module = %s"
            f" AND NOT {SUB_ITEM} GROUP BY title ORDER BY min(id) LIMIT %s"
        )
        found = self._ex.fetchall(statement, (package, module, _limit(limit)))
        return [str(r[0]) for r in found]

    def module_names(self, package: str, limit: int) -> list[str]:
        """The package's module names, sorted."""
        statement = (
            "SELECT module FROM chunks WHERE package = %s AND module IS NOT NULL"
            ' GROUP BY module ORDER BY module COLLATE "C" LIMIT %s'
        )
        return [str(r[0]) for r in self._ex.fetchall(statement, (package, _limit(limit)))]

    def packages_with_module(self, module: str) -> list[str]:
        """The indexed packages documenting `module`, by name."""
        statement = (
            "SELECT name FROM packages p WHERE EXISTS"
            " (SELECT 1 FROM chunks c WHERE c.package = p.name AND c.module = %s)"
            ' ORDER BY name COLLATE "C"'
        )
        return [str(r[0]) for r in self._ex.fetchall(statement, (module,))]

    def member_titles(self, package: str, limit: int) -> list[str]:
        """Titles of the package's members (functions, macros, callbacks, types), in
        document order."""
        statement = (
            "SELECT title FROM chunks WHERE package = %s AND function IS NOT NULL"
            f" AND NOT {SUB_ITEM} GROUP BY title ORDER BY min(id) LIMIT %s"
        )
        return [str(r[0]) for r in self._ex.fetchall(statement, (package, _limit(limit)))]

    # -- evaluation ----------------------------------------------------------------------

    def package_stats(self) -> list[PackageStats]:
        statement = (
            "SELECT p.name, p.version, p.chunker_version, p.embed_model,"
            " count(c.id), count(DISTINCT c.ref)"
            " FROM packages p LEFT JOIN chunks c ON c.package = p.name"
            ' GROUP BY p.name ORDER BY p.name COLLATE "C"'
        )
        return [
            PackageStats(str(r[0]), str(r[1]), int(r[2]), r[3], int(r[4]), int(r[5]))
            for r in self._ex.fetchall(statement)
        ]

    def content_hashes(self) -> Iterator[str]:
        """Every chunk's content hash, in a stable order (package, ref, ordinal, id)."""
        statement = (
            'SELECT content_hash FROM chunks ORDER BY package COLLATE "C", ref COLLATE "C",'
            " ordinal, id"
        )
        for (content_hash,) in self._ex.fetchall(statement):
            yield str(content_hash)

    def ids_by_ref(self, package: str, targets: Sequence[tuple[str, str]]) -> frozenset[int]:
        """Ids of the package's chunks whose ref equals a target or starts with its prefix
        (`starts_with`, not LIKE: `_` is a LIKE wildcard and everywhere in Elixir refs)."""
        if not targets:
            return frozenset()
        statement = (
            "SELECT id FROM chunks c WHERE package = %s AND (ref = ANY(%s::text[])"
            " OR EXISTS (SELECT 1 FROM unnest(%s::text[]) AS t(prefix)"
            " WHERE starts_with(c.ref, t.prefix)))"
        )
        refs = [ref for ref, _ in targets]
        prefixes = [prefix for _, prefix in targets]
        found = self._ex.fetchall(statement, (package, refs, prefixes))
        return frozenset(int(r[0]) for r in found)


def _phrase_params(query: fts.Query) -> dict[str, object]:
    return {f"p{i}": phrase.tsquery() for i, phrase in enumerate(query.phrases)}


def _limit(n: int) -> int | None:
    """SQLite reads a negative LIMIT as none; PostgreSQL reads NULL so."""
    return None if n < 0 else n
