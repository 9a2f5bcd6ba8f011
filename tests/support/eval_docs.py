"""What the query-set tests check refs against, read once per test session: a Hex package's
corpus docs tarball (its ExDoc search index and parsed items) and an OTP application's
items in the OTP 27.3.4.1 doc tarball; and the one rule for what an error paste looks like."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache

from hexlocal_core.evaluation import EvalQuery
from hexlocal_core.ingest.exdoc_search import load_search_index
from hexlocal_core.ingest.hexdocs import parse_hexdocs
from hexlocal_core.ingest.otp_tarball import app_items
from hexlocal_core.ingest.tarball import read_docs_tarball
from hexlocal_core.model import DocItem
from tests.support.paths import CORPUS, HEXDOCS

OTP_TARBALL = CORPUS / "otp" / "otp_doc_html_27.3.4.1.tar.gz"
MAX_DOCS_BYTES = 200 * 1024 * 1024
# What an agent pastes carries run-specific noise: PIDs, references, paths with lines, timings.
PASTE_NOISE = re.compile(r"#PID<|#Reference<|\.exs?:\d+|\d{4,}ms")


@cache
def hex_files(package: str, version: str) -> dict[str, bytes]:
    tarball = HEXDOCS / f"{package}-{version}.tar.gz"
    return dict(read_docs_tarball(tarball.read_bytes(), max_bytes=MAX_DOCS_BYTES))


@cache
def published_refs(package: str, version: str) -> frozenset[str]:
    """The refs of the package's ExDoc search index."""
    index = load_search_index(hex_files(package, version))
    assert index is not None, f"{package} {version} has no ExDoc search index"
    return frozenset(raw.ref for raw in index.items)


@cache
def hex_items(package: str, version: str) -> tuple[DocItem, ...]:
    return parse_hexdocs(hex_files(package, version), package=package, version=version).items


@cache
def otp_items(app: str, version: str) -> tuple[DocItem, ...]:
    """An OTP 27.3.4.1 application's items, from the release's doc tarball."""
    parsed = app_items(OTP_TARBALL.read_bytes(), app, version=version, otp_major=27)
    return tuple(parsed.items)


def assert_pasted_output(errors: Sequence[EvalQuery]) -> None:
    """Error queries are printed output: at least half carry noise, none is a question."""
    noisy = [q for q in errors if PASTE_NOISE.search(q.query)]
    assert len(noisy) >= len(errors) // 2, "at least half carry realistic noise"
    for query in errors:
        assert not query.query.rstrip().endswith("?"), f"{query.id} reads like a question"
