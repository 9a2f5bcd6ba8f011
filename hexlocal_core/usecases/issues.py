"""search_github_issues: live issue and PR search, scoped by repo, org or Hex package."""

from __future__ import annotations

from hexlocal_core.bounds import check_query
from hexlocal_core.errors import NotFound, RemoteError
from hexlocal_core.issues import repo_from_links, validate_issue_query
from hexlocal_core.model import IssueHit, IssueQuery
from hexlocal_core.ports import HexRegistry, IssueTracker
from hexlocal_core.screening import screen_issues
from hexlocal_core.untrusted import clip
from hexlocal_core.versions import validate_package_name


async def search_github_issues(
    registry: HexRegistry,
    tracker: IssueTracker | None,
    query: str,
    *,
    package: str | None,
    repo: str | None,
    org: str | None,
    type: str | None,
    state: str | None,
    limit: int,
) -> list[IssueHit]:
    """The query is checked before any request (unauthenticated search allows 10 a minute)."""

    query = check_query(query)
    if package and not (repo or org):
        name = validate_package_name(package)
        info = await registry.package_info(name)
        repo = repo_from_links(info.links)
        if repo is None:
            links = clip(str(dict(info.links)))
            raise NotFound(
                f"hex.pm lists no GitHub repository for {name} (links: {links}); "
                "pass repo='owner/name' instead"
            )
    q = validate_issue_query(
        IssueQuery(query, repo=repo, org=org, type=type, state=state, limit=limit)
    )
    if tracker is None:
        raise RemoteError("GitHub issue search is not configured")
    return screen_issues(await tracker.search(q))
