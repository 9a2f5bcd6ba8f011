"""One small package of every ExDoc generation, end to end with the real local embedder:
loopback hex.pm -> download -> parse -> chunk -> ONNX embed -> SQLite -> hybrid search.
The queries are in words, not identifiers, so the vector arm has to carry them."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexlocal_core.adapters.local_embedder import LocalEmbedder
from hexlocal_core.index.sqlite.db import scalar
from hexlocal_core.service import build
from tests.fakes.fake_hex import FakeHex
from tests.support.helpers import db
from tests.support.hex_fixtures import client_for, settings_for

pytestmark = pytest.mark.integration

CASES = [
    # package, version, generation, concept query, expected ref prefix
    (
        "mime",
        "1.3.1",
        "ExDoc 0.19 sidebar + HTML",
        "file extensions known for a mime type",
        "MIME.html#extensions/1",
    ),
    (
        "jason",
        "1.2.2",
        "ExDoc 0.29 search_items",
        "pretty print a JSON string with indentation",
        "Jason.Formatter.html#pretty_print",
    ),
    (
        "plug_crypto",
        "2.1.1",
        "ExDoc 0.36 search_data",
        "compare two binaries in constant time",
        "Plug.Crypto.html#secure_compare/2",
    ),
    (
        "text_chunker",
        "0.7.0",
        "ExDoc 0.40 search_data + .md",
        "split a long text into smaller pieces",
        "TextChunker.html#split/2",
    ),
    (
        "telemetry",
        "1.2.1",
        "EDoc (Erlang)",
        "attach a handler function to an event",
        "telemetry.html#attach/4",
    ),
]


@pytest.mark.parametrize(
    ("package", "version", "generation", "query", "expected"), CASES, ids=[c[2] for c in CASES]
)
async def test_generation_ingests_and_answers_with_the_real_model(
    package: str,
    version: str,
    generation: str,
    query: str,
    expected: str,
    fake_hex: FakeHex,
    tmp_path: Path,
    local_embedder: LocalEmbedder,
) -> None:
    settings = settings_for(fake_hex, tmp_path, ai_rerank_model="off")
    service = build(
        settings, embedder=local_embedder, registry=client_for(settings), load_models=False
    )
    try:
        result = await service.search_docs(package, query, version=version)
        assert result.notices == (), result.notices  # every stage ran, nothing degraded
        refs = [h.ref for h in result.hits]
        assert any(r.startswith(expected) for r in refs), (generation, refs)
        top = next(h for h in result.hits if h.ref.startswith(expected))
        assert top.hexdocs_url.endswith(top.ref) and version in top.hexdocs_url
        assert top.vec_rank is not None  # the vector arm saw it
        conn = db(service)
        chunks = scalar(conn, "SELECT count(*) FROM chunks WHERE package = ?", (package,))
        vectors = scalar(conn, "SELECT count(*) FROM chunk_vecs WHERE package = ?", (package,))
        assert chunks == vectors > 0
    finally:
        await service.aclose()
