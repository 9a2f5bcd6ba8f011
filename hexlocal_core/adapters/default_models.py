"""The models `build()` wires when none is given: the local ONNX ones, or the cloud
embedder `AI_EMBED_MODEL` names. A model that cannot be had is logged and left out: search
degrades to the arm beneath it, with a notice."""

from __future__ import annotations

import logging

from hexlocal_core.config import Settings
from hexlocal_core.errors import HexlocalError
from hexlocal_core.index.seam import UsageRecords
from hexlocal_core.model import DownloadProgress
from hexlocal_core.ports import Embedder, Reranker

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


def default_reranker(
    settings: Settings, usage: UsageRecords, progress: DownloadProgress | None
) -> Reranker | None:
    from hexlocal_core.adapters.cross_encoder import build_local_reranker

    try:
        return build_local_reranker(settings, usage, progress=progress)
    except HexlocalError as exc:
        log.info("no cross-encoder: %s", exc)
        return None
