"""The result-paste set (`eval/result_pastes.jsonl`): error queries that paste what a call
returned, not an exception. Each query opens with an IEx prompt line and the printed value,
or with the returned `{:error, ...}` and a comment naming the call. Written from the docs
alone, before any search ran on it and without reading the other sets, to judge how result
pastes are searched as error pastes. Its refs are checked like the other sets': Hex refs
against the corpus tarball's ExDoc index and parsed items, OTP refs against the items of the
OTP 27.3.4.1 doc tarball.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from hexlocal_core.evaluation import EvalQuery, load_queries, ref_matches
from tests.support.eval_docs import assert_pasted_output, hex_items, otp_items, published_refs
from tests.support.paths import REPO_ROOT, SHARED

RESULT_PASTES = REPO_ROOT / "eval" / "result_pastes.jsonl"
OTP_APPS = {"erts": "15.2.7", "kernel": "10.2.7.1", "stdlib": "6.2.2.1"}
HEX_VERSIONS = {
    "ecto": "3.14.2",
    "ecto_sql": "3.14.0",
    "db_connection": "2.10.2",
    "plug": "1.19.2",
    "elixir": "1.18.4",
    "mix": "1.18.4",
    "jason": "1.4.5",
    "decimal": "3.1.1",
    "nimble_options": "1.1.1",
    "mint": "1.9.3",
    "finch": "0.23.0",
    "req": "0.7.3",
    "exqlite": "0.39.0",
    "telemetry": "1.2.1",
}
_ID = re.compile(r"^rp-(?P<package>[a-z][a-z0-9_]*)-e-\d{2}$")
# `iex(3)> `, `iex(app@host)2> `, `iex(api@10.0.0.4)2> `: the prompt of an IEx session.
_IEX_PROMPT = re.compile(r"^iex\([^)\s]*\)\d*> \S")


def _queries() -> list[EvalQuery]:
    return load_queries(RESULT_PASTES)


@pytest.mark.parametrize("query", _queries(), ids=lambda q: q.id)
def test_expected_refs_are_items_with_text(corpus: Path, query: EvalQuery) -> None:
    assert query.expect.form in {"ref", "any_ref"}, f"{query.id}: refs only, no pages"
    if query.package in OTP_APPS:
        assert query.version == OTP_APPS[query.package]
        items = otp_items(query.package, query.version)
        known = {i.ref for i in items}
    else:
        assert query.version == HEX_VERSIONS.get(query.package), f"{query.id}: version"
        items = hex_items(query.package, query.version)
        known = published_refs(query.package, query.version)
    missing = [t for t in query.expect.targets if t not in known]
    assert not missing, f"{query.id}: not in {query.package} {query.version}: {missing}"
    with_text = [i for i in items if ref_matches(i.ref, query.expect) and i.markdown.strip()]
    assert with_text, f"{query.id}: no expected item has text"


def test_the_set_is_forty_result_pastes_spread_over_otp_and_hex() -> None:
    queries = _queries()
    assert len(queries) == 40
    assert {q.kind for q in queries} == {"error"}
    ids = [q.id for q in queries]
    assert len(set(ids)) == len(ids), "ids are unique"
    for query in queries:
        match = _ID.match(query.id)
        assert match, f"{query.id} is not rp-<package>-e-<NN>"
        assert match["package"] == query.package
        assert query.package in OTP_APPS or query.package in HEX_VERSIONS, query.package
        assert query.note.strip(), f"{query.id}: every query says why its answer answers it"
    packages = Counter(q.package for q in queries)
    otp = sum(n for p, n in packages.items() if p in OTP_APPS)
    assert set(OTP_APPS) <= set(packages) and 15 <= otp <= 25, packages
    assert len(set(packages) - set(OTP_APPS)) >= 12, packages
    assert max(n for p, n in packages.items() if p not in OTP_APPS) <= 3, packages


def test_every_query_is_a_result_paste_not_an_exception_or_a_question() -> None:
    queries = _queries()
    iex = [q for q in queries if _IEX_PROMPT.match(q.query)]
    returned = [q for q in queries if q.query.startswith("{:error,")]
    odd = [q.id for q in queries if q not in iex and q not in returned]
    assert not odd, f"neither an IEx prompt line nor a returned {{:error, ...}}: {odd}"
    # Roughly half of each form.
    assert min(len(iex), len(returned)) >= len(queries) // 3, (len(iex), len(returned))
    for query in queries:
        assert "** (" not in query.query.split("\n", 1)[0], f"{query.id} pastes an exception"
    assert_pasted_output(queries)


def test_no_query_is_copied_from_another_set() -> None:
    other_sets = [
        *sorted((REPO_ROOT / "eval").glob("*.jsonl")),
        SHARED / "eval" / "dev.jsonl",
    ]
    others = {
        q.query
        for other in other_sets
        if other.is_file() and other != RESULT_PASTES
        for q in load_queries(other)
    }
    copied = [q.id for q in _queries() if q.query in others]
    assert not copied, f"copied from another set: {copied}"
