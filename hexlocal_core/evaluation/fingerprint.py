"""What corpus a report was measured on.

The keyword arm takes BM25's document counts from the package searched, but its length
normaliser (avgdl) from the whole FTS table (`index/bm25.py`), so adding an unrelated
package still moves keyword scores a little; and a re-chunk or another embedding model
moves everything. Two reports are comparable only when their fingerprints match; the
digest makes that a one-glance check. It covers package versions, row counts, the
embedding model and every stored chunk's content hash, so a re-chunk or a re-embed under
another model changes it.
"""

from __future__ import annotations

import hashlib
from typing import Any

from attrs import asdict, frozen

from hexlocal_core.index.seam import DocsStore


@frozen
class PackageFingerprint:
    name: str
    version: str
    chunks: int  # counted from the rows, not taken from the package record
    items: int  # distinct refs among the rows
    chunker_version: int
    embed_model: str | None


@frozen
class CorpusFingerprint:
    packages: tuple[PackageFingerprint, ...]
    total_chunks: int  # every row in the index (BM25's length normaliser spans them all)
    embed_model: str | None
    embed_dims: int | None
    digest: str  # sha256 prefix over the above and every content hash

    def version_of(self, package: str) -> str | None:
        for p in self.packages:
            if p.name == package:
                return p.version
        return None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _digest(store: DocsStore, packages: tuple[PackageFingerprint, ...], model: str | None) -> str:
    h = hashlib.sha256(f"model={model}\n".encode())
    for p in packages:
        h.update(f"{p.name}@{p.version}:{p.chunks}:{p.chunker_version}\n".encode())
    for content_hash in store.session().chunks.content_hashes():
        h.update(content_hash.encode())
    return h.hexdigest()[:16]


def fingerprint(store: DocsStore) -> CorpusFingerprint:
    packages = tuple(
        PackageFingerprint(
            name=s.name,
            version=s.version,
            chunker_version=s.chunker_version,
            embed_model=s.embed_model,
            chunks=s.chunks,
            items=s.items,
        )
        for s in store.session().chunks.package_stats()
    )
    config = store.embedding_config()
    model = config.model if config else None
    return CorpusFingerprint(
        packages=packages,
        total_chunks=store.chunk_count(),
        embed_model=model,
        embed_dims=config.dims if config else None,
        digest=_digest(store, packages, model),
    )
