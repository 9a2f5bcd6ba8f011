"""The keyword arm's text side on PostgreSQL, as pure functions: FTS5 MATCH text read into
a tsquery, documents into a tsvector with FTS5's positions and lengths."""

from __future__ import annotations

import pytest

from hexlocal_core.index.pg import fts
from hexlocal_core.search.sanitizer import to_match

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("match", "tsquery"),
    [
        ('"chunk_overlap"', "(('chunk_overlap'))"),
        (
            '"req merge/2" OR "req" OR "merge/2"',
            "(('req' <-> 'merge/2')) | (('req')) | (('merge/2'))",
        ),
        ('"rais"*', "(('rais':*))"),
        ('"a b"*', "(('a' <-> 'b':*))"),
        ("foo bar OR baz", "(('foo') & ('bar')) | (('baz'))"),
        ("Café", "(('cafe'))"),
        ("NOT NEAR AND x", "(('x'))"),
        ('"unclosed phrase', "(('unclosed' <-> 'phrase'))"),
        ("o'brien", "(('o' <-> 'brien'))"),  # a bare word cut by punctuation: a phrase
    ],
)
def test_match_text_reads_as_fts5_means_it(match: str, tsquery: str) -> None:
    query = fts.parse_match(match)
    assert query is not None
    assert query.tsquery() == tsquery


def test_a_quoted_quote_stays_inside_its_phrase() -> None:
    query = fts.parse_match('"it""s"')
    assert query is not None
    assert query.tsquery() == "(('it' <-> 's'))"


@pytest.mark.parametrize("match", ["", "   ", '""', "*", "OR OR", "()", '"" OR ""', "---"])
def test_nothing_searchable_is_none(match: str) -> None:
    assert fts.parse_match(match) is None


def test_the_sanitizers_output_keeps_every_phrase() -> None:
    match = to_match("how does Req.merge/2 handle chunk_overlap options")
    assert match is not None
    query = fts.parse_match(match)
    assert query is not None
    assert len(query.phrases) == match.count(" OR ") + 1
    assert query.groups == tuple((i,) for i in range(len(query.phrases)))


def test_a_huge_query_is_cut_to_what_a_statement_can_hold() -> None:
    query = fts.parse_match(" OR ".join(f'"w{i}"' for i in range(1000)))
    assert query is not None and len(query.phrases) == fts.MAX_PHRASES


def test_documents_keep_identifiers_whole_with_fts5_positions() -> None:
    doc = fts.document("Req.merge/2", "Use chunk_overlap / wisely", "merge chunk overlap")
    # title at A from 1; `/` takes a position (FTS5 indexes it) but is not searchable;
    # each column starts after a gap, so no phrase spans two columns
    assert doc.tsvector == (
        "'req':1A 'merge/2':2A 'use':4B 'chunk_overlap':5B 'wisely':7B"
        " 'merge':9C 'chunk':10C 'overlap':11C"
    )
    assert doc.length == 2 + 4 + 3


def test_rank_weights_fit_postgresql_and_scale_back() -> None:
    weights, scale = fts.rank_weights((8.0, 1.0, 1.5))
    assert weights == [0.0, 1.5 / 8, 1.0 / 8, 1.0]  # {D, C, B, A}: split, content, title
    assert scale == 8.0
