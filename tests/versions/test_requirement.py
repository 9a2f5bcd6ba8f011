"""Version requirements from mix.exs (`~> 1.4`) as the version asked for: Elixir's
grammar, matched against the lock's pin first, then against hex.pm's real release list
(the fake serves the corpus's jason.json: 1.4.5 stable, 1.5.0-alpha.2 newest)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hexlocal_core.adapters.hex import HexClient
from hexlocal_core.errors import UserInputError, VersionNotFound
from hexlocal_core.model import VersionSource
from hexlocal_core.versions import resolve_version
from hexlocal_core.versions.requirement import best_match, parse_requirement
from hexlocal_core.versions.semver import parse_version
from tests.support.projects import NoRegistry, jason_lock

RELEASES = ["2.0.0", "2.0.0-rc.1", "1.5.0-alpha.2", "1.4.5", "1.4.4", "1.4.0", "1.2.2"]


@pytest.mark.parametrize(
    ("text", "chosen"),
    [
        ("~> 1.4", "1.4.5"),  # below 2.0.0; the stable release over 1.5.0-alpha.2
        ("~> 1.4.0", "1.4.5"),  # below 1.5.0
        ("~> 1.2.0", "1.2.2"),
        ("~>1.4", "1.4.5"),
        (">= 1.4.0 and < 1.4.5", "1.4.4"),
        ("== 1.2.2", "1.2.2"),
        ("~> 1.2.0 or ~> 1.4.0", "1.4.5"),
        ("~> 1.5.0-alpha.1", "1.5.0-alpha.2"),  # naming a pre-release lets pre-releases in
        ("~> 2.0", "2.0.0"),
        ("> 2.0.0", None),
        ("!= 2.0.0 and >= 2.0.0-rc.1", "2.0.0-rc.1"),  # only a pre-release matches
    ],
)
def test_requirements_choose_the_newest_release_they_allow(text: str, chosen: str | None) -> None:
    requirement = parse_requirement(text)
    assert requirement is not None
    assert best_match(requirement, RELEASES) == chosen


def test_the_ceiling_of_a_pessimistic_requirement_keeps_its_pre_releases_out() -> None:
    requirement = parse_requirement("~> 1.4")
    assert requirement is not None
    assert not requirement.matches(parse_version("2.0.0-rc.1"))
    assert requirement.matches(parse_version("1.9.9"))


@pytest.mark.parametrize(
    "text", ["1.4.4", "latest", "", "~> 1", "~> banana", "jason", "1.4 and 1.5", "~> 1.4 and"]
)
def test_what_is_not_a_requirement(text: str) -> None:
    assert parse_requirement(text) is None


_PIECES = st.sampled_from(
    ["~>", ">=", "<", "==", "!=", "and", "or", "1.4", "1.4.5", "2.0.0-rc.1", "x", "9" * 40, "1.2+b"]
)


@given(st.one_of(st.text(max_size=300), st.lists(_PIECES, max_size=20).map(" ".join)))
def test_any_text_is_a_requirement_or_none_never_an_error(text: str) -> None:
    requirement = parse_requirement(text)
    if requirement is not None:
        chosen = best_match(requirement, RELEASES)
        assert chosen is None or requirement.matches(parse_version(chosen))


def test_a_malformed_requirement_is_told_what_one_looks_like() -> None:
    with pytest.raises(UserInputError, match="nor a requirement .*'~> 1.4'"):
        parse_version("~> banana")


async def test_the_locks_pin_wins_when_it_meets_the_requirement(tmp_path: Path) -> None:
    jason_lock(tmp_path, "1.4.4")
    resolved = await resolve_version(
        "jason", "~> 1.4", project_root=tmp_path, registry=NoRegistry()
    )
    assert (resolved.version, resolved.source) == ("1.4.4", VersionSource.MIX_LOCK)
    assert [n.code for n in resolved.notices] == ["requirement_matched"]
    assert "mix.lock's pin" in resolved.notices[0].message


async def test_else_the_newest_release_hex_lists_that_meets_it(
    tmp_path: Path, hex_client: HexClient
) -> None:
    jason_lock(tmp_path, "1.4.4")  # the lock does not meet it: hex.pm's list decides
    resolved = await resolve_version(
        "jason", "~> 1.2.0", project_root=tmp_path, registry=hex_client
    )
    assert (resolved.version, resolved.source) == ("1.2.2", VersionSource.EXPLICIT)
    assert "the newest such release" in resolved.notices[0].message


async def test_a_requirement_nothing_meets_names_the_newest(
    tmp_path: Path, hex_client: HexClient
) -> None:
    with pytest.raises(VersionNotFound, match=r"meets '> 9\.0\.0'; the newest: 1\.5\.0-alpha\.2"):
        await resolve_version("jason", "> 9.0.0", project_root=tmp_path, registry=hex_client)


async def test_without_hex_a_requirement_asks_for_an_exact_version(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="pass an exact version of jason"):
        await resolve_version("jason", "~> 1.4", project_root=tmp_path, registry=None)
