"""The vector codec, the vec0 DDL and the model the vectors come from, written down once.

sqlite-vec reads a float32 little-endian blob; the embedding cache stores the same bytes, so
a cached vector goes into vec0 unchanged. Vectors reach the engine as numpy arrays and
leave it as numpy arrays: the blob never crosses the seam. The vec0 tables are created at
the first ingest because their dimension is the embedder's, known only from its output.
"""

from __future__ import annotations

from collections.abc import Sequence

import apsw
import numpy as np
import numpy.typing as npt

from hexlocal_core.index.sql import utcnow

CHUNK_VEC_TABLE = "chunk_vecs"
MEMORY_VEC_TABLE = "memory_vecs"
_ID_BATCH = 500  # ids per `IN (...)`: well under SQLite's bound-parameter limit


def encode_vector(vector: npt.ArrayLike) -> bytes:
    """One vector (any shape that flattens to dims) as the float32 blob vec0 reads."""
    return np.asarray(vector, dtype=np.float32).reshape(-1).tobytes()


def decode_vector(blob: bytes) -> npt.NDArray[np.float32]:
    return np.frombuffer(blob, dtype=np.float32)


def vector_tables_exist(conn: apsw.Connection) -> bool:
    """Whether the chunk vec0 table exists (created by the first vector written)."""
    found = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (CHUNK_VEC_TABLE,)
    )
    return any(True for _ in found)


def vector_ids(conn: apsw.Connection, package: str, among: Sequence[int] | None = None) -> set[int]:
    """The package's chunk ids that have a vector. `among`: only these ids are asked about
    (a slice's: rowid lookups, ~8 ms for 200, where the partition scan costs ~150 ms for
    elixir's 4,973 rows, inside every slice's write transaction)."""
    if not vector_tables_exist(conn):
        return set()
    if among is None:  # partition-key equality: one package's rows only
        found = conn.execute(f"SELECT rowid FROM {CHUNK_VEC_TABLE} WHERE package = ?", (package,))
        return {int(r[0]) for r in found}
    have: set[int] = set()
    for start in range(0, len(among), _ID_BATCH):
        part = list(among[start : start + _ID_BATCH])
        marks = ",".join("?" * len(part))
        statement = f"SELECT rowid FROM {CHUNK_VEC_TABLE} WHERE rowid IN ({marks})"
        have.update(int(r[0]) for r in conn.execute(statement, part))
    return have


def create_vector_tables(conn: apsw.Connection, dims: int) -> None:
    """Chunk vectors partitioned by package (only partition keys cut the KNN scan)."""
    conn.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {CHUNK_VEC_TABLE} USING vec0("
        f"embedding float[{int(dims)}] distance_metric=cosine, "
        "package text partition key, has_example integer)"
    )
    conn.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {MEMORY_VEC_TABLE} USING vec0("
        f"embedding float[{int(dims)}] distance_metric=cosine)"
    )


def drop_vector_tables(conn: apsw.Connection) -> None:
    conn.execute(f"DROP TABLE IF EXISTS {CHUNK_VEC_TABLE}")
    conn.execute(f"DROP TABLE IF EXISTS {MEMORY_VEC_TABLE}")


def record_embedding(conn: apsw.Connection, model: str, dims: int, provider: str) -> None:
    """The index's vectors come from `model` (no model was recorded before)."""
    conn.execute(
        "INSERT INTO embedding_config(id, model, dims, provider, recorded_at)"
        " VALUES (1, ?, ?, ?, ?)",
        (model, dims, provider, utcnow()),
    )


__all__ = [
    "CHUNK_VEC_TABLE",
    "MEMORY_VEC_TABLE",
    "create_vector_tables",
    "decode_vector",
    "drop_vector_tables",
    "encode_vector",
    "record_embedding",
]
