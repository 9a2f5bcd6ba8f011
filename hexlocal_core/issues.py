"""Live issue search, the pure part: checking an `IssueQuery` and turning it into GitHub's `q`.

The service calls `validate_issue_query` before any network, so a wrong argument costs no
request (unauthenticated search allows only 10 a minute). The adapter
(`adapters/github.py`) calls it again, so the port is safe to use on its own.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import urlparse

from attrs import evolve

from hexlocal_core.errors import UserInputError
from hexlocal_core.model import IssueQuery

MAX_LIMIT = 50
ISSUE_TYPES = ("issue", "pr")
ISSUE_STATES = ("open", "closed")
EXCERPT_CHARS = 400

# GitHub's own rules: a login is letters, digits and single hyphens (at most 39 characters,
# not starting with a hyphen); a repository name is letters, digits, '.', '-' and '_'.
_LOGIN = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})"
_LOGIN_RE = re.compile(rf"^{_LOGIN}$")
_REPO_RE = re.compile(rf"^{_LOGIN}/(?!\.\.?$)[A-Za-z0-9._-]{{1,100}}$")
_WHITESPACE = re.compile(r"\s+")

_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)  # also an unclosed template comment
_MD_IMAGE = re.compile(r"!\[[^\]]*\](?:\([^)]*\)|\[[^\]]*\])")
_HTML_IMAGE = re.compile(r"<img\b[^>]*>", re.IGNORECASE)


def validate_issue_query(q: IssueQuery) -> IssueQuery:
    """Check a query and return it normalised (trimmed, lower-cased choices, '' as None).

    Raises UserInputError naming the bad argument and what is expected.
    """
    repo = _blank_to_none(q.repo)
    org = _blank_to_none(q.org)
    kind = _choice("type", q.type, ISSUE_TYPES, "'issue', 'pr', or nothing for both")
    state = _choice("state", q.state, ISSUE_STATES, "'open', 'closed', or nothing for both")
    _check_scope(repo, org)
    _check_limit(q.limit)
    return evolve(q, text=_collapse(q.text), repo=repo, org=org, type=kind, state=state)


def build_search_q(q: IssueQuery) -> str:
    """GitHub's `q`: the free text, then the scope, type and state qualifiers.

    With no type both issues and PRs match; with no state both open and closed match.
    """
    parts = [_collapse(q.text)]
    if q.repo:
        parts.append(f"repo:{q.repo}")
    if q.org:
        parts.append(f"org:{q.org}")
    if q.type:
        parts.append(f"is:{q.type}")
    if q.state:
        parts.append(f"state:{q.state}")
    return " ".join(p for p in parts if p)


def search_params(q: IssueQuery) -> dict[str, str]:
    """The query string of `GET /search/issues` for a validated query.

    Free text is ranked by GitHub's best match (its default when `sort` is absent); without
    text there is nothing to rank by, so the most recently updated come first.
    """
    params = {"q": build_search_q(q), "per_page": str(q.limit)}
    if not _collapse(q.text):
        params.update(sort="updated", order="desc")
    return params


def make_excerpt(body: str | None, limit: int = EXCERPT_CHARS) -> str:
    """A bounded plain excerpt of an issue body: no images, no template comments, one line."""
    if not body:
        return ""
    text = _HTML_COMMENT.sub(" ", body)
    text = _MD_IMAGE.sub(" ", text)
    text = _HTML_IMAGE.sub(" ", text)
    text = _collapse(text)
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    # End on a word boundary unless that would throw away most of the excerpt.
    if space >= limit * 0.6:
        cut = cut[:space]
    return cut.rstrip() + "…"


def _collapse(text: str | None) -> str:
    return _WHITESPACE.sub(" ", text or "").strip()


def _blank_to_none(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    return value or None


def _choice(name: str, value: str | None, allowed: tuple[str, ...], expected: str) -> str | None:
    normalised = _blank_to_none(value)
    if normalised is None:
        return None
    if normalised.lower() not in allowed:
        raise UserInputError(f"{name}={value!r} is not valid; expected {expected}.")
    return normalised.lower()


def _check_scope(repo: str | None, org: str | None) -> None:
    if repo is None and org is None:
        raise UserInputError(
            "Give a repository (repo='owner/name', e.g. 'elixir-ecto/ecto') or an "
            "organisation (org='elixir-ecto') to search; all of GitHub is not searched."
        )
    if repo is not None and not _REPO_RE.match(repo):
        raise UserInputError(
            f"repo={repo!r} is not a GitHub repository; expected 'owner/name', "
            "e.g. 'elixir-ecto/ecto'."
        )
    if org is not None and not _LOGIN_RE.match(org):
        raise UserInputError(
            f"org={org!r} is not a GitHub organisation or user name; expected letters, "
            "digits and hyphens, e.g. 'elixir-ecto'."
        )
    # Both together can only narrow to nothing when they disagree: say so instead of
    # answering with an empty list that looks like "no issues".
    if repo is not None and org is not None and repo.split("/")[0].lower() != org.lower():
        raise UserInputError(
            f"repo={repo!r} is not in org={org!r}; give one of them, or a repo of that org."
        )


def _check_limit(limit: object) -> None:
    # bool is an int subclass; `limit=True` is a caller bug, not 1.
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise UserInputError(
            f"limit={limit!r} is out of range; expected a whole number from 1 to {MAX_LIMIT}."
        )


# Link labels packages use for their source repository, most telling first.
_SOURCE_LABELS = ("github", "source", "source code", "repository", "repo", "code")
_GITHUB_HOSTS = ("github.com", "www.github.com")
_NOT_OWNERS = frozenset(
    {"sponsors", "orgs", "settings", "marketplace", "features", "topics", "apps"}
)
_OWNER = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$")
_REPO_NAME = re.compile(r"^[A-Za-z0-9._-]{1,100}$")


def repo_from_links(links: Mapping[str, str]) -> str | None:
    """'owner/name' of the GitHub repository among a package's links, or None.

    Links labelled like a source link are tried first, then any other GitHub link.
    """
    ranked = sorted(
        links.items(),
        key=lambda kv: (
            _SOURCE_LABELS.index(kv[0].strip().lower())
            if kv[0].strip().lower() in _SOURCE_LABELS
            else len(_SOURCE_LABELS)
        ),
    )
    for _, url in ranked:
        repo = _github_repo(url) if isinstance(url, str) else None
        if repo is not None:
            return repo
    return None


def _github_repo(url: str) -> str | None:
    text = url.strip()
    ssh = re.match(r"^git@github\.com:(.+)$", text)
    if ssh:
        path = ssh.group(1)
    else:
        parsed = urlparse(text if "://" in text else f"https://{text}")
        if parsed.scheme not in ("http", "https", "git") or parsed.hostname not in _GITHUB_HOSTS:
            return None
        path = parsed.path
    parts = [p for p in path.split("/") if p]
    if len(parts) < 2:
        return None
    owner, repo = parts[0], parts[1].removesuffix(".git")
    if owner.lower() in _NOT_OWNERS or not _OWNER.match(owner) or not _REPO_NAME.match(repo):
        return None
    return f"{owner}/{repo}"
