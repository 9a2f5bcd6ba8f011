"""Memories in PostgreSQL: the `MemoryQueries` half of team mode (see `index/seam.py`).

Statement for statement the twin of `memory_store.py`, returning its rows. What differs:

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
from typing import Any

import numpy as np
from psycopg import Cursor
from psycopg.abc import Params, Query

from hexlocal_core.index.db import utcnow
from hexlocal_core.index.memory_store import (
    MEMORY_COLUMNS,
    CurationEntry,
    MemoryRow,
    MemoryScope,
    MemoryText,
    NewRequest,
    QueuedRow,
    RequestRow,
    memory_row,
    tags_of,
)
from hexlocal_core.index.pg import fts
from hexlocal_core.index.pg.db import EMBEDDING_LOCK
from hexlocal_core.index.pg.memory_schema import Executes, vector_literal
from hexlocal_core.index.tokens import split_terms
from hexlocal_core.ports import Vectors


def _scalar(ex: Executes, sql: Query, params: Params | None = None) -> Any:
    row = ex.execute(sql, params).fetchone()
    return None if row is None else row[0]


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


# -- scope ---------------------------------------------------------------------------------


def scope_sql(scope: MemoryScope) -> tuple[str, dict[str, object]]:
    """`MemoryScope.sql()` for PostgreSQL: conditions on `memories m` as ' AND ...' text,
    and their named parameters."""
    conditions: list[str] = []
    params: dict[str, object] = {}
    if not scope.include_deprecated:
        conditions.append("NOT m.deprecated")
    if scope.package is not None:
        conditions.append("m.package = %(scope_package)s")
        params["scope_package"] = scope.package
    return "".join(f" AND {c}" for c in conditions), params


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


class PgMemoryQueries:
    """`seam.MemoryQueries` over one `PgSession` (statements run where the session says:
    inside its `atomic()` on that transaction's connection)."""

    def __init__(
        self, session: Executes, *, owner: str = PROCESS_OWNER, lease_s: float = CLAIM_LEASE_S
    ) -> None:
        self.session = session
        self.owner = owner  # who leases queue rows: one value per server
        self.lease_s = lease_s

    def _run(self, sql: Query, params: Params | None = None) -> Cursor[Any]:
        return self.session.execute(sql, params)

    def _embedding_first(self) -> None:
        """The embedding model's shared lock, taken before any memory row is locked.

        A transaction writing memory vectors takes it anyway (`claim_embedding`), but only
        after locking rows; a model switch holds it exclusively while it rewrites every
        memory row. Taken first, the order is the same in both, so they cannot deadlock.
        """
        self._run("SELECT pg_advisory_xact_lock_shared(%s, %s)", EMBEDDING_LOCK)

    # -- memories ------------------------------------------------------------------------

    def memories_by_ids(self, ids: Sequence[int]) -> dict[int, MemoryRow]:
        if not ids:
            return {}
        sql = f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ANY(%s::bigint[])"
        return {r.id: r for r in map(memory_row, self._run(sql, (list(ids),)).fetchall())}

    def memory_text(self, memory_id: int) -> str | None:
        # FOR UPDATE: the backfill reads the text, then writes its vector; a rewrite by
        # another server in between waits, or is seen (and the vector skipped).
        self._embedding_first()
        sql = "SELECT text FROM memories WHERE id = %s FOR UPDATE"
        found = _scalar(self.session, sql, (memory_id,))
        return None if found is None else str(found)

    def deprecated_count(self) -> int:
        return int(_scalar(self.session, "SELECT count(*) FROM memories WHERE deprecated"))

    def live_ids_with_norm_hash(self, norm_hash: str) -> set[int]:
        sql = "SELECT id FROM memories WHERE norm_hash = %s AND NOT deprecated"
        return {int(r[0]) for r in self._run(sql, (norm_hash,)).fetchall()}

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
        return int(_scalar(self.session, sql, params))

    def rewrite_memory(
        self,
        memory_id: int,
        text: MemoryText,
        *,
        package: str | None,
        version: str | None,
        tags: Sequence[str],
    ) -> None:
        self._run(
            "UPDATE memories SET text = %s, text_hash = %s, norm_hash = %s, curated = TRUE,"
            " package = %s, version = %s, tags = %s, updated_at = %s, split_terms = %s,"
            " tsv = %s::tsvector, token_count = %s WHERE id = %s",
            (
                *(text.text, text.text_hash, text.norm_hash, package, version),
                *(json.dumps(list(tags)), utcnow(), *_document(text.text), memory_id),
            ),
        )

    def deprecate_memory(self, memory_id: int) -> None:
        sql = "UPDATE memories SET deprecated = TRUE, updated_at = %s WHERE id = %s"
        self._run(sql, (utcnow(), memory_id))

    # -- memory vectors ------------------------------------------------------------------

    def memory_vectors_exist(self) -> bool:
        return bool(_scalar(self.session, "SELECT EXISTS (SELECT 1 FROM memory_vecs)"))

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
        found = self._run(sql, (vector_literal(values), values.size, k)).fetchall()
        return [(int(r[0]), float(r[1])) for r in found]

    def drop_memory_vector(self, memory_id: int) -> None:
        self._run("DELETE FROM memory_vecs WHERE memory_id = %s", (memory_id,))
        self._run("UPDATE memories SET embed_model = NULL WHERE id = %s", (memory_id,))

    def put_memory_vector(self, memory_id: int, vector: Vectors, model: str) -> None:
        self._run(
            "INSERT INTO memory_vecs (memory_id, embedding) VALUES (%s, %s::vector)"
            " ON CONFLICT (memory_id) DO UPDATE SET embedding = EXCLUDED.embedding",
            (memory_id, vector_literal(vector)),
        )
        self._run("UPDATE memories SET embed_model = %s WHERE id = %s", (model, memory_id))

    def missing_vectors(self, model: str, limit: int) -> list[tuple[int, str]]:
        sql = (
            "SELECT m.id, m.text FROM memories m WHERE m.embed_model IS DISTINCT FROM %s"
            " OR NOT EXISTS (SELECT 1 FROM memory_vecs v WHERE v.memory_id = m.id)"
            " ORDER BY m.id LIMIT %s"
        )
        rows = self._run(sql, (model, _limit(limit))).fetchall()
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
        phrases = _phrase_params(query)
        counts = ", ".join(
            f"count(*) FILTER (WHERE tsv @@ %(p{i})s::tsquery)" for i in range(len(phrases))
        )
        stats = self._run(
            f"SELECT count(*), coalesce(avg(token_count), 0), {counts} FROM memories",
            phrases,
        ).fetchone()
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
        freq = ", ".join(
            f"ts_rank_cd(%(w)s::real[], m.tsv, %(p{i})s::tsquery, 0)"
            for i in range(len(query.phrases))
        )
        sql = (
            f"SELECT m.id, m.token_count, {freq} FROM memories m"
            f" WHERE m.tsv @@ %(any)s::tsquery{where}"
        )
        params = (
            _phrase_params(query)
            | scope_params
            | {
                "w": rank_weights,
                "any": query.any_tsquery(),
            }
        )
        return [
            fts.Candidate(int(r[0]), int(r[1]), False, tuple(float(f) * scale for f in r[2:]))
            for r in self._run(sql, params).fetchall()
        ]

    def out_of_scope_count(self, scope: MemoryScope) -> int:
        """How many memories the scope leaves out (k-NN cannot filter, so it asks for more).

        `IS NOT TRUE` counts a memory with no package as out of a package's scope.
        """
        where, params = scope_sql(scope)
        sql = f"SELECT count(*) FROM memories m WHERE (TRUE{where}) IS NOT TRUE"
        return int(_scalar(self.session, sql, params or None))

    def in_scope(self, ids: Sequence[int], scope: MemoryScope) -> set[int]:
        if not ids:
            return set()
        where, params = scope_sql(scope)
        sql = f"SELECT m.id FROM memories m WHERE m.id = ANY(%(ids)s::bigint[]){where}"
        return {int(r[0]) for r in self._run(sql, {"ids": list(ids), **params}).fetchall()}

    # -- the curation log ----------------------------------------------------------------

    def log_curation(
        self,
        request_id: str,
        action: str,
        memory_id: int | None,
        model: str | None,
        reason: str,
    ) -> None:
        self._run(
            "INSERT INTO curation_log (request_id, action, memory_id, model, reason, at)"
            " VALUES (%s, %s, %s, %s, %s, %s)",
            (request_id, action, memory_id, model, reason, utcnow()),
        )

    def curation_history(self, ids: Sequence[int]) -> dict[int, list[CurationEntry]]:
        """The log entries that touched each memory, oldest first ([] for none)."""
        out: dict[int, list[CurationEntry]] = {i: [] for i in ids}
        if not ids:
            return out
        sql = (
            "SELECT memory_id, request_id, action, model, reason, at FROM curation_log"
            " WHERE memory_id = ANY(%s::bigint[]) ORDER BY id"
        )
        for memory_id, request_id, action, model, reason, at in self._run(
            sql, (list(ids),)
        ).fetchall():
            out[int(memory_id)].append(CurationEntry(request_id, action, model, reason, at))
        return out

    # -- the remember queue --------------------------------------------------------------

    def enqueue(self, items: Sequence[NewRequest]) -> None:
        now = utcnow()
        for item in items:
            self._run(
                "INSERT INTO remember_queue (request_id, text, package, version, tags, status,"
                " submitted_at) VALUES (%s, %s, %s, %s, %s, 'pending', %s)",
                (
                    *(item.request_id, item.text, item.package, item.version),
                    *(json.dumps(item.tags), now),
                ),
            )

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
            " ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED)"
            " RETURNING seq, request_id, text, package, version, tags"
        )
        row = self._run(sql, (self.owner, self.owner, float(self.lease_s))).fetchone()
        if row is None:
            return None
        seq, request_id, text, package, version, tags = row
        return QueuedRow(int(seq), request_id, text, package, version, tags_of(tags))

    def pending_count(self) -> int:
        sql = "SELECT count(*) FROM remember_queue WHERE status = 'pending'"
        return int(_scalar(self.session, sql))

    def request_status(self, request_id: str) -> str | None:
        """Inside `atomic()`: waits until no other server's decision is uncommitted, then
        reads the row locked until this transaction ends.

        The wait serializes decisions as SQLite's one writer does: a decision checks its
        target memory's text before rewriting it, and that check must see a rewrite
        another server committed meanwhile, or the second rewrite would drop the first.
        Decisions are short (no model call inside), so nothing waits long.
        """
        self._embedding_first()
        self._run("SELECT pg_advisory_xact_lock(%s, %s)", DECISION_LOCK)
        sql = "SELECT status FROM remember_queue WHERE request_id = %s FOR UPDATE"
        found = _scalar(self.session, sql, (request_id,))
        return None if found is None else str(found)

    def finish_request(
        self,
        request_id: str,
        *,
        status: str,
        action: str | None,
        memory_id: int | None,
        reason: str,
        curated: bool,
        model: str | None,
    ) -> None:
        self._run(
            "UPDATE remember_queue SET status = %s, action = %s, memory_id = %s, reason = %s,"
            " curated = %s, model = %s, processed_at = %s WHERE request_id = %s",
            (status, action, memory_id, reason, curated, model, utcnow(), request_id),
        )

    def requests(self, request_ids: Sequence[str]) -> dict[str, RequestRow]:
        """The queue rows of the ids that exist, by id."""
        if not request_ids:
            return {}
        sql = (
            "SELECT request_id, status, action, memory_id, curated, reason, model,"
            " submitted_at, processed_at FROM remember_queue WHERE request_id = ANY(%s::text[])"
        )
        out: dict[str, RequestRow] = {}
        for rid, status, action, mid, curated, reason, model, submitted, processed in self._run(
            sql, (list(request_ids),)
        ).fetchall():
            out[rid] = RequestRow(
                rid,
                status,
                action,
                None if mid is None else int(mid),
                None if curated is None else bool(curated),
                reason,
                model,
                submitted,
                processed,
            )
        return out


def _document(text: str) -> tuple[str, str, int]:
    """split_terms, tsvector and token count of a memory (FTS5's two columns)."""
    split = split_terms(text)
    doc = fts.document("", text, split)
    return split, doc.tsvector, doc.length


def _phrase_params(query: fts.Query) -> dict[str, object]:
    return {f"p{i}": phrase.tsquery() for i, phrase in enumerate(query.phrases)}


def _limit(n: int) -> int | None:
    """SQLite reads a negative LIMIT as none; PostgreSQL reads NULL so."""
    return None if n < 0 else n
