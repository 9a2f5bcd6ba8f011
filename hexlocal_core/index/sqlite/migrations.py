"""Numbered schema steps, applied at open, each once, recorded with the step itself.

A step commits together with the row recording it, so a failed step stays pending. Steps
are never edited once released: a change is a new step. A database whose version is newer
than the last step known here is refused with `SchemaTooNew`.

Vector tables (vec0) are not here: their dimension is the embedder's, known only at the
first ingest (see `store.Store.claim_embedding`).
"""

from __future__ import annotations

from collections.abc import Callable

import apsw

from hexlocal_core.errors import SchemaTooNew, StoreError
from hexlocal_core.index.sqlite.db import atomic, scalar
from hexlocal_core.index.tokens import FTS_TOKENIZER


def m001_initial(conn: apsw.Connection) -> None:
    conn.execute(
        f"""
        CREATE TABLE packages (
            name TEXT PRIMARY KEY,
            version TEXT NOT NULL,
            source TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('complete', 'partial', 'failed')),
            ingested_at TEXT NOT NULL,
            chunker_version INTEGER NOT NULL,
            item_count INTEGER NOT NULL DEFAULT 0,
            chunk_count INTEGER NOT NULL DEFAULT 0,
            embed_model TEXT,
            docs_html_url TEXT,
            meta TEXT NOT NULL DEFAULT '{{}}'
        );

        CREATE TABLE chunks (
            id INTEGER PRIMARY KEY,
            package TEXT NOT NULL REFERENCES packages(name) ON DELETE CASCADE,
            version TEXT NOT NULL,
            ordinal INTEGER NOT NULL,
            ref TEXT NOT NULL,
            page TEXT NOT NULL,
            title TEXT NOT NULL,
            doc_type TEXT NOT NULL,
            module TEXT,
            function TEXT,
            arity INTEGER,
            signature TEXT,
            deprecated TEXT,
            since TEXT,
            content TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            embed_hash TEXT NOT NULL,
            split_terms TEXT NOT NULL DEFAULT '',
            hexdocs_url TEXT NOT NULL DEFAULT '',
            source_url TEXT,
            source TEXT NOT NULL,
            has_example INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX chunks_package_ref ON chunks(package, ref);
        CREATE INDEX chunks_package_module ON chunks(package, module, function, arity);

        -- External-content FTS over chunks, kept in sync by triggers. Columns: title,
        -- body, split identifier parts; bm25 weights are given at query time.
        CREATE VIRTUAL TABLE chunks_fts USING fts5(
            title, content, split_terms,
            content='chunks', content_rowid='id',
            tokenize="{FTS_TOKENIZER}"
        );
        CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN
            INSERT INTO chunks_fts(rowid, title, content, split_terms)
            VALUES (new.id, new.title, new.content, new.split_terms);
        END;
        CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN
            INSERT INTO chunks_fts(chunks_fts, rowid, title, content, split_terms)
            VALUES ('delete', old.id, old.title, old.content, old.split_terms);
        END;
        CREATE TRIGGER chunks_au AFTER UPDATE ON chunks BEGIN
            INSERT INTO chunks_fts(chunks_fts, rowid, title, content, split_terms)
            VALUES ('delete', old.id, old.title, old.content, old.split_terms);
            INSERT INTO chunks_fts(rowid, title, content, split_terms)
            VALUES (new.id, new.title, new.content, new.split_terms);
        END;

        -- Vectors keyed by (model, hash of the exact text embedded): a version switch or
        -- a re-ingest embeds only text it has never seen.
        CREATE TABLE embed_cache (
            model TEXT NOT NULL,
            text_hash TEXT NOT NULL,
            dims INTEGER NOT NULL,
            vector BLOB NOT NULL,
            PRIMARY KEY (model, text_hash)
        ) WITHOUT ROWID;

        CREATE TABLE embedding_config (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            model TEXT NOT NULL,
            dims INTEGER NOT NULL,
            provider TEXT NOT NULL,
            recorded_at TEXT NOT NULL
        );

        CREATE TABLE ingest_jobs (
            id INTEGER PRIMARY KEY,
            package TEXT NOT NULL,
            version TEXT NOT NULL,
            source TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed')),
            pid INTEGER,
            started_at TEXT NOT NULL,
            finished_at TEXT,
            progress TEXT NOT NULL DEFAULT '{{}}',
            error TEXT
        );
        CREATE INDEX ingest_jobs_status ON ingest_jobs(status);

        CREATE TABLE memories (
            id INTEGER PRIMARY KEY,
            text TEXT NOT NULL,
            text_hash TEXT NOT NULL,
            norm_hash TEXT NOT NULL,
            curated INTEGER NOT NULL DEFAULT 0,
            package TEXT,
            version TEXT,
            tags TEXT NOT NULL DEFAULT '[]',
            deprecated INTEGER NOT NULL DEFAULT 0,
            embed_model TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE INDEX memories_norm ON memories(norm_hash);
        CREATE VIRTUAL TABLE memories_fts USING fts5(
            text, split_terms, content='', contentless_delete=1,
            tokenize="{FTS_TOKENIZER}"
        );

        CREATE TABLE remember_queue (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            request_id TEXT NOT NULL UNIQUE,
            text TEXT NOT NULL,
            package TEXT,
            version TEXT,
            tags TEXT NOT NULL DEFAULT '[]',
            status TEXT NOT NULL CHECK (status IN ('pending', 'done', 'failed')),
            action TEXT,
            memory_id INTEGER,
            reason TEXT,
            submitted_at TEXT NOT NULL,
            processed_at TEXT
        );
        CREATE INDEX remember_queue_status ON remember_queue(status, seq);

        CREATE TABLE curation_log (
            id INTEGER PRIMARY KEY,
            request_id TEXT NOT NULL,
            action TEXT NOT NULL,
            memory_id INTEGER,
            model TEXT,
            reason TEXT,
            at TEXT NOT NULL
        );
        CREATE INDEX curation_log_memory ON curation_log(memory_id);
        CREATE INDEX curation_log_request ON curation_log(request_id);

        CREATE TABLE usage_events (
            id INTEGER PRIMARY KEY,
            at TEXT NOT NULL,
            model TEXT NOT NULL,
            kind TEXT NOT NULL,
            prompt_tokens INTEGER NOT NULL,
            completion_tokens INTEGER NOT NULL,
            total_tokens INTEGER NOT NULL,
            success INTEGER NOT NULL,
            local INTEGER NOT NULL
        );
        CREATE INDEX usage_events_at ON usage_events(at);
        """
    )


def m002_remember_outcome(conn: apsw.Connection) -> None:
    # remember_status reports who decided (a chat model, or a rule when none was usable)
    # and whether the decision was curated; the queue row is the one place both live.
    conn.execute(
        """
        ALTER TABLE remember_queue ADD COLUMN curated INTEGER;
        ALTER TABLE remember_queue ADD COLUMN model TEXT;
        """
    )


def m003_sync_queue(conn: apsw.Connection) -> None:
    # `hexlocal sync`: one row per package the project runs (mix.lock's deps and Elixir's
    # own apps), kept across processes so a sync cut short by an exit resumes at the next
    # start, and a failure keeps its reason for `list`. `pid` claims a row being worked on.
    conn.execute(
        """
        CREATE TABLE sync_queue (
            package TEXT PRIMARY KEY,
            version TEXT NOT NULL,
            kind TEXT NOT NULL,
            status TEXT NOT NULL
                CHECK (status IN ('queued', 'running', 'done', 'failed', 'skipped')),
            seq INTEGER NOT NULL,
            reason TEXT,
            retry INTEGER NOT NULL DEFAULT 1,
            pid INTEGER,
            updated_at TEXT NOT NULL
        );
        CREATE INDEX sync_queue_status ON sync_queue(status, seq);
        """
    )


MIGRATIONS: tuple[Callable[[apsw.Connection], None], ...] = (
    m001_initial,
    m002_remember_outcome,
    m003_sync_queue,
)
SCHEMA_VERSION = len(MIGRATIONS)


def current_version(conn: apsw.Connection) -> int:
    return int(scalar(conn, "PRAGMA user_version") or 0)


def migrate(conn: apsw.Connection) -> int:
    """Apply pending steps; returns the schema version. Idempotent."""
    version = current_version(conn)
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"this index was written by a newer hexlocal (schema {version}; this version knows "
            f"up to {SCHEMA_VERSION}). Upgrade hexlocal, or point DATABASE_PATH at another file."
        )
    for number in range(version + 1, SCHEMA_VERSION + 1):
        step = MIGRATIONS[number - 1]
        with atomic(conn):
            # Re-check inside the write lock: another process may have migrated meanwhile.
            if current_version(conn) >= number:
                continue
            try:
                step(conn)
            except apsw.Error as exc:
                raise StoreError(f"schema step {step.__name__} failed: {exc}") from exc
            conn.execute(f"PRAGMA user_version={number}")
    return current_version(conn)
