"""The one ingestor: gather the facts, plan (pure), read the plan's items, index them.

It takes the ports it needs (store, embedder, registry) and plain values; the model guard
is the caller's, run once before a job starts.
"""

from __future__ import annotations

import asyncio
import time
from functools import partial
from pathlib import Path

from attrs import frozen

from hexlocal_core.chunk import CHUNKER_VERSION
from hexlocal_core.errors import ModelError, PackageNotFound, RemoteError, StoreError
from hexlocal_core.index.rows import Unembedded
from hexlocal_core.index.seam import DocsStore, IngestClaim
from hexlocal_core.ingest.otp_source import OtpSource
from hexlocal_core.ingest.pipeline import IngestRequest, finish_stored, ingest_items
from hexlocal_core.ingest.planner import IngestPlan, needs_compiled, plan_ingest
from hexlocal_core.ingest.sources import compiled_ebin, read_plan, with_usage_rules
from hexlocal_core.model import (
    IndexedPackage,
    IngestProgress,
    IngestReport,
    Phase,
    ProgressFn,
    ResolvedVersion,
    VersionSource,
)
from hexlocal_core.ports import Embedder, HexRegistry, serves_index
from hexlocal_core.threads import in_worker
from hexlocal_core.versions import ELIXIR_APPS

# How often a process waiting on another's claim (a file lock, or PostgreSQL's advisory lock)
# looks again.
CLAIM_POLL_S = 0.5


@frozen
class SourcePaths:
    """Where compiled apps are found, and how much a docs tarball may weigh."""

    project_root: Path
    elixir_home: Path | None
    max_docs_bytes: int


class Ingestor:
    def __init__(
        self,
        store: DocsStore,
        embedder: Embedder | None,
        registry: HexRegistry,
        paths: SourcePaths,
        *,
        slice_size: int,
        otp: OtpSource | None = None,
    ) -> None:
        self._store = store
        self._embedder = embedder
        self._registry = registry
        self._paths = paths
        self._slice_size = slice_size
        self.otp = otp  # Erlang/OTP applications: resolved and read through it

    async def plan(
        self, resolved: ResolvedVersion, *, docs_html_url: str | None = None, ask_hex: bool = True
    ) -> IngestPlan:
        """Gathers what the planner needs (a folder probe, hex.pm's docs URL) and plans."""
        name, version, p = resolved.name, resolved.version, self._paths
        if resolved.source is VersionSource.PROJECT:  # its ebin is where it resolved
            return plan_ingest(resolved, compiled=None, docs_html_url=None)
        compiled = await in_worker(
            lambda: compiled_ebin(name, version, p.project_root, p.elixir_home)
        )
        if docs_html_url is None and ask_hex and not needs_compiled(resolved):
            docs_html_url = await self._docs_html_url(name)
        return plan_ingest(resolved, compiled=compiled, docs_html_url=docs_html_url)

    async def read(self, plan: IngestPlan, phase: ProgressFn | None = None) -> IngestRequest:
        def report(p: Phase) -> None:
            if phase is not None:
                phase(IngestProgress(plan.package, plan.version, p))

        return await read_plan(
            self._registry,
            plan,
            max_bytes=self._paths.max_docs_bytes,
            phase=report,
            root=self._paths.project_root,
        )

    async def run(
        self,
        resolved: ResolvedVersion,
        progress: ProgressFn,
        *,
        from_store: bool = True,
        embed: bool = True,
    ) -> IngestReport:
        """Plans, reads and indexes one package version; writes nothing unless it all works.

        Processes sharing one index ingest a package version once: this one
        waits while another holds the claim, and answers from its work when it is done.
        `from_store`: a version whose chunks are stored, partial, is finished from them
        (False: a refresh reads the docs again). `embed=False`: the chunks only.
        """
        started = time.perf_counter()
        claim = await self._claim(resolved, progress)
        if claim is None:
            return await self._indexed_elsewhere(resolved, started)
        try:
            stored = await in_worker(lambda: self._resumable(resolved)) if from_store else None
            if stored is not None and not embed:
                return _report_of(stored.package, started)
            if stored is not None and self._embedder is not None:
                return await finish_stored(
                    self._store,
                    self._embedder,
                    stored,
                    slice_size=self._slice_size,
                    progress=progress,
                    started=started,
                )
            request = await self._read(resolved, progress)
            root = self._paths.project_root
            request = await in_worker(lambda: with_usage_rules(request, resolved, root))
            return await self.ingest(request, progress, started=started, embed=embed)
        finally:
            await in_worker(claim.release)

    async def _read(self, resolved: ResolvedVersion, progress: ProgressFn) -> IngestRequest:
        """The items of `resolved`: an OTP application from its OTP, else per the plan."""
        if resolved.source is VersionSource.OTP and self.otp is not None:
            progress(IngestProgress(resolved.name, resolved.version, Phase.PARSING))
            return await self.otp.read(resolved)
        return await self.read(await self.plan(resolved), progress)

    async def _claim(self, resolved: ResolvedVersion, progress: ProgressFn) -> IngestClaim | None:
        """This process's claim on the version; None if another indexed it while we waited."""
        name, version = resolved.name, resolved.version
        waited = searchable = False
        while True:
            attempt = partial(self._attempt_claim, name, version, waited=waited)
            claim, elsewhere = await in_worker(attempt, undo=_release_attempt)
            if elsewhere:
                return None
            if claim is not None:
                return claim
            if not waited:
                message = "another hexlocal process sharing this index is indexing it; waiting"
                progress(IngestProgress(name, version, Phase.RESOLVING, message=message))
                waited = True
            if not searchable and await in_worker(lambda: self._chunks_at(name, version)):
                # The other server wrote the chunks: this one's searches answer by keyword
                # (the job is searchable) while it waits for the vectors.
                message = "another hexlocal process sharing this index is embedding it"
                progress(IngestProgress(name, version, Phase.EMBEDDING, message=message))
                searchable = True
            await asyncio.sleep(CLAIM_POLL_S)  # cancellable: a shutdown stops the wait

    def _attempt_claim(
        self, name: str, version: str, *, waited: bool
    ) -> tuple[IngestClaim | None, bool]:
        """One try at the claim, in one worker call (so a cancel can give it back): the
        claim, or none while another holds it; True when, after a wait, the other process
        turned out to have indexed the version (the claim is released again)."""
        claim = self._store.try_ingest_claim(name, version)
        if claim is not None and waited and self._indexed_at(name, version):
            claim.release()
            return None, True
        return claim, False

    def _resumable(self, resolved: ResolvedVersion) -> Unembedded | None:
        """The stored chunks of a partial `resolved` that lack a vector, when finishing them
        gives what a fresh ingestion would: the same chunker made them and the embedder's
        model is the package's."""
        stored = self._store.unembedded(resolved.name, resolved.version)
        if stored is None or self._embedder is None:
            return None
        package = stored.package
        if package.chunker_version != CHUNKER_VERSION:
            return None
        # serves_index, not the model id: an embedder that follows its index (a server kept
        # on fp32 after another process reindexed) moves first, as every other model check.
        if package.embed_model is not None and not serves_index(
            self._embedder, package.embed_model
        ):
            return None
        return stored

    def _chunks_at(self, name: str, version: str) -> bool:
        indexed = self._store.package(name)
        return indexed is not None and indexed.version == version

    def _indexed_at(self, name: str, version: str) -> bool:
        indexed = self._store.package(name)
        # 'partial' at that version: the other server stopped before its last vector.
        return indexed is not None and indexed.version == version and indexed.complete

    async def _indexed_elsewhere(self, resolved: ResolvedVersion, started: float) -> IngestReport:
        indexed = await in_worker(lambda: self._store.package(resolved.name))
        if indexed is None:  # indexed by another server, then deleted, in a moment
            raise StoreError(f"{resolved.name} was removed while it was being indexed; retry")
        return _report_of(indexed, started)

    async def ingest(
        self,
        request: IngestRequest,
        progress: ProgressFn | None = None,
        *,
        started: float | None,
        embed: bool = True,
    ) -> IngestReport:
        if self._embedder is None:
            raise ModelError(
                "no embedding model is available to index new docs; see `hexlocal models status`"
            )
        return await ingest_items(
            self._store,
            self._embedder,
            request,
            slice_size=self._slice_size,
            progress=progress,
            started=started,
            embed=embed,
        )

    async def _docs_html_url(self, name: str) -> str | None:
        if name in ELIXIR_APPS:
            return None
        try:
            return (await self._registry.package_info(name)).docs_html_url
        except (RemoteError, PackageNotFound):
            return None


def _report_of(package: IndexedPackage, started: float) -> IngestReport:
    """The report of a job that found the work done: by another server, or (chunks only)
    by an earlier job."""
    return IngestReport(
        package=package.name,
        version=package.version,
        source=package.source,
        items=package.item_count,
        chunks=package.chunk_count,
        embedded=0,
        reused=0,
        seconds=round(time.perf_counter() - started, 3),
    )


def _release_attempt(attempt: tuple[IngestClaim | None, bool]) -> None:
    claim, _ = attempt
    if claim is not None:
        claim.release()
