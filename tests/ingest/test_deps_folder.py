"""A dependency in the project's deps/: hits carry the local file and line, and the usage
rules the package ships are indexed with it and lead a how-should-I-use answer.

The fake hex serves jason 1.4.4's real tarball; deps/jason is laid out as `mix deps.get`
leaves it (hex_metadata.config, lib/jason.ex), with a usage-rules.md written here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hexlocal_core.ingest.deps_folder import (
    dep_version,
    deps_dir,
    local_source,
    usage_rule_items,
)
from hexlocal_core.model import SourceKind
from hexlocal_core.search.query_shape import asks_how_to_use
from hexlocal_core.service import Hexlocal, build
from tests.fakes.fake_hex import FakeHex, client_for, settings_for
from tests.support.helpers import HashingEmbedder, project_root

RULES = """# Rules for working with Jason

Decode untrusted input with `keys: :strings` (the default); never use `keys: :atoms` on
user-supplied JSON, since atoms are never garbage collected.

## Encoding structs

Derive `Jason.Encoder` with `only:` so that secret fields never leak into a response.
"""
METADATA = '{<<"app">>,<<"jason">>}.\n{<<"name">>,<<"jason">>}.\n{<<"version">>,<<"{v}">>}.\n'


def lay_out_dep(root: Path, version: str, *, rules: bool = True) -> Path:
    dep = root / "deps" / "jason"
    (dep / "lib").mkdir(parents=True)
    (dep / "hex_metadata.config").write_text(METADATA.replace("{v}", version))
    (dep / "lib" / "jason.ex").write_text("defmodule Jason do\n" + "\n" * 60 + "end\n")
    if rules:
        (dep / "usage-rules.md").write_text(RULES)
        (dep / "usage-rules").mkdir()
        (dep / "usage-rules" / "encoding.md").write_text("Prefer `Jason.encode_to_iodata!/2`.\n")
    return dep


def make(fake: FakeHex, tmp_path: Path, pinned: str = "1.4.4") -> Hexlocal:
    settings = settings_for(fake, tmp_path, ai_rerank_model="off", sync_on_start=False)
    root = settings.project_root
    (root / "mix.exs").write_text("defmodule App.MixProject do\nend\n")
    (root / "mix.lock").write_text(
        '%{\n  "jason": {:hex, :jason, "' + pinned + '", "abc", [:mix], [], "hexpm", "d"},\n}\n'
    )
    return build(
        settings,
        embedder=HashingEmbedder(),
        reranker=None,
        registry=client_for(settings),
        load_models=False,
    )


@pytest.fixture
async def svc(fake_hex: FakeHex, tmp_path: Path) -> AsyncIterator[Hexlocal]:
    service = make(fake_hex, tmp_path)
    lay_out_dep(project_root(service), "1.4.4")
    yield service
    await service.aclose()


async def test_a_hit_names_the_local_file_and_line_of_its_source_link(svc: Hexlocal) -> None:
    result = await svc.get_docs("jason", "Jason.decode/2")
    hit = result.hits[0]
    assert hit.source_url and "/blob/v1.4.4/lib/jason.ex#L" in hit.source_url
    line = hit.source_url.rsplit("#L", 1)[1]
    assert hit.local_source == f"deps/jason/lib/jason.ex:{line}"
    assert "local: deps/jason/lib/jason.ex" in _text(result)


async def test_no_local_file_for_another_version_or_a_missing_file(
    fake_hex: FakeHex, tmp_path: Path
) -> None:
    service = make(fake_hex, tmp_path)
    try:
        dep = lay_out_dep(project_root(service), "1.4.5")  # deps/ lags the lock
        result = await service.get_docs("jason", "Jason.decode/2")
        assert result.hits and result.hits[0].local_source is None
        (dep / "hex_metadata.config").write_text(METADATA.replace("{v}", "1.4.4"))
        (dep / "lib" / "jason.ex").unlink()
        result = await service.get_docs("jason", "Jason.decode/2")
        assert result.hits[0].local_source is None
    finally:
        await service.aclose()


async def test_usage_rules_are_indexed_with_the_package_and_lead_how_to_use_questions(
    svc: Hexlocal,
) -> None:
    # BM25 alone ranks the decode/2 docs first here; the question asks for the rules.
    result = await svc.search_docs("jason", "how should I use the decoder", mode="fts")
    first = result.hits[0]
    assert first.source == SourceKind.USAGE_RULES.value
    assert first.ref == "usage-rules.md"
    assert first.local_source == "deps/jason/usage-rules.md"
    assert "(usage rules, v1.4.4)" in _text(result)
    # A plain question is ranked as before: the rules do not push in.
    plain = await svc.search_docs("jason", "decode a JSON string into a map", mode="fts")
    assert plain.hits and plain.hits[0].source != SourceKind.USAGE_RULES.value
    sub = await svc.search_docs("jason", "common mistakes when decoding", mode="fts")
    assert [h.source for h in sub.hits[:1]] == [SourceKind.USAGE_RULES.value]


async def test_usage_rules_of_another_version_are_not_indexed(
    fake_hex: FakeHex, tmp_path: Path
) -> None:
    service = make(fake_hex, tmp_path)
    try:
        lay_out_dep(project_root(service), "1.2.2")
        result = await service.search_docs("jason", "best practices for jason", mode="fts")
        assert all(h.source != SourceKind.USAGE_RULES.value for h in result.hits)
    finally:
        await service.aclose()


def _text(result: object) -> str:
    from hexlocal_mcp import formatting

    return formatting.search_result(result.to_dict())  # type: ignore[attr-defined]


# -- the pure parts -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://github.com/o/jason/blob/v1.4.4/lib/jason.ex#L54", "lib/jason.ex:54"),
        ("https://gitlab.com/o/jason/-/blob/v1.4.4/lib/jason.ex#L7-L9", "lib/jason.ex:7"),
        ("https://codeberg.org/o/jason/src/tag/v1.4.4/lib/jason.ex#L3", "lib/jason.ex:3"),
        ("https://github.com/o/jason/blob/v1.4.4/lib/jason.ex", "lib/jason.ex"),
        ("https://github.com/o/jason/blob/v1.4.4/lib/missing.ex#L1", None),
        ("https://github.com/o/jason/blob/v1.4.4/../../etc/passwd", None),
        ("https://github.com/o/jason/blob/v1.4.4/lib", None),  # a folder is no source
        (None, None),
        ("not a url at all", None),
    ],
)
def test_local_source_takes_the_longest_tail_that_is_a_file(
    tmp_path: Path, url: str | None, expected: str | None
) -> None:
    dep = lay_out_dep(tmp_path, "1.4.4")
    assert local_source(url, dep) == expected


def test_a_link_out_of_the_dependency_folder_is_not_its_file(tmp_path: Path) -> None:
    dep = lay_out_dep(tmp_path, "1.4.4")
    (tmp_path / "secret.ex").write_text("x")
    (dep / "lib" / "evil.ex").symlink_to(tmp_path / "secret.ex")
    assert local_source("https://github.com/o/j/blob/v1/lib/evil.ex#L1", dep) is None
    (dep / "usage-rules.md").unlink()
    (dep / "usage-rules.md").symlink_to(tmp_path / "secret.ex")
    refs = [i.ref for i in usage_rule_items(dep, "jason", "1.4.4")]
    assert refs == ["usage-rules/encoding.md"]


def test_dep_version_and_deps_dir(tmp_path: Path) -> None:
    dep = lay_out_dep(tmp_path, "1.4.4")
    assert dep_version(dep) == "1.4.4"
    (dep / "hex_metadata.config").write_text("garbage")
    assert dep_version(dep) is None
    assert deps_dir(tmp_path) is None  # no mix.exs and no lock: not a Mix project
    (tmp_path / "mix.exs").write_text("")
    assert deps_dir(tmp_path) == tmp_path / "deps"
    child = tmp_path / "apps" / "web"
    child.mkdir(parents=True)
    (child / "mix.exs").write_text("")
    (tmp_path / "mix.lock").write_text("%{}\n")
    assert deps_dir(child) == tmp_path / "deps"  # an umbrella keeps deps/ at its root


def test_usage_rule_items_are_marked_and_titled(tmp_path: Path) -> None:
    dep = lay_out_dep(tmp_path, "1.4.4")
    items = usage_rule_items(dep, "jason", "1.4.4")
    assert [(i.ref, i.title) for i in items] == [
        ("usage-rules.md", "Rules for working with Jason"),
        ("usage-rules/encoding.md", "jason usage rules: encoding"),
    ]
    assert {i.source for i in items} == {SourceKind.USAGE_RULES}
    assert items[0].markdown == RULES  # byte-identical, as every item's text


@pytest.mark.parametrize(
    ("query", "asks"),
    [
        ("how should I use Ecto.Multi", True),
        ("what are the best practices for changesets", True),
        ("idiomatic way to structure contexts", True),
        ("common mistakes with preload", True),
        ("decode a JSON string", False),
        ("Ecto.Changeset.cast/4", False),
        ("** (ArgumentError) how should I use this", False),
    ],
)
def test_how_to_use_questions(query: str, asks: bool) -> None:
    assert asks_how_to_use(query) is asks
