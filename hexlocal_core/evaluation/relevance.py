"""Which stored chunks answer a query, decided from item refs (never row ids).

The rules (shared/eval/README.md), for a target ref R:

* R has a `#` (a function, a section): the chunk's ref equals R, or is a heading sub-item
  of it, i.e. starts with R + "-" (`Plug.Conn.html#put_resp_header/3-examples`).
* R has no `#` (a module or guide page): only the page's own doc counts, i.e. ref equals
  R or starts with R + "#module-". Its functions and types do not.
* page P: any chunk of the page, i.e. the ref before `#` equals P.

The rules exist twice on purpose: `ref_matches` (pure, for hits and tests) and
`relevant_ids` (a query on the stored refs, `ChunkReads.ids_by_ref`, which also detects
expectations that resolve to nothing). Tests run one table through both.
"""

from __future__ import annotations

from hexlocal_core.evaluation.queries import Expectation
from hexlocal_core.index.seam import ChunkReads

MODULE_DOC = "#module-"


def _prefix(target: str, form: str) -> str:
    if form == "page":
        return target + "#"
    return target + ("-" if "#" in target else MODULE_DOC)


def ref_matches(ref: str, expect: Expectation) -> bool:
    """Whether a chunk whose item ref is `ref` answers the expectation."""
    return any(ref == t or ref.startswith(_prefix(t, expect.form)) for t in expect.targets)


def relevant_ids(reads: ChunkReads, package: str, expect: Expectation) -> frozenset[int]:
    """Ids of the package's stored chunks that answer the expectation (empty: BROKEN)."""
    targets = [(t, _prefix(t, expect.form)) for t in expect.targets]
    return reads.ids_by_ref(package, targets)
