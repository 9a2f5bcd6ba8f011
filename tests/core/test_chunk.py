"""SectionChunker: structure-first cuts, exact reassembly, example detection."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hexlocal_core.chunk import CHUNKER_VERSION, SectionChunker
from hexlocal_core.ingest.hexdocs import parse_hexdocs
from hexlocal_core.ingest.tarball import read_docs_tarball
from hexlocal_core.model import Chunk, DocItem, DocType
from tests.support.paths import HEXDOCS


def _item(markdown: str) -> DocItem:
    return DocItem(
        package="pkg",
        version="1.0.0",
        ref="Mod.html#fun/1",
        title="Mod.fun/1",
        doc_type=DocType.FUNCTION,
        markdown=markdown,
    )


def _chunks(markdown: str, **options: int) -> list[Chunk]:
    return SectionChunker(**options).chunk(_item(markdown))


def _contents(markdown: str, **options: int) -> list[str]:
    return [c.content for c in _chunks(markdown, **options)]


def _para(word: str, chars: int) -> str:
    """One paragraph of about `chars` characters, wrapped at 80 columns."""
    words = " ".join([word] * (chars // (len(word) + 1)))
    lines, line = [], ""
    for w in words.split(" "):
        if len(line) + len(w) + 1 > 80:
            lines.append(line)
            line = w
        else:
            line = f"{line} {w}".strip()
    return "\n".join([*lines, line])


def test_version_is_an_int() -> None:
    assert isinstance(CHUNKER_VERSION, int) and CHUNKER_VERSION >= 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_chars": 0}, "max_chars"),
        ({"min_chars": -1}, "min_chars"),
        ({"max_code_chars": 0}, "max_code_chars"),
    ],
)
def test_bad_settings_are_refused(options: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SectionChunker(**options)


def test_limits_never_exceed_max_chars() -> None:
    chunker = SectionChunker(max_chars=100)
    assert (chunker.code_limit, chunker.merge_below) == (100, 100)


@pytest.mark.parametrize("markdown", ["", "   ", "\n\n", " \n\t\n"])
def test_blank_markdown_gives_no_chunks(markdown: str) -> None:
    assert _chunks(markdown) == []


# -- structure -------------------------------------------------------------------------

HEADING_CASES = [
    # (name, markdown, expected chunk starts)
    (
        "two large sections cut at the heading",
        f"## One\n\n{_para('alpha', 600)}\n\n## Two\n\n{_para('beta', 600)}\n",
        ["## One", "## Two"],
    ),
    (
        "small sections merge",
        "## One\n\nshort.\n\n## Two\n\nalso short.\n",
        ["## One"],
    ),
    (
        "intro then sections",
        f"{_para('intro', 500)}\n\n## Options\n\n{_para('opt', 500)}\n\n## Examples\n\n"
        f"```elixir\n{_para('x', 300)}\n```\n",
        ["intro", "## Options", "## Examples"],
    ),
    (
        "setext headings count",
        f"One\n===\n\n{_para('alpha', 600)}\n\nTwo\n---\n\n{_para('beta', 600)}\n",
        ["One\n===", "Two\n---"],
    ),
]


@pytest.mark.parametrize(
    ("name", "markdown", "starts"), HEADING_CASES, ids=[c[0] for c in HEADING_CASES]
)
def test_heading_splits(name: str, markdown: str, starts: list[str]) -> None:
    contents = _contents(markdown, max_chars=900, min_chars=250)
    assert "".join(contents) == markdown
    assert len(contents) == len(starts)
    for content, start in zip(contents, starts, strict=True):
        assert content.startswith(start)


def test_small_intro_joins_the_next_section() -> None:
    markdown = (
        f"Short intro.\n\n## Details\n\n{_para('detail', 400)}\n\n## More\n\n{_para('m', 700)}\n"
    )
    contents = _contents(markdown, max_chars=900, min_chars=250)
    assert contents[0].startswith("Short intro.") and "## Details" in contents[0]
    assert contents[1].startswith("## More")


def test_a_heading_is_not_left_at_the_end_of_a_chunk() -> None:
    markdown = f"{_para('a', 100)}\n\n## Next\n\n{_para('b', 850)}\n"
    contents = _contents(markdown, max_chars=900, min_chars=250)
    assert contents[0].startswith("a a") and "## Next" not in contents[0]
    assert contents[1].startswith("## Next")


LIST_CASES = [
    ("bullets", "- ", [f"- {_para('item' + str(i), 180)}\n" for i in range(10)]),
    ("ordered", "1. ", [f"{i + 1}. {_para('item', 180)}\n" for i in range(10)]),
    ("loose star list", "* ", [f"* {_para('thing', 250)}\n\n" for i in range(8)]),
]


@pytest.mark.parametrize(("name", "marker", "entries"), LIST_CASES, ids=[c[0] for c in LIST_CASES])
def test_long_lists_split_between_items(name: str, marker: str, entries: list[str]) -> None:
    markdown = "".join(entries)
    contents = _contents(markdown, max_chars=600, min_chars=100)
    assert "".join(contents) == markdown
    assert len(contents) > 1
    for content in contents:
        assert len(content) <= 600
        assert content.lstrip()[0] in "-*0123456789"  # every chunk starts at an item


def test_oversized_code_block_is_cut_on_line_ends() -> None:
    code = "\n".join(f"    value_{i} = compute(:input_{i}, opts)" for i in range(120))
    markdown = f"Example:\n\n```elixir\n{code}\n```\n"
    chunks = _chunks(markdown, max_chars=900, min_chars=100, max_code_chars=600)
    assert "".join(c.content for c in chunks) == markdown
    assert len(chunks) > 3
    for chunk in chunks:
        assert len(chunk.content) <= 600
        assert chunk.has_example
    for chunk in chunks[:-1]:
        assert chunk.content.endswith("\n")


def test_line_longer_than_the_limit_is_cut_at_whitespace_then_hard() -> None:
    long_prose = " ".join(["wordy"] * 400)  # one 2399-char line
    contents = _contents(long_prose, max_chars=500, min_chars=0)
    assert "".join(contents) == long_prose
    assert all(len(c) <= 500 for c in contents)
    assert all(c.endswith(" ") for c in contents[:-1])
    solid = "é" * 1234  # no whitespace at all: a hard cut, on characters not bytes
    contents = _contents(solid, max_chars=500, min_chars=0)
    assert [len(c) for c in contents] == [500, 500, 234]
    assert all(c.encode("utf-8").decode("utf-8") == c for c in contents)


@pytest.mark.parametrize(
    "markdown",
    [
        "line one\r\nline two\r\n\r\n## Head\r\n\r\nbody\r\n",
        "lone\rcarriage\rreturns\n\n## Head\n\ntext",
        "tabs\tand\u2028unicode separators\u2029 and emoji 🧪🧪\n\n- a\n- b",
        "no trailing newline",
        "\n\n\nleading blank lines\n\n## h\n\ntrailing\n\n\n",
    ],
)
def test_odd_text_reassembles_exactly(markdown: str) -> None:
    for max_chars in (20, 50, 900):
        contents = _contents(markdown, max_chars=max_chars, min_chars=0)
        assert "".join(contents) == markdown
        assert all(contents)


# -- has_example -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("```elixir\nEnum.map([1], & &1)\n```", True),
        ("~~~\nplain fence\n~~~", True),
        ("Text.\n\n    indented_code()\n", True),
        ("iex> 1 + 1\n2", True),
        ("Run `iex(1)> h Enum` in the shell.", True),
        ("Just prose with `inline_code/1`.", False),
        ("```elixir\n@spec fun(term()) :: :ok\n```", False),  # a spec is not an example
        ("```erlang\n-type id() :: term().\n```", False),
        ("- a list\n- of things", False),
    ],
)
def test_has_example(markdown: str, expected: bool) -> None:
    chunks = _chunks(markdown)
    assert len(chunks) == 1
    assert chunks[0].has_example is expected


def test_has_example_is_per_chunk() -> None:
    markdown = (
        f"## Prose\n\n{_para('words', 800)}\n\n## Code\n\n```elixir\n{_para('x', 500)}\n```\n"
    )
    chunks = _chunks(markdown, max_chars=900, min_chars=250)
    assert [c.has_example for c in chunks] == [False, True]
    assert [c.ordinal for c in chunks] == [0, 1]


# -- real corpus -----------------------------------------------------------------------

REAL = ["jason-1.4.4", "jason-1.4.5", "jason-1.2.2", "mime-1.3.1", "telemetry-1.2.1", "plug-1.19.2"]


@cache
def _real_items(name: str) -> tuple[DocItem, ...]:
    package, version = name.split("-", 1)
    files = read_docs_tarball((HEXDOCS / f"{name}.tar.gz").read_bytes(), max_bytes=200 << 20)
    return parse_hexdocs(files, package=package, version=version).items


@pytest.mark.parametrize("name", REAL)
def test_chunks_of_real_items_reassemble_exactly(corpus: Path, name: str) -> None:
    chunker = SectionChunker()
    total = 0
    for item in _real_items(name):
        chunks = chunker.chunk(item)
        total += len(chunks)
        if not item.markdown.strip():
            assert chunks == []
            continue
        assert "".join(c.content for c in chunks) == item.markdown, item.ref
        assert [c.ordinal for c in chunks] == list(range(len(chunks)))
        assert all(c.item is item and c.content for c in chunks)
        assert all(len(c.content) <= chunker.max_chars for c in chunks)
    assert total >= len(_real_items(name)) // 2


# -- properties ------------------------------------------------------------------------

_LINES = st.one_of(
    st.sampled_from(
        [
            "",
            "",
            "# Title",
            "## Section",
            "### Sub",
            "Setext",
            "===",
            "- item",
            "  - nested item",
            "* star item",
            "1. first",
            "2) second",
            "```elixir",
            "```",
            "~~~",
            "    indented code",
            "> quoted",
            "| a | b |",
            "|---|---|",
            "iex> Enum.sum([1, 2])",
            "<div>html</div>",
            "---",
            "\r",
        ]
    ),
    st.text(min_size=0, max_size=120),
)


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(_LINES, min_size=1, max_size=60),
    max_chars=st.integers(min_value=10, max_value=400),
    min_chars=st.integers(min_value=0, max_value=400),
)
def test_chunks_reassemble_and_respect_the_limit(
    lines: list[str], max_chars: int, min_chars: int
) -> None:
    markdown = "\n".join(lines)
    chunker = SectionChunker(max_chars=max_chars, min_chars=min(min_chars, max_chars))
    chunks = chunker.chunk(_item(markdown))
    if not markdown.strip():
        assert chunks == []
        return
    assert "".join(c.content for c in chunks) == markdown
    assert all(c.content for c in chunks)
    # Stronger than "unless a single line is longer": long lines are cut too.
    assert all(len(c.content) <= max_chars for c in chunks)
