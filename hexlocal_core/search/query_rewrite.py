"""What the vector arm embeds for a prose query: the query, or the mean of the query and
its plain words (`SearchTuning.vector_rewrite`).

Chunks are embedded as `title signature content` (`model.embedding_text`): module-qualified
titles and documentation prose, never "how do I ...?" nor "my struct". A symmetric model
such as all-MiniLM-L6-v2 puts a question's framing words ("how can I", "I need my ... so I
can") in the vector as much as its content words. The plain-words form drops them: the
question openers at the start of each clause, "in <package>," and the trailing "?", then
the user's own person (I, my, we, you ...). Embedding both texts in one call and averaging
their unit vectors keeps what the framing says about intent while moving the query toward
the prose that answers; the plain form alone lost examples concept MRR (0.689 -> 0.671).

Measured (rrf, recall@5 / MRR@10, one index of the sets' packages): dev and the bundled set
unchanged (0.977 / 0.919, 0.926 / 0.845); held-out agent 0.853 / 0.722 -> 0.863 / 0.736
(task 0.527 -> 0.570); then, pre-registered, on a set written for the check
(`eval/confirm_tasks.jsonl`, 36 tasks): 0.889 / 0.556 -> 0.889 / 0.561. Costs a
second text in the query embedding (2-10 ms here). Every run: docs/lab/retrieval-levers.md, lever 8.
"""

from __future__ import annotations

import math
import re

import numpy as np

from hexlocal_core.ports import Embedder, Vectors
from hexlocal_core.search.query_shape import Shape

# Clause openers that carry no content: the question's shape, not its subject. Longest
# first, so "how do I" is not left as "do I" by a shorter match.
_OPENERS = (
    r"what(?: is|'s) the (?:best |right |recommended |correct |idiomatic )?way (?:to|of)",
    r"is there (?:a|any) (?:built-in |builtin |simple |easy |good )?way to",
    r"is it possible to",
    r"how (?:do|can|should|would|could|must) (?:i|we|you|one)",
    r"how does one",
    r"how to",
    r"(?:can|could|should|do|may) (?:i|we|you)",
    r"i (?:want|need|would like|'d like|wish) to",
    r"i'd like to",
    r"(?:please )?(?:tell|show) me how to",
    r"(?:please )?(?:tell|show) me",
    r"please",
)
_OPENER = re.compile(r"(?P<lead>^|[;,.:!?]\s+)(?:" + "|".join(_OPENERS) + r")\b\s*", re.IGNORECASE)
# The user's own person ("my struct", "so I can"): in no chunk's text.
_PERSON = re.compile(
    r"\b(?:so (?:that )?(?:i|we) can|i'm|i've|i'd|i|me|my|mine|we|our|us|you|your)\b\s*",
    re.IGNORECASE,
)
_SPACES = re.compile(r"\s+")
_TRAILING = re.compile(r"[\s?!.]+$")


def _scope(package: str) -> re.Pattern[str]:
    """ "in ecto_sql, ..." / "with Req: ..." at the start: the engine searches there already."""
    parts = [re.escape(p) for p in re.split(r"[_\-\s]+", package) if p]
    name = r"[_\-\s]?".join(parts) or re.escape(package)
    return re.compile(r"^(?:in|with|using|for)\s+(?:the\s+)?" + name + r"\s*[,:]\s*", re.I)


def strip_question(query: str, package: str = "") -> str:
    """The query without its question framing; never empty (a query that is all framing
    is returned as it was)."""
    text = _SPACES.sub(" ", query).strip()
    if package:
        text = _scope(package).sub("", text)
    previous = None
    while previous != text:  # "please, how do I ..." needs two passes
        previous = text
        text = _OPENER.sub(lambda m: m.group("lead"), text).strip()
    text = _TRAILING.sub("", text).strip(" ,;:")
    return text or query.strip()


def plain_words(query: str, package: str = "") -> str:
    """`strip_question`, then without the user's own person; never empty."""
    stripped = strip_question(query, package)
    out = _SPACES.sub(" ", _PERSON.sub("", stripped)).strip(" ,;:")
    return out or stripped


def texts_to_embed(query: str, package: str, shape: Shape, rewrite: bool) -> tuple[str, ...]:
    """The texts whose mean is the query vector: the query alone, or (`rewrite`, prose
    only: identifiers are looked up exactly, error pastes cleaned by `parse_error`) the
    query and its plain words when they differ."""
    if not rewrite or shape is not Shape.PROSE:
        return (query,)
    plain = plain_words(query, package)
    return (query,) if plain == query.strip() else (query, plain)


async def embed_mean(embedder: Embedder, texts: tuple[str, ...]) -> Vectors:
    """One query vector, shape (1, dims): the text's own, or the unit mean of the texts'
    unit vectors (one embedder call for all of them)."""
    if len(texts) == 1:
        return await embedder.embed_query(texts[0])
    return mean_unit(await embedder.embed(list(texts)))


def mean_unit(rows: Vectors) -> Vectors:
    """The unit vector of the rows' mean direction, one row; the first row when the mean
    is degenerate (opposite rows, or not finite)."""
    stacked = np.asarray(rows, dtype=np.float32).reshape(len(rows), -1)
    units = stacked / np.maximum(np.linalg.norm(stacked, axis=1, keepdims=True), 1e-12)
    mean = units.sum(axis=0)
    norm = float(np.linalg.norm(mean))
    if not math.isfinite(norm) or norm == 0.0:
        first: Vectors = units[:1]
        return first
    unit: Vectors = (mean / norm).astype(np.float32).reshape(1, -1)
    return unit
