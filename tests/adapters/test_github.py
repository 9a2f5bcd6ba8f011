"""Live issue search: query building and validation (pure), and the real aiohttp adapter
against the loopback fake GitHub (tests/fakes/fake_github.py)."""

from __future__ import annotations

import logging
import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hexlocal_core.adapters.github import GitHubIssues, reset_time
from hexlocal_core.adapters.http_policy import RetryPolicy
from hexlocal_core.config import Settings
from hexlocal_core.errors import RateLimited, RemoteError, UserInputError
from hexlocal_core.issues import (
    build_search_q,
    make_excerpt,
    search_params,
    validate_issue_query,
)
from hexlocal_core.model import IssueQuery
from hexlocal_core.ports import IssueTracker
from tests.fakes.fake_github import TYPE_REQUIRED, FakeGitHub, Fault

TOKEN = "ghp_TESTtoken0123456789abcdefghijklmnop"


class Waits:
    """A RetryPolicy.sleep that records the waits and returns at once."""

    def __init__(self) -> None:
        self.seconds: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)


WAITS = Waits()
FAST = RetryPolicy(attempts=2, base_s=0.5, max_retry_after_s=10.0, sleep=WAITS)


@pytest.fixture(autouse=True)
def _no_waits_yet() -> None:
    WAITS.seconds.clear()


def make_settings(tmp_path: Path, base: str, **env: str) -> Settings:
    return Settings.from_env({"PROJECT_ROOT": str(tmp_path), "GITHUB_API_URL": base, **env})


@pytest.fixture
async def fake() -> AsyncIterator[FakeGitHub]:
    async with FakeGitHub() as server:
        yield server


@pytest.fixture
async def github(fake: FakeGitHub, tmp_path: Path) -> AsyncIterator[GitHubIssues]:
    async with GitHubIssues(make_settings(tmp_path, fake.url), retry=FAST) as gh:
        yield gh


@pytest.fixture
async def github_with_token(fake: FakeGitHub, tmp_path: Path) -> AsyncIterator[GitHubIssues]:
    settings = make_settings(tmp_path, fake.url, GITHUB_TOKEN=TOKEN)
    async with GitHubIssues(settings, retry=FAST) as gh:
        yield gh


# -- query building (pure) --------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # repo as resolved from a package's hex.pm links
        (IssueQuery("decode", repo="michalmuskala/jason"), "decode repo:michalmuskala/jason"),
        (IssueQuery("transaction", org="elixir-ecto"), "transaction org:elixir-ecto"),
        (IssueQuery("x", repo="a/b", type="issue"), "x repo:a/b is:issue"),
        (IssueQuery("x", repo="a/b", type="pr"), "x repo:a/b is:pr"),
        (IssueQuery("x", repo="a/b", state="open"), "x repo:a/b state:open"),
        (
            IssueQuery("x", repo="a/b", type="pr", state="closed"),
            "x repo:a/b is:pr state:closed",
        ),
        (IssueQuery("", repo="a/b", type="issue"), "repo:a/b is:issue"),
        (IssueQuery("  nested\n  maps ", repo="a/b"), "nested maps repo:a/b"),
        (IssueQuery("label:bug crash", org="o"), "label:bug crash org:o"),
    ],
)
def test_build_search_q(query: IssueQuery, expected: str) -> None:
    assert build_search_q(query) == expected


def test_search_params_rank_text_by_best_match_and_no_text_by_recency() -> None:
    assert search_params(IssueQuery("crash", repo="a/b", limit=7)) == {
        "q": "crash repo:a/b",
        "per_page": "7",
    }
    assert search_params(IssueQuery(" ", repo="a/b")) == {
        "q": "repo:a/b",
        "per_page": "10",
        "sort": "updated",
        "order": "desc",
    }


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (IssueQuery("x"), "Give a repository"),
        (IssueQuery("x", repo=" ", org=""), "Give a repository"),
        (IssueQuery("x", repo="jason"), "expected 'owner/name'"),
        (IssueQuery("x", repo="a/b/c"), "expected 'owner/name'"),
        (IssueQuery("x", repo="https://github.com/a/b"), "expected 'owner/name'"),
        (IssueQuery("x", repo="-a/b"), "expected 'owner/name'"),
        (IssueQuery("x", repo="a/.."), "expected 'owner/name'"),
        (IssueQuery("x", org="elixir ecto"), "org='elixir ecto'"),
        (IssueQuery("x", repo="a/b", org="c"), "is not in org='c'"),
        (IssueQuery("x", repo="a/b", type="bug"), "type='bug' is not valid"),
        (IssueQuery("x", repo="a/b", type="issues"), "expected 'issue', 'pr'"),
        (IssueQuery("x", repo="a/b", state="merged"), "state='merged' is not valid"),
        (IssueQuery("x", repo="a/b", limit=0), "limit=0 is out of range"),
        (IssueQuery("x", repo="a/b", limit=51), "from 1 to 50"),
        (IssueQuery("x", repo="a/b", limit=True), "limit=True"),
    ],
)
def test_validate_rejects(query: IssueQuery, message: str) -> None:
    with pytest.raises(UserInputError, match=message.replace(".", r"\.")):
        validate_issue_query(query)


def test_validate_normalises() -> None:
    q = IssueQuery(
        " a  b ", repo=" elixir-ecto/ecto ", org="Elixir-Ecto", type=" PR ", state="Open"
    )
    assert validate_issue_query(q) == IssueQuery(
        "a b", repo="elixir-ecto/ecto", org="Elixir-Ecto", type="pr", state="open"
    )
    loose = IssueQuery("x", repo="a/b.ex", type="", state="", limit=50)
    assert validate_issue_query(loose) == IssueQuery("x", repo="a/b.ex", limit=50)


def test_excerpt_strips_noise_and_is_bounded() -> None:
    body = "<!-- template\nhelp -->\n## Bug\n\n![shot](https://x/y.png)  It   crashes\n<img src=x>"
    assert make_excerpt(body) == "## Bug It crashes"
    assert make_excerpt(None) == ""
    assert make_excerpt("<!-- unclosed template comment") == ""
    long = make_excerpt("word " * 200)
    assert len(long) <= 400 and long.endswith("word…")


def test_reset_time_takes_the_later_of_both_headers() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    epoch = int((now + timedelta(seconds=30)).timestamp())
    assert reset_time({"X-RateLimit-Reset": str(epoch)}, now) == "2025-01-01T12:00:30Z"
    both = {"X-RateLimit-Reset": str(epoch), "Retry-After": "90"}
    assert reset_time(both, now) == "2025-01-01T12:01:30Z"
    http_date = {"Retry-After": "Wed, 01 Jan 2025 13:00:00 GMT"}
    assert reset_time(http_date, now) == "2025-01-01T13:00:00Z"
    assert reset_time({"Retry-After": "soon"}, now) is None
    assert reset_time({}, now) is None


# -- the adapter against the fake -------------------------------------------------------


async def test_is_an_issue_tracker(github: GitHubIssues) -> None:
    assert isinstance(github, IssueTracker)


async def test_results_are_mapped(fake: FakeGitHub, github: GitHubIssues) -> None:
    hits = await github.search(IssueQuery("transport", repo="zoedsoupe/anubis-mcp"))

    by_number = {h.number: h for h in hits}
    assert set(by_number) == {45, 52}
    pr = by_number[52]
    assert pr.repo == "zoedsoupe/anubis-mcp"
    assert pr.title == "feat: streamable HTTP transport (2025-03-26 spec)"
    assert (pr.is_pr, pr.merged, pr.state) == (True, True, "closed")
    assert pr.labels == ("enhancement",)
    assert pr.author == "zoedsoupe"
    assert pr.html_url == "https://github.com/zoedsoupe/anubis-mcp/pull/52"
    assert (pr.created_at, pr.closed_at) == ("2025-04-01T10:00:00Z", "2025-04-09T18:30:00Z")
    assert pr.comments == 7
    issue = by_number[45]
    assert (issue.is_pr, issue.merged, issue.closed_at) == (False, None, None)
    assert issue.labels == ("bug", "transport")
    assert issue.excerpt.startswith("### Environment * Elixir 1.17.3")
    assert "<!--" not in issue.excerpt and "![" not in issue.excerpt

    (request,) = fake.requests
    assert request.path == "/search/issues"
    assert request.query == {"q": "transport repo:zoedsoupe/anubis-mcp", "per_page": "10"}
    assert request.headers["Accept"] == "application/vnd.github+json"
    assert request.headers["X-GitHub-Api-Version"] == "2022-11-28"
    assert request.headers["User-Agent"] == "hexlocal"
    assert "Authorization" not in request.headers


async def test_unmerged_pr_and_bounded_excerpt(github: GitHubIssues) -> None:
    hits = await github.search(IssueQuery("", repo="zoedsoupe/anubis-mcp", state="closed"))
    by_number = {h.number: h for h in hits}
    assert by_number[61].is_pr and by_number[61].merged is False
    long = by_number[70].excerpt
    assert 300 < len(long) <= 400 and long.endswith("…")


async def test_type_state_and_org_scope(fake: FakeGitHub, github: GitHubIssues) -> None:
    prs = await github.search(IssueQuery("", org="elixir-ecto", type="pr", state="closed"))
    assert [(h.repo, h.number) for h in prs] == [("elixir-ecto/ecto", 4012)]
    everything = await github.search(IssueQuery("", org="elixir-ecto", limit=50))
    assert {h.repo for h in everything} == {"elixir-ecto/ecto", "elixir-ecto/postgrex"}
    assert fake.requests[0].q == "org:elixir-ecto is:pr state:closed"
    assert fake.requests[1].query["per_page"] == "50"


async def test_token_is_sent_only_when_set(
    fake: FakeGitHub, github: GitHubIssues, github_with_token: GitHubIssues
) -> None:
    await github.search(IssueQuery("decode", repo="michalmuskala/jason"))
    await github_with_token.search(IssueQuery("decode", repo="michalmuskala/jason"))
    anonymous, authed = fake.requests
    assert "Authorization" not in anonymous.headers
    assert authed.headers["Authorization"] == f"Bearer {TOKEN}"
    assert TOKEN not in repr(github_with_token)


async def test_enterprise_base(fake: FakeGitHub, tmp_path: Path) -> None:
    settings = make_settings(tmp_path, fake.enterprise_url + "/")
    async with GitHubIssues(settings) as gh:
        hits = await gh.search(IssueQuery("preload", repo="elixir-ecto/ecto"))
    assert [(h.repo, h.number) for h in hits] == [("elixir-ecto/ecto", 4120)]
    assert fake.requests[0].path == "/api/v3/search/issues"


async def test_primary_rate_limit_names_reset_and_token(
    fake: FakeGitHub, github: GitHubIssues
) -> None:
    fake.rate_limit_403(reset_epoch=1_900_000_000)
    with pytest.raises(RateLimited) as caught:
        await github.search(IssueQuery("decode", repo="michalmuskala/jason"))
    assert caught.value.reset_at == "2030-03-17T17:46:40Z"
    message = str(caught.value)
    assert "resets at 2030-03-17T17:46:40Z" in message
    assert "Set GITHUB_TOKEN" in message
    assert f"{fake.url}/search/issues" in message


async def test_secondary_rate_limit_with_token(
    fake: FakeGitHub, github_with_token: GitHubIssues
) -> None:
    fake.rate_limit_429(retry_after=120)
    before = datetime.now(UTC)
    with pytest.raises(RateLimited) as caught:
        await github_with_token.search(IssueQuery("decode", repo="michalmuskala/jason"))
    assert caught.value.reset_at is not None
    reset = datetime.strptime(caught.value.reset_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert timedelta(seconds=118) <= reset - before <= timedelta(seconds=125)
    assert "Set GITHUB_TOKEN" not in str(caught.value)
    assert "HTTP 429" in str(caught.value)
    # 120 s is longer than a search waits (10 s): no second request, no sleep.
    assert len(fake.requests) == 1 and WAITS.seconds == []


async def test_a_short_secondary_rate_limit_is_waited_for(
    fake: FakeGitHub, github_with_token: GitHubIssues
) -> None:
    fake.rate_limit_429(retry_after=3)
    hits = await github_with_token.search(IssueQuery("decode", repo="michalmuskala/jason"))
    assert [h.number for h in hits] == [128]
    assert len(fake.requests) == 2 and WAITS.seconds == [3.0]


async def test_the_primary_rate_limit_is_not_retried(
    fake: FakeGitHub, github: GitHubIssues
) -> None:
    fake.rate_limit_403(reset_epoch=1_900_000_000)
    with pytest.raises(RateLimited):
        await github.search(IssueQuery("decode", repo="michalmuskala/jason"))
    assert len(fake.requests) == 1 and WAITS.seconds == []


async def test_forbidden_without_rate_limit_is_a_remote_error(
    fake: FakeGitHub, github: GitHubIssues
) -> None:
    fake.fail_next(Fault(403, {"message": "Resource protected by organization SAML"}))
    with pytest.raises(RemoteError, match="HTTP 403: Resource protected") as caught:
        await github.search(IssueQuery("decode", repo="michalmuskala/jason"))
    assert not isinstance(caught.value, RateLimited)


async def test_rejected_query_is_user_input(github: GitHubIssues) -> None:
    # The fake answers unknown repositories like GitHub does: 422 Validation Failed.
    with pytest.raises(UserInputError) as caught:
        await github.search(IssueQuery("x", repo="nobody/nothing"))
    assert str(caught.value).startswith(
        "GitHub rejected the search query: Validation Failed: The listed users and "
        "repositories cannot be searched"
    )


async def test_timeout_names_url_and_setting(fake: FakeGitHub, tmp_path: Path) -> None:
    fake.slow(5.0)
    settings = make_settings(tmp_path, fake.url, HEXLOCAL_HTTP_TIMEOUT_S="0.1")
    async with GitHubIssues(settings) as gh:
        with pytest.raises(RemoteError) as caught:
            await gh.search(IssueQuery("decode", repo="michalmuskala/jason"))
    message = str(caught.value)
    assert f"GitHub search at {fake.url}/search/issues timed out after 0.1s" in message
    assert "HEXLOCAL_HTTP_TIMEOUT_S" in message


async def test_server_error_is_retried_once(fake: FakeGitHub, github: GitHubIssues) -> None:
    fake.server_error(times=1, status=502)
    hits = await github.search(IssueQuery("decode", repo="michalmuskala/jason"))
    assert [h.number for h in hits] == [128]
    assert len(fake.requests) == 2 and WAITS.seconds == [0.5]


async def test_repeated_server_error_names_url(fake: FakeGitHub, github: GitHubIssues) -> None:
    fake.server_error(times=3)
    with pytest.raises(RemoteError) as caught:
        await github.search(IssueQuery("decode", repo="michalmuskala/jason"))
    assert str(caught.value) == (
        f"GitHub search at {fake.url}/search/issues answered HTTP 500; gave up after 2 attempts"
    )
    assert len(fake.requests) == 2 and WAITS.seconds == [0.5]


async def test_other_statuses_are_not_retried(fake: FakeGitHub, github: GitHubIssues) -> None:
    fake.fail_next(Fault(501, {"message": "Not Implemented"}))
    with pytest.raises(RemoteError, match="HTTP 501: Not Implemented"):
        await github.search(IssueQuery("decode", repo="michalmuskala/jason"))
    assert len(fake.requests) == 1 and WAITS.seconds == []


async def test_connection_refused_names_url(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    async with GitHubIssues(make_settings(tmp_path, base)) as gh:
        with pytest.raises(RemoteError, match="Could not reach GitHub at") as caught:
            await gh.search(IssueQuery("decode", repo="michalmuskala/jason"))
    assert f"{base}/search/issues" in str(caught.value)


async def test_wrong_base_hints_at_enterprise_path(fake: FakeGitHub, tmp_path: Path) -> None:
    async with GitHubIssues(make_settings(tmp_path, fake.url + "/api")) as gh:
        with pytest.raises(RemoteError, match="HTTP 404.*end in /api/v3"):
            await gh.search(IssueQuery("decode", repo="michalmuskala/jason"))


async def test_unexpected_bodies(fake: FakeGitHub, github: GitHubIssues) -> None:
    fake.fail_next(Fault(200, "<html>captive portal</html>"))
    with pytest.raises(RemoteError, match="answered 200 without a list of items"):
        await github.search(IssueQuery("decode", repo="michalmuskala/jason"))
    good = {
        "number": 1,
        "title": "t",
        "state": "open",
        "html_url": "https://github.com/a/b/issues/1",
    }
    fake.fail_next(Fault(200, {"total_count": 2, "items": [{"title": "no number"}, good]}))
    hits = await github.search(IssueQuery("decode", repo="michalmuskala/jason"))
    assert [(h.repo, h.number, h.is_pr, h.labels) for h in hits] == [("a/b", 1, False, ())]


async def test_both_types_when_github_requires_a_type_qualifier(tmp_path: Path) -> None:
    async with FakeGitHub(require_type_qualifier=True) as fake:
        async with GitHubIssues(make_settings(tmp_path, fake.url)) as gh:
            hits = await gh.search(IssueQuery("transport", repo="zoedsoupe/anubis-mcp"))
            again = await gh.search(IssueQuery("encode", repo="michalmuskala/jason", limit=1))
            # With a type given there is nothing to split: GitHub's complaint surfaces.
            fake.fail_next(Fault(422, {"message": TYPE_REQUIRED}))
            with pytest.raises(UserInputError, match="is:pull-request"):
                await gh.search(IssueQuery("x", repo="a/b", type="pr"))
    assert {(h.number, h.is_pr) for h in hits} == {(45, False), (52, True)}
    assert [h.number for h in again] == [140]  # the PR outscores issue 151; cut to the limit
    qs = [r.q for r in fake.requests]
    assert qs[:3] == [
        "transport repo:zoedsoupe/anubis-mcp",
        "transport repo:zoedsoupe/anubis-mcp is:issue",
        "transport repo:zoedsoupe/anubis-mcp is:pr",
    ]
    # Learned once: the next "both types" search goes straight to two queries.
    assert sorted(qs[3:5]) == [
        "encode repo:michalmuskala/jason is:issue",
        "encode repo:michalmuskala/jason is:pr",
    ]


@pytest.mark.parametrize(
    "query",
    [
        IssueQuery("x"),
        IssueQuery("x", repo="not a repo"),
        IssueQuery("x", repo="a/b", type="bug"),
        IssueQuery("x", repo="a/b", state="merged"),
        IssueQuery("x", repo="a/b", limit=500),
    ],
)
async def test_validation_happens_before_any_request(
    fake: FakeGitHub, github: GitHubIssues, query: IssueQuery
) -> None:
    with pytest.raises(UserInputError):
        await github.search(query)
    assert fake.requests == []


async def test_token_never_leaks(
    fake: FakeGitHub,
    github_with_token: GitHubIssues,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    errors: list[BaseException] = []
    q = IssueQuery("decode", repo="michalmuskala/jason")

    await github_with_token.search(q)
    fake.rate_limit_403(reset_epoch=1_900_000_000)
    fake.reject_422(f"echoing the header: Bearer {TOKEN}")
    fake.fail_next(Fault(401, {"message": f"Bad credentials {TOKEN}"}))
    fake.fail_next(Fault(418, f"plain text with {TOKEN}"))
    fake.server_error(times=2)
    for expected in (RateLimited, UserInputError, RemoteError, RemoteError, RemoteError):
        with pytest.raises(expected) as caught:
            await github_with_token.search(q)
        errors.append(caught.value)
    fake.slow(5.0)
    timeout = make_settings(tmp_path, fake.url, GITHUB_TOKEN=TOKEN, HEXLOCAL_HTTP_TIMEOUT_S="0.1")
    async with GitHubIssues(timeout) as gh:
        with pytest.raises(RemoteError) as caught:
            await gh.search(q)
        errors.append(caught.value)

    assert len(fake.requests) == 8
    assert all(r.headers["Authorization"] == f"Bearer {TOKEN}" for r in fake.requests)
    assert "****" in str(errors[1])  # the echoed token was redacted, the rest kept
    for error in errors:
        chain: BaseException | None = error
        while chain is not None:
            assert TOKEN not in str(chain) and TOKEN not in repr(chain)
            chain = chain.__cause__ or chain.__context__
    for record in caplog.records:
        assert TOKEN not in record.getMessage()
    assert TOKEN not in caplog.text
    assert TOKEN not in repr(github_with_token)


async def test_close_is_idempotent_and_search_reopens(fake: FakeGitHub, tmp_path: Path) -> None:
    gh = GitHubIssues(make_settings(tmp_path, fake.url))
    await gh.aclose()  # never opened
    assert await gh.search(IssueQuery("decode", repo="michalmuskala/jason"))
    session = gh.http.session()
    assert await gh.search(IssueQuery("decode", repo="michalmuskala/jason"))
    assert gh.http.session() is session  # one session for every search
    await gh.aclose()
    assert session.closed and not gh.http.open
    assert await gh.search(IssueQuery("decode", repo="michalmuskala/jason"))
    await gh.aclose()
    await gh.aclose()


async def test_token_echo_cut_at_the_excerpt_boundary_is_scrubbed(
    fake: FakeGitHub, github_with_token: GitHubIssues
) -> None:
    q = IssueQuery("decode", repo="michalmuskala/jason")
    for pad in range(285, 300):
        fake.fail_next(Fault(400, {"message": "m" * pad + " " + TOKEN}))
        with pytest.raises(RemoteError) as caught:
            await github_with_token.search(q)
        for piece in (TOKEN[:8], TOKEN[4:12], TOKEN[-8:], TOKEN[: pad % 7 + 3]):
            assert piece not in str(caught.value), (pad, piece)
    fake.fail_next(Fault(400, '{"message": "bad ' + TOKEN.replace("_", "\\u005f") + '"}'))
    with pytest.raises(RemoteError) as escaped:
        await github_with_token.search(q)
    assert TOKEN[4:] not in str(escaped.value) and "****" in str(escaped.value)


async def test_credentials_in_the_url_are_masked(
    fake: FakeGitHub, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    host = fake.url.removeprefix("http://")
    base = f"http://ghuser:ghpass77@{host}?access_token=ghquery77"
    errors: list[BaseException] = []
    async with GitHubIssues(make_settings(tmp_path, base), retry=FAST) as gh:
        q = IssueQuery("decode", repo="michalmuskala/jason")
        assert await gh.search(q)
        for fault in (Fault(401, {"message": "ghpass77?"}), Fault(418, "ghquery77")):
            fake.fail_next(fault)
            with pytest.raises(RemoteError) as caught:
                await gh.search(q)
            errors.append(caught.value)
        fake.server_error(times=2)
        with pytest.raises(RemoteError) as failed:
            await gh.search(q)
        errors.append(failed.value)
        shown = repr(gh) + gh.search_url
    assert fake.requests[0].query["access_token"] == "ghquery77"  # the query is kept
    assert f"http://****@{host}/search/issues?access_token=****" in str(errors[-1])
    for text in [*map(str, errors), shown, caplog.text]:
        assert "ghpass77" not in text and "ghquery77" not in text, text
