"""Property: any markdown through the chunker gives slices of it, in bounded time, and the
chunks still concatenate back to the text whenever no bound cut the item short."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hexlocal_core.chunk import SectionChunker, chunk_items
from hexlocal_core.model import DocItem, DocType

FUZZ = settings(
    max_examples=1000,
    deadline=2000,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
_LINE = st.one_of(
    st.sampled_from(
        [
            "```",
            "~~~",
            "```elixir",
            "    code",
            "# h",
            "## h",
            "- a",
            "  - b",
            "1. c",
            "> q",
            "| a | b |",
            "|---|---|",
            "",
            " ",
            "iex> 1",
            "iex(iex(",
            "@spec f() :: t",
            "\r",
            "<div>",
            "***",
            "text",
        ]
    ),
    st.text(max_size=40),
)
_MARKDOWN = st.lists(_LINE, max_size=30).map("\n".join)


def _item(markdown: str) -> DocItem:
    return DocItem(
        package="fuzz",
        version="1",
        ref="g.html",
        title="G",
        doc_type=DocType.EXTRAS,
        markdown=markdown,
        hexdocs_url="",
    )


@FUZZ
@given(
    _MARKDOWN,
    st.integers(10, 400),
    st.integers(0, 400),
    st.integers(1, 2000),
    st.integers(1, 60),
    st.integers(1, 40),
)
def test_chunks_are_slices_and_concatenate_when_not_cut(
    markdown: str, max_chars: int, min_chars: int, item_chars: int, item_lines: int, chunks: int
) -> None:
    chunker = SectionChunker(
        max_chars=max_chars,
        min_chars=min_chars,
        max_item_chars=item_chars,
        max_item_lines=item_lines,
        max_chunks=chunks,
    )
    found = chunker.chunk_bounded(_item(markdown))
    joined = "".join(c.content for c in found.chunks)
    if not markdown.strip():
        assert found.chunks == []
    elif found.truncated:
        assert markdown.startswith(joined) and len(joined) < len(markdown)
    else:
        assert joined == markdown
    assert [c.ordinal for c in found.chunks] == list(range(len(found.chunks)))
    assert len(found.chunks) <= chunks


@FUZZ
@given(st.lists(_MARKDOWN, max_size=4), st.integers(1, 20), st.integers(1, 200))
def test_package_bounds(texts: list[str], max_chunks: int, max_lines: int) -> None:
    items = [_item(t) for t in texts]
    result = chunk_items(
        items,
        SectionChunker(max_chars=60, min_chars=10),
        max_chunks=max_chunks,
        max_lines=max_lines,
    )
    assert len(result.chunks) <= max_chunks
    if not result.truncated_refs and not result.items_left_out:
        assert result.notices("fuzz", "1") == ()
        assert len(result.chunks) == sum(
            len(SectionChunker(max_chars=60, min_chars=10).chunk(i)) for i in items
        )
    else:
        assert [n.code for n in result.notices("fuzz", "1")] == ["docs_truncated"]
