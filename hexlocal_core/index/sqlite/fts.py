"""The keyword arm's FTS5 side: BM25 with one package's statistics, over the shared table.

FTS5's own `bm25()` takes N (documents) and each term's document frequency from the
whole table. One index holds every package of a project, so a word that is rare in the
package searched but common in another (`pool` in finch next to db_connection and
nimble_pool) is weighted by the other packages' docs. Measured (MiniLM, 3 sets): the dev
set loses 0.955 -> 0.932 recall@5 (rrf) once the examples' packages share its index.

So the keyword arm scores with the package's own statistics: N is the package's number of
chunks, each phrase's document frequency a count over the package's rowid range, and the
candidates (FTS5's best rows in that range) are re-scored by FTS5's formula (k1 = 1.2,
b = 0.75, idf floored at 1e-6: `index/bm25.py`) with those numbers. An FTS5 auxiliary function
(`hexlocal_tf`) reports each candidate's length and column-weighted phrase frequencies.
The document-length normaliser (avgdl) stays the table's: a package-local one gained one
query on one set and needs a per-package token total the schema does not keep.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw

from hexlocal_core.index import bm25

AUX_FUNCTION = "hexlocal_tf"


def term_frequencies(api: apsw.FTS5ExtensionApi, *weights: Any) -> str:
    """`length avgdl i:freq ...` for the current row (the auxiliary function's body).

    A string because an SQL function returns one value; parsed by `parse_row`.
    """
    parts = [str(api.column_size(-1)), repr(api.column_total_size(-1) / max(api.row_count, 1))]
    for phrase in range(api.phrase_count):
        freq = 0.0
        for column, offsets in enumerate(api.phrase_locations(phrase)):
            if offsets:
                freq += (float(weights[column]) if column < len(weights) else 1.0) * len(offsets)
        if freq:
            parts.append(f"{phrase}:{freq!r}")
    return " ".join(parts)


def register(conn: apsw.Connection) -> None:
    conn.register_fts5_function(AUX_FUNCTION, term_frequencies)


def parse_row(packed: str) -> tuple[int, float, dict[int, float]]:
    """(row length, table avgdl, {phrase: weighted frequency}) from `term_frequencies`."""
    head = packed.split(" ")
    freqs = {int(i): float(f) for i, _, f in (p.partition(":") for p in head[2:])}
    return int(head[0]), float(head[1]), freqs


def score_rows(
    rows: Sequence[tuple[int, str]], documents: int, df: Sequence[int]
) -> list[tuple[int, float]]:
    """(rowid, -bm25) best first (lower is better, as FTS5's bm25() returns).

    `rows` are candidate rows (rowid, `term_frequencies` output), `documents` the
    package's number of rows and `df[i]` the number of them phrase i matches.
    """
    weights = {phrase: bm25.idf(documents, n) for phrase, n in enumerate(df)}
    scored = []
    for rowid, packed in rows:
        length, avgdl, freqs = parse_row(packed)
        terms = ((weights[p], f) for p, f in freqs.items())
        scored.append((rowid, -bm25.score(terms, length, avgdl)))
    scored.sort(key=lambda pair: (pair[1], pair[0]))
    return scored


def contiguous(lo: int | None, hi: int | None, count: int) -> bool:
    """Whether a package's chunk ids are exactly lo..hi (one transaction writes them all)."""
    return lo is not None and hi is not None and count > 0 and hi - lo + 1 == count
