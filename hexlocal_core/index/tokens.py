"""The token rules shared by the FTS5 tokenizer and the query sanitizer.

They live in `index/` because the schema (the FTS5 `tokenize=` option) and the stored
`split_terms` column are built from them; `search/sanitizer.py` imports them from here, so
imports point downward (search -> index), never from storage up to search.

One source of truth: `_` and `/` are token characters, so `chunk_overlap` and `token/2`
stay whole in the index; `.` and `:` are not (they end sentences), so `Boruta.Oauth` is two
tokens. Because a whole identifier cannot match its own parts, every chunk also stores the
*split* parts of its identifier tokens (`chunk overlap`, `token`) in a separate column, and
the sanitizer emits identifiers both whole and split. Bare arities are dropped from splits.
"""

from __future__ import annotations

import re

TOKEN_CHARS = "_/"
FTS_TOKENIZER = f"unicode61 remove_diacritics 2 tokenchars '{TOKEN_CHARS}'"

# What unicode61 with those tokenchars treats as one token (letters, digits, `_`, `/`).
TOKEN_RE = re.compile(r"[\w/]+", re.UNICODE)
_SPLIT_RE = re.compile(r"[_/]+")
_HAS_ALNUM = re.compile(r"[^\W_]", re.UNICODE)


def tokens(text: str) -> list[str]:
    """Tokens as FTS5 sees them, keeping only those with a letter or digit."""
    return [t for t in TOKEN_RE.findall(text) if _HAS_ALNUM.search(t)]


def split_parts(token: str) -> list[str]:
    """`chunk_overlap` -> [chunk, overlap]; `token/2` -> [token]; arity digits dropped."""
    if "_" not in token and "/" not in token:
        return []
    return [p for p in _SPLIT_RE.split(token) if p and not p.isdigit() and _HAS_ALNUM.search(p)]


def split_terms(*texts: str) -> str:
    """The extra column: split parts of every identifier token in the texts."""
    seen: dict[str, None] = {}
    for text in texts:
        for tok in tokens(text):
            for part in split_parts(tok):
                seen.setdefault(part.lower(), None)
    return " ".join(seen)
