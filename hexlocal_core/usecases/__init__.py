"""hexlocal's use cases, one small module each, taking values and the ports they need.

`service.Hexlocal` (the facade every face calls) holds the ports `service.build` wires and
delegates each method to one of these:

- docs.py          search_docs, get_docs (through ingest.Indexing: resolve, index if owed)
- ingest.py        ingest, ingestion_status, resuming interrupted jobs
- packages.py      list_packages, diagnostics
- project_docs.py  index_project_docs, search_project_docs
- drift.py         drift (would re-indexing change the chunks?)
- reindex.py       plan_reindex, reindex (re-embed under another model)
- issues.py        search_github_issues
- usage.py         get_token_usage
- evaluation.py    evaluate
- chunk_diff.py    the chunk comparison drift and project docs share

Memory (remember, recall, the curation worker) lives in `hexlocal_core.memory.service`.
"""
