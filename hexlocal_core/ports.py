"""The ports: what the core needs from the outside world, in the core's own vocabulary.

Adapters in `hexlocal_core/adapters/` implement them (onnxruntime, aiohttp); tests use the
real adapters against loopback fakes. Core logic depends only on these Protocols.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from hexlocal_core.model import (
    ChatReply,
    HexPackageInfo,
    IssueHit,
    IssueQuery,
    Reachability,
    UsageEvent,
)

Vectors = npt.NDArray[np.float32]  # shape (n, dims), rows L2-normalised


class Resource(Protocol):
    """The lifecycle every adapter has, so the composition root never duck-types.

    `warm_up` loads now what the first call would load (models); `aclose` releases sessions
    and threads. Both are idempotent; a remote client's `warm_up` does nothing.
    """

    async def warm_up(self) -> None: ...

    async def aclose(self) -> None: ...


class NoLifecycle:
    """Base for adapters with nothing to load or release."""

    async def warm_up(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


@runtime_checkable
class Embedder(Resource, Protocol):
    """Turns texts into unit vectors. Output row i belongs to input i."""

    @property
    def model_id(self) -> str:
        """Identity recorded with the index, e.g. 'local:sentence-transformers/all-MiniLM-L6-v2'."""
        ...

    @property
    def dims(self) -> int: ...

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed documents (any number; the adapter batches). Raises ModelError/RemoteError."""
        ...

    async def embed_query(self, text: str) -> Vectors:
        """Embed one query; shape (1, dims)."""
        ...


@runtime_checkable
class FollowsIndex(Protocol):
    """An embedder that can move to the model its index has moved to (see
    `adapters/following_embedder.py`)."""

    def follow(self, indexed_model: str) -> bool:
        """True when its vectors now match an index built by `indexed_model`."""
        ...


def serves_index(embedder: Embedder, indexed_model: str) -> bool:
    """Whether the embedder's vectors match an index built by `indexed_model`; one that
    follows its index moves first."""
    if isinstance(embedder, FollowsIndex):
        return embedder.follow(indexed_model)
    return embedder.model_id == indexed_model


@runtime_checkable
class Reranker(Resource, Protocol):
    """Scores (query, passage) pairs; a higher score means more relevant."""

    @property
    def model_id(self) -> str: ...

    async def score(self, query: str, passages: Sequence[str]) -> list[float]: ...


@runtime_checkable
class ChatModel(Resource, Protocol):
    """An OpenAI-compatible chat model answering JSON for curation."""

    @property
    def model_id(self) -> str: ...

    async def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        json_schema: Mapping[str, Any] | None = None,
        large: bool = False,
    ) -> ChatReply: ...


@runtime_checkable
class HexRegistry(Resource, Protocol):
    """hex.pm's API and docs mirror."""

    async def package_info(self, name: str) -> HexPackageInfo:
        """Raises PackageNotFound, RemoteError."""
        ...

    async def fetch_docs(self, name: str, version: str) -> bytes:
        """The docs tarball, in memory, size-capped. Raises VersionNotFound, RemoteError."""
        ...

    def reachable(self) -> tuple[Reachability, ...]:
        """What is known of the API's and the mirror's reachability, the API first. A call
        to one found unreachable fails at once (RemoteError) until it answers again."""
        ...


@runtime_checkable
class OtpDocsSource(Resource, Protocol):
    """The doc tarballs Erlang/OTP releases publish (ExDoc output of every application)."""

    async def fetch_release_docs(self, release: str) -> bytes:
        """The tarball of OTP `release` ("27.3.4.1" or "OTP-27.3.4.1"), in memory,
        size-capped. Raises UserInputError, VersionNotFound, RemoteError."""
        ...


@runtime_checkable
class ReleaseRequirements(Protocol):
    """hex.pm's data on one release: what it requires of other packages."""

    async def release_requirements(self, name: str, version: str) -> Mapping[str, str]:
        """Dependency name -> requirement (`"~> 3.0"`). Raises VersionNotFound, RemoteError."""
        ...


@runtime_checkable
class IssueTracker(Resource, Protocol):
    """Live issue/PR search (GitHub). Nothing is stored."""

    async def search(self, query: IssueQuery) -> list[IssueHit]:
        """Raises RateLimited, UserInputError (422), RemoteError."""
        ...


@runtime_checkable
class UsageSink(Protocol):
    """Where adapters record model usage (tokens) for `get_token_usage`."""

    def record(self, event: UsageEvent) -> None: ...
