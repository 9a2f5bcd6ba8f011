"""evaluate: run a query set through the search engine and score it (nothing is ingested;
the caller ingests the set's targets first, through the facade's `ingest`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hexlocal_core.index.seam import DocsStore
from hexlocal_core.ports import Embedder, Reranker
from hexlocal_core.search.engine import SearchEngine

if TYPE_CHECKING:
    from hexlocal_core.evaluation import EvalOptions, EvalQuery, EvalReport


async def evaluate(
    engine: SearchEngine,
    store: DocsStore,
    embedder: Embedder | None,
    reranker: Reranker | None,
    queries: Sequence[EvalQuery],
    options: EvalOptions,
    *,
    source: str,
) -> EvalReport:
    from hexlocal_core.evaluation import run_eval  # numpy-heavy scoring, loaded on use

    models = {
        "embedder": embedder.model_id if embedder else None,
        "reranker": reranker.model_id if reranker else None,
    }
    return await run_eval(engine, store, queries, options=options, source=source, models=models)
