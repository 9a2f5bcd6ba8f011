"""The OTP query set (`eval/otp.jsonl`) names items OTP 27.3.4.1 really has: each
expected ref is in ExDoc's search data of the release's doc tarball, and the parser yields
an item with text for at least one of a query's refs (a few entries, `erlang:send_after/3`,
are "Equivalent to ..." with no text of their own in ExDoc's index)."""

from __future__ import annotations

import re
from collections import Counter
from functools import cache

import pytest

from hexlocal_core.evaluation import EvalQuery, load_queries, ref_matches
from hexlocal_core.ingest.otp_tarball import app_items
from hexlocal_core.model import DocItem
from tests.support.paths import CORPUS, REPO_ROOT

OTP_SET = REPO_ROOT / "eval" / "otp.jsonl"
TARBALL = CORPUS / "otp" / "otp_doc_html_27.3.4.1.tar.gz"
_ID = re.compile(r"^otp-(?P<package>[a-z_]+)-(?P<kind>[tes])-\d{2}$")


@cache
def _items(app: str, version: str) -> tuple[DocItem, ...]:
    parsed = app_items(TARBALL.read_bytes(), app, version=version, otp_major=27)
    return tuple(parsed.items)


def _queries() -> list[EvalQuery]:
    return load_queries(OTP_SET)


@pytest.mark.parametrize("query", _queries(), ids=lambda q: q.id)
def test_expected_refs_are_items_of_the_release(corpus: object, query: EvalQuery) -> None:
    assert query.version is not None
    items = _items(query.package, query.version)
    refs = {i.ref for i in items}
    missing = [t for t in query.expect.targets if t not in refs]
    assert not missing, f"{query.id}: not in {query.package} {query.version}: {missing}"
    with_text = [i for i in items if ref_matches(i.ref, query.expect) and i.markdown.strip()]
    assert with_text, f"{query.id}: no expected item has text"


def test_the_set_covers_erts_kernel_and_stdlib_in_every_kind() -> None:
    queries = _queries()
    assert len(queries) >= 40
    assert {q.package for q in queries} == {"erts", "kernel", "stdlib"}
    kinds = Counter(q.kind for q in queries)
    assert set(kinds) == {"task", "error", "symbol"} and min(kinds.values()) >= 12, kinds
    for query in queries:
        match = _ID.match(query.id)
        assert match and match["package"] == query.package and match["kind"] == query.kind[0]


def test_tasks_do_not_name_the_function_that_answers_them() -> None:
    for query in _queries():
        if query.kind != "task":
            continue
        for target in query.expect.targets:
            name = target.split("#", 1)[1].split("/", 1)[0] if "#" in target else None
            if name and len(name) > 3 and not name.startswith(("t:", "c:", "module-")):
                assert name not in query.query, f"{query.id} names {name}"
