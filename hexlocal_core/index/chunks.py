"""Reads over the stored chunks: the two retrieval arms, exact lookup, hydration, eval.

Every statement search and evaluation run against `chunks`, `chunks_fts` and `chunk_vecs`
is here, behind functions that take plain values and return typed rows or tuples. The
callers decide *what* to ask (depths, weights, which doc types an identifier means); this
module decides *how* SQLite is asked. Functions take a connection so they run in whichever
thread the caller is on (connections are per thread, see `db.ConnectionPool`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import apsw
import numpy as np
import numpy.typing as npt
from attrs import frozen

from hexlocal_core.index import bm25
from hexlocal_core.index.vectors import (
    CHUNK_VEC_TABLE,
    decode_vector,
    encode_vector,
    vector_tables_exist,
)
from hexlocal_core.model import Chunk, embedding_text, sha256_text
from hexlocal_core.ports import Vectors


@frozen
class ChunkRow:
    """One stored chunk, as `Store.hydrate` returns it."""

    id: int
    package: str
    version: str
    ordinal: int
    ref: str
    page: str
    title: str
    doc_type: str
    module: str | None
    function: str | None
    arity: int | None
    signature: str | None
    deprecated: str | None
    since: str | None
    content: str
    content_hash: str
    embed_hash: str
    split_terms: str
    hexdocs_url: str
    source_url: str | None
    source: str
    has_example: bool


# Column order of ChunkRow; the SELECT names them so a new column never shifts the tuple.
# Both engines read rows with these (pg/chunks.py too).
CHUNK_COLUMNS = (
    "id, package, version, ordinal, ref, page, title, doc_type, module, function, arity,"
    " signature, deprecated, since, content, content_hash, embed_hash, split_terms,"
    " hexdocs_url, source_url, source, has_example"
)


def chunk_row(r: Sequence[Any]) -> ChunkRow:
    return ChunkRow(
        id=int(r[0]),
        package=r[1],
        version=r[2],
        ordinal=r[3],
        ref=r[4],
        page=r[5],
        title=r[6],
        doc_type=r[7],
        module=r[8],
        function=r[9],
        arity=r[10],
        signature=r[11],
        deprecated=r[12],
        since=r[13],
        content=r[14],
        content_hash=r[15],
        embed_hash=r[16],
        split_terms=r[17],
        hexdocs_url=r[18],
        source_url=r[19],
        source=r[20],
        has_example=bool(r[21]),
    )


# The columns a chunk is written with (its id aside), in order, on both engines.
CHUNK_WRITE_COLUMNS = (
    "package, version, ordinal, ref, page, title, doc_type, module, function, arity,"
    " signature, deprecated, since, content, content_hash, embed_hash, split_terms,"
    " hexdocs_url, source_url, source, has_example"
)


def chunk_values(package: str, chunk: Chunk, split: str) -> tuple[Any, ...]:
    """A chunk's values for `CHUNK_WRITE_COLUMNS`; `split` is its `split_terms`."""
    item = chunk.item
    return (
        package,
        item.version,
        chunk.ordinal,
        item.ref,
        item.page,
        item.title,
        str(item.doc_type),
        item.module,
        item.function,
        item.arity,
        item.signature,
        item.deprecated,
        item.since,
        chunk.content,
        chunk.content_hash,
        sha256_text(chunk.embedding_text()),
        split,
        item.hexdocs_url,
        item.source_url,
        str(item.source),
        bool(chunk.has_example),
    )


def _marks(n: int) -> str:
    return ",".join("?" * n)


def hydrate(conn: apsw.Connection, ids: Sequence[int]) -> list[ChunkRow]:
    """Rows for the ids, in the order given (`IN (...)` returns storage order)."""
    if not ids:
        return []
    sql = f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE id IN ({_marks(len(ids))})"
    by_id = {int(r[0]): chunk_row(r) for r in conn.execute(sql, tuple(ids))}
    return [by_id[i] for i in ids if i in by_id]


def locate(conn: apsw.Connection, ids: Sequence[int]) -> dict[int, tuple[str, str]]:
    """(ref, page) of each chunk id, in one query."""
    unique = list(dict.fromkeys(ids))
    if not unique:
        return {}
    sql = f"SELECT id, ref, page FROM chunks WHERE id IN ({_marks(len(unique))})"
    return {int(r[0]): (str(r[1]), str(r[2])) for r in conn.execute(sql, tuple(unique))}


# -- the retrieval arms ------------------------------------------------------------------


def keyword_hits(
    conn: apsw.Connection,
    match: str,
    *,
    package: str,
    depth: int,
    examples_only: bool,
    weights: tuple[float, float, float],
) -> list[tuple[int, float]]:
    """(chunk id, bm25 score; lower is better) for a sanitized FTS5 MATCH expression.

    The package (and examples-only) filter is inside the query, before the LIMIT, so the
    depth is never spent on other packages.
    """
    w = ", ".join(str(float(x)) for x in weights)
    sql = (
        f"SELECT c.id, bm25(chunks_fts, {w}) AS score FROM chunks_fts"
        " JOIN chunks c ON c.id = chunks_fts.rowid"
        " WHERE chunks_fts MATCH ? AND c.package = ?"
        + (" AND c.has_example = 1" if examples_only else "")
        + " ORDER BY score LIMIT ?"
    )
    return [(int(r[0]), float(r[1])) for r in conn.execute(sql, (match, package, depth))]


def package_keyword_hits(
    conn: apsw.Connection,
    phrases: Sequence[str],
    *,
    package: str,
    depth: int,
    examples_only: bool,
    weights: tuple[float, float, float],
    rescore: int = 1,
) -> list[tuple[int, float]]:
    """`keyword_hits` scored with the package's own BM25 statistics (see `index/bm25.py`).

    `phrases` are the quoted FTS5 phrases the MATCH expression ORs together. The package's
    chunk ids are one range (one transaction writes them), so FTS5 reads only that range
    of each doclist: each phrase's document frequency is a count over the range, the
    `rescore * depth` best rows by the table's BM25 are the candidates, and those are
    re-scored with the package's numbers. When the ids are not one range (never seen,
    but cheap to check) the table-wide scoring answers instead.
    """
    match = " OR ".join(phrases)
    sql = "SELECT min(id), max(id), count(*) FROM chunks WHERE package = ?"
    lo, hi, count = next(iter(conn.execute(sql, (package,))))
    if not phrases or not bm25.contiguous(lo, hi, int(count)):
        return keyword_hits(
            conn, match, package=package, depth=depth, examples_only=examples_only, weights=weights
        )
    count_sql = "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ? AND rowid BETWEEN ? AND ?"
    df = [int(next(iter(conn.execute(count_sql, (p, lo, hi))))[0]) for p in phrases]
    w = ", ".join(str(float(x)) for x in weights)
    sql = (
        f"SELECT rowid, {bm25.AUX_FUNCTION}(chunks_fts, {w}) FROM chunks_fts"
        f" WHERE chunks_fts MATCH ? AND rank MATCH 'bm25({w})' AND rowid BETWEEN ? AND ?"
        " ORDER BY rank LIMIT ?"
    )
    limit = depth * rescore * (4 if examples_only else 1)
    rows = [(int(r[0]), str(r[1])) for r in conn.execute(sql, (match, lo, hi, limit))]
    scored = bm25.score_rows(rows, int(count), df)
    if examples_only:
        with_example = _with_example(conn, [rowid for rowid, _ in scored])
        scored = [pair for pair in scored if pair[0] in with_example]
    return scored[:depth]


def _with_example(conn: apsw.Connection, ids: Sequence[int]) -> set[int]:
    found: set[int] = set()
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        sql = f"SELECT id FROM chunks WHERE has_example = 1 AND id IN ({_marks(len(part))})"
        found.update(int(r[0]) for r in conn.execute(sql, tuple(part)))
    return found


def vector_hits(
    conn: apsw.Connection,
    query_vector: Vectors,
    *,
    package: str,
    depth: int,
    examples_only: bool,
) -> list[tuple[int, float]]:
    """(chunk id, cosine distance), nearest first, inside the package's vec0 partition."""
    sql = (
        f"SELECT rowid, distance FROM {CHUNK_VEC_TABLE}"
        " WHERE embedding MATCH ? AND k = ? AND package = ?"
        + (" AND has_example = 1" if examples_only else "")
    )
    blob = encode_vector(query_vector)
    return [(int(r[0]), float(r[1])) for r in conn.execute(sql, (blob, depth, package))]


def stored_vectors(
    conn: apsw.Connection, package: str, ids: Sequence[int]
) -> dict[int, npt.NDArray[np.float32]]:
    """The stored vectors of these chunks of the package (those that have one)."""
    # One `rowid = ?` lookup each: vec0 answers `rowid IN (...)` by scanning the whole
    # table (7 ms for 3 rows of a 12k-chunk index, against 0.05 ms).
    sql = f"SELECT embedding FROM {CHUNK_VEC_TABLE} WHERE rowid = ? AND package = ?"
    found: dict[int, npt.NDArray[np.float32]] = {}
    if not ids or not vector_tables_exist(conn):
        return found  # no vector written yet in this index
    for chunk_id in dict.fromkeys(ids):
        for (blob,) in conn.execute(sql, (chunk_id, package)):
            found[int(chunk_id)] = decode_vector(bytes(blob))
    return found


def package_vectors(conn: apsw.Connection, package: str) -> dict[int, npt.NDArray[np.float32]]:
    """Every stored chunk vector of the package (fitting tools read them all; search never)."""
    sql = f"SELECT rowid, embedding FROM {CHUNK_VEC_TABLE} WHERE package = ?"
    if not vector_tables_exist(conn):
        return {}
    return {int(r[0]): decode_vector(bytes(r[1])) for r in conn.execute(sql, (package,))}


# -- exact lookup ------------------------------------------------------------------------

# `instr(substr(ref, instr(ref, '#') + 1), '-') > 0`: the ref's anchor has a `-`, i.e. it
# is a heading sub-item (`Mod.html#fun/2-examples`) rather than the item itself.
_SUB_ITEM = "(instr(substr(ref, instr(ref, '#') + 1), '-') > 0)"


@frozen
class ItemQuery:
    """Which stored item an identifier names: its module and, for a member, its name."""

    module: str | None
    function: str | None = None  # None: the module's own docs
    arity: int | None = None
    doc_types: tuple[str, ...] = ()  # members: only these types (empty: any)
    not_doc_types: tuple[str, ...] = ()  # modules: never these types


def exact_ids(conn: apsw.Connection, package: str, item: ItemQuery, *, limit: int) -> list[int]:
    """Chunk ids of the item (its own ref first, then its heading sub-items, in order)."""
    where = ["package = ?"]
    params: list[object] = [package]
    if item.module:
        where.append("module = ?")
        params.append(item.module)
    if item.function is not None:
        where.append("function = ?")
        params.append(item.function)
        if item.arity is not None:
            where.append("arity = ?")
            params.append(item.arity)
    if item.doc_types:
        where.append(f"doc_type IN ({_marks(len(item.doc_types))})")
        params.extend(item.doc_types)
    if item.not_doc_types:
        where.append(f"doc_type NOT IN ({_marks(len(item.not_doc_types))})")
        params.extend(item.not_doc_types)
    if item.function is None:
        order = "CASE WHEN ref = ? THEN 0 ELSE 1 END, id"
        params.append(f"{item.module}.html")
    else:
        order = f"CASE WHEN {_SUB_ITEM} THEN 1 ELSE 0 END, id"
    sql = f"SELECT id FROM chunks WHERE {' AND '.join(where)} ORDER BY {order} LIMIT ?"
    params.append(limit)
    return [int(r[0]) for r in conn.execute(sql, tuple(params))]


def titles_named(
    conn: apsw.Connection, package: str, function: str, prefer_module: str | None, limit: int
) -> list[str]:
    """Titles of the items called `function` (any module or arity), `prefer_module`'s first."""
    sql = (
        "SELECT DISTINCT title FROM chunks WHERE package = ? AND function = ?"
        f" AND instr(ref, '#') > 0 AND NOT {_SUB_ITEM}"
        " ORDER BY module = ? DESC, title LIMIT ?"
    )
    return [str(r[0]) for r in conn.execute(sql, (package, function, prefer_module, limit))]


def titles_in_module(conn: apsw.Connection, package: str, module: str, limit: int) -> list[str]:
    """Titles of a module's items (not their heading sub-items), in document order."""
    sql = (
        "SELECT DISTINCT title FROM chunks WHERE package = ? AND module = ?"
        f" AND NOT {_SUB_ITEM} ORDER BY id LIMIT ?"
    )
    return [str(r[0]) for r in conn.execute(sql, (package, module, limit))]


def module_names(conn: apsw.Connection, package: str, limit: int) -> list[str]:
    """The package's module names, sorted: what a misspelt module is compared against."""
    sql = (
        "SELECT DISTINCT module FROM chunks WHERE package = ? AND module IS NOT NULL"
        " ORDER BY module LIMIT ?"
    )
    return [str(r[0]) for r in conn.execute(sql, (package, limit))]


def packages_with_module(conn: apsw.Connection, module: str) -> list[str]:
    """The indexed packages documenting `module`, by name: a lookup without a package.
    One probe of the (package, module) index per package, not a scan of every chunk."""
    sql = (
        "SELECT name FROM packages p WHERE EXISTS"
        " (SELECT 1 FROM chunks c WHERE c.package = p.name AND c.module = ?) ORDER BY name"
    )
    return [str(r[0]) for r in conn.execute(sql, (module,))]


def member_titles(conn: apsw.Connection, package: str, limit: int) -> list[str]:
    """Titles of the package's members (functions, macros, callbacks, types), in document
    order: what a misspelt identifier with no known module is compared against."""
    sql = (
        "SELECT DISTINCT title FROM chunks WHERE package = ? AND function IS NOT NULL"
        f" AND NOT {_SUB_ITEM} ORDER BY id LIMIT ?"
    )
    return [str(r[0]) for r in conn.execute(sql, (package, limit))]


# -- evaluation --------------------------------------------------------------------------


@frozen
class PackageStats:
    """A package record with counts taken from its stored rows (for a corpus fingerprint)."""

    name: str
    version: str
    chunker_version: int
    embed_model: str | None
    chunks: int
    items: int  # distinct refs


def package_stats(conn: apsw.Connection) -> list[PackageStats]:
    sql = (
        "SELECT p.name, p.version, p.chunker_version, p.embed_model,"
        " count(c.id), count(DISTINCT c.ref)"
        " FROM packages p LEFT JOIN chunks c ON c.package = p.name"
        " GROUP BY p.name ORDER BY p.name"
    )
    return [
        PackageStats(str(r[0]), str(r[1]), int(r[2]), r[3], int(r[4]), int(r[5]))
        for r in conn.execute(sql)
    ]


def embedding_rows(conn: apsw.Connection, package: str) -> list[tuple[int, str, str, bool]]:
    """(id, embed_hash, the text embedded, has_example) of a package's chunks, in id order:
    the text rebuilt from the stored title, signature and content, as ingestion made it."""
    sql = (
        "SELECT id, embed_hash, title, signature, content, has_example FROM chunks"
        " WHERE package = ? ORDER BY id"
    )
    return [
        (int(r[0]), str(r[1]), embedding_text(r[2], r[3], r[4]), bool(r[5]))
        for r in conn.execute(sql, (package,))
    ]


def content_hashes(conn: apsw.Connection) -> Iterator[str]:
    """Every chunk's content hash, in a stable order (package, ref, ordinal, id)."""
    sql = "SELECT content_hash FROM chunks ORDER BY package, ref, ordinal, id"
    for (content_hash,) in conn.execute(sql):
        yield str(content_hash)


def ids_by_ref(
    conn: apsw.Connection, package: str, targets: Sequence[tuple[str, str]]
) -> frozenset[int]:
    """Ids of the package's chunks whose ref equals a target or starts with its prefix.

    `targets` are (ref, prefix) pairs. Prefixes are compared with `substr`, not LIKE,
    because `_` (a LIKE wildcard) is everywhere in Elixir refs.
    """
    if not targets:
        return frozenset()
    clauses: list[str] = []
    params: list[object] = [package]
    for ref, prefix in targets:
        clauses.append("(ref = ? OR substr(ref, 1, ?) = ?)")
        params.extend([ref, len(prefix), prefix])
    sql = f"SELECT id FROM chunks WHERE package = ? AND ({' OR '.join(clauses)})"
    return frozenset(int(r[0]) for r in conn.execute(sql, tuple(params)))
