"""One valid call per MCP tool: the arguments a bad-input case or a fuzzer changes one at a
time (a test checks that every tool has one)."""

from __future__ import annotations

from typing import Any

VALID_ARGS: dict[str, dict[str, Any]] = {
    "search_docs": {"package": "jason", "query": "decode", "version": "1.4.4"},
    "search_project_docs": {"query": "deploy"},
    "get_docs": {"package": "jason", "identifier": "Jason.decode/2", "version": "1.4.4"},
    "ingestion_status": {},
    "list_indexed_packages": {},
    "remember": {"texts": ["Jason.decode!/2 raises on invalid JSON"]},
    "remember_status": {"request_ids": ["0" * 32]},
    "recall": {"query": "decode"},
    "search_github_issues": {"query": "session", "repo": "zoedsoupe/anubis-mcp"},
    "get_token_usage": {},
    "diff_versions": {"package": "jason", "from_version": "1.4.4", "to_version": "1.4.5"},
    "upgrade_impact": {"package": "jason", "to_version": "1.4.5", "from_version": "1.4.4"},
}
