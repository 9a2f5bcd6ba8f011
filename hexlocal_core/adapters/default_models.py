"""The models `build()` wires when none is given: the local ONNX ones, or the cloud
embedder `AI_EMBED_MODEL` names, and the AI API's chat model when a key is set. A model
that cannot be had is logged and left out: search degrades to the arm beneath it, with a
notice."""

from __future__ import annotations

import logging

from hexlocal_core.config import Settings
from hexlocal_core.errors import HexlocalError
from hexlocal_core.index.seam import UsageRecords
from hexlocal_core.model import DownloadProgress
from hexlocal_core.ports import ChatModel, Embedder, Reranker

log = logging.getLogger("hexlocal.service")


def default_embedder(
    settings: Settings, usage: UsageRecords, progress: DownloadProgress | None
) -> Embedder | None:
    try:
        if settings.uses_local_embedder:
            from hexlocal_core.adapters.local_embedder import build_local_embedder

            return build_local_embedder(settings, usage, progress=progress)
        from hexlocal_core.adapters.openai_api import OpenAIEmbedder

        return OpenAIEmbedder(settings, usage=usage)
    except HexlocalError as exc:
        log.warning("no embedder: %s", exc)
        return None


def served_embedder(
    settings: Settings, served: Settings, usage: UsageRecords, progress: DownloadProgress | None
) -> Embedder | None:
    """The embedder for an index `served` (`Settings.served_with`) keeps at the model it
    was built with: while that is not the configured one, it follows the index to the
    configured model once another process reindexes it."""
    embedder = default_embedder(served, usage, progress)
    if served is settings or embedder is None:
        return embedder
    from hexlocal_core.adapters.following_embedder import following

    return following(embedder, default_embedder(settings, usage, progress))


def default_reranker(
    settings: Settings, usage: UsageRecords, progress: DownloadProgress | None
) -> Reranker | None:
    from hexlocal_core.adapters.cross_encoder import build_local_reranker

    try:
        return build_local_reranker(settings, usage, progress=progress)
    except HexlocalError as exc:
        log.info("no cross-encoder: %s", exc)
        return None


def default_chat(settings: Settings, usage: UsageRecords) -> ChatModel | None:
    """The AI API's chat model (memory curation), when AI_API_KEY is set."""
    if not settings.ai_api_key:
        return None
    from hexlocal_core.adapters.openai_api import OpenAIChat

    return OpenAIChat(settings, usage=usage)
