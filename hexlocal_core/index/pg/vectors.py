"""Chunk vectors on PostgreSQL: one table per package, each with its own HNSW index.

Why a table per package. pgvector 0.6 has no iterative index scan: an HNSW scan returns
at most `hnsw.ef_search` rows nearest over the *whole* index, and a `WHERE package = ...`
applied after it keeps only that package's share, so a small package next to a large one
got fewer than `depth` hits (the depth budget spent on other packages). A package's own
index holds nothing else, so its scan returns `depth` rows of that package.

Why not declarative partitions (`PARTITION BY LIST (package)`), which would give the same
per-package indexes: creating or dropping a partition takes an ACCESS EXCLUSIVE lock on
the parent table until the writing transaction commits, so while one server writes a
package, every other server's vector search in *any* package waits (measured on PG 16:
a search on package a blocked by `CREATE TABLE ... PARTITION OF` for b, and by `DROP TABLE`
of a partition). A standalone table locks only itself: while a package is rewritten, only
searches in that same package wait (and they would wait for its ingest anyway).

Why HNSW rather than an exact scan, and only from `HNSW_MIN_ROWS` on (measured: 384 dims,
clustered unit vectors, PG 16 on 2 shared cores under load 8, depth 30, ef_search 60):

    rows   build (all + examples)   query hnsw   query exact   recall@30 hnsw
    1000        0.43 s + 0.13 s        2.2 ms        3.1 ms         1.000
    2000        1.23 s + 0.30 s        2.4 ms        4.3 ms         1.000
    5000        1.86 s + 0.59 s        2.2 ms        8.7 ms         1.000

Below 2000 rows an exact scan costs at most a couple of milliseconds more, needs no
build, and returns what SQLite's exact vec0 scan returns; above, the index wins and its
build is small next to embedding that many chunks (minutes). `examples_only` has a
partial index of its own (`WHERE has_example`), so that filter is not applied after the
scan either; `hnsw.ef_search` is at least twice the depth of each search.

The table name is derived from the package name (a hash: names may hold any character),
so no catalogue of tables is needed; `vector_tables()` lists them for a model switch.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg import errors as pg_errors
from psycopg import pq, sql

from hexlocal_core.ports import Vectors

Connection = psycopg.Connection[tuple[Any, ...]]
VectorLike = Any  # one vector: any array that flattens to the table's dims

TABLE_PREFIX = "chunk_vecs_"
HNSW_MIN_ROWS = 2_000
SESSION_EF_SEARCH = 100  # set on every pooled connection (pgvector's default is 40)
EF_SEARCH_MAX = 1_000  # pgvector's limit
BUILD_MEMORY = "256MB"  # an HNSW graph built outside this spills to disk, far slower


def table_name(package: str) -> str:
    return TABLE_PREFIX + hashlib.sha256(package.encode()).hexdigest()[:24]


def exists(conn: Connection, package: str) -> bool:
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table_name(package),)).fetchone()
    return bool(row and row[0])


def create(conn: Connection, package: str, dims: int) -> None:
    """An empty vector table for the package (call `drop` first when replacing)."""
    conn.execute(
        sql.SQL(
            "CREATE TABLE {} (chunk_id BIGINT PRIMARY KEY, has_example BOOLEAN NOT NULL,"
            " embedding vector({}) NOT NULL)"
        ).format(sql.Identifier(table_name(package)), sql.Literal(int(dims)))
    )


def drop(conn: Connection, package: str) -> None:
    conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table_name(package))))


def vector_tables(conn: Connection) -> list[str]:
    found = conn.execute(
        "SELECT c.relname FROM pg_class c WHERE c.relkind = 'r'"
        " AND c.relnamespace = current_schema()::regnamespace AND starts_with(c.relname, %s)",
        (TABLE_PREFIX,),
    ).fetchall()
    return [str(r[0]) for r in found]


def drop_all(conn: Connection) -> None:
    for name in vector_tables(conn):
        conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(name)))


def load(conn: Connection, package: str, rows: Iterable[tuple[int, bool, VectorLike]]) -> None:
    """COPY (chunk id, has_example, vector) rows into the package's table (binary: a
    vector travels as its float32 bytes, not as text)."""
    statement = sql.SQL("COPY {} (chunk_id, has_example, embedding) FROM STDIN (FORMAT BINARY)")
    with conn.cursor().copy(statement.format(sql.Identifier(table_name(package)))) as copy:
        copy.set_types(["int8", "bool", "vector"])
        for chunk_id, has_example, vector in rows:
            copy.write_row((chunk_id, has_example, np.asarray(vector, dtype=np.float32)))


def fill_from_cache(conn: Connection, package: str, model: str) -> None:
    """The package's vectors from the embedding cache under `model` (a model switch)."""
    conn.execute(
        sql.SQL(
            "INSERT INTO {} (chunk_id, has_example, embedding)"
            " SELECT c.id, c.has_example, e.vector FROM chunks c JOIN embed_cache e"
            " ON e.model = %s AND e.text_hash = c.embed_hash WHERE c.package = %s"
        ).format(sql.Identifier(table_name(package))),
        (model, package),
    )


def cache_package(
    conn: Connection, package: str, model: str, dims: int, ids: Sequence[int] | None = None
) -> None:
    """The package's vectors (or those of the chunk `ids`) into the embedding cache, where
    not there yet. In hash order, so two servers writing packages that share texts lock
    cache rows in one order and never deadlock."""
    only = " AND c.id = ANY(%s::bigint[])" if ids is not None else ""
    params: tuple[object, ...] = (model, int(dims), package)
    if ids is not None:
        params += (list(ids),)
    conn.execute(
        sql.SQL(
            "INSERT INTO embed_cache (model, text_hash, dims, vector)"
            " SELECT %s, c.embed_hash, %s, v.embedding FROM chunks c JOIN {} v"
            " ON v.chunk_id = c.id WHERE c.package = %s" + only + " ORDER BY c.embed_hash"
            " ON CONFLICT (model, text_hash) DO NOTHING"
        ).format(sql.Identifier(table_name(package))),
        params,
    )


def index(conn: Connection, package: str) -> None:
    """Statistics, and the HNSW indexes once the table is big enough to gain from them."""
    table = sql.Identifier(table_name(package))
    conn.execute(sql.SQL("ANALYZE {}").format(table))
    rows = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone()
    if not rows or int(rows[0]) < HNSW_MIN_ROWS:
        return
    conn.execute("SELECT set_config('maintenance_work_mem', %s, true)", (BUILD_MEMORY,))
    conn.execute(
        sql.SQL("CREATE INDEX {} ON {} USING hnsw (embedding vector_cosine_ops)").format(
            sql.Identifier(table_name(package) + "_hnsw"), table
        )
    )
    conn.execute(
        sql.SQL(
            "CREATE INDEX {} ON {} USING hnsw (embedding vector_cosine_ops) WHERE has_example"
        ).format(sql.Identifier(table_name(package) + "_hnsw_ex"), table)
    )


def stored(conn: Connection, package: str, ids: Sequence[int]) -> dict[int, np.ndarray[Any, Any]]:
    """The stored vectors of these chunks; {} when the package has no vector table yet."""
    if not ids:
        return {}
    statement = sql.SQL("SELECT chunk_id, embedding FROM {} WHERE chunk_id = ANY(%s)").format(
        sql.Identifier(table_name(package))
    )
    try:
        with conn.transaction():  # a savepoint inside atomic(): a missing table is no abort
            found = conn.execute(statement, (list(ids),), binary=True).fetchall()
    except pg_errors.UndefinedTable:
        return {}
    return {int(cid): np.asarray(vector, dtype=np.float32) for cid, vector in found}


def stored_ids(conn: Connection, package: str, among: Sequence[int] | None = None) -> set[int]:
    """The chunk ids that have a vector (`among`: only these ids are asked about, by the
    primary key); empty when the package has no vector table yet."""
    statement = sql.SQL("SELECT chunk_id FROM {}").format(sql.Identifier(table_name(package)))
    params: tuple[Any, ...] = ()
    if among is not None:
        statement = statement + sql.SQL(" WHERE chunk_id = ANY(%s::bigint[])")
        params = (list(among),)
    try:
        with conn.transaction():  # a savepoint inside atomic(): a missing table is no abort
            return {int(r[0]) for r in conn.execute(statement, params)}
    except pg_errors.UndefinedTable:
        return set()


def nearest_statement(package: str, *, examples_only: bool) -> sql.Composed:
    """The KNN statement (params: vector, vector, depth). No tie-break column: a second
    ORDER BY key turns the HNSW index scan into a full scan and a sort."""
    where = sql.SQL(" WHERE has_example") if examples_only else sql.SQL("")
    return sql.SQL(
        "SELECT chunk_id, embedding <=> %s AS distance FROM {}{} ORDER BY embedding <=> %s LIMIT %s"
    ).format(sql.Identifier(table_name(package)), where)


def nearest(
    conn: Connection, package: str, vector: Vectors, *, depth: int, examples_only: bool
) -> list[tuple[int, float]]:
    """(chunk id, cosine distance), nearest first, inside the package; [] with no table.

    One statement at the usual depths (the session's `hnsw.ef_search` suffices, see
    `pg/db.py`); a deeper search raises it in a transaction (a savepoint inside one).
    """
    if depth <= 0:
        return []
    query = np.asarray(vector, dtype=np.float32).reshape(-1)
    statement = nearest_statement(package, examples_only=examples_only)
    params = (query, query, depth)
    idle = conn.info.transaction_status == pq.TransactionStatus.IDLE
    try:
        if idle and 2 * depth <= SESSION_EF_SEARCH:
            found = conn.execute(statement, params).fetchall()
        else:
            with conn.transaction():  # a savepoint inside atomic(): a missing table is no abort
                ef = min(max(SESSION_EF_SEARCH, 2 * depth), EF_SEARCH_MAX)
                conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(ef),))
                if 2 * depth > EF_SEARCH_MAX:  # deeper than an index scan returns: exact
                    conn.execute("SELECT set_config('enable_indexscan', 'off', true)")
                found = conn.execute(statement, params).fetchall()
    except pg_errors.UndefinedTable:
        return []  # the package has no vectors (none yet, or no chunks)
    return [(int(r[0]), float(r[1])) for r in found]
