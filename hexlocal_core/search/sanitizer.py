"""QuerySanitizer: any string in, a legal FTS5 MATCH expression (or None: skip the arm) out.

Every term is a quoted phrase built only from tokens (see `index/tokens.py`), so no FTS5 syntax
(`*`, `NEAR(`, `:`, `^`, quotes, parentheses) can survive into the expression. Identifier-
shaped words are emitted whole and split: `Req.merge/2` -> `"req merge/2" OR "req" OR
"merge/2" OR "merge"`; bare arities never stand alone.

Plain words are also emitted as a prefix query of their light stem (`raising` ->
`"raising" OR "rais"*`), so a question's word forms meet the docs' (`raise`, `raised`):
the index has no stemmer, and questions are worded differently from the docs that answer
them. The `*` is the one operator the sanitizer writes itself, always after a quoted
token. Identifiers are never stemmed: `checkout!/4` must not match `checkouts`.
"""

from __future__ import annotations

import re

from hexlocal_core.index.tokens import split_parts, tokens

MAX_QUERY_CHARS = 2_000
MAX_TERMS = 40

# Words so common in questions that they only dilute BM25 (kept when nothing else is left).
STOPWORDS = frozenset(
    """a an and are as at be by can do does for from how i if in into is it its me my of on
    or so that the their then there these this to use using was what when where which while
    who why will with you your should would could want get""".split()
)

_PREFIX_RE = re.compile(r"^(?:[ct]:)", re.IGNORECASE)  # c:callback/1, t:type/0

# A term ending in this marker is a prefix query. Tokens never contain `*` (TOKEN_RE).
PREFIX_MARK = "*"
MIN_STEM = 4  # shorter prefixes match too much (`us`* -> user, usage, using ...)
# Longest first. Enough to meet the usual English forms; not a full Porter stemmer,
# because a prefix query already covers whatever follows the stem.
_SUFFIXES = (
    "ations", "ation", "ments", "ment", "ness", "ings", "ing", "ions", "ion",
    "ers", "er", "ies", "ied", "ed", "es", "ly", "s",
)  # fmt: skip
_PLAIN_WORD = re.compile(r"^[a-z]+$")
_EDGE_PUNCTUATION = ".,;:!?()[]{}'\"`"


def light_stem(word: str) -> str:
    """`raising` -> `rais`, `stopped` -> `stop`, `tokens` -> `token`; the word if too short."""
    for suffix in _SUFFIXES:
        if not word.endswith(suffix) or len(word) - len(suffix) < MIN_STEM:
            continue
        if suffix == "s" and word.endswith(("ss", "us", "is")):
            return word  # `class`, `status`, `analysis` are not plurals
        stem = word[: -len(suffix)]
        if suffix in ("ed", "ing", "er", "ers") and _doubled(stem):
            stem = stem[:-1]  # stopped -> stopp -> stop
        return stem
    return word


def _doubled(stem: str) -> bool:
    return len(stem) > MIN_STEM and stem[-1] == stem[-2] and stem[-1] not in "lsz"


def _quote(phrase: str) -> str:
    # Tokens never contain `"`, but quoting is the one place that must be airtight.
    if phrase.endswith(PREFIX_MARK):
        return _quote(phrase[: -len(PREFIX_MARK)]) + "*"
    return '"' + phrase.replace('"', '""') + '"'


def _word_terms(word: str) -> list[str]:
    word = _PREFIX_RE.sub("", word)
    toks = [t.lower() for t in tokens(word)]
    if not toks:
        return []
    terms: list[str] = []
    if len(toks) > 1:
        terms.append(" ".join(toks))  # the identifier as a phrase: `req merge/2`
    for tok in toks:
        if not tok.isdigit():
            terms.append(tok)
        terms.extend(p.lower() for p in split_parts(tok))
    bare = word.strip(_EDGE_PUNCTUATION)  # a sentence's last word is still a plain word
    if len(toks) == 1 and _PLAIN_WORD.match(toks[0]) and not is_identifier_like(bare):
        stem = light_stem(toks[0])
        if len(stem) >= MIN_STEM:
            terms.append(stem + PREFIX_MARK)
    return terms


def is_identifier_like(word: str) -> bool:
    return bool(re.search(r"[._/:]|[a-z][A-Z]|^[A-Z][a-z]+[A-Z]", word))


def to_match(query: str) -> str | None:
    """The FTS5 MATCH expression for a user query, or None when it has no searchable term."""
    phrases = to_phrases(query)
    return " OR ".join(phrases) if phrases else None


def to_phrases(query: str) -> list[str]:
    """The quoted FTS5 phrases (prefix marks included) that `to_match` ORs together."""
    text = query[:MAX_QUERY_CHARS]
    terms: dict[str, None] = {}
    fallback: dict[str, None] = {}
    for word in text.split():
        for term in _word_terms(word):
            if term.removesuffix(PREFIX_MARK) in STOPWORDS:
                fallback.setdefault(term, None)
            else:
                terms.setdefault(term, None)
        if len(terms) >= MAX_TERMS:
            break
    chosen = list(terms or fallback)[:MAX_TERMS]
    return [_quote(t) for t in chosen]
