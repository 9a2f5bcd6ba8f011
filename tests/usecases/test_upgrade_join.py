"""The pure parts of upgrade_impact, table by table: the join of changes with uses,
default arguments, the changed sentences, changelog slicing, requirement changes, the
source scan and the 80-column text."""

from __future__ import annotations

import pytest

from hexlocal_core.ingest.elixir_source import blank_literals, scan_source
from hexlocal_core.usecases.diff import ApiEntry, diff_entries
from hexlocal_core.usecases.upgrade_changelog import (
    between,
    changelog_versions,
    from_changelog,
    from_releases,
)
from hexlocal_core.usecases.upgrade_join import Site, Use, changed_sentences, covers, join
from hexlocal_core.usecases.upgrade_text import render


def api(
    group: str, name: str, *, sig: str | None = None, dep: str | None = None, doc: str = "d"
) -> ApiEntry:
    return ApiEntry(
        key=f"{group}.html#{name}",
        group=group,
        name=name,
        doc_type="callback" if name.startswith("c:") else "function",
        signature=sig,
        deprecated=dep,
        doc_hash=doc,
        hexdocs_url=f"https://hexdocs.pm/p/1/{group}.html#{name}",
    )


SITE = Site("lib/a.ex", 3, "A.f/0")


def use(module: str, name: str, arity: int, *, callback: bool = False) -> Use:
    return Use(module, name, arity, SITE, callback)


@pytest.mark.parametrize(
    ("arity", "signature", "called", "expected"),
    [
        (4, "cast(data, params, permitted, opts \\\\ [])", 3, True),
        (4, "cast(data, params, permitted, opts \\\\ [])", 4, True),
        (4, "cast(data, params, permitted, opts \\\\ [])", 2, False),
        (2, "f(a, b)", 1, False),
        (2, None, 2, True),
    ],
)
def test_default_arguments_widen_the_arity(
    arity: int, signature: str | None, called: int, expected: bool
) -> None:
    assert covers(arity, signature, called) is expected


OLD = [
    api("U", "generate/0", sig="generate()"),
    api("Q", "literal/1", sig="literal(binary)"),
    api("R", "c:transaction/2", sig="transaction(f, opts)"),
    api("D", "cast/1", sig="cast(integer)"),
    api("D", "cmp/2", sig="cmp(a, b)", dep="Use compare/2.", doc="old"),
    api("Gone", "Gone"),
    api("Gone", "f/1"),
]
NEW = [
    api("U", "generate/1", sig="generate(opts \\\\ [])"),
    api("R", "c:transaction/2", sig="transaction(f, opts)", dep="Use transact/2.", doc="x"),
    api("D", "cast/1", sig="cast(term)"),
    api("D", "cmp/2", sig="cmp(a, b)", dep="Use compare/2.", doc="new"),
]
CHANGES = diff_entries(OLD, NEW)


@pytest.mark.parametrize(
    ("uses", "affected", "not_affected"),
    [
        ([], [], []),  # nothing used: nothing listed, whatever the diff holds
        ([use("U", "generate", 0)], [], ["U.generate/0"]),  # generate/1 has a default
        ([use("Q", "literal", 1)], [("Q.literal/1", "removed")], []),
        ([use("R", "transaction", 2, callback=True)], [("c:R.transaction/2", "deprecated")], []),
        ([use("R", "transaction", 2)], [], []),  # a function named so is not the callback
        ([use("D", "cast", 1)], [("D.cast/1", "signature_changed")], []),
        ([use("D", "cmp", 2)], [("D.cmp/2", "deprecated")], []),
        ([use("Gone", "f", 1)], [("Gone", "removed")], []),
        ([use("D", "cast", 2)], [], []),  # another arity: not this entry
    ],
)
def test_join(uses: list[Use], affected: list[tuple[str, str]], not_affected: list[str]) -> None:
    found, spared = join(CHANGES, OLD, NEW, uses, from_version="1.0.0")
    assert [(a.identifier, str(a.change)) for a in found] == affected
    assert [n.identifier for n in spared] == not_affected
    assert all(a.call_sites == (SITE,) for a in found)


def test_a_deprecation_already_there_says_so() -> None:
    (cmp,) = join(CHANGES, OLD, NEW, [use("D", "cmp", 2)], from_version="1.0.0")[0]
    assert cmp.detail == "Use compare/2. (already deprecated in 1.0.0)"


def test_the_worst_change_comes_first() -> None:
    uses = [use("D", "cast", 1), use("Q", "literal", 1), use("D", "cmp", 2)]
    found, _ = join(CHANGES, OLD, NEW, uses)
    assert [str(a.change) for a in found] == ["removed", "deprecated", "signature_changed"]


def test_changed_sentences_skip_code_and_quote_briefly() -> None:
    old = "Casts params.\n\n    iex> cast(1)\n\nEmpty values are replaced."
    new = "Casts params.\n\n    iex> cast(2)\n\nTrims first. " + "Long " * 60 + "end."
    text = changed_sentences(old, new).split("\n")
    assert text[0] == "+ Trims first."
    assert text[1].startswith("+ Long") and text[1].endswith("…") and len(text[1]) <= 162
    assert text[2] == "- Empty values are replaced."
    assert changed_sentences("A b.", "A  b.") == "the docs changed (wording or examples)"


SECTIONS = [
    ("v1.3.0 (2026-01-02) - Changelog", ""),
    ("Enhancements - Changelog", "* [Other] x\n  * [Mod.A] Require dep v3\n    wrapped"),
    ("v1.2.0 - Changelog", "* [Mod.B] y"),
    ("1.1.0 (01.01.2020) - Changelog", "* z"),
]


def test_changelog_between_two_versions_names_used_modules_first() -> None:
    versions = changelog_versions(SECTIONS)
    picked = between(versions, "1.1.0", "1.3.0", ["Mod.A"])
    assert [(v.version, v.lines) for v in picked] == [
        ("1.3.0", ("[Mod.A] Require dep v3 wrapped", "[Other] x")),
        ("1.2.0", ("[Mod.B] y",)),
    ]
    (req,) = from_changelog(picked, {"dep": "2.3.0", "other": "1.0.0"}, "pkg")
    assert (req.package, req.requirement, req.locked, req.satisfied) == (
        "dep",
        ">= 3.0.0",
        "2.3.0",
        False,
    )
    assert from_changelog(picked, {"other": "1.0.0"}, "pkg") == []  # dep is not locked


def test_release_requirements_that_change() -> None:
    found = from_releases(
        {"dep": "~> 2.0", "same": "~> 1.0"}, {"dep": "~> 3.0", "same": "~> 1.0"}, {"dep": "2.3.0"}
    )
    assert [(r.package, r.previous, r.requirement, r.satisfied) for r in found] == [
        ("dep", "~> 2.0", "~> 3.0", False)
    ]
    # Without the old release's data: only what the lock's pin fails.
    unmet = from_releases(None, {"dep": "~> 3.0", "ok": "~> 1.0"}, {"dep": "2.3.0", "ok": "1.2.0"})
    assert [r.package for r in unmet] == ["dep"]


SOURCE = """defmodule Shop.Q do
  import Ecto.Query
  alias Ecto.{Changeset, UUID}
  alias Shop.Repo, as: R
  @doc "Changeset.cast(not, a, call)"
  def q(x) do
    # UUID.generate()
    from u in "users", where: u.id == ^x, select: u
    x |> Changeset.cast(%{}, [:a])
    R.transaction(fn -> :ok end)
    Enum.map([1], &UUID.cast/1)
  end
end
"""


def test_the_source_scan_resolves_aliases_imports_and_arity() -> None:
    behaviours: dict[str, tuple[str, ...]] = {}
    calls = scan_source(SOURCE, "lib/q.ex", {"Ecto.Query": {"from"}}, behaviours)
    assert [(c.module, c.function, c.arity, c.line) for c in calls] == [
        ("Ecto.Query", "from", 2, 8),
        ("Ecto.Changeset", "cast", 3, 9),  # piped: one more
        ("Shop.Repo", "transaction", 1, 10),
        ("Enum", "map", 2, 11),
        ("Ecto.UUID", "cast", 1, 11),
    ]
    assert {c.in_module for c in calls} == {"Shop.Q"} and calls[0].caller == "q"


def test_blanking_literals_keeps_lines_and_columns() -> None:
    text = 'a = "x.y(1)" # b.c()\nd = ~r/e.f(/\ng("""\nh.i()\n""")'
    blank = blank_literals(text)
    assert len(blank) == len(text) and blank.count("\n") == text.count("\n")
    assert "x.y" not in blank and "b.c" not in blank and "e.f" not in blank
    assert "h.i" not in blank and blank.startswith("a = ")


def test_the_text_fits_80_columns_and_leads_with_breaks() -> None:
    long = "word " * 40
    report = {
        "package": "p",
        "from": "1.0.0",
        "to": "2.0.0",
        "from_source": "mix.lock",
        "to_source": "hex latest stable",
        "affected": [
            {
                "identifier": "M.dep/1",
                "change": "deprecated",
                "detail": long,
                "call_sites": [{"file": "lib/" + "x" * 90 + ".ex", "line": 1, "caller": "A.b/0"}],
            },
            {"identifier": "M.gone/1", "change": "removed", "detail": "removed", "call_sites": []},
        ],  # fmt: skip
        "not_affected": [],
        "changelog": [{"version": "2.0.0", "lines": [long] * 9, "omitted": 2}],
        "requirements": [],
        "notices": [{"code": "c", "message": long}],
        "diff": {"removed": 1, "added": 0},
        "call_sites": {"beams": 1, "source": 0},
    }
    lines = render(report).splitlines()
    assert lines[0] == "p 1.0.0 -> 2.0.0: 1 break, 2 used entries changed"
    assert all(len(line) <= 80 for line in lines)
    assert lines.index("BREAKS: removed (the call will fail)") < lines.index("DEPRECATED")
    assert "    (5 more)" in lines  # 9 lines, 6 shown, 2 omitted from the data
