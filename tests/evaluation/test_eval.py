"""The evaluation: relevance rules, statuses, metrics, the JSON report and `hexlocal eval`.

The index is small and real: jason 1.4.4 and nimble_pool 1.1.0 parsed from the corpus
and written by the ingest pipeline, with the hashing embedder (these tests are about
the evaluation's own arithmetic, not about embedding quality).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from hexlocal_cli import common
from hexlocal_cli.main import cli
from hexlocal_core.config import Settings
from hexlocal_core.errors import UserInputError
from hexlocal_core.evaluation import (
    EvalOptions,
    EvalQuery,
    Expectation,
    QueryStatus,
    load_queries,
    parse_queries,
    ref_matches,
    relevant_ids,
    run_eval,
)
from hexlocal_core.evaluation.metrics import mrr_at, percentile, recall_at
from hexlocal_core.evaluation.queries import KINDS
from hexlocal_core.index.sqlite.db import scalar
from hexlocal_core.index.sqlite.store import Store
from hexlocal_core.ingest.hexdocs import parse_hexdocs
from hexlocal_core.ingest.pipeline import IngestRequest, ingest_items
from hexlocal_core.ingest.tarball import read_docs_tarball
from hexlocal_core.model import Hit
from hexlocal_core.search.engine import SearchEngine, SearchOutcome
from hexlocal_core.search.rows import hit_from_row
from hexlocal_core.service import Hexlocal, build
from tests.fakes.fake_hex import FakeHex, client_for, settings_for
from tests.support.helpers import HashingEmbedder, chunk_of, item, write_package

PACKAGES = (("jason", "1.4.4"), ("nimble_pool", "1.1.0"))


def _index(store: Store, hexdocs: Path, package: str, version: str) -> None:
    data = (hexdocs / f"{package}-{version}.tar.gz").read_bytes()
    parsed = parse_hexdocs(
        read_docs_tarball(data, max_bytes=50_000_000), package=package, version=version
    )
    request = IngestRequest(package, version, "hexdocs", parsed.items)
    asyncio.run(ingest_items(store, HashingEmbedder(), request))


@pytest.fixture(scope="module")
def db_path(tmp_path_factory: pytest.TempPathFactory, corpus: Path) -> Path:
    path = tmp_path_factory.mktemp("eval") / "eval.db"
    store = Store(path)
    for package, version in PACKAGES:
        _index(store, corpus / "hexdocs", package, version)
    store.close()
    return path


@pytest.fixture
def store(db_path: Path) -> Iterator[Store]:
    store = Store(db_path)
    yield store
    store.close()


def query(
    qid: str,
    text: str,
    expect: Expectation,
    *,
    kind: str = "concept",
    package: str = "jason",
    version: str | None = "1.4.4",
) -> EvalQuery:
    return EvalQuery(qid, kind, package, text, expect, version=version)


# -- relevance rules -----------------------------------------------------------------------

REF, PAGE, ANY = "ref", "page", "any_ref"

RULES = [
    # a function ref: itself and its heading sub-items
    ("Jason.html#decode/2", REF, ["Jason.html#decode/2"], True),
    ("Jason.html#decode/2-examples", REF, ["Jason.html#decode/2"], True),
    ("Jason.html#decode!/2", REF, ["Jason.html#decode/2"], False),
    ("Jason.html#decode/20", REF, ["Jason.html#decode/2"], False),
    ("Other.html#decode/2", REF, ["Jason.html#decode/2"], False),
    # `_` is literal (a LIKE pattern would treat it as a wildcard)
    ("Jason.html#encodeXtoXiodata/2", REF, ["Jason.html#encode_to_iodata/2"], False),
    # a module page: its own doc and module sections, not its functions
    ("Jason.html", REF, ["Jason.html"], True),
    ("Jason.html#module-examples", REF, ["Jason.html"], True),
    ("Jason.html#decode/2", REF, ["Jason.html"], False),
    ("Jason.Encoder.html", REF, ["Jason.html"], False),
    # a guide section; the README's prefix rule also admits a longer slug
    ("readme.html#installation", REF, ["readme.html#installation"], True),
    ("readme.html#installation-notes", REF, ["readme.html#installation"], True),
    ("readme.html#usage", REF, ["readme.html#installation"], False),
    # a whole page: every item of it, functions included
    ("decompression.html", PAGE, ["decompression.html"], True),
    ("decompression.html#setup", PAGE, ["decompression.html"], True),
    ("Jason.html#decode/2", PAGE, ["Jason.html"], True),
    ("decompression.htmlx", PAGE, ["decompression.html"], False),
    ("Mint.HTTP.html", PAGE, ["decompression.html"], False),
    # several equally good answers
    ("readme.html#encoders", ANY, ["Jason.Encoder.html", "readme.html#encoders"], True),
    ("Jason.Encoder.html#module-deriving", ANY, ["Jason.Encoder.html", "readme.html"], True),
    ("Jason.Encoder.html#encode/2", ANY, ["Jason.Encoder.html", "readme.html"], False),
]


@pytest.fixture(scope="module")
def rule_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """One chunk per ref of the table, so the SQL side can be checked row by row."""
    store = Store(tmp_path_factory.mktemp("rules") / "rules.db")
    refs = sorted({ref for ref, *_ in RULES})
    chunks = [chunk_of(item(ref, f"text of {ref}", package="pkg")) for ref in refs]
    write_package(store, "pkg", chunks)
    yield store
    store.close()


@pytest.mark.parametrize(("ref", "form", "targets", "relevant"), RULES)
def test_relevance_rules_in_python_and_sql(
    rule_store: Store, ref: str, form: str, targets: list[str], relevant: bool
) -> None:
    expect = Expectation(form, tuple(targets))
    assert ref_matches(ref, expect) is relevant
    matched_refs = {
        row[0]
        for row in rule_store.conn.execute(
            "SELECT ref FROM chunks WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(sorted(relevant_ids(rule_store.session().chunks, "pkg", expect))),),
        )
    }
    assert (ref in matched_refs) is relevant


def test_relevance_is_scoped_to_the_package(store: Store) -> None:
    expect = Expectation(PAGE, ("NimblePool.html",))
    assert relevant_ids(store.session().chunks, "nimble_pool", expect)
    assert not relevant_ids(store.session().chunks, "jason", expect)


# -- the query format ----------------------------------------------------------------------


def test_query_file_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(
        '{"id": "a", "kind": "symbol", "package": "jason", "query": "Jason.decode/2", '
        '"expect": {"ref": "Jason.html#decode/2"}, "note": "why"}\n\n'
        '{"id": "b", "kind": "concept", "package": "jason", "version": "1.4.4", '
        '"query": "pretty", "expect": {"any_ref": ["A.html", "B.html"]}}\n',
        encoding="utf-8",
    )
    first, second = load_queries(path)
    assert first.version is None and first.expect == Expectation(REF, ("Jason.html#decode/2",))
    assert second.expect.to_dict() == {"any_ref": ["A.html", "B.html"]}


def _line(**changes: object) -> str:
    base: dict[str, object] = {
        "id": "a",
        "kind": "symbol",
        "package": "p",
        "query": "q",
        "expect": {"ref": "R"},
    }
    return json.dumps({**base, **changes})


@pytest.mark.parametrize(
    ("line", "complaint"),
    [
        ("not json", "not valid JSON"),
        ("[1]", "JSON object"),
        (_line(kind="other"), "kind"),
        (_line(query=""), "query"),
        (_line(expect={}), "exactly one"),
        (_line(expect={"ref": "R", "page": "P"}), "exactly one"),
        (_line(expect={"any_ref": []}), "non-empty list"),
        (_line(expect={"page": "P.html#x"}), "no `#`"),
        (_line(extra=1), "unknown key"),
    ],
)
def test_malformed_lines_name_the_line(line: str, complaint: str) -> None:
    with pytest.raises(UserInputError, match=complaint) as info:
        parse_queries(["", line], "set.jsonl")
    assert "set.jsonl line 2" in str(info.value)


def test_duplicate_ids_are_refused() -> None:
    line = _line()
    with pytest.raises(UserInputError, match="used twice"):
        parse_queries([line, line])


# -- statuses ------------------------------------------------------------------------------


async def test_broken_and_not_indexed_queries_are_reported_and_not_scored(store: Store) -> None:
    engine = SearchEngine(store, HashingEmbedder(), None)
    queries = [
        query("ok", "Jason.decode/2", Expectation(REF, ("Jason.html#decode/2",)), kind="symbol"),
        query("typo", "decode json", Expectation(REF, ("Jason.html#decod/2",))),
        query("other-version", "decode", Expectation(REF, ("Jason.html",)), version="1.2.2"),
        query("absent", "get", Expectation(REF, ("Req.html",)), package="req", version=None),
        query(
            "any-version",
            "pool",
            Expectation(REF, ("NimblePool.html",)),
            package="nimble_pool",
            version=None,
        ),
    ]
    report = await run_eval(engine, store, queries, options=EvalOptions(modes=("fts",)))
    status = {r.query.id: r.status for r in report.results}
    assert status == {
        "ok": QueryStatus.OK,
        "typo": QueryStatus.BROKEN,
        "other-version": QueryStatus.NOT_INDEXED,
        "absent": QueryStatus.NOT_INDEXED,
        "any-version": QueryStatus.OK,
    }
    broken = next(r for r in report.results if r.query.id == "typo")
    assert broken.runs == () and broken.relevant_rows == 0
    assert report.score("fts", "all").queries == 2  # type: ignore[union-attr]
    assert report.score("fts", "symbol").queries == 1  # type: ignore[union-attr]


# -- metrics on a hand-made ranking ---------------------------------------------------------


class ScriptedSearcher:
    """Returns, per query text, the first chunk of each listed ref as hits, plus a pool."""

    def __init__(
        self,
        store: Store,
        hits: Mapping[str, Sequence[str]],
        pool_extra: Mapping[str, Sequence[str]],
    ) -> None:
        self.store = store
        self.hits = hits
        self.pool_extra = pool_extra
        self.calls: list[tuple[str, str, int, str, bool]] = []

    def _ids(self, package: str, refs: Sequence[str]) -> list[int]:
        sql = "SELECT min(id) FROM chunks WHERE package = ? AND ref = ?"
        return [int(scalar(self.store.conn, sql, (package, ref))) for ref in refs]

    async def search(
        self, package: str, query: str, *, limit: int = 10, mode: str = "rrf", exact: bool = True
    ) -> SearchOutcome:
        self.calls.append((package, query, limit, mode, exact))
        ids = self._ids(package, self.hits.get(query, ()))[:limit]
        pool = ids + self._ids(package, self.pool_extra.get(query, ()))
        hits: tuple[Hit, ...] = tuple(hit_from_row(r) for r in self.store.hydrate(ids))
        return SearchOutcome(hits, (), {"fts": 0.5}, tuple(pool))


FILLER = [
    "Jason.html#encode/2",
    "Jason.html#encode!/2",
    "Jason.html#decode!/2",
    "Jason.Formatter.html#minimize/2",
    "Jason.Formatter.html#pretty_print/2",
    "Jason.Encode.html#value/2",
]


async def test_metrics_from_a_hand_made_ranking(store: Store) -> None:
    target = "Jason.html#decode/2"
    rankings = {
        "first": [target, *FILLER],  # rank 1
        "third": [*FILLER[:2], target, *FILLER[2:]],  # rank 3
        "seventh": [*FILLER, target],  # rank 7: outside top 5, inside top 10
        "missing": FILLER,  # not returned, but in the candidate pool
        "nowhere": FILLER,  # neither returned nor in the pool
    }
    kinds = {
        "first": "concept",
        "third": "concept",
        "seventh": "symbol",
        "missing": "symbol",
        "nowhere": "symbol",
    }
    queries = [query(q, q, Expectation(REF, (target,)), kind=kinds[q]) for q in rankings]
    searcher = ScriptedSearcher(store, rankings, {"missing": [target]})
    report = await run_eval(
        searcher, store, queries, options=EvalOptions(modes=("rrf", "fts"), warmup=False)
    )

    ranks = {r.query.id: r.run("rrf").rank for r in report.results}  # type: ignore[union-attr]
    assert ranks == {"first": 1, "third": 3, "seventh": 7, "missing": None, "nowhere": None}
    overall = report.score("rrf", "all")
    concept = report.score("rrf", "concept")
    symbol = report.score("rrf", "symbol")
    assert overall is not None and concept is not None and symbol is not None
    assert overall.queries == 5
    assert overall.recall_at_5 == pytest.approx(2 / 5)
    assert overall.mrr_at_10 == pytest.approx((1 + 1 / 3 + 1 / 7) / 5)
    assert overall.cand == pytest.approx(4 / 5)
    assert (concept.recall_at_5, concept.mrr_at_10, concept.cand) == pytest.approx(
        (1.0, (1 + 1 / 3) / 2, 1.0)
    )
    assert (symbol.recall_at_5, symbol.mrr_at_10, symbol.cand) == pytest.approx(
        (0.0, (1 / 7) / 3, 2 / 3)
    )
    assert report.score("fts", "all") is not None
    assert {call[2] for call in searcher.calls} == {10}  # enough hits for MRR@10
    assert {call[3] for call in searcher.calls} == {"rrf", "fts"}


@pytest.mark.parametrize(
    ("ranks", "recall", "mrr"),
    [
        ([], 0.0, 0.0),
        ([1, None], 0.5, 0.5),
        ([5, 6, 10, 11], 0.25, (1 / 5 + 1 / 6 + 1 / 10) / 4),
    ],
)
def test_recall_and_mrr(ranks: list[int | None], recall: float, mrr: float) -> None:
    assert recall_at(ranks) == pytest.approx(recall)
    assert mrr_at(ranks) == pytest.approx(mrr)


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 21)]
    assert (percentile(values, 50), percentile(values, 95), percentile(values, 100)) == (
        10.0,
        19.0,
        20.0,
    )
    assert percentile([], 50) == 0.0


# -- the report ----------------------------------------------------------------------------


async def test_report_json_shape(store: Store) -> None:
    engine = SearchEngine(store, HashingEmbedder(), None)
    queries = [
        query(
            "s",
            "Jason.Formatter.pretty_print/2",
            Expectation(REF, ("Jason.Formatter.html#pretty_print/2",)),
            kind="symbol",
        ),
        query("broken", "x", Expectation(PAGE, ("nothing.html",))),
    ]
    report = await run_eval(
        engine, store, queries, options=EvalOptions(modes=("fts", "vector")), source="q.jsonl"
    )
    data = json.loads(json.dumps(report.to_dict()))
    assert set(data) == {
        "source",
        "created_at",
        "fingerprint",
        "models",
        "options",
        "counts",
        "scores",
        "queries",
    }
    assert data["counts"] == {"ok": 1, "broken": 1, "not indexed": 0}
    fp = data["fingerprint"]
    assert [(p["name"], p["version"]) for p in fp["packages"]] == sorted(PACKAGES)
    assert (
        fp["total_chunks"] == sum(p["chunks"] for p in fp["packages"]) and len(fp["digest"]) == 16
    )
    assert fp["embed_model"] == "test:hashing"
    assert {(s["mode"], s["kind"]) for s in data["scores"]} == {
        (m, k) for m in ("fts", "vector") for k in ("concept", "symbol", "all")
    }  # one score per mode and kind the set has, and per mode over all kinds
    assert set(data["scores"][0]) == {
        "mode",
        "kind",
        "queries",
        "recall@5",
        "mrr@10",
        "cand",
        "median_ms",
    }
    ok = data["queries"][0]
    assert ok["status"] == "ok" and ok["expect"] == {"ref": "Jason.Formatter.html#pretty_print/2"}
    assert ok["fts_match"].startswith('"jason formatter pretty_print/2" OR')
    run = ok["runs"]["fts"]
    assert run["rank"] == 1 and run["in_pool"] is True and run["ms"] >= 0
    assert run["returned"][0] == {
        "ref": "Jason.Formatter.html#pretty_print/2",
        "title": "Jason.Formatter.pretty_print/2",
        "relevant": True,
    }
    assert data["queries"][1]["runs"] == {}


def test_fingerprint_changes_with_the_corpus(store: Store, db_path: Path) -> None:
    from hexlocal_core.evaluation import fingerprint

    before = fingerprint(store)
    assert before == fingerprint(store)
    assert before.version_of("jason") == "1.4.4" and before.version_of("req") is None


# -- the CLI -------------------------------------------------------------------------------

SET = "\n".join(
    json.dumps(q)
    for q in (
        {
            "id": "j-s",
            "kind": "symbol",
            "package": "jason",
            "version": "1.4.4",
            "query": "Jason.Formatter.pretty_print/2",
            "expect": {"ref": "Jason.Formatter.html#pretty_print/2"},
        },
        {
            "id": "j-c",
            "kind": "concept",
            "package": "jason",
            "version": "1.4.4",
            "query": "pretty print [json] with indentation",
            "expect": {"ref": "Jason.Formatter.html#pretty_print/2"},
        },
        {
            "id": "p-s",
            "kind": "symbol",
            "package": "nimble_pool",
            "version": "1.1.0",
            "query": "c:handle_checkout/4",
            "expect": {"ref": "NimblePool.html#c:handle_checkout/4"},
        },
        {
            "id": "gone",
            "kind": "symbol",
            "package": "jason",
            "version": "1.4.4",
            "query": "x",
            "expect": {"ref": "Nope.html"},
        },
    )
)


def _hashing_service(settings: Settings, *, load_models: bool = True) -> Hexlocal:
    return build(
        settings, embedder=HashingEmbedder(), registry=client_for(settings), load_models=False
    )


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, db_path: Path, tmp_path: Path) -> Path:
    monkeypatch.setenv("DATABASE_PATH", str(db_path))
    monkeypatch.setenv("PROJECT_ROOT", str(tmp_path))
    monkeypatch.setattr(common, "build_service", _hashing_service)
    path = tmp_path / "set.jsonl"
    path.write_text(SET, encoding="utf-8")
    return path


def test_cli_json(cli_env: Path, db_path: Path) -> None:
    # --database: eval measures its own index by default, never the project's.
    args = ["--queries", str(cli_env), "--database", str(db_path), "--modes", "fts,rrf", "--json"]
    result = CliRunner().invoke(cli, ["eval", *args])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["counts"] == {"ok": 3, "broken": 1, "not indexed": 0}
    assert data["options"]["modes"] == ["fts", "rrf"]
    assert {s["mode"] for s in data["scores"]} == {"fts", "rrf"}


def test_cli_table_verbose_and_show(cli_env: Path, db_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            "--queries",
            str(cli_env),
            "--database",
            str(db_path),
            "--modes",
            "fts",
            "--verbose",
            "--show",
            "2",
            "--only",
            "concept",
        ],
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "retrieval quality" in out and "digest" in out
    assert "ranks of the first relevant chunk" in out
    assert "pretty print [json] with indentation" in out  # brackets are not eaten as markup
    assert "j-s" not in out  # --only concept
    assert "BROKEN" not in out  # the broken query is a symbol one


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--modes", "fts,bogus"], "unknown mode"),
        (["--only", "both"], "Invalid value"),
        (["--show", "11"], "Invalid value"),
    ],
)
def test_cli_usage_errors_exit_2(cli_env: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["eval", "--queries", str(cli_env), *args])
    assert result.exit_code == 2
    assert message in result.output


def test_cli_malformed_query_file_exits_2(cli_env: Path) -> None:
    cli_env.write_text('{"id": "a"}\n', encoding="utf-8")
    result = CliRunner().invoke(cli, ["eval", "--queries", str(cli_env)])
    assert result.exit_code == 2
    assert "line 1" in result.output


def test_cli_needs_a_query_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No research set is a default: an installed wheel has none, and a checkout's sets are
    # held out or spent by rule (eval/README.md), never measured by accident.
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["eval"])
    assert result.exit_code == 2
    assert "--queries" in result.output


async def test_cli_ingest_indexes_the_query_set_first(
    fake_hex: FakeHex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for(fake_hex, tmp_path)
    for name, value in {
        "HEX_API_URL": fake_hex.api_url,
        "HEX_MIRROR": fake_hex.mirror_url,
        "PROJECT_ROOT": str(settings.project_root),
        "DATABASE_PATH": str(settings.database_path),
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(common, "build_service", _hashing_service)
    path = tmp_path / "pool.jsonl"
    path.write_text(SET.splitlines()[2] + "\n", encoding="utf-8")
    args = ["--queries", str(path), "--modes", "fts", "--ingest", "--json"]
    # The fake serves on this loop, so the command (its own asyncio.run) runs in a thread.
    result = await asyncio.to_thread(CliRunner().invoke, cli, ["eval", *args])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["counts"]["ok"] == 1
    assert [p["name"] for p in data["fingerprint"]["packages"]] == ["nimble_pool"]
    assert "indexing nimble_pool 1.1.0" in result.stderr
    assert any(r.path.endswith("nimble_pool-1.1.0.tar.gz") for r in fake_hex.requests)


async def test_scores_cover_the_kinds_the_set_has_and_no_others(store: Store) -> None:
    engine = SearchEngine(store, HashingEmbedder(), None)
    target = Expectation(REF, ("Jason.Formatter.html#pretty_print/2",))
    queries = [
        query("t", "make my JSON output readable with indentation", target, kind="task"),
        query(
            "e", "** (Jason.EncodeError) invalid byte 0xFF in pretty_print/2", target, kind="error"
        ),
    ]
    report = await run_eval(engine, store, queries, options=EvalOptions(modes=("fts",)))
    assert [s.kind for s in report.scores] == ["task", "error", "all"]  # KINDS order
    assert [s.queries for s in report.scores] == [1, 1, 2]
    assert set(KINDS) - {"task", "error"} == {"concept", "symbol"}  # what was left out
