"""Retrieval evaluation: a query set with expected refs, run through the search engine.

The evaluation is a *control* for search, so it shares none of the code it measures
(beyond the query sanitizer, used only to show what the keyword arm was given): relevance
is decided by its own SQL over the stored item refs, and ranks, recall and MRR are
computed here from the hits and candidate pool the engine returns.

    queries.py      the JSONL format: EvalQuery, Expectation, load_queries
    relevance.py    the relevance rules, as a pure predicate and as SQL on the store
    fingerprint.py  what corpus a report was measured on (versions, chunks, model)
    metrics.py      recall@k, MRR@k, candidate-pool hits, medians; per mode and kind
    runner.py       run_eval: status checks, one search per query and mode, the report
"""

from hexlocal_core.evaluation.fingerprint import CorpusFingerprint, PackageFingerprint, fingerprint
from hexlocal_core.evaluation.metrics import ModeScore, score_runs
from hexlocal_core.evaluation.queries import (
    KINDS,
    EvalQuery,
    Expectation,
    load_queries,
    parse_queries,
)
from hexlocal_core.evaluation.relevance import ref_matches, relevant_ids
from hexlocal_core.evaluation.runner import (
    EVAL_MODES,
    EvalOptions,
    EvalReport,
    ModeRun,
    QueryResult,
    QueryStatus,
    ReturnedDoc,
    ingest_targets,
    run_eval,
)

__all__ = [
    "EVAL_MODES",
    "KINDS",
    "CorpusFingerprint",
    "EvalOptions",
    "EvalQuery",
    "EvalReport",
    "Expectation",
    "ModeRun",
    "ModeScore",
    "PackageFingerprint",
    "QueryResult",
    "QueryStatus",
    "ReturnedDoc",
    "fingerprint",
    "ingest_targets",
    "load_queries",
    "parse_queries",
    "ref_matches",
    "relevant_ids",
    "run_eval",
    "score_runs",
]
