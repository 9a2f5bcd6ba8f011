"""The chunk rows one search reads, and the hits made of them."""

from __future__ import annotations

from collections.abc import Sequence

from attrs import evolve

from hexlocal_core.index.rows import ChunkRow
from hexlocal_core.index.seam import DocsStore
from hexlocal_core.model import Hit


class Rows:
    """The chunk rows one search has read. Each stage hydrates only the ids it has not
    seen: the learned stage reads 20, the reranker 10 of those, the answer 5 of them."""

    def __init__(self, store: DocsStore) -> None:
        self._store = store
        self._by_id: dict[int, ChunkRow] = {}

    def get(self, ids: Sequence[int]) -> list[ChunkRow]:
        """Rows for the ids, in the order given; ids not stored are left out."""
        missing = [cid for cid in dict.fromkeys(ids) if cid not in self._by_id]
        if missing:
            self._by_id.update((row.id, row) for row in self._store.hydrate(missing))
        return [self._by_id[cid] for cid in ids if cid in self._by_id]


def hit_from_row(row: ChunkRow) -> Hit:
    return Hit(
        chunk_id=row.id,
        package=row.package,
        version=row.version,
        ref=row.ref,
        title=row.title,
        doc_type=row.doc_type,
        content=row.content,
        hexdocs_url=row.hexdocs_url,
        source_url=row.source_url,
        module=row.module,
        function=row.function,
        arity=row.arity,
        signature=row.signature,
        deprecated=row.deprecated,
        source=row.source,
        has_example=row.has_example,
    )


def hits_from_rows(
    rows: Sequence[ChunkRow],
    fts_ids: list[int],
    vec_ids: list[int],
    pool: list[int],
    scores: dict[int, float],
    exact_ids: set[int],
) -> list[Hit]:
    """The rows as hits in that order, each with where it stood in each arm, the fused
    pool and the reranker's scores."""
    return [
        evolve(
            hit_from_row(row),
            fts_rank=place(fts_ids, row.id),
            vec_rank=place(vec_ids, row.id),
            fused_rank=place(pool, row.id),
            rerank_score=scores.get(row.id),
            final_rank=final_rank,
            exact=row.id in exact_ids,
        )
        for final_rank, row in enumerate(rows, start=1)
    ]


def place(ids: list[int], cid: int) -> int | None:
    """Where `cid` stands in `ids`, from 1; None when it is not there."""
    try:
        return ids.index(cid) + 1
    except ValueError:
        return None
