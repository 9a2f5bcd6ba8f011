"""The values the engine passes around. All are attrs frozen classes: built once, never mutated.

Expected outcomes (a degraded stage, a replaced version) travel as `Notice` values inside
results; only failures the caller must act on are exceptions (see `errors.py`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from datetime import datetime
from enum import StrEnum
from typing import Any

from attrs import asdict, field, frozen

from hexlocal_core.notice_codes import NoticeCode


def sha256_text(text: str) -> str:
    """The content hash used everywhere (chunks, embedding cache, memories)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def embedding_text(title: str, signature: str | None, content: str) -> str:
    """What the embedder sees: the item's identity as context, then the stored text.

    Stored content stays byte-identical to the source; only the embedded text is prefixed.
    """
    head = title
    if signature and signature not in head:
        head = f"{head} {signature}"
    return f"{head}\n{content}" if head else content


class DocType(StrEnum):
    MODULE = "module"
    BEHAVIOUR = "behaviour"
    PROTOCOL = "protocol"
    EXCEPTION = "exception"
    TASK = "task"
    FUNCTION = "function"
    MACRO = "macro"
    CALLBACK = "callback"
    MACROCALLBACK = "macrocallback"
    TYPE = "type"
    OPAQUE = "opaque"
    EXTRAS = "extras"


class SourceKind(StrEnum):
    """Where an item's text came from."""

    HEXDOCS = "hexdocs"
    BEAM = "beam"
    PROJECT = "project"
    USAGE_RULES = "usage_rules"  # a dependency's usage-rules.md, for coding agents


class VersionSource(StrEnum):
    """Which link of the resolution chain chose the version."""

    EXPLICIT = "explicit"
    MIX_LOCK = "mix.lock"
    BUILD = "_build"
    HEX_LATEST = "hex latest stable"
    TOOL_VERSIONS = "pinned elixir"
    ELIXIR_ON_PATH = "elixir on PATH"
    INDEXED = "indexed"
    PROJECT = "the project's own app"  # compiled in _build; the version names the beams
    OTP = "Erlang/OTP"  # an OTP application, at its version in the project's OTP release


@frozen
class Atom:
    """An Elixir/Erlang atom, kept distinct from strings (`:hex` is not `"hex"`).

    One type for both readers of Elixir terms: the mix.lock parser and the ETF decoder.
    """

    name: str

    def __str__(self) -> str:
        return f":{self.name}"


@frozen
class Notice:
    """Something the caller should know about a result: a degradation, a replacement, drift."""

    code: NoticeCode  # the stable machine key clients act on (notice_codes.py)
    message: str  # one or two sentences for a person or an assistant, naming the fix

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code.value, "message": self.message}


@frozen
class LockEntry:
    """One dependency pinned by mix.lock.

    `name` is the lock key (the OTP application name). For Hex deps `package` is the name
    on Hex, which can differ (`"eini": {:hex, :eini_beam, ...}`).
    """

    name: str
    kind: str  # "hex" | "git" | "path", or another SCM's name as written
    version: str | None = None  # Hex deps only; surrounding whitespace removed
    package: str | None = None  # the Hex package name (Hex deps only)
    repo: str | None = None  # Hex repository ("hexpm", "hexpm:org") or the git URL
    ref: str | None = None  # the locked git revision
    path: str | None = None  # path deps
    options: Mapping[str, Any] = field(factory=dict)  # git options, Hex checksums, managers
    deps: tuple[str, ...] = ()


@frozen
class ResolvedVersion:
    name: str
    version: str
    source: VersionSource
    detail: str = ""  # e.g. the mix.lock path that pinned it
    lock_entry: LockEntry | None = None  # when mix.lock pinned it (git/path deps matter)
    notices: tuple[Notice, ...] = ()
    otp_release: str | None = None  # an OTP application's release ("27.3.4.1")


@frozen
class DocItem:
    """One documented thing (module doc, function, guide section) as published.

    `markdown` is the text exactly as the package published it (search_data `doc`, the
    page's .md section, or a rendering of the BEAM doc); chunks are slices of it.
    """

    package: str
    version: str
    ref: str  # ExDoc anchor ref: "Jason.html#decode/2", "readme.html#installation"
    title: str  # "Jason.decode/2"
    doc_type: DocType
    markdown: str
    module: str | None = None
    function: str | None = None  # name without arity: "decode"
    arity: int | None = None
    signature: str | None = None  # "decode(input, opts \\\\ [])"
    deprecated: str | None = None  # deprecation message, or None
    hexdocs_url: str = ""
    source_url: str | None = None
    source: SourceKind = SourceKind.HEXDOCS
    since: str | None = None

    @property
    def page(self) -> str:
        return self.ref.split("#", 1)[0]


@frozen
class Chunk:
    """A slice of one DocItem's markdown, sized for the embedder.

    `content` is byte-identical to a contiguous range of `item.markdown`; the chunks of an
    item concatenate back to it.
    """

    item: DocItem
    ordinal: int
    content: str
    has_example: bool = False

    @property
    def content_hash(self) -> str:
        return sha256_text(self.content)

    def embedding_text(self) -> str:
        return embedding_text(self.item.title, self.item.signature, self.content)


@frozen
class Hit:
    """One search result, citable on its own."""

    chunk_id: int
    package: str
    version: str
    ref: str
    title: str
    doc_type: str
    content: str
    hexdocs_url: str
    source_url: str | None
    module: str | None = None
    function: str | None = None
    arity: int | None = None
    signature: str | None = None
    deprecated: str | None = None
    source: str = SourceKind.HEXDOCS.value
    has_example: bool = False
    # Ranks and scores that placed it (1-based ranks; None when that arm did not see it).
    fts_rank: int | None = None
    vec_rank: int | None = None
    fused_rank: int | None = None
    rerank_score: float | None = None
    final_rank: int | None = None
    exact: bool = False
    # The file the hit's source link points at in the project's deps/ (`deps/ecto/lib/
    # ecto/repo.ex:312`), when the dependency there is the hit's version.
    local_source: str | None = None
    # What the reader should know about this hit's text (`suspicious_content`: written to
    # steer an agent); the result's notices repeat it, so they are read before the hits.
    notices: tuple[Notice, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class SearchMode(StrEnum):
    """How a search ranks: one arm, the fused arms, or the fused arms then the reranker."""

    FTS = "fts"  # the keyword arm alone
    VECTOR = "vector"  # the vector arm alone
    RRF = "rrf"  # both arms fused, relevance feedback, the learned ranking
    RERANK = "rerank"  # rrf, then the cross-encoder over the pool

    @property
    def fuses(self) -> bool:
        """Both arms fused (and what follows the fusion: feedback, the learned ranking)."""
        return self in (SearchMode.RRF, SearchMode.RERANK)

    @classmethod
    def parse(cls, value: str) -> SearchMode:
        """The mode `value` names; ValueError (listing the modes) for any other text."""
        try:
            return cls(value)
        except ValueError:
            modes = ", ".join(m.value for m in cls)
            raise ValueError(f"unknown search mode {value!r}; expected one of {modes}") from None


@frozen
class ResolvedMode:
    """The mode a search was asked for and the one it ran, with why they differ.

    The only rewrite: `rerank` runs as `rrf` when reranking is switched off on purpose
    (AI_RERANK_MODEL=off). A reranker that is merely not there yet is no rewrite: the
    search runs in `rerank` mode and a notice says the pool kept the fused order."""

    requested: SearchMode
    used: SearchMode
    reason: str | None = None  # None when `used` is `requested`

    @classmethod
    def of(cls, requested: SearchMode, *, rerank_enabled: bool) -> ResolvedMode:
        if requested is SearchMode.RERANK and not rerank_enabled:
            why = "reranking is switched off (AI_RERANK_MODEL=off): the fused order is final"
            return cls(requested, SearchMode.RRF, why)
        return cls(requested, requested)

    def to_dict(self) -> dict[str, str | None]:
        return {"requested": self.requested.value, "used": self.used.value, "reason": self.reason}


@frozen
class SearchResult:
    package: str
    version: str | None
    query: str
    hits: tuple[Hit, ...] = ()
    notices: tuple[Notice, ...] = ()
    version_source: str | None = None
    timings_ms: Mapping[str, float] = field(factory=dict)
    ingestion: JobStatus | None = None  # where the job stands when the answer waits on it
    mode: ResolvedMode | None = None  # a search's mode (None for an exact lookup)

    def to_dict(self) -> dict[str, Any]:
        return {
            "package": self.package,
            "version": self.version,
            "query": self.query,
            "version_source": self.version_source,
            "mode": self.mode.to_dict() if self.mode else None,
            "results": [h.to_dict() for h in self.hits],
            "notices": [n.to_dict() for n in self.notices],
            "ingestion": self.ingestion.to_dict() if self.ingestion else None,
        }


@frozen
class IndexedPackage:
    name: str
    version: str
    source: str
    status: str  # complete | partial | failed
    chunk_count: int
    item_count: int
    chunker_version: int
    ingested_at: str
    embed_model: str | None = None

    @property
    def complete(self) -> bool:
        """Every chunk has its vector; 'partial' has its chunks only (embedding under way,
        or cut short), and answers by keyword."""
        return self.status == "complete"


class Phase(StrEnum):
    """Where an ingestion job is, in order; the last three are final."""

    RESOLVING = "resolving"
    DOWNLOADING = "downloading"
    PARSING = "parsing"
    CHUNKING = "chunking"
    WRITING = "writing"  # the chunks, whole: keyword search answers from here
    EMBEDDING = "embedding"  # vectors added slice by slice
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


@frozen
class IngestProgress:
    """Pushed to every listener of a job each time it moves."""

    package: str
    version: str
    phase: Phase
    items: int = 0
    chunks_total: int = 0
    chunks_embedded: int = 0
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "phase": str(self.phase)}


# A job's listener: called with each IngestProgress, from the event loop.
ProgressFn = Callable[[IngestProgress], None]
# A model download's: (message, bytes done, bytes total or 0 when the hub did not say),
# called from the download's worker thread.
DownloadProgress = Callable[[str, int, int], None]


@frozen
class JobStatus:
    """Where one package's ingestion stands: a job of this process, or what the index holds.

    `state` is running | done | failed | cancelled for a job, indexed | not indexed otherwise.
    """

    package: str
    state: str
    version: str | None = None
    phase: Phase | None = None
    chunks_embedded: int = 0
    chunks_total: int = 0
    elapsed_s: float | None = None
    error: str | None = None
    progress: IngestProgress | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"package": self.package, "state": self.state}
        if self.version is not None:
            out["version"] = self.version
        if self.elapsed_s is not None:
            out["elapsed_s"] = self.elapsed_s
            out["progress"] = self.progress.to_dict() if self.progress else None
        if self.error:
            out["error"] = self.error
        return out


class SyncState(StrEnum):
    """Where one package the project runs stands (`Hexlocal.project_packages`)."""

    INDEXED = "indexed"  # at the version the project runs (or, unlocked, at any version)
    INDEXING = "indexing"  # a job is running now
    QUEUED = "queued"  # `sync` will index it, in turn (a search starts it at once)
    FAILED = "failed"  # the last attempt failed; `reason` says why
    SKIPPED = "skipped"  # sync cannot index it (an uncompiled git dep, a bad lock entry)
    OUTDATED = "outdated"  # indexed at another version than the project runs; not queued
    NOT_INDEXED = "not indexed"  # the project runs it; nothing is indexed or queued


@frozen
class PackageState:
    """One package the project runs (mix.lock's deps, Elixir's own apps), or one indexed
    that the project does not run (`kind` None), with where its indexing stands."""

    name: str
    state: SyncState
    kind: str | None = None  # hex | git | path | elixir; None: indexed but not locked
    locked_version: str | None = None  # the version the project runs
    indexed_version: str | None = None
    chunks: int = 0  # chunks indexed
    phase: Phase | None = None  # INDEXING: the job's phase
    chunks_embedded: int = 0  # INDEXING: the job's progress
    chunks_total: int = 0
    reason: str | None = None  # FAILED / SKIPPED: why; QUEUED: why it waits, if it does

    @property
    def locked(self) -> bool:
        return self.kind is not None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["state"] = str(self.state)
        out["phase"] = str(self.phase) if self.phase else None
        out["locked"] = self.locked
        return out


@frozen
class Diagnostics:
    """Facts about the running engine for `doctor` and logs."""

    database_path: str
    project_root: str
    schema_version: int
    schema_known: int
    engine: str  # the database engine and its search extensions, with versions
    packages: int
    chunks: int
    embedding_model: str | None
    embedding_dims: int | None
    settings_warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@frozen
class IngestReport:
    package: str
    version: str
    source: str
    items: int
    chunks: int
    embedded: int  # vectors computed now
    reused: int  # vectors taken from the cache by content hash
    seconds: float
    notices: tuple[Notice, ...] = ()
    skipped: Mapping[str, int] = field(factory=dict)  # e.g. {"corrupt_beam": 2}


@frozen
class Memory:
    id: int
    text: str
    curated: bool
    created_at: str
    updated_at: str
    package: str | None = None
    version: str | None = None
    tags: tuple[str, ...] = ()
    deprecated: bool = False
    stale: bool = False
    history: tuple[Mapping[str, Any], ...] = ()
    notices: tuple[Notice, ...] = ()  # e.g. `suspicious_content`: written to steer an agent


@frozen
class UsageEvent:
    model: str
    kind: str  # embed | chat | rerank
    prompt_tokens: int
    completion_tokens: int = 0
    success: bool = True
    local: bool = False
    at: datetime | None = None  # filled by the sink when None

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@frozen
class ChatReply:
    text: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


@frozen
class HexRelease:
    version: str
    has_docs: bool = True


@frozen
class HexPackageInfo:
    """What hexlocal needs from `GET {HEX_API_URL}/packages/{name}`."""

    name: str
    releases: tuple[HexRelease, ...]  # as the API lists them (SemVer-descending)
    latest_version: str | None
    latest_stable_version: str | None
    docs_html_url: str | None = None
    links: Mapping[str, str] = field(factory=dict)


@frozen
class Reachability:
    """What a client last learned of one remote service: it answers, or it could not be
    reached (refused, unresolvable, timed out) and is not asked again until a background
    check gets an answer from it."""

    setting: str  # the variable naming the service: "HEX_API_URL", "HEX_MIRROR"
    url: str  # its base URL, credentials masked
    reachable: bool = True
    since: str | None = None  # when it was found unreachable, ISO UTC
    reason: str = ""  # the failure that made it so, scrubbed
    recheck_s: float = 0.0  # how often it is checked again while unreachable

    def describe(self) -> str:
        """One clause for a notice or a message."""
        if self.reachable:
            return f"{self.setting} ({self.url}) answers"
        return (
            f"{self.setting} ({self.url}) has been unreachable since {self.since} "
            f"({self.reason}); it is checked again in the background every "
            f"{self.recheck_s:g} s and used once it answers"
        )


@frozen
class IssueQuery:
    text: str
    repo: str | None = None  # owner/name
    org: str | None = None
    type: str | None = None  # issue | pr | None for both
    state: str | None = None  # open | closed | None for both
    limit: int = 10


@frozen
class IssueHit:
    repo: str
    number: int
    title: str
    state: str
    is_pr: bool
    html_url: str
    author: str | None = None
    labels: tuple[str, ...] = ()
    created_at: str | None = None
    updated_at: str | None = None
    closed_at: str | None = None
    comments: int = 0
    merged: bool | None = None
    excerpt: str = ""
    notices: tuple[Notice, ...] = ()  # e.g. `suspicious_content`: written to steer an agent
