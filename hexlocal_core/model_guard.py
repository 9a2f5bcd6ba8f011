"""The index is built with one embedding model: the check before adding vectors to it.

Vectors of two models cannot be compared, so a call that may embed new docs asks first
(one row read) and is refused, naming the fix, when the configured embedder does not
serve the index's model. `provider_of` is the provider label stored beside the vectors.
"""

from __future__ import annotations

from hexlocal_core.errors import ModelMismatch
from hexlocal_core.index.seam import DocsStore
from hexlocal_core.ports import Embedder, serves_index


def model_guard(store: DocsStore, embedder: Embedder) -> None:
    """Refuse to add vectors of another model to an index (costs one row read)."""
    config = store.embedding_config()
    if config is not None and not serves_index(embedder, config.model):
        raise ModelMismatch(
            f"this index was built with {config.model} ({config.dims} dims) but the configured "
            f"embedder is {embedder.model_id}. Run `hexlocal reindex` to re-embed every package "
            "under the configured model, or set AI_EMBED_MODEL back."
        )


def provider_of(embedder: Embedder) -> str:
    return embedder.model_id.split(":", 1)[0] if ":" in embedder.model_id else "api"
