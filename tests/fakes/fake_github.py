"""A fake GitHub search API on 127.0.0.1: `GET /search/issues` and `GET /api/v3/search/issues`.

Answers with real-shaped search responses over a small hand-written dataset, filtered by
the qualifiers of `q` (repo:, org:/user:, is:, type:, state:, label:, author:, free words
matched in title and body). Records every request. Scripted faults (`fail_next` and its
helpers) are served before normal answers, in order, one per request.

    async with FakeGitHub() as gh:
        settings = Settings.from_env({"GITHUB_API_URL": gh.url})   # or gh.enterprise_url
        gh.rate_limit_403(reset_epoch=1_900_000_000)
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import zlib
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from aiohttp import web
from attrs import field, frozen

from tests.fakes.loopback import AsyncServerContext, bound_port, serve

DOCS_URL = "https://docs.github.com/rest/search/search#search-issues-and-pull-requests"
UNSEARCHABLE = (
    "The listed users and repositories cannot be searched either because the resources do "
    "not exist or you do not have permission to view them."
)
TYPE_REQUIRED = "Query must include 'is:issue' or 'is:pull-request'"


@frozen
class Seed:
    """One issue or PR of the dataset, before it is rendered in GitHub's JSON shape."""

    repo: str
    number: int
    title: str
    state: str
    author: str
    created_at: str
    updated_at: str
    body: str | None = None
    closed_at: str | None = None
    labels: tuple[str, ...] = ()
    comments: int = 0
    is_pr: bool = False
    merged_at: str | None = None


_TEMPLATE_BODY = """<!--
Thanks for reporting! Please fill in the sections below.
-->

### Environment

* Elixir 1.17.3 / OTP 27
* anubis_mcp 0.9.0

### Current behavior

After the client reconnects, the server answers every request with `session not found`.

![screenshot](https://github.com/user-attachments/assets/0f1e2d3c-aaaa-bbbb-cccc-1234567890ab)

### Expected behavior

The session survives a reconnect within the keep-alive window.
"""

_LONG_BODY = (
    "When a tool declares an input schema with a nested map, for example "
    "`%{type: :object, properties: %{filters: %{type: :object, properties: %{...}}}}`, "
    "the validation step rejects every call with `invalid params`. "
) * 6 + ("\n\nA workaround is to flatten the schema, which makes the tool harder to use.")

DATASET: tuple[Seed, ...] = (
    Seed(
        repo="zoedsoupe/anubis-mcp",
        number=45,
        title="Streamable HTTP transport drops the session on reconnect",
        state="open",
        author="alice-dev",
        created_at="2025-05-02T09:14:11Z",
        updated_at="2025-05-20T16:02:45Z",
        body=_TEMPLATE_BODY,
        labels=("bug", "transport"),
        comments=4,
    ),
    Seed(
        repo="zoedsoupe/anubis-mcp",
        number=52,
        title="feat: streamable HTTP transport (2025-03-26 spec)",
        state="closed",
        author="zoedsoupe",
        created_at="2025-04-01T10:00:00Z",
        updated_at="2025-04-09T18:30:00Z",
        closed_at="2025-04-09T18:30:00Z",
        body="Implements the streamable HTTP transport from the 2025-03-26 MCP spec.\n\n"
        "Closes #31.",
        labels=("enhancement",),
        comments=7,
        is_pr=True,
        merged_at="2025-04-09T18:30:00Z",
    ),
    Seed(
        repo="zoedsoupe/anubis-mcp",
        number=61,
        title="fix: ignore an empty JSON-RPC batch",
        state="closed",
        author="bob-elixir",
        created_at="2025-05-10T08:00:00Z",
        updated_at="2025-05-12T11:45:00Z",
        closed_at="2025-05-12T11:45:00Z",
        body="An empty batch `[]` crashed the server process. Superseded by #63.",
        comments=2,
        is_pr=True,
        merged_at=None,
    ),
    Seed(
        repo="zoedsoupe/anubis-mcp",
        number=70,
        title="Tool schema validation rejects nested maps",
        state="closed",
        author="carol-codes",
        created_at="2025-06-01T12:00:00Z",
        updated_at="2025-06-15T09:20:00Z",
        closed_at="2025-06-15T09:20:00Z",
        body=_LONG_BODY,
        labels=("bug",),
        comments=3,
    ),
    Seed(
        repo="michalmuskala/jason",
        number=128,
        title="Jason.decode!/2 raises on large integer keys with keys: :atoms",
        state="closed",
        author="dave-beam",
        created_at="2021-03-04T15:22:10Z",
        updated_at="2021-03-20T07:01:00Z",
        closed_at="2021-03-20T07:01:00Z",
        body='`Jason.decode!(~s({"1": 1}), keys: :atoms!)` raises ArgumentError.',
        comments=5,
    ),
    Seed(
        repo="michalmuskala/jason",
        number=140,
        title="Document Jason.Fragment for pre-encoded JSON",
        state="open",
        author="erin-docs",
        created_at="2023-08-11T09:00:00Z",
        updated_at="2024-01-05T13:37:00Z",
        body="Adds a section on `Jason.Fragment.new/1` to the README.",
        labels=("docs",),
        comments=1,
        is_pr=True,
        merged_at=None,
    ),
    Seed(
        repo="michalmuskala/jason",
        number=151,
        title="Encoding a struct without @derive gives Protocol.UndefinedError",
        state="open",
        author="frank-otp",
        created_at="2024-02-14T10:10:10Z",
        updated_at="2024-02-15T08:00:00Z",
        body="Is `@derive {Jason.Encoder, only: [...]}` the only way to encode a struct?",
        labels=("question",),
    ),
    Seed(
        repo="elixir-ecto/ecto",
        number=3901,
        title="Ecto.Multi rollback loses the error of the failed step",
        state="closed",
        author="gina-db",
        created_at="2022-06-01T08:30:00Z",
        updated_at="2022-06-03T17:00:00Z",
        closed_at="2022-06-03T17:00:00Z",
        body="When a `Multi.run/3` step returns `{:error, value}` inside a transaction, "
        "the rollback should return the failed step's error.",
        labels=("kind:bug",),
        comments=6,
    ),
    Seed(
        repo="elixir-ecto/ecto",
        number=4012,
        title="Add an example to Ecto.Query.with_named_binding/3",
        state="closed",
        author="hank-sql",
        created_at="2023-01-09T11:00:00Z",
        updated_at="2023-01-10T09:00:00Z",
        closed_at="2023-01-10T09:00:00Z",
        body="Shows how to join only once with a named binding.",
        labels=("docs",),
        comments=1,
        is_pr=True,
        merged_at="2023-01-10T09:00:00Z",
    ),
    Seed(
        repo="elixir-ecto/ecto",
        number=4120,
        title="Preload with a custom query ignores order_by in nested preloads",
        state="open",
        author="ivy-query",
        created_at="2024-03-18T14:00:00Z",
        updated_at="2024-04-02T10:00:00Z",
        body="`Repo.preload(posts, comments: from(c in Comment, order_by: c.inserted_at))` "
        "keeps the order, but a nested preload does not.",
        labels=("kind:feature",),
        comments=9,
    ),
    Seed(
        repo="elixir-ecto/postgrex",
        number=650,
        title="Timeout connecting to Postgres 16 with SCRAM auth",
        state="open",
        author="jon-pg",
        created_at="2024-05-05T05:05:05Z",
        updated_at="2024-05-06T06:06:06Z",
        body="`DBConnection.ConnectionError` after 15 s; psql connects fine.",
        comments=2,
    ),
)


@frozen
class RecordedRequest:
    method: str
    path: str
    query: Mapping[str, str]
    headers: Mapping[str, str]

    @property
    def q(self) -> str:
        return self.query.get("q", "")


@frozen
class Fault:
    """A scripted answer. `status=None` means "answer normally, after `delay_s`"."""

    status: int | None
    body: Any = None  # JSON-able, or str sent as text
    headers: Mapping[str, str] = field(factory=dict)
    delay_s: float = 0.0


class FakeGitHub(AsyncServerContext):
    def __init__(
        self, dataset: Sequence[Seed] = DATASET, *, require_type_qualifier: bool = False
    ) -> None:
        self.dataset = tuple(dataset)
        # Like user-to-server tokens on github.com: 422 unless q has is:issue or is:pr.
        self.require_type_qualifier = require_type_qualifier
        self.requests: list[RecordedRequest] = []
        self._faults: deque[Fault] = deque()
        self._closing = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> FakeGitHub:
        app = web.Application()
        app.router.add_get("/search/issues", self._search)
        app.router.add_get("/api/v3/search/issues", self._search)
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        self._runner = await serve(app, shutdown_timeout=1.0)
        self.port = bound_port(self._runner)
        return self

    async def close(self) -> None:
        self._closing.set()  # wakes slow handlers so shutdown does not wait for them
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def stop(self) -> None:
        await self.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def enterprise_url(self) -> str:
        return f"{self.url}/api/v3"

    # -- scripting ------------------------------------------------------------------------

    def fail_next(self, fault: Fault, times: int = 1) -> None:
        self._faults.extend([fault] * times)

    def rate_limit_403(self, reset_epoch: int) -> None:
        """The primary limit: 403 with `X-RateLimit-Remaining: 0`."""
        headers = _rate_headers(limit=10, remaining=0, reset=reset_epoch)
        body = {
            "message": "API rate limit exceeded for 127.0.0.1. (But here's the good news: "
            "Authenticated requests get a higher rate limit.)",
            "documentation_url": "https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting",
        }
        self.fail_next(Fault(403, body, headers))

    def rate_limit_429(self, retry_after: int = 60) -> None:
        """A secondary limit: 429 with `Retry-After` (seconds)."""
        body = {
            "message": "You have exceeded a secondary rate limit. Please wait a few minutes "
            "before you try again.",
            "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
        }
        self.fail_next(Fault(429, body, {"Retry-After": str(retry_after)}))

    def reject_422(self, message: str = UNSEARCHABLE) -> None:
        self.fail_next(Fault(422, _validation_failed(message)))

    def slow(self, seconds: float) -> None:
        self.fail_next(Fault(None, delay_s=seconds))

    def server_error(self, times: int = 1, status: int = 500) -> None:
        self.fail_next(Fault(status, {"message": "Server Error"}), times)

    # -- handlers -------------------------------------------------------------------------

    def _record(self, request: web.Request) -> None:
        self.requests.append(
            RecordedRequest(
                method=request.method,
                path=request.path,
                query=dict(request.query),
                headers=dict(request.headers),
            )
        )

    async def _not_found(self, request: web.Request) -> web.Response:
        self._record(request)
        return _json({"message": "Not Found", "documentation_url": DOCS_URL}, 404)

    async def _search(self, request: web.Request) -> web.Response:
        self._record(request)
        if self._faults:
            fault = self._faults.popleft()
            if fault.delay_s:
                await self._sleep(fault.delay_s)
            if fault.status is not None:
                return _fault_response(fault)
        if "User-Agent" not in request.headers:  # as GitHub does
            return _json({"message": "Request forbidden by administrative rules."}, 403)
        return self._answer(request)

    async def _sleep(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._closing.wait(), timeout=seconds)
        except TimeoutError:
            pass

    def _answer(self, request: web.Request) -> web.Response:
        query = _parse_q(request.query.get("q", ""))
        error = self._validate(query)
        if error is not None:
            return _json(error, 422)
        matches = [s for s in self.dataset if _matches(s, query)]
        matches = _order(matches, query, request.query.get("sort"), request.query.get("order"))
        per_page = min(int(request.query.get("per_page", "30")), 100)
        page = int(request.query.get("page", "1"))
        window = matches[(page - 1) * per_page : page * per_page]
        api_base = str(request.url.origin()) + request.path.removesuffix("/search/issues")
        body = {
            "total_count": len(matches),
            "incomplete_results": False,
            "items": [_render(s, api_base, _score(s, query)) for s in window],
        }
        authed = "Authorization" in request.headers
        headers = _rate_headers(
            limit=30 if authed else 10, remaining=9, reset=int(time.time()) + 60
        )
        return _json(body, 200, headers)

    def _validate(self, query: _Query) -> dict[str, Any] | None:
        if not query.words and not query.qualifiers:
            return _validation_failed(None, code="missing")
        known_repos = {s.repo.lower() for s in self.dataset}
        known_owners = {r.split("/")[0] for r in known_repos}
        for repo in query.values("repo"):
            if repo.lower() not in known_repos:
                return _validation_failed(UNSEARCHABLE)
        for owner in query.values("org") + query.values("user"):
            if owner.lower() not in known_owners:
                return _validation_failed(UNSEARCHABLE)
        if self.require_type_qualifier and not query.types():
            return {"message": TYPE_REQUIRED, "documentation_url": DOCS_URL, "status": "422"}
        return None


# -- q parsing and matching -------------------------------------------------------------

_QUALIFIERS = {"repo", "org", "user", "is", "type", "state", "label", "author"}
_TOKEN = re.compile(r'(-?[\w.]+):("[^"]*"|\S+)|"([^"]*)"|(\S+)')


@frozen
class _Query:
    words: tuple[str, ...]
    qualifiers: tuple[tuple[str, str], ...]

    def values(self, key: str) -> list[str]:
        return [v for k, v in self.qualifiers if k == key]

    def types(self) -> set[str]:
        aliases = {"issue": "issue", "pr": "pr", "pull-request": "pr"}
        found = self.values("is") + self.values("type")
        return {aliases[v] for v in found if v in aliases}


def _parse_q(q: str) -> _Query:
    words: list[str] = []
    qualifiers: list[tuple[str, str]] = []
    for m in _TOKEN.finditer(q):
        key, value, phrase, word = m.groups()
        if key is not None and key.lower() in _QUALIFIERS:
            qualifiers.append((key.lower(), value.strip('"').lower()))
        elif phrase is not None:
            words.append(phrase.lower())
        else:
            words.append((word or m.group(0)).lower())
    return _Query(tuple(words), tuple(qualifiers))


def _matches(seed: Seed, query: _Query) -> bool:
    owner = seed.repo.split("/")[0].lower()
    repos = query.values("repo")
    owners = query.values("org") + query.values("user")
    states = set(query.values("state")) | {v for v in query.values("is") if v in ("open", "closed")}
    types = query.types()
    labels = {label.lower() for label in seed.labels}
    text = f"{seed.title}\n{seed.body or ''}".lower()
    return (
        (not repos or seed.repo.lower() in repos)  # several repo: qualifiers are ORed
        and (not owners or owner in owners)
        and (not states or seed.state in states)
        and (not types or ("pr" if seed.is_pr else "issue") in types)
        and all(label in labels for label in query.values("label"))
        and all(author == seed.author.lower() for author in query.values("author"))
        and all(word in text for word in query.words)
    )


def _score(seed: Seed, query: _Query) -> float:
    # Title hits weigh more, roughly like GitHub's best match.
    title, body = seed.title.lower(), (seed.body or "").lower()
    return 1.0 + sum(3.0 * title.count(w) + body.count(w) for w in query.words)


def _order(matches: list[Seed], query: _Query, sort: str | None, order: str | None) -> list[Seed]:
    descending = order != "asc"
    if sort in ("created", "updated", "comments"):
        key = {"created": "created_at", "updated": "updated_at", "comments": "comments"}[sort]
        return sorted(matches, key=lambda s: getattr(s, key), reverse=descending)
    return sorted(matches, key=lambda s: (_score(s, query), s.updated_at), reverse=True)


# -- rendering --------------------------------------------------------------------------


def _render(seed: Seed, api_base: str, score: float) -> dict[str, Any]:
    """An item with the field names and nesting of GitHub's search response."""
    repo_api = f"{api_base}/repos/{seed.repo}"
    kind = "pull" if seed.is_pr else "issues"
    html = f"https://github.com/{seed.repo}/{kind}/{seed.number}"
    node = 1_000_000 + seed.number
    item: dict[str, Any] = {
        "url": f"{repo_api}/issues/{seed.number}",
        "repository_url": repo_api,
        "labels_url": f"{repo_api}/issues/{seed.number}/labels{{/name}}",
        "comments_url": f"{repo_api}/issues/{seed.number}/comments",
        "events_url": f"{repo_api}/issues/{seed.number}/events",
        "html_url": html,
        "id": node,
        "node_id": f"I_kwDO{node}",
        "number": seed.number,
        "title": seed.title,
        "user": {
            "login": seed.author,
            "id": zlib.crc32(seed.author.encode()) % 10_000_000,
            "type": "User",
            "html_url": f"https://github.com/{seed.author}",
            "site_admin": False,
        },
        "labels": [
            {"id": 100 + i, "name": name, "color": "d73a4a", "default": False, "description": ""}
            for i, name in enumerate(seed.labels)
        ],
        "state": seed.state,
        "state_reason": "completed" if seed.state == "closed" and not seed.is_pr else None,
        "locked": False,
        "assignee": None,
        "assignees": [],
        "milestone": None,
        "comments": seed.comments,
        "created_at": seed.created_at,
        "updated_at": seed.updated_at,
        "closed_at": seed.closed_at,
        "author_association": "CONTRIBUTOR",
        "active_lock_reason": None,
        "body": seed.body,
        "reactions": {"url": f"{repo_api}/issues/{seed.number}/reactions", "total_count": 0},
        "timeline_url": f"{repo_api}/issues/{seed.number}/timeline",
        "performed_via_github_app": None,
        "score": score,
    }
    if seed.is_pr:
        item["draft"] = False
        item["pull_request"] = {
            "url": f"{repo_api}/pulls/{seed.number}",
            "html_url": html,
            "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch",
            "merged_at": seed.merged_at,
        }
    return item


def _validation_failed(message: str | None, code: str = "invalid") -> dict[str, Any]:
    error: dict[str, Any] = {"resource": "Search", "field": "q", "code": code}
    if message:
        error["message"] = message
    return {
        "message": "Validation Failed",
        "errors": [error],
        "documentation_url": DOCS_URL,
        "status": "422",
    }


def _rate_headers(*, limit: int, remaining: int, reset: int) -> dict[str, str]:
    return {
        "X-RateLimit-Limit": str(limit),
        "X-RateLimit-Remaining": str(remaining),
        "X-RateLimit-Reset": str(reset),
        "X-RateLimit-Used": str(limit - remaining),
        "X-RateLimit-Resource": "search",
    }


def _fault_response(fault: Fault) -> web.Response:
    if isinstance(fault.body, str):
        return web.Response(status=fault.status or 200, text=fault.body, headers=fault.headers)
    return _json(fault.body or {}, fault.status or 200, fault.headers)


def _json(body: Any, status: int, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status,
        text=json.dumps(body),
        content_type="application/json",
        charset="utf-8",
        headers=dict(headers or {}),
    )
