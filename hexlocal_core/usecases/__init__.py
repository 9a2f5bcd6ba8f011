"""hexlocal's use cases, one small module each, taking values and the ports they need.

`service.Hexlocal` (the facade every face calls) holds the ports `service.build` wires and
delegates each method to one of these:

- docs.py            search_docs, get_docs (through ingest.Ingestion: resolve, ingest if owed)
- ingest.py          ingest, ingestion_status, resuming interrupted jobs; prepare_plan.py is
                     its pure decision
- locate.py          which package documents a module (get_docs without a package)
- local_sources.py   a hit's file and line in the project's deps/
- project_search.py  search_docs without a package: every package the project runs
- sync.py            sync, project_packages; sync_plan.py is its pure half
- packages.py        list_packages, diagnostics; diagnostics.py: the models' downloads
- project_docs.py    index_project_docs, search_project_docs
- diff.py            diff_versions
- upgrade_impact.py  upgrade_impact, with upgrade_usage.py (the project's calls),
                     upgrade_join.py (pure: which changes they meet), upgrade_changelog.py
                     and upgrade_text.py (the report as text)
- drift.py           drift (would re-indexing change the chunks?)
- reindex.py         plan_reindex, reindex (re-embed under another model)
- issues.py          search_github_issues
- usage.py           get_token_usage
- evaluation.py      evaluate
- chunk_diff.py      the chunk comparison drift and project docs share

Memory (remember, recall, the curation worker) lives in `hexlocal_core.memory.service`.
"""
