"""The keyword arm's text side on PostgreSQL: documents, queries and BM25, in Python.

PostgreSQL's text parser splits `chunk_overlap` at `_` and reads `merge/2` as a path, so
the token rule of `index/tokens.py` cannot be had from `to_tsvector`. The tsvector is
built here instead, from exactly the tokens FTS5 indexes: title tokens weighted A,
content B, the stored split identifier parts C, lowercased and with diacritics removed
(what unicode61 `remove_diacritics 2` does), positions counted across the three with a
gap between them so no phrase matches across a column boundary. Queries get the same
folding, so no text search configuration touches either side ('simple' would only
lowercase).

A query arrives as FTS5 MATCH text (what `search/sanitizer.py` writes: quoted phrases,
`OR`, a `*` after a quoted token). `parse_match` reads that grammar leniently, so any
string at all gives a query or None, never an error: unknown operators are dropped,
parentheses ignored, an unclosed quote runs to the end. It becomes a tsquery of the
same lexemes (a phrase is `<->`, a prefix `:*`), built here with every lexeme quoted.

Ranking is BM25 as FTS5 computes it (k1 1.2, b 0.75, idf floored, `index/bm25.py`), not
`ts_rank_cd` alone: cover density has no idf, so a question's rare word would weigh no more
than its common ones. `ts_rank_cd` does give what BM25 needs, though: for a query of one
phrase, every occurrence is a cover of its own worth its column's weight, so with the
column weights (scaled into [0, 1]) it returns the phrase's column-weighted frequency,
FTS5's `tf`. The statement asks for that once per phrase; document frequencies are
counted over the scope asked for (the package, or the whole table), and BM25 is summed
here.
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Sequence

from attrs import frozen

from hexlocal_core.index import bm25
from hexlocal_core.index.tokens import TOKEN_RE, tokens

TITLE, CONTENT, SPLIT = "A", "B", "C"  # tsvector weights of the three FTS5 columns
MAX_POSITION = 16_383  # PostgreSQL clamps larger positions to this
MAX_POSITIONS = 256  # and keeps this many per lexeme
MAX_LEXEME_BYTES = 2_046  # a longer word is refused ("word is too long"): left out
# A query's size (the sanitizer writes at most 40 phrases; any string may arrive here):
# each phrase is a column of the ranking statement, which PostgreSQL caps at 1664.
MAX_PHRASES = 64
MAX_PHRASE_LEXEMES = 32
_HAS_ALNUM = re.compile(r"[^\W_]")  # the test `tokens.tokens` keeps a token by


def fold(token: str) -> str:
    """A token as it is stored and queried: lowercase, diacritics removed."""
    if token.isascii():
        return token.lower()
    decomposed = unicodedata.normalize("NFKD", token.lower())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def _lexeme_literal(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


# -- documents ---------------------------------------------------------------------------


@frozen
class Document:
    tsvector: str  # tsvector input text
    length: int  # tokens in all three columns (FTS5's column_size(-1))


def document(title: str, content: str, split_terms: str) -> Document:
    postings: dict[str, list[str]] = defaultdict(list)
    position = 0
    for weight, text in ((TITLE, title), (CONTENT, content), (SPLIT, split_terms)):
        # FTS5 counts every token in positions and in the row's length, a lone `/` too,
        # though only those with a letter or digit are kept (`tokens.tokens`).
        for token in TOKEN_RE.findall(text):
            position += 1
            if not _HAS_ALNUM.search(token):
                continue
            kept = postings[fold(token)]
            if len(kept) < MAX_POSITIONS:
                kept.append(f"{min(position, MAX_POSITION)}{weight}")
        position += 1  # the gap: a phrase never spans two columns
    length = position - 3
    text = " ".join(
        f"{_lexeme_literal(lex)}:{','.join(ps)}"
        for lex, ps in postings.items()
        if len(lex) * 4 <= MAX_LEXEME_BYTES or len(lex.encode()) <= MAX_LEXEME_BYTES
    )
    return Document(text, length)


# -- queries -----------------------------------------------------------------------------


@frozen
class Phrase:
    lexemes: tuple[str, ...]
    prefix: bool = False  # the last lexeme is a prefix

    def tsquery(self) -> str:
        parts = [_lexeme_literal(lex) for lex in self.lexemes]
        if self.prefix:
            parts[-1] += ":*"
        return " <-> ".join(parts)


@frozen
class Query:
    """An OR of AND-groups of phrases (FTS5's precedence: AND binds tighter than OR)."""

    phrases: tuple[Phrase, ...]
    groups: tuple[tuple[int, ...], ...]  # indexes into phrases

    def tsquery(self) -> str:
        return " | ".join(
            "(" + " & ".join(f"({self.phrases[i].tsquery()})" for i in group) + ")"
            for group in self.groups
        )

    def any_tsquery(self) -> str:
        """Rows matching any phrase: where document frequencies are counted."""
        return " | ".join(f"({p.tsquery()})" for p in self.phrases)

    def matches(self, found: set[int]) -> bool:
        """Whether a row whose matching phrases are `found` satisfies the query."""
        return any(all(i in found for i in group) for group in self.groups)


def _phrase(text: str, prefix: bool) -> Phrase | None:
    lexemes = tuple(
        lex for lex in (fold(t) for t in tokens(text)) if len(lex.encode()) <= MAX_LEXEME_BYTES
    )[:MAX_PHRASE_LEXEMES]
    return Phrase(lexemes, prefix) if lexemes else None


def _terms(match: str) -> Iterable[Phrase | str]:
    """Phrases and the operator words OR / AND / NOT / NEAR, in order."""
    i, n = 0, len(match)
    while i < n:
        ch = match[i]
        if ch.isspace() or ch in "()":
            i += 1
            continue
        if ch == '"':
            j, buf = i + 1, []
            while j < n:
                if match[j] == '"':
                    if j + 1 < n and match[j + 1] == '"':
                        buf.append('"')
                        j += 2
                        continue
                    break
                buf.append(match[j])
                j += 1
            i = j + 1
            prefix = i < n and match[i] == "*"
            if prefix:
                i += 1
            phrase = _phrase("".join(buf), prefix)
            if phrase is not None:
                yield phrase
            continue
        j = i
        while j < n and not match[j].isspace() and match[j] not in '"()':
            j += 1
        word = match[i:j]
        i = j
        if word in ("OR", "AND", "NOT", "NEAR"):
            yield word
            continue
        phrase = _phrase(word.rstrip("*"), word.endswith("*"))
        if phrase is not None:
            yield phrase


def parse_match(match: str) -> Query | None:
    """The query an FTS5 MATCH text means, or None when it has no searchable token."""
    phrases: dict[Phrase, int] = {}
    groups: list[list[int]] = [[]]
    for term in _terms(match):
        if term == "OR":
            if groups[-1]:
                groups.append([])
            continue
        if isinstance(term, str):
            continue  # AND is what juxtaposition means; NOT and NEAR are not supported
        if term not in phrases and len(phrases) >= MAX_PHRASES:
            continue
        index = phrases.setdefault(term, len(phrases))
        if index not in groups[-1]:
            groups[-1].append(index)
    kept = tuple(tuple(g) for g in groups if g)
    if not kept:
        return None
    return Query(tuple(phrases), kept)


# -- BM25 --------------------------------------------------------------------------------


def rank_weights(weights: tuple[float, float, float]) -> tuple[list[float], float]:
    """`ts_rank_cd`'s {D, C, B, A} array for (title, content, split) weights, each in [0, 1]
    as PostgreSQL requires, and the scale that turns its result back into those weights."""
    title, content, split = (max(0.0, float(w)) for w in weights)
    top = max(title, content, split) or 1.0
    return [0.0, split / top, content / top, title / top], top


@frozen
class Candidate:
    """A row of the package matching some phrase, with what BM25 needs of it."""

    id: int
    length: int
    has_example: bool
    freqs: tuple[float, ...]  # per phrase: column-weighted occurrences (0: absent)


def rank(
    query: Query,
    rows: Sequence[Candidate],
    *,
    documents: int,
    df: Sequence[int] | None,
    avgdl: float,
    examples_only: bool,
    depth: int,
) -> list[tuple[int, float]]:
    """(id, -bm25) of the rows satisfying the query, best first (lower is better), at most
    `depth`, ties by id.

    `df[i]` is how many documents of the scope phrase i matches; None counts it over
    `rows`, which then must be every row of the scope that matches any phrase.
    """
    if df is None:
        df = [sum(1 for row in rows if row.freqs[i] > 0) for i in range(len(query.phrases))]
    idf = [bm25.idf(max(documents, 1), n) for n in df]
    scored: list[tuple[int, float]] = []
    for row in rows:
        if examples_only and not row.has_example:
            continue
        if not query.matches({i for i, f in enumerate(row.freqs) if f > 0}):
            continue
        terms = ((idf[i], f) for i, f in enumerate(row.freqs) if f > 0)
        scored.append((row.id, -bm25.score(terms, row.length, avgdl)))
    scored.sort(key=lambda pair: (pair[1], pair[0]))
    return scored[:depth]
