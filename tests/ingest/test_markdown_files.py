"""The project's own markdown: defaults, exact text, titles, skips."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexlocal_core.ingest.markdown_files import (
    MAX_FILE_BYTES,
    collect_markdown,
    first_heading,
    scan_markdown,
)
from hexlocal_core.model import DocType, SourceKind


def write(root: Path, rel: str, content: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_bytes(content.encode())
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write(tmp_path, "README.md", "# My App\r\n\r\nHello.\r\n")
    write(tmp_path, "docs/intro.md", "Intro without a heading.\n")
    write(tmp_path, "guides/b/deep.livemd", "# Deep notebook\n\n```elixir\n1\n```\n")
    write(tmp_path, "guides/a.markdown", "# A guide\n")
    write(tmp_path, "guides/cheat.cheatmd", "# Cheats\n")
    write(tmp_path, "guides/image.png", b"\x89PNG")
    write(tmp_path, "guides/.hidden.md", "# Hidden file\n")
    write(tmp_path, "guides/.git/x.md", "# In a hidden folder\n")
    write(tmp_path, "guides/_build/x.md", "# Build output\n")
    write(tmp_path, "guides/deps/x.md", "# A dependency\n")
    write(tmp_path, "guides/node_modules/x.md", "# JS\n")
    write(tmp_path, "lib/not_default.md", "# Not read by default\n")
    return tmp_path


def test_defaults_read_readme_docs_and_guides(project: Path) -> None:
    items = collect_markdown(project, None)
    assert [(i.ref, i.title) for i in items] == [
        ("README.md", "My App"),
        ("docs/intro.md", "intro.md"),
        ("guides/a.markdown", "A guide"),
        ("guides/b/deep.livemd", "Deep notebook"),
        ("guides/cheat.cheatmd", "Cheats"),
    ]


def test_item_fields_and_exact_text(project: Path) -> None:
    readme = collect_markdown(project)[0]
    assert readme.markdown == "# My App\r\n\r\nHello.\r\n"  # CRLF kept byte for byte
    assert (readme.package, readme.version) == ("__project__", "local")
    assert readme.doc_type is DocType.EXTRAS
    assert readme.source is SourceKind.PROJECT
    assert readme.hexdocs_url == ""
    assert readme.source_url == (project.resolve() / "README.md").as_uri()
    assert readme.module is None and readme.function is None


def test_explicit_paths_files_and_folders(project: Path) -> None:
    items = collect_markdown(project, [Path("lib/not_default.md"), project / "docs"])
    assert [i.ref for i in items] == ["lib/not_default.md", "docs/intro.md"]


def test_duplicates_are_read_once(project: Path) -> None:
    items = collect_markdown(project, [Path("README.md"), Path("./README.md"), Path(".")])
    refs = [i.ref for i in items]
    assert refs.count("README.md") == 1
    assert "lib/not_default.md" in refs and "guides/_build/x.md" not in refs


def test_skips_are_counted(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    root = tmp_path / "project"
    write(outside, "secret.md", "# Secret\n")
    write(root, "docs/latin1.md", "caf\xe9".encode("latin-1"))
    write(root, "docs/big.md", b"#" * (MAX_FILE_BYTES + 1))
    write(root, "docs/exact.md", b"x" * MAX_FILE_BYTES)
    (root / "docs/link.md").symlink_to(outside / "secret.md")
    (root / "docs/linkdir").symlink_to(outside, target_is_directory=True)  # not followed
    result = scan_markdown(root, [Path("docs"), Path("../outside/secret.md")])
    assert [i.ref for i in result.items] == ["docs/exact.md"]
    assert result.skipped == {"not_utf8": 1, "too_large": 1, "outside_project": 2}


def test_missing_defaults_are_not_errors(tmp_path: Path) -> None:
    assert scan_markdown(tmp_path).items == ()
    assert scan_markdown(tmp_path).skipped == {}


def test_a_bom_is_kept(tmp_path: Path) -> None:
    write(tmp_path, "README.md", "\ufeff# Title\n")
    [item] = collect_markdown(tmp_path)
    assert item.markdown == "\ufeff# Title\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("# Title\n", "Title"),
        ("   #   Spaced   #\n", "Spaced"),
        ("Intro\n\n## Second level\n# First level\n", "First level"),
        ("```bash\n# a comment\n```\n# Real\n", "Real"),
        ("~~~~\n```\n# still code\n~~~~\n# After\n", "After"),
        ("```\n# unclosed fence\n", None),
        ("#NoSpace\n", None),
        ("    # indented code\n", None),
        ("#\n", None),
        ("", None),
    ],
)
def test_first_heading(text: str, expected: str | None) -> None:
    assert first_heading(text) == expected
