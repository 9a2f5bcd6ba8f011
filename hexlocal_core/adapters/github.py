"""`IssueTracker` over GitHub's REST search API (`GET {GITHUB_API_URL}/search/issues`).

Works with github.com (`https://api.github.com`) and GitHub Enterprise Server
(`https://ghe.example.com/api/v3`). Nothing is stored. The token (GITHUB_TOKEN) goes into
the Authorization header of each request and nowhere else: not into logs, messages, reprs,
or the session's default headers; credentials in GITHUB_API_URL are masked likewise.

The HTTP policy is `adapters.http`'s (one retry of a 5xx or a short 429 by default). This
module classifies GitHub's answers: rate limits -> RateLimited (with the reset time), a
rejected query (422) -> UserInputError, anything else remote -> RemoteError naming the URL.
A search is interactive, so timeouts and unreachable hosts are not retried.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from attrs import evolve

from hexlocal_core.adapters.http import Failure, HttpClient, Retry, join_url
from hexlocal_core.adapters.http_body import TooLarge, read_body, read_error_text
from hexlocal_core.adapters.http_policy import RetryPolicy, parse_retry_after
from hexlocal_core.config import Secret, Settings
from hexlocal_core.errors import RateLimited, RemoteError, UserInputError
from hexlocal_core.issues import make_excerpt, search_params, validate_issue_query
from hexlocal_core.model import IssueHit, IssueQuery
from hexlocal_core.ports import NoLifecycle
from hexlocal_core.redact import excerpt, redact_url, url_secrets
from hexlocal_core.untrusted import clip

if TYPE_CHECKING:
    import aiohttp

__all__ = ["DEFAULT_RETRY", "GitHubIssues", "hit_from_item", "reset_time"]

log = logging.getLogger("hexlocal.github")

API_VERSION = "2022-11-28"
USER_AGENT = "hexlocal"
# One retry a second later; a secondary rate limit's Retry-After (usually 60 s) is not
# waited for: the caller gets RateLimited with the reset time at once.
DEFAULT_RETRY = RetryPolicy(attempts=2, base_s=1.0, cap_s=5.0, max_retry_after_s=10.0)
MAX_ANSWER_BYTES = 32 * 1024 * 1024  # 100 items with long bodies are a few MB
_MAX_ERRORS = 10  # validation errors quoted from one answer


class _TypeQualifierRequired(UserInputError):
    """GitHub wants `is:issue` or `is:pull-request` in the query (user-to-server tokens)."""


class GitHubIssues(NoLifecycle):
    """Live issue and pull-request search. Use as `async with GitHubIssues(settings) as gh:`.

    `retry_delay_s` is a shorthand for `retry=RetryPolicy(attempts=2, base_s=...)`.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        retry: RetryPolicy | None = None,
        retry_delay_s: float | None = None,
        trust_env: bool = False,
    ) -> None:
        self._base = settings.github_api_url.rstrip("/")
        self._token: Secret = settings.github_token
        if retry is None:
            retry = DEFAULT_RETRY
            if retry_delay_s is not None:
                retry = evolve(retry, base_s=retry_delay_s)
        self.retry = retry
        self._secrets = (self._token.reveal(), *url_secrets(self._base))
        self.http = HttpClient(
            timeout_s=settings.http_timeout_s,
            secrets=self._secrets,
            trust_env=trust_env,  # HTTPS_PROXY from the environment, as the hex adapter
        )
        # Set once GitHub has asked for a type qualifier: from then on "both types" is
        # asked as two queries straight away instead of failing first each time.
        self._split_types = False

    @property
    def search_url(self) -> str:
        """The search endpoint as messages show it (credentials masked)."""
        return clip(redact_url(self._search_target), 500)

    @property
    def _search_target(self) -> str:
        return join_url(self._base, "/search/issues")

    def __repr__(self) -> str:
        return f"GitHubIssues(base={redact_url(self._base)!r}, token={self._token.masked()})"

    async def __aenter__(self) -> GitHubIssues:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

    async def search(self, query: IssueQuery) -> list[IssueHit]:
        """Issues and PRs matching `query`, best first. See `IssueTracker.search`."""
        q = validate_issue_query(query)
        if q.type is None and self._split_types:
            return await self._search_both_types(q)
        try:
            items = await self._search_items(q)
        except _TypeQualifierRequired:
            if q.type is not None:
                raise
            log.info("GitHub requires is:issue or is:pr here; asking for each separately")
            self._split_types = True
            return await self._search_both_types(q)
        return _to_hits(items)

    async def _search_both_types(self, q: IssueQuery) -> list[IssueHit]:
        params = search_params(q)
        results = await asyncio.gather(
            self._search_items(evolve(q, type="issue")),
            self._search_items(evolve(q, type="pr")),
            return_exceptions=True,  # let both finish, then report the first failure
        )
        merged: list[Mapping[str, Any]] = []
        for result in results:
            if isinstance(result, BaseException):
                raise result
            merged.extend(result)
        by_recency = params.get("sort") == "updated"
        merged.sort(key=lambda item: _rank_key(item, by_recency), reverse=True)
        return _to_hits(merged[: q.limit])

    async def _search_items(self, q: IssueQuery) -> list[Mapping[str, Any]]:
        params = search_params(q)
        log.debug("GitHub search %s q=%r", self.search_url, clip(params["q"]))
        payload = await self.http.request(
            "GET",
            self._search_target,
            policy=self.retry,
            handle=self._handle,
            on_failure=self._failure_error,
            headers=self._headers(),
            params=params,
        )
        if payload.get("incomplete_results"):
            log.info(
                "GitHub search timed out on its side; results for %r may be partial",
                clip(q.text),
            )
        return [item for item in payload["items"] if isinstance(item, Mapping)]

    def _headers(self) -> dict[str, str]:
        headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": USER_AGENT,
        }
        if self._token:
            headers["Authorization"] = f"Bearer {self._token.reveal()}"
        return headers

    async def _handle(self, response: aiohttp.ClientResponse) -> dict[str, Any]:
        """The search payload of a 200, or the core error for any other answer."""
        if response.status == 200:
            try:
                payload = _json_object(await read_body(response, MAX_ANSWER_BYTES))
            except TooLarge:
                payload = None
            if payload is None or not isinstance(payload.get("items"), list):
                raise RemoteError(
                    f"GitHub search at {self.search_url} answered 200 without a list of "
                    "items; is GITHUB_API_URL a GitHub API base?"
                )
            return payload
        body = (await read_error_text(response)).encode("utf-8")
        # Scrubbed before it is cut, so a cut inside an echoed token cannot show a piece.
        message = excerpt(_github_message(_json_object(body), body), self._secrets)
        raise self._error(response.status, response.headers, message)

    def _failure_error(self, failure: Failure) -> Exception:
        if failure.kind == "timeout":
            return RemoteError(
                f"GitHub search at {failure.url} timed out after {self.http.timeout_s:g}s; "
                "try again, or raise HEXLOCAL_HTTP_TIMEOUT_S."
            )
        return RemoteError(
            f"Could not reach GitHub at {failure.url} ({failure.detail}); check "
            "GITHUB_API_URL and the network."
        )

    def _error(self, status: int, headers: Mapping[str, str], message: str) -> Exception:
        url = self.search_url
        if _is_rate_limit(status, headers, message):
            limited = self._rate_limited(status, headers)
            if self.retry.retries(status):
                return Retry(limited, parse_retry_after(headers.get("Retry-After")))
            return limited
        if status == 422:
            if "is:issue" in message and "is:pull-request" in message:
                return _TypeQualifierRequired(f"GitHub rejected the search query: {message}")
            return UserInputError(f"GitHub rejected the search query: {message}")
        if status == 401:
            return RemoteError(
                f"GitHub at {url} rejected GITHUB_TOKEN (HTTP 401: {message}); "
                "check the token or unset it."
            )
        if status == 404:
            return RemoteError(
                f"{url} answered HTTP 404; check GITHUB_API_URL "
                "(GitHub Enterprise API bases end in /api/v3)."
            )
        if self.retry.retries(status):
            log.warning("GitHub search answered HTTP %d", status)
            return Retry(RemoteError(f"GitHub search at {url} answered HTTP {status}"))
        return RemoteError(f"GitHub search at {url} answered HTTP {status}: {message}")

    def _rate_limited(self, status: int, headers: Mapping[str, str]) -> RateLimited:
        reset_at = reset_time(headers, datetime.now(UTC))
        when = f"it resets at {reset_at}" if reset_at else "try again in a minute"
        if self._token:
            hint = "The token's search quota is used up; wait for the reset."
        else:
            hint = (
                "Set GITHUB_TOKEN to a GitHub token to raise the limit "
                "(unauthenticated search allows 10 requests a minute)."
            )
        return RateLimited(
            f"GitHub rate limit reached for {self.search_url} (HTTP {status}); {when}. {hint}",
            reset_at=reset_at,
        )


def reset_time(headers: Mapping[str, str], now: datetime) -> str | None:
    """When a rate limit lifts, as ISO UTC ('2025-01-31T12:00:00Z'), or None if unknown.

    `X-RateLimit-Reset` (epoch seconds) is the primary limit's reset; `Retry-After`
    (seconds or an HTTP date) is the secondary limit's. Both present: the later one,
    since waiting for it satisfies both.
    """
    after = parse_retry_after(headers.get("Retry-After"), now=now)
    secondary = now + timedelta(seconds=after) if after is not None else None
    candidates = [t for t in (_epoch_header(headers), secondary) if t]
    if not candidates:
        return None
    return max(candidates).strftime("%Y-%m-%dT%H:%M:%SZ")


def hit_from_item(item: Mapping[str, Any]) -> IssueHit:
    """One search result item (GitHub's JSON) as an IssueHit. Raises KeyError/TypeError/
    ValueError when a required field is missing or has the wrong type."""
    is_pr = "pull_request" in item
    pr = item.get("pull_request")
    merged: bool | None = None
    if isinstance(pr, Mapping) and "merged_at" in pr:
        merged = pr["merged_at"] is not None
    user = item.get("user")
    return IssueHit(
        repo=_repo_name(item),
        number=int(item["number"]),
        title=str(item["title"]),
        state=str(item["state"]),
        is_pr=is_pr,
        html_url=str(item["html_url"]),
        author=user.get("login") if isinstance(user, Mapping) else None,
        labels=_label_names(item.get("labels")),
        created_at=item.get("created_at"),
        updated_at=item.get("updated_at"),
        closed_at=item.get("closed_at"),
        comments=int(item.get("comments") or 0),
        merged=merged,
        excerpt=make_excerpt(item.get("body")),
    )


def _to_hits(items: Sequence[Mapping[str, Any]]) -> list[IssueHit]:
    hits = []
    for item in items:
        try:
            hits.append(hit_from_item(item))
        except (KeyError, TypeError, ValueError) as exc:
            # One malformed item should not hide the others.
            log.warning("skipping a GitHub search item without %s", exc)
    return hits


def _rank_key(item: Mapping[str, Any], by_recency: bool) -> tuple[float, str]:
    score = item.get("score")
    updated = str(item.get("updated_at") or "")
    if by_recency or not isinstance(score, int | float):
        return (0.0, updated)
    return (float(score), updated)


def _repo_name(item: Mapping[str, Any]) -> str:
    # repository_url is ".../repos/{owner}/{name}" on github.com and Enterprise alike.
    repository_url = item.get("repository_url")
    if isinstance(repository_url, str):
        parts = urlsplit(repository_url).path.rstrip("/").split("/")
        if len(parts) >= 3 and parts[-3] == "repos":
            return f"{parts[-2]}/{parts[-1]}"
    # Fallback: html_url is "https://github.com/{owner}/{name}/issues/{n}".
    parts = urlsplit(str(item["html_url"])).path.strip("/").split("/")
    if len(parts) < 2:
        raise ValueError("a repository")
    return f"{parts[0]}/{parts[1]}"


def _label_names(labels: object) -> tuple[str, ...]:
    if not isinstance(labels, list):
        return ()
    names = (label.get("name") if isinstance(label, Mapping) else label for label in labels)
    return tuple(name for name in names if isinstance(name, str) and name)


def _is_rate_limit(status: int, headers: Mapping[str, str], message: str) -> bool:
    if status == 429:
        return True
    if status != 403:
        return False
    # A 403 is also "forbidden" (SSO, blocked token): only these mean "wait and retry".
    return (
        headers.get("X-RateLimit-Remaining") == "0"
        or "Retry-After" in headers
        or "rate limit" in message.lower()
    )


def _epoch_header(headers: Mapping[str, str]) -> datetime | None:
    value = headers.get("X-RateLimit-Reset")
    try:
        return datetime.fromtimestamp(int(value), UTC) if value else None
    except (ValueError, OverflowError, OSError):
        return None


def _json_object(body: bytes) -> dict[str, Any] | None:
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return payload if isinstance(payload, dict) else None


def _github_message(payload: Mapping[str, Any] | None, body: bytes) -> str:
    """GitHub's error text, whole: `message`, plus each validation error's own message.
    (The caller scrubs and cuts it.)"""
    if payload is None:
        return body.decode("utf-8", "replace").strip() or "no details"
    parts = [str(payload.get("message") or "").strip()]
    errors = payload.get("errors")
    for error in errors[:_MAX_ERRORS] if isinstance(errors, list) else ():
        detail = error.get("message") if isinstance(error, Mapping) else error
        if detail:
            parts.append(str(detail).strip())
    return ": ".join(p for p in parts if p) or "no details"
