"""Memories in PostgreSQL: `seam.MemoryQueries`, the twin of `sqlite/memories.py`.

The statements both engines share are `memory_sql.MemorySql`'s. What PostgreSQL does its
own way:

- Keyword recall. The tsvector is built in Python by `pg/fts.py` from `tokens.py`'s rule
  (PostgreSQL's parser would split `chunk_overlap` and `token/2`): the text at weight B,
  its split identifier parts (`split_terms`) at C, a gap between them so no phrase spans
  the two. `fts_match_to_tsquery` reads the sanitizer's MATCH text; any input gives a
  tsquery or None, never a failed statement. Ranking is FTS5's BM25, computed as the
  chunks' keyword arm does, so memories come back in SQLite's order.
- Vectors. `memory_vecs.embedding` is a `vector` without dims (memories are few: an exact
  cosine scan, no index), so the table exists from the schema on and
  `memory_vectors_exist` means "some memory vector is stored".
- Two servers on one queue. `next_pending` leases the row it hands out, so another
  server takes the next one; correctness comes from `request_status`, which inside the
  applying transaction waits for any other decision to commit and locks the row.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Sequence

import numpy as np

from hexlocal_core.index.memory_sql import QUEUED_COLUMNS, MemorySql, queued_row, scope_sql
from hexlocal_core.index.pg import fts
from hexlocal_core.index.pg.db import EMBEDDING_LOCK, Executor, PgRunner
from hexlocal_core.index.pg.memory_schema import vector_literal
from hexlocal_core.index.rows import MemoryScope, MemoryText, QueuedRow
from hexlocal_core.index.sql import utcnow
from hexlocal_core.index.tokens import split_terms
from hexlocal_core.ports import Vectors

# -- full-text: the MATCH text as a tsquery ------------------------------------------------


def fts_match_to_tsquery(match: str) -> str | None:
    """The tsquery text for an FTS5 MATCH expression, None when it has no searchable word.

    The grammar is `pg/fts.py`'s, shared with the chunks' keyword arm: quoted phrases
    (`<->` between their folded tokens, `:*` after a `*`), OR as `|`, juxtaposition and
    AND as `&`, NOT and NEAR dropped; every lexeme is quoted, so any input gives a tsquery
    PostgreSQL accepts, or None.
    """
    query = fts.parse_match(match)
    return None if query is None else query.tsquery()


# -- the queries ---------------------------------------------------------------------------

# Who leases queue rows: one value per process unless the store passes its own.
PROCESS_OWNER = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
# How long a handed-out queue row is left to the server curating it (one item's embedding,
# chat call and retries take well under this). Past it, a row of a server that died is
# taken by another; a lease never decides anything, `request_status` does.
CLAIM_LEASE_S = 120
# Two int4 keys, apart from `pg/db.py`'s ('hexl' migrations and the embedding model, 'hexi'
# ingest claims).
DECISION_LOCK = (0x68657870, 1)  # 'hexp': one memory decision at a time


class PgMemoryQueries(MemorySql, PgRunner):
    """`seam.MemoryQueries` over one `PgSession` (statements run where the session says:
    inside its `atomic()` on that transaction's connection)."""

    def __init__(
        self, session: Executor, *, owner: str = PROCESS_OWNER, lease_s: float = CLAIM_LEASE_S
    ) -> None:
        self._ex = session
        self.owner = owner  # who leases queue rows: one value per server
        self.lease_s = lease_s

    def _embedding_first(self) -> None:
        """The embedding model's shared lock, taken before any memory row is locked.

        A transaction writing memory vectors takes it anyway (`claim_embedding`), but only
        after locking rows; a model switch holds it exclusively while it rewrites every
        memory row. Taken first, the order is the same in both, so they cannot deadlock.
        """
        self._ex.execute("SELECT pg_advisory_xact_lock_shared(%s, %s)", EMBEDDING_LOCK)

    # -- memories ------------------------------------------------------------------------

    def memory_text(self, memory_id: int) -> str | None:
        # FOR UPDATE: the backfill reads the text, then writes its vector; a rewrite by
        # another server in between waits, or is seen (and the vector skipped).
        self._embedding_first()
        sql = "SELECT text FROM memories WHERE id = %s FOR UPDATE"
        found = self._ex.scalar(sql, (memory_id,))
        return None if found is None else str(found)

    def insert_memory(
        self,
        text: MemoryText,
        *,
        curated: bool,
        package: str | None,
        version: str | None,
        tags: Sequence[str],
    ) -> int:
        now, doc = utcnow(), _document(text.text)
        sql = (
            "INSERT INTO memories (text, text_hash, norm_hash, curated, package, version, tags,"
            " created_at, updated_at, split_terms, tsv, token_count)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::tsvector, %s) RETURNING id"
        )
        params = (
            *(text.text, text.text_hash, text.norm_hash, curated, package, version),
            *(json.dumps(list(tags)), now, now, *doc),
        )
        return int(self._ex.scalar(sql, params))

    def rewrite_memory(
        self,
        memory_id: int,
        text: MemoryText,
        *,
        package: str | None,
        version: str | None,
        tags: Sequence[str],
    ) -> None:
        self._ex.execute(
            "UPDATE memories SET text = %s, text_hash = %s, norm_hash = %s, curated = TRUE,"
            " package = %s, version = %s, tags = %s, updated_at = %s, split_terms = %s,"
            " tsv = %s::tsvector, token_count = %s WHERE id = %s",
            (
                *(text.text, text.text_hash, text.norm_hash, package, version),
                *(json.dumps(list(tags)), utcnow(), *_document(text.text), memory_id),
            ),
        )

    # -- memory vectors ------------------------------------------------------------------

    def memory_vectors_exist(self) -> bool:
        return bool(self._ex.scalar("SELECT EXISTS (SELECT 1 FROM memory_vecs)"))

    def memory_knn(self, vector: Vectors, k: int) -> list[tuple[int, float]]:
        """(memory id, cosine distance), nearest first; [] before any vector was stored."""
        if k <= 0:
            return []
        values = np.asarray(vector, dtype=np.float32).reshape(-1)
        # Only vectors of the query's dims: pgvector refuses to compare others (none should
        # exist, as the index holds one model, but a failed statement would end recall).
        sql = (
            "SELECT memory_id, embedding <=> %s::vector AS distance FROM memory_vecs"
            " WHERE vector_dims(embedding) = %s ORDER BY distance, memory_id LIMIT %s"
        )
        found = self._ex.fetchall(sql, (vector_literal(values), values.size, k))
        return [(int(r[0]), float(r[1])) for r in found]

    def drop_memory_vector(self, memory_id: int) -> None:
        self._ex.execute("DELETE FROM memory_vecs WHERE memory_id = %s", (memory_id,))
        self._ex.execute("UPDATE memories SET embed_model = NULL WHERE id = %s", (memory_id,))

    def put_memory_vector(self, memory_id: int, vector: Vectors, model: str) -> None:
        self._ex.execute(
            "INSERT INTO memory_vecs (memory_id, embedding) VALUES (%s, %s::vector)"
            " ON CONFLICT (memory_id) DO UPDATE SET embedding = EXCLUDED.embedding",
            (memory_id, vector_literal(vector)),
        )
        self._ex.execute("UPDATE memories SET embed_model = %s WHERE id = %s", (model, memory_id))

    def missing_vectors(self, model: str, limit: int) -> list[tuple[int, str]]:
        sql = (
            "SELECT m.id, m.text FROM memories m WHERE m.embed_model IS DISTINCT FROM %s"
            " OR NOT EXISTS (SELECT 1 FROM memory_vecs v WHERE v.memory_id = m.id)"
            " ORDER BY m.id LIMIT %s"
        )
        rows = self._ex.fetchall(sql, (model, self.dialect.limit(limit)))
        return [(int(r[0]), str(r[1])) for r in rows]

    # -- recall --------------------------------------------------------------------------

    def keyword_memory_ids(
        self, match: str, scope: MemoryScope, *, depth: int, weights: tuple[float, float]
    ) -> list[int]:
        """Memory ids for a sanitized MATCH expression, best first, scope applied before
        LIMIT; [] when the expression holds no searchable word.

        BM25 as FTS5's bm25() computes it (`pg/fts.py`): N, document frequencies and the
        average length over every memory, frequencies from the rows the scope allows.
        """
        query = fts.parse_match(match)
        if query is None or depth == 0:
            return []
        rows = self._candidates(query, scope, weights)
        if not rows:
            return []
        phrases = [phrase.tsquery() for phrase in query.phrases]
        counts = ", ".join("count(*) FILTER (WHERE tsv @@ %s::tsquery)" for _ in phrases)
        stats = self._ex.fetchone(
            f"SELECT count(*), coalesce(avg(token_count), 0), {counts} FROM memories", phrases
        )
        assert stats is not None  # an aggregate always answers a row
        documents, avgdl, *df = stats
        ranked = fts.rank(
            query,
            rows,
            documents=int(documents),
            df=[int(n) for n in df],
            avgdl=float(avgdl),
            examples_only=False,
            depth=len(rows) if depth < 0 else depth,
        )
        return [memory_id for memory_id, _ in ranked]

    def _candidates(
        self, query: fts.Query, scope: MemoryScope, weights: tuple[float, float]
    ) -> list[fts.Candidate]:
        """Every memory in scope matching any phrase, with each phrase's frequency."""
        where, scope_params = scope_sql(scope)
        rank_weights, scale = fts.rank_weights((0.0, *weights))
        freq = ", ".join("ts_rank_cd(?::real[], m.tsv, ?::tsquery, 0)" for _ in query.phrases)
        sql = f"SELECT m.id, m.token_count, {freq} FROM memories m WHERE m.tsv @@ ?::tsquery{where}"
        params = [
            *(p for phrase in query.phrases for p in (rank_weights, phrase.tsquery())),
            query.any_tsquery(),
            *scope_params,
        ]
        return [
            fts.Candidate(int(r[0]), int(r[1]), False, tuple(float(f) * scale for f in r[2:]))
            for r in self._select(sql, params)
        ]

    # -- the remember queue --------------------------------------------------------------

    def next_pending(self) -> QueuedRow | None:
        """The oldest pending row no other server is curating, leased to this one.

        Called outside a transaction, so the lease is a column, not a lock: another server
        skips the row until the lease runs out (its holder died). This owner's own lease
        is no obstacle, so a restarted worker resumes with the item it had abandoned.
        """
        sql = (
            "UPDATE remember_queue SET claimed_by = %s, claimed_at = now() WHERE seq = ("
            " SELECT seq FROM remember_queue WHERE status = 'pending' AND (claimed_by IS NULL"
            " OR claimed_by = %s OR claimed_at < now() - make_interval(secs => %s))"
            f" ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING {QUEUED_COLUMNS}"
        )
        row = self._ex.fetchone(sql, (self.owner, self.owner, float(self.lease_s)))
        return None if row is None else queued_row(row)

    def request_status(self, request_id: str) -> str | None:
        """Inside `atomic()`: waits until no other server's decision is uncommitted, then
        reads the row locked until this transaction ends.

        The wait serializes decisions as SQLite's one writer does: a decision checks its
        target memory's text before rewriting it, and that check must see a rewrite
        another server committed meanwhile, or the second rewrite would drop the first.
        Decisions are short (no model call inside), so nothing waits long.
        """
        self._embedding_first()
        self._ex.execute("SELECT pg_advisory_xact_lock(%s, %s)", DECISION_LOCK)
        sql = "SELECT status FROM remember_queue WHERE request_id = %s FOR UPDATE"
        found = self._ex.scalar(sql, (request_id,))
        return None if found is None else str(found)


def _document(text: str) -> tuple[str, str, int]:
    """split_terms, tsvector and token count of a memory (FTS5's two columns)."""
    split = split_terms(text)
    doc = fts.document("", text, split)
    return split, doc.tsvector, doc.length
