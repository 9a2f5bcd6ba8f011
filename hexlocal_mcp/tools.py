"""The MCP tools: typed arguments the model can learn from, one service call, formatting.

Each tool's docstring and argument descriptions are written for the assistant calling
it: they teach the call pattern (one package per call, the package's own vocabulary,
read the notices, remember a whole session in one list). Behaviour lives in the service;
a tool only awaits the service, calls it once and returns the structured dict plus its
compact text form. Errors leave through `tool_errors`: a `HexlocalError` becomes a
`ToolError` carrying its message (which names the fix); anything else is logged with its
traceback and answered with a generic message, so the server never dies of one call.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal, ParamSpec, TypeVar

from attrs import frozen
from fastmcp import Context
from fastmcp.exceptions import ToolError
from fastmcp.tools.base import ToolResult
from mcp_types import TextContent, ToolAnnotations
from pydantic import Field

from hexlocal_core import bounds
from hexlocal_core.errors import HexlocalError, UserInputError
from hexlocal_core.model import IngestProgress, ProgressFn
from hexlocal_core.usecases.upgrade_text import render as render_upgrade
from hexlocal_mcp import formatting

if TYPE_CHECKING:
    from hexlocal_core.service import Hexlocal
    from hexlocal_core.usecases.diagnostics import ModelDownload

log = logging.getLogger("hexlocal.mcp.tools")

HOST_KEY = "hexlocal"  # where the lifespan puts the ServiceHost in the lifespan context

P = ParamSpec("P")
R = TypeVar("R")

# -- argument types: the descriptions are the model's manual ----------------------------

Package = Annotated[
    str,
    Field(
        description=(
            "The Hex package name exactly as in mix.exs / mix.lock, e.g. 'ecto', "
            "'phoenix_live_view', 'jason'; Elixir's own apps are 'elixir', 'ex_unit', "
            "'logger', 'mix', 'eex', 'iex'; OTP applications 'stdlib', 'kernel', 'erts', ... "
            "Required: one package per call; for a question spanning packages, make one "
            "call per package."
        )
    ),
]
Query = Annotated[
    str,
    Field(
        max_length=bounds.MAX_QUERY_CHARS,
        description=(
            "What to look for, in the package's own vocabulary: module and function names "
            "('Ecto.Multi.run/3'), option names (':on_conflict'), terms its docs use "
            "('changeset', 'preload'). One topic per call, not a whole conversation."
        ),
    ),
]
Version = Annotated[
    str | None,
    Field(
        description=(
            "A Hex version such as '3.12.5', or a requirement from mix.exs such as '~> 3.12' "
            "(mix.lock's pin when it meets it, else the newest release that does). Leave it "
            "out: the version the project's mix.lock pins is used (else what is indexed, else "
            "the latest stable release)."
        )
    ),
]
SearchLimit = Annotated[
    int,
    Field(
        ge=1, le=bounds.MAX_LIMIT, description=f"How many hits to return (1-{bounds.MAX_LIMIT})."
    ),
]
ExamplesOnly = Annotated[
    bool, Field(description="Only return passages that contain a code example.")
]
Identifier = Annotated[
    str,
    Field(
        max_length=bounds.MAX_QUERY_CHARS,
        description=(
            "One exact identifier: 'Module', 'Module.function/arity', 'c:callback/arity' "
            "or 't:type/arity', e.g. 'Ecto.Repo.insert/2', 'c:GenServer.init/1'; Erlang "
            "ones as Elixir or Erlang write them: ':ets.new/2', 'ets:new/2', ':ets', "
            "'c:gen_server:handle_call/3', 't:ets:tid/0'. Use search_docs for questions "
            "and partial names."
        ),
    ),
]
GetPackage = Annotated[
    str | None,
    Field(
        description=(
            "The package that documents it, as in mix.lock ('ecto'), Elixir's apps "
            "('elixir', 'logger'), an OTP application ('stdlib', 'kernel', 'erts') or "
            "'erlang' for any OTP app. Leave it out to have it found from the module."
        )
    ),
]
SearchPackage = Annotated[
    str | None,
    Field(
        description=(
            "The Hex package name exactly as in mix.exs / mix.lock, e.g. 'ecto', "
            "'phoenix_live_view', 'jason'; Elixir's own apps are 'elixir', 'ex_unit', "
            "'logger', 'mix', 'eex', 'iex'; Erlang/OTP applications are 'stdlib', 'kernel', "
            "'erts', 'crypto', 'ssl', ... and 'erlang' searches all the OTP apps the project "
            "uses; the project's own app by its name. Leave it out (and `packages` too) to "
            "search every package the project runs (its deps, Elixir, OTP, its own modules), "
            "when you do not know which one holds the answer."
        )
    ),
]
SearchPackages = Annotated[
    list[Annotated[str, Field(max_length=bounds.MAX_PACKAGE_CHARS)]] | None,
    Field(
        max_length=bounds.MAX_SEARCH_PACKAGES,
        description=(
            "Instead of `package`: search only these packages of the project together, "
            "ranked as one list, e.g. ['plug', 'phoenix']."
        ),
    ),
]
OptionalPackage = Annotated[
    str | None, Field(description="A Hex package name; leave out for every package.")
]
Texts = Annotated[
    list[Annotated[str, Field(max_length=bounds.MAX_TEXT_CHARS)]],
    Field(
        max_length=bounds.MAX_TEXTS,
        description=(
            "The lessons to keep, one self-contained fact per string (name the module, "
            "function or option it is about). Send everything worth keeping from this "
            "session in ONE call as a list, not one call per fact."
        ),
    ),
]
MemoryPackage = Annotated[
    str | None, Field(description="The Hex package the lessons are about, if one.")
]
MemoryVersion = Annotated[
    str | None,
    Field(description="The package version the lessons were learned on (needs package)."),
]
Tags = Annotated[
    list[Annotated[str, Field(max_length=bounds.MAX_TAG_CHARS)]] | None,
    Field(
        max_length=bounds.MAX_TAGS, description="Short one-line tags, e.g. ['testing', 'gotcha']."
    ),
]
RequestIds = Annotated[
    list[Annotated[str, Field(max_length=bounds.MAX_REQUEST_ID_CHARS)]],
    Field(max_length=bounds.MAX_REQUEST_IDS, description="The request ids that remember returned."),
]
RecallQuery = Annotated[
    str,
    Field(
        max_length=bounds.MAX_QUERY_CHARS,
        description="What you want to know, in the words the lesson would use.",
    ),
]
RecallLimit = Annotated[
    int,
    Field(
        ge=1,
        le=bounds.MAX_RECALL_LIMIT,
        description=f"How many memories (1-{bounds.MAX_RECALL_LIMIT}).",
    ),
]
IncludeDeprecated = Annotated[
    bool, Field(description="Also return memories later marked deprecated (with history).")
]
IssueQueryText = Annotated[
    str,
    Field(
        max_length=bounds.MAX_QUERY_CHARS,
        description="Words to search issue and PR titles and bodies for, e.g. an error message.",
    ),
]
IssuePackage = Annotated[
    str | None,
    Field(description="A Hex package: its GitHub repository (from hex.pm) is searched."),
]
Repo = Annotated[str | None, Field(description="A GitHub repository 'owner/name'.")]
Org = Annotated[str | None, Field(description="A GitHub user or organisation.")]
IssueType = Annotated[str | None, Field(description="'issue' or 'pr'; leave out for both.")]
IssueState = Annotated[str | None, Field(description="'open' or 'closed'; leave out for both.")]
IssueLimit = Annotated[
    int,
    Field(
        ge=1,
        le=bounds.MAX_ISSUE_LIMIT,
        description=f"How many results (1-{bounds.MAX_ISSUE_LIMIT}).",
    ),
]
FromDay = Annotated[
    str | None,
    Field(
        alias="from",
        max_length=bounds.DAY_CHARS,
        description="First UTC day, YYYY-MM-DD (default: the until day).",
    ),
]
UntilDay = Annotated[
    str | None,
    Field(
        max_length=bounds.DAY_CHARS,
        description="Last UTC day, YYYY-MM-DD, included (default: today).",
    ),
]

DiffPackage = Annotated[
    str,
    Field(
        description=(
            "The Hex package name exactly as in mix.exs / mix.lock, e.g. 'ecto'. Elixir's "
            "own apps ('elixir', 'ex_unit', ...) need both versions; an OTP application "
            "('stdlib', 'kernel', ...) needs the OTP release to compare with, e.g. 'OTP-28.0'."
        )
    ),
]
FromVersion = Annotated[
    str | None,
    Field(
        description=(
            "The version upgraded from, e.g. '3.12.5' (an OTP release for an OTP "
            "application, e.g. 'OTP-27.3.4.1'). Leave it out: the version the project's "
            "mix.lock pins (its OTP for an OTP application; else the indexed one)."
        )
    ),
]
ToVersion = Annotated[
    str | None,
    Field(
        description=(
            "The version upgraded to, e.g. '3.14.2'. Leave it out: hex.pm's latest stable."
        )
    ),
]
DiffKind = Annotated[
    Literal["added", "removed", "deprecated", "signature_changed", "docs_changed"] | None,
    Field(
        description=(
            "Only this kind of change (to page through one long list); leave out for every kind."
        )
    ),
]
DiffLimit = Annotated[
    int,
    Field(
        ge=1,
        le=bounds.MAX_DIFF_LIMIT,
        description=f"At most this many entries per kind (1-{bounds.MAX_DIFF_LIMIT}).",
    ),
]
DiffOffset = Annotated[
    int,
    Field(
        ge=0,
        le=bounds.MAX_DIFF_OFFSET,
        description="Skip this many entries of each kind: the next page's offset is in the answer.",
    ),
]


# -- plumbing shared by the tools ---------------------------------------------------------


def tool_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Translate errors at the edge: domain errors keep their message, the rest is logged."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except ToolError:
            raise
        except HexlocalError as exc:
            # An expected outcome for the caller to fix, not a server fault: log it quietly.
            raise ToolError(str(exc), log_level=logging.INFO) from exc
        except Exception as exc:
            log.exception("unexpected error in tool %s", fn.__name__)
            raise ToolError(
                f"{fn.__name__} failed on an internal error ({type(exc).__name__}); the "
                "traceback is in the server log (stderr, or MCP_LOG_FILE). Try again; if it "
                "persists, run `hexlocal doctor`."
            ) from exc

    return wrapper


async def _service(ctx: Context) -> Hexlocal:
    """The service once it is built (the lifespan builds it in the background)."""
    host = ctx.lifespan_context.get(HOST_KEY)
    if host is None:
        raise ToolError("the hexlocal server is not started; restart the MCP server")
    service: Hexlocal = await host.service()
    return service


def _answer(data: Mapping[str, Any], text: str) -> ToolResult:
    return ToolResult(content=[TextContent(type="text", text=text)], structured_content=dict(data))


# Share of a job's progress each phase starts at (percent); embedding fills the middle.
_PHASE_START = {
    "resolving": 0.0,
    "downloading": 2.0,
    "parsing": 8.0,
    "chunking": 10.0,
    "embedding": 12.0,
    "writing": 95.0,
    "done": 100.0,
    "failed": 100.0,
    "cancelled": 100.0,
}


def progress_percent(p: IngestProgress) -> float:
    """A job's progress as 0-100: phases in order, embedding by chunks embedded."""
    start = _PHASE_START.get(p.phase, 0.0)
    if p.phase == "embedding" and p.chunks_total > 0:
        start += 83.0 * min(p.chunks_embedded, p.chunks_total) / p.chunks_total
    return round(start, 1)


def progress_message(p: IngestProgress) -> str:
    text = f"indexing {p.package} {p.version}: {p.phase}"
    if p.chunks_total:
        text += f" ({p.chunks_embedded}/{p.chunks_total} chunks)"
    return f"{text} - {p.message}" if p.message else text


def download_message(d: ModelDownload) -> str:
    """A model download as a progress message (the reranker's runs in the background)."""
    what = f"downloading the {d.which} model"
    if d.which == "reranker":
        what += " in the background (results keep the fused order meanwhile)"
    sizes = f" ({d.done / 1e6:.0f}/{d.total / 1e6:.0f} MB)" if d.total else ""
    return f"{what}{sizes}: {d.message}" if d.message else f"{what}{sizes}"


DOWNLOAD_POLL_S = 0.5  # how often a waiting call looks at the models' downloads
DOWNLOAD_STEP = 0.01  # MCP progress must increase: a download update nudges it this much


@contextlib.asynccontextmanager
async def reporting_progress(
    ctx: Context, service: Hexlocal | None = None
) -> AsyncIterator[ProgressFn]:
    """A progress callback for the service that becomes MCP progress notifications.

    The service calls it synchronously from its own task; a queue hands each update to a
    sender task that owns the (async) notification. With `service`, a poller also reports
    the models' downloads (the first answer may wait for the embedder's, or start the
    reranker's in the background): the same call's progress, inside its budget. Once the
    call returns the callback drops updates: notifications after the result would be
    discarded by the client.
    """
    queue: asyncio.Queue[IngestProgress | ModelDownload] = asyncio.Queue()
    open_ = True
    last = -1.0

    async def send() -> None:
        nonlocal last
        while True:
            update = await queue.get()
            if isinstance(update, IngestProgress):
                value, message = max(last, progress_percent(update)), progress_message(update)
            else:  # a download says nothing about the job's share: it only moves forward
                value, message = min(max(last, 0.0) + DOWNLOAD_STEP, 99.9), download_message(update)
            last = value  # MCP progress must not go back
            try:
                await ctx.report_progress(round(value, 2), 100.0, message)
            except Exception:  # a client that went away must not fail the search
                log.debug("progress notification not sent", exc_info=True)

    async def poll_downloads(service: Hexlocal) -> None:
        seen: dict[str, tuple[str, int]] = {}
        while True:
            for download in service.model_downloads():
                key = (download.message, download.done)
                if download.running and seen.get(download.which) != key:
                    seen[download.which] = key
                    queue.put_nowait(download)
            await asyncio.sleep(DOWNLOAD_POLL_S)

    def on_progress(update: IngestProgress) -> None:
        if open_:
            queue.put_nowait(update)

    tasks = [asyncio.create_task(send(), name="mcp-progress")]
    if service is not None:
        tasks.append(asyncio.create_task(poll_downloads(service), name="mcp-downloads"))
    try:
        yield on_progress
    finally:
        open_ = False
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


# -- the tools ------------------------------------------------------------------------------


@tool_errors
async def search_docs(
    ctx: Context,
    query: Query,
    package: SearchPackage = None,
    packages: SearchPackages = None,
    version: Version = None,
    limit: SearchLimit = 5,
    examples_only: ExamplesOnly = False,
) -> ToolResult:
    """Search the documentation of a Hex package, at the version the project uses.

    With `package`: that one package (best when you know which library the question is
    about; for a question spanning known packages, make one call per package). The first
    search of a package downloads and indexes its docs: it answers by keyword within
    seconds (notice embedding_in_progress) while the rest is built in the background, so
    repeat an important search a little later for the best ranking.
    Without `package`: every package the project's mix.lock pins, plus Elixir's own apps,
    ranked as one list; use it when you do not know which dependency holds the answer.
    Each hit names its package and version. `packages` narrows that to a few.
    Returns the best matching passages, each with its title, ref, version and hexdocs_url
    to cite. Read the `notices` first: they say when the version differs from what you
    expected, when results are degraded, which project packages are not indexed yet
    (they are queued), or when the package is still being indexed (then call again with
    the same arguments in a little while, or check ingestion_status).
    For an exact identifier ('Ecto.Repo.insert/2') prefer get_docs.
    """
    service = await _service(ctx)
    if package is None:
        if version is not None or examples_only:
            raise UserInputError(
                "version and examples_only apply to one package; pass package with them"
            )
        result = await service.search_project_deps(query, packages=packages, limit=limit)
        data = result.to_dict()
        return _answer(data, formatting.search_result(data))
    if packages:
        raise UserInputError("pass either package or packages, not both")
    async with reporting_progress(ctx, service) as on_progress:
        result = await service.search_docs(
            package, query, version, limit=limit, examples_only=examples_only, progress=on_progress
        )
    data = result.to_dict()
    return _answer(data, formatting.search_result(data))


@tool_errors
async def get_docs(
    ctx: Context, identifier: Identifier, package: GetPackage = None, version: Version = None
) -> ToolResult:
    """The full documentation of one exact module, function, callback or type, Elixir or
    Erlang (`Ecto.Repo.insert/2`, `:ets.new/2`, `gen_server:call/3`).

    Leave `package` out when you do not know it: the package is found from the module (the
    project's dependencies, its own modules, Elixir, Erlang/OTP) and named in a notice.
    Use search_docs when you only know the topic. Read the `notices`: a `not_found` notice
    means the identifier is not documented in that version (check the spelling and arity).
    """
    service = await _service(ctx)
    async with reporting_progress(ctx, service) as on_progress:
        result = await service.get_docs(package, identifier, version, progress=on_progress)
    data = result.to_dict()
    return _answer(data, formatting.search_result(data, whole=True))


@tool_errors
async def diff_versions(
    ctx: Context,
    package: DiffPackage,
    from_version: FromVersion = None,
    to_version: ToVersion = None,
    kind: DiffKind = None,
    limit: DiffLimit = bounds.DEFAULT_DIFF_LIMIT,
    offset: DiffOffset = 0,
) -> ToolResult:
    """What changed in a Hex package (or an OTP application, between two OTP releases)
    between two versions: use it before or during an upgrade (bumping a dependency in
    mix.exs, moving to a new OTP) instead of searching both versions' docs.

    Lists functions, callbacks, types and modules added, removed, newly deprecated (with
    the message naming the replacement), whose signature changed, and whose docs changed,
    grouped by module, each with its hexdocs_url. Leave both versions out to compare what
    the project locks with the latest stable release. The answer starts with a count per
    kind and shows at most `limit` entries per kind; to see more of one kind, call again
    with `kind` and the `offset` it gives. Nothing is indexed: search_docs still answers
    from the locked version.
    """
    service = await _service(ctx)
    result = await service.diff_versions(
        package, from_version, to_version, kind=kind, limit=limit, offset=offset
    )
    data = result.to_dict()
    return _answer(data, formatting.version_diff(data))


UpgradePackage = Annotated[
    str,
    Field(
        max_length=bounds.MAX_PACKAGE_CHARS,
        description=(
            "The dependency to move, as in mix.lock, e.g. 'ecto'; or one of Elixir's own "
            "apps ('elixir', 'ex_unit', ...), which needs to_version."
        ),
    ),
]
UpgradeTo = Annotated[
    str | None,
    Field(
        max_length=bounds.MAX_PACKAGE_CHARS,
        description=(
            "The version to move to: exact ('3.14.2') or a requirement ('~> 3.14'). Leave "
            "it out for hex.pm's latest stable release."
        ),
    ),
]
UpgradeFrom = Annotated[
    str | None,
    Field(
        max_length=bounds.MAX_PACKAGE_CHARS,
        description=(
            "Only for a package the project does not lock: the version to compare from. "
            "Leave it out otherwise (mix.lock's pin is used)."
        ),
    ),
]


@tool_errors
async def upgrade_impact(
    ctx: Context,
    package: UpgradePackage,
    to_version: UpgradeTo = None,
    from_version: UpgradeFrom = None,
) -> ToolResult:
    """What breaks or changes in THIS project's code if it upgrades one dependency: call
    it before bumping a version in mix.exs or running `mix deps.update`.

    Joins the diff of the two versions' docs with the project's own calls (read from its
    compiled beams in _build, and from lib/ sources for macros like Ecto.Query's DSL).
    `affected` lists only entries the project uses, most serious first: removed (the
    call will fail), deprecated (with the replacement to use), signature_changed (both
    signatures), docs_changed (the changed sentences), each with every call site (file,
    line, calling function; `via` says when a call reaches a behaviour callback through
    the project's own module, or was found in source). `not_affected` explains what looks
    removed but still works (a default argument). Then `changelog` lines between the
    versions and `requirements` other locked packages must meet (update them together).
    Read the `notices`: e.g. nothing compiled (source scan only: run `mix compile`).
    Nothing is indexed; repeating the call is instant.
    """
    service = await _service(ctx)
    report = await service.upgrade_impact(package, to_version, from_version=from_version)
    data = report.to_dict()
    return _answer(data, render_upgrade(data))


@tool_errors
async def search_project_docs(ctx: Context, query: Query, limit: SearchLimit = 5) -> ToolResult:
    """Search the project's OWN docs (README, docs/, guides/), not a dependency's.

    Use it for the project's conventions, design notes and guides. They are indexed by
    `hexlocal index-docs`; a notice says so when they are not indexed yet.
    """
    service = await _service(ctx)
    async with reporting_progress(ctx, service):  # embedding the query may fetch the model
        result = await service.search_project_docs(query, limit=limit)
    data = formatting.project_answer(result.to_dict())
    return _answer(data, formatting.search_result(data))


@tool_errors
async def ingestion_status(ctx: Context, package: OptionalPackage = None) -> ToolResult:
    """Where indexing stands: running, done or failed, with progress.

    Use it after search_docs answered that indexing is still running. Without a package
    it lists every ingestion this server has run; with one it also says whether that
    package is already indexed.
    """
    service = await _service(ctx)
    jobs = [job.to_dict() for job in service.ingestion_status(package)]
    return _answer({"jobs": jobs}, formatting.ingestion_status(jobs))


@tool_errors
async def list_indexed_packages(ctx: Context) -> ToolResult:
    """Every package the project's mix.lock pins (and Elixir's own apps) with its state:
    indexed, queued, indexing n/m chunks, failed + why, skipped + why, outdated; then the
    packages indexed here that the project does not pin, with versions and sizes."""
    service = await _service(ctx)
    indexed = formatting.jsonable(service.list_packages())
    rows = formatting.package_rows(await service.project_packages(), indexed)
    return _answer({"packages": rows}, formatting.packages(rows))


@tool_errors
async def remember(
    ctx: Context,
    texts: Texts,
    package: MemoryPackage = None,
    version: MemoryVersion = None,
    tags: Tags = None,
) -> ToolResult:
    """Keep lessons for later sessions: fixes found, gotchas, project conventions.

    Pass ALL the lessons of this session in one call, as a list of self-contained facts.
    They are queued and curated in the background (merged with, or replacing, what is
    already known); the answer gives a request id per text for remember_status.
    """
    service = await _service(ctx)
    rows = await service.remember(texts, package=package, version=version, tags=tags)
    return _answer({"requests": rows}, formatting.remember_requests(rows))


@tool_errors
async def remember_status(ctx: Context, request_ids: RequestIds) -> ToolResult:
    """What curation did with texts given to remember (created, merged, duplicate, ...)."""
    service = await _service(ctx)
    rows = service.remember_status(request_ids)
    return _answer({"requests": rows}, formatting.remember_outcomes(rows))


@tool_errors
async def recall(
    ctx: Context,
    query: RecallQuery,
    limit: RecallLimit = 5,
    package: OptionalPackage = None,
    include_deprecated: IncludeDeprecated = False,
) -> ToolResult:
    """Recall lessons remembered in earlier sessions, best match first.

    Check it before a task in an area you worked on before. A memory marked stale was
    learned on another version of its package than the project now locks.
    """
    service = await _service(ctx)
    found = await service.recall(
        query, limit=limit, package=package, include_deprecated=include_deprecated
    )
    rows = formatting.jsonable(found)
    return _answer({"memories": rows}, formatting.memories(rows, query))


@tool_errors
async def search_github_issues(
    ctx: Context,
    query: IssueQueryText,
    package: IssuePackage = None,
    repo: Repo = None,
    org: Org = None,
    type: IssueType = None,
    state: IssueState = None,
    limit: IssueLimit = 10,
) -> ToolResult:
    """Search GitHub issues and pull requests live, e.g. for an error the docs do not explain.

    Scope it with package (its repository is looked up on hex.pm), repo or org. Nothing
    is stored; unauthenticated GitHub search allows about 10 calls a minute.
    """
    service = await _service(ctx)
    hits = await service.search_github_issues(
        query, package=package, repo=repo, org=org, type=type, state=state, limit=limit
    )
    rows = formatting.jsonable(hits)
    return _answer({"issues": rows}, formatting.issues(rows))


@tool_errors
async def get_token_usage(
    ctx: Context, from_: FromDay = None, until: UntilDay = None
) -> ToolResult:
    """Tokens spent on models per model and day range (UTC days, both ends included).

    Local models cost nothing but are listed; cloud tokens are the ones that cost money.
    """
    service = await _service(ctx)
    report = service.get_token_usage(from_, until)
    return _answer(report.to_dict(), report.to_markdown())


# -- the contract: name, title and hints of every tool ----------------------------------------


def _schema(required: tuple[str, ...], **properties: str | tuple[str, ...]) -> dict[str, Any]:
    """A small output schema: top-level keys and their JSON types, extra keys allowed."""
    props = {
        name: {"type": list(kind) if isinstance(kind, tuple) else kind}
        for name, kind in properties.items()
    }
    return {"type": "object", "properties": props, "required": list(required)}


_RESULT = _schema(
    ("package", "query", "results", "notices"),
    package="string",
    version=("string", "null"),
    query="string",
    version_source=("string", "null"),
    mode=("object", "null"),
    results="array",
    notices="array",
    ingestion=("object", "null"),
)


@frozen(kw_only=True)
class ToolSpec:
    """One tool's registration: its function and the hints clients show and act on."""

    fn: Callable[..., Awaitable[ToolResult]]
    title: str
    output_schema: dict[str, Any]
    read_only: bool = True
    open_world: bool = False  # True when the call may reach the network

    @property
    def name(self) -> str:
        return self.fn.__name__

    def annotations(self) -> ToolAnnotations:
        return ToolAnnotations(
            title=self.title,
            read_only_hint=self.read_only,
            destructive_hint=False,  # nothing here deletes or overwrites user data
            idempotent_hint=self.read_only,
            open_world_hint=self.open_world,
        )


# search_docs and get_docs only fill hexlocal's own cache, so they count as read-only;
# both may download docs from hex.pm, hence open-world.
TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        fn=search_docs, title="Search a Hex package's docs", output_schema=_RESULT, open_world=True
    ),
    ToolSpec(
        fn=get_docs, title="Get the docs of one identifier", output_schema=_RESULT, open_world=True
    ),
    ToolSpec(
        fn=diff_versions,
        title="What changed between two versions of a package",
        output_schema=_schema(
            ("package", "from", "to", "summary", "changes", "paging", "notices"),
            **{"from": "object", "to": "object"},
            package="string",
            summary="object",
            changes="object",
            paging="object",
            notices="array",
        ),
        open_world=True,
    ),
    ToolSpec(
        fn=upgrade_impact,
        title="What an upgrade changes for this project's code",
        output_schema=_schema(
            (
                "package",
                "from",
                "to",
                "affected",
                "not_affected",
                "changelog",
                "requirements",
                "notices",
            ),
            **{"from": "string", "to": "string"},
            package="string",
            affected="array",
            not_affected="array",
            changelog="array",
            requirements="array",
            notices="array",
            diff="object",
            call_sites="object",
        ),
        open_world=True,
    ),
    ToolSpec(fn=search_project_docs, title="Search the project's own docs", output_schema=_RESULT),
    ToolSpec(
        fn=ingestion_status, title="Indexing status", output_schema=_schema(("jobs",), jobs="array")
    ),
    ToolSpec(
        fn=list_indexed_packages,
        title="List indexed packages",
        output_schema=_schema(("packages",), packages="array"),
    ),
    ToolSpec(
        fn=remember,
        title="Remember lessons",
        output_schema=_schema(("requests",), requests="array"),
        read_only=False,
    ),
    ToolSpec(
        fn=remember_status,
        title="Curation status of remembered lessons",
        output_schema=_schema(("requests",), requests="array"),
    ),
    ToolSpec(
        fn=recall,
        title="Recall remembered lessons",
        output_schema=_schema(("memories",), memories="array"),
    ),
    ToolSpec(
        fn=search_github_issues,
        title="Search GitHub issues and PRs",
        output_schema=_schema(("issues",), issues="array"),
        open_world=True,
    ),
    ToolSpec(
        fn=get_token_usage,
        title="Token usage",
        output_schema=_schema(
            ("from", "until", "totals", "by_model"), totals="object", by_model="object"
        ),
    ),
)
