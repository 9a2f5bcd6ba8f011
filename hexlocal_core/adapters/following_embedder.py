"""The embedder of an index kept on an older local model, which moves to the configured one
once the index has.

While AI_EMBED_MODEL is unset, `build()` serves an index with the local model that built it
(`Settings.served_with`): an fp32 index from before int8 became the default keeps fp32.
When another process runs `hexlocal reindex`, the index switches to the default under a
running server. `follow` then moves this embedder to the default, so that server's
searches, ingestions and memories keep their vectors instead of turning keyword-only until
a restart.
"""

from __future__ import annotations

from collections.abc import Sequence

from hexlocal_core.adapters.model_fetch import FetchState
from hexlocal_core.ports import Embedder, Vectors


class FollowingEmbedder:
    """Implements `ports.Embedder` and `ports.FollowsIndex` over two embedders."""

    def __init__(self, kept: Embedder, configured: Embedder) -> None:
        self._kept = kept
        self._configured = configured
        self._current = kept

    @property
    def model_id(self) -> str:
        return self._current.model_id

    @property
    def dims(self) -> int:
        return self._current.dims

    @property
    def download_state(self) -> FetchState | None:
        state: FetchState | None = getattr(self._current, "download_state", None)
        return state

    def follow(self, indexed_model: str) -> bool:
        if self._current is self._kept and indexed_model == self._configured.model_id:
            self._current = self._configured
        return indexed_model == self._current.model_id

    async def embed(self, texts: Sequence[str]) -> Vectors:
        return await self._current.embed(texts)

    async def embed_query(self, text: str) -> Vectors:
        return await self._current.embed_query(text)

    async def warm_up(self) -> None:
        await self._current.warm_up()

    async def aclose(self) -> None:
        await self._kept.aclose()
        await self._configured.aclose()


def following(kept: Embedder, configured: Embedder | None) -> Embedder:
    """The kept model's embedder, moving to the configured one when the index does."""
    return kept if configured is None else FollowingEmbedder(kept, configured)
