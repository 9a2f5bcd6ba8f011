"""The reads and writes of `reindex`: stored texts, the embedding cache, and the
one transaction that switches the whole index to another embedding model."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import apsw
import numpy.typing as npt

from hexlocal_core.errors import ModelError
from hexlocal_core.index import chunks
from hexlocal_core.index.db import EmbeddingOwner, atomic, scalar, utcnow
from hexlocal_core.index.vectors import (
    CHUNK_VEC_TABLE,
    MEMORY_VEC_TABLE,
    drop_vector_tables,
    encode_vector,
)

log = logging.getLogger("hexlocal.reindex")


def embedded_texts(store: EmbeddingOwner, package: str) -> list[tuple[str, str]]:
    """(embed_hash, text embedded) for a package's chunks, rebuilt from the stored rows."""
    return [(h, text) for _, h, text, _ in chunks.embedding_rows(store.conn, package)]


def memory_texts(store: EmbeddingOwner) -> list[tuple[int, str]]:
    found = store.conn.execute("SELECT id, text FROM memories ORDER BY id")
    return [(int(r[0]), str(r[1])) for r in found]


def cache_vectors(
    store: EmbeddingOwner, model: str, hashes: Sequence[str], vectors: Sequence[npt.ArrayLike]
) -> None:
    """Puts vectors into the embedding cache under `model`, in one transaction."""
    with atomic(store.conn) as conn:
        for text_hash, vector in zip(hashes, vectors, strict=True):
            blob = encode_vector(vector)
            conn.execute(
                "INSERT OR REPLACE INTO embed_cache(model, text_hash, dims, vector)"
                " VALUES (?,?,?,?)",
                (model, text_hash, len(blob) // 4, blob),
            )


def switch_model(
    store: EmbeddingOwner, model: str, provider: str, dims: int, memory_vectors: Mapping[int, bytes]
) -> None:
    """One transaction: new vector tables filled from the cache, the new model recorded.

    Raises ModelError (nothing switched) when a chunk has no cached vector under `model`.
    """
    with atomic(store.conn) as conn:
        # Checked inside the write lock: another process may have ingested meanwhile.
        missing = scalar(
            conn,
            "SELECT count(*) FROM chunks c LEFT JOIN embed_cache e ON e.model = ?"
            " AND e.text_hash = c.embed_hash WHERE e.text_hash IS NULL",
            (model,),
        )
        if missing:
            raise ModelError(
                f"{missing} chunks have no vector under {model} (a package was indexed "
                "meanwhile); nothing was switched. Run `hexlocal reindex` again."
            )
        dims = _dims_of(conn, model, memory_vectors) or dims
        if not dims:
            # Nothing to embed and a model that learns its dimension on first use: forget
            # the old model, and let the next ingest record the new one.
            drop_vector_tables(conn)
            conn.execute("DELETE FROM embedding_config")
            return
        store.switch_embedding(conn, model, dims, provider)
        conn.execute(
            f"INSERT INTO {CHUNK_VEC_TABLE}(rowid, embedding, package, has_example)"
            " SELECT c.id, e.vector, c.package, c.has_example FROM chunks c"
            " JOIN embed_cache e ON e.model = ? AND e.text_hash = c.embed_hash",
            (model,),
        )
        for mid, blob in memory_vectors.items():
            conn.execute(
                f"INSERT INTO {MEMORY_VEC_TABLE}(rowid, embedding) VALUES (?, ?)", (mid, blob)
            )
        conn.execute("UPDATE packages SET embed_model = ?", (model,))
        conn.execute("UPDATE memories SET embed_model = ?", (model,))
    log.info("index switched to %s at %s", model, utcnow())


def _dims_of(conn: apsw.Connection, model: str, memory_vectors: Mapping[int, bytes]) -> int:
    """The dimension the vectors really have (an API embedder learns its own on first use)."""
    found = scalar(conn, "SELECT dims FROM embed_cache WHERE model = ? LIMIT 1", (model,))
    if found:
        return int(found)
    for blob in memory_vectors.values():
        return len(blob) // 4
    return 0
