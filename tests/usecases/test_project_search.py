"""Project-wide search (`Hexlocal.search_project_deps`): a mix.lock in tmp, the fake hex
serving the corpus's real tarballs, the real parser and SQLite. The HashingEmbedder keeps
ingestion fast; its vectors are noise, so the relevance tests search in `fts` mode: each
package's own BM25 ranks, fused across packages, which is what size must not distort."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import attrs
import pytest

from hexlocal_core.config import Settings
from hexlocal_core.errors import UserInputError
from hexlocal_core.index.sqlite.store import Store
from hexlocal_core.model import Hit, PackageState, Phase, SearchMode, SyncState
from hexlocal_core.ports import Vectors
from hexlocal_core.search.cross_package import fuse_packages, search_many
from hexlocal_core.search.engine import SearchEngine
from hexlocal_core.search.tuning import POOL
from hexlocal_core.service import Hexlocal, build
from hexlocal_core.usecases.project_search import ALL_PACKAGES, PROJECT_VERSIONS, is_searchable
from tests.fakes.fake_hex import FakeHex, client_for, settings_for
from tests.support.helpers import (
    HashingEmbedder,
    ScriptedReranker,
    chunk_of,
    cli_builds_with_fakes,
    item,
    project_root,
    write_package,
)
from tests.support.paths import SHARED_EVAL, shared
from tests.support.pg import package_write
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

INDEXED = {"jason": "1.4.4", "mime": "2.0.7", "nimble_options": "1.1.1"}
NOT_INDEXED = {"telemetry": "1.2.1"}
WAIT_S = 20.0  # upper bound for the background sync to finish; never a speed assertion


def lock_text(pins: dict[str, str]) -> str:
    lines = [
        f'  "{name}": {{:hex, :{name}, "{version}", "abc", [:mix], [], "hexpm", "def"}},'
        for name, version in pins.items()
    ]
    return "%{\n" + "\n".join(lines) + "\n}\n"


def project(fake: FakeHex, tmp_path: Path, pins: dict[str, str]) -> Settings:
    settings: Settings = settings_for(
        fake, tmp_path, ai_rerank_model="off", sync_elixir=False, sync_on_start=False
    )
    root = settings.project_root
    (root / "mix.exs").write_text("defmodule App.MixProject do\nend\n")
    (root / "mix.lock").write_text(lock_text(pins))
    return settings


def make(fake: FakeHex, tmp_path: Path, pins: dict[str, str]) -> Hexlocal:
    settings = project(fake, tmp_path, pins)
    return build(
        settings,
        embedder=HashingEmbedder(),
        reranker=None,
        registry=client_for(settings),
        load_models=False,
    )


@pytest.fixture
async def svc(fake_hex: FakeHex, tmp_path: Path) -> AsyncIterator[Hexlocal]:
    service = make(fake_hex, tmp_path, {**INDEXED, **NOT_INDEXED})
    for name, version in INDEXED.items():
        await service.ingest(name, version)
    yield service
    await service.aclose()


def labels(hits: tuple[Hit, ...]) -> list[str]:
    return [f"{h.package}@{h.version}" for h in hits]


async def test_a_query_one_package_answers_puts_that_package_first(svc: Hexlocal) -> None:
    result = await svc.search_project_deps("MIME type of a file extension", limit=5, mode="fts")
    assert (result.package, result.version_source) == (ALL_PACKAGES, PROJECT_VERSIONS)
    assert result.hits, result.notices
    assert result.hits[0].package == "mime" and result.hits[0].version == "2.0.7"
    for hit in result.hits:  # every hit names the package and the locked version
        assert hit.version == INDEXED[hit.package]
    assert [h.final_rank for h in result.hits] == list(range(1, len(result.hits) + 1))
    # Where the time went reaches the caller: the engine's stages, the fusion, the total.
    assert {"fts", "merge", "total", "packages"} <= set(result.timings_ms), result.timings_ms

    decode = await svc.search_project_deps("decode JSON into maps with atom keys", mode="fts")
    assert decode.hits[0].package == "jason", labels(decode.hits)


async def test_unindexed_packages_are_named_once_and_queued(svc: Hexlocal) -> None:
    result = await svc.search_project_deps("validate keyword options", mode="fts")
    missing = [n for n in result.notices if n.code == "packages_not_indexed"]
    assert len(missing) == 1
    assert "telemetry 1.2.1" in missing[0].message
    assert not any(h.package == "telemetry" for h in result.hits)

    # Queued for the sync worker, which indexes it in the background.
    async def indexed() -> bool:
        state = {s.name: s for s in await svc.project_packages()}["telemetry"].state
        assert state in (SyncState.QUEUED, SyncState.INDEXING, SyncState.INDEXED), state
        return state is SyncState.INDEXED

    await eventually(indexed, what="the sync worker indexing telemetry", timeout=WAIT_S)
    again = await svc.search_project_deps("attach a handler to an event", mode="fts")
    assert not any(n.code == "packages_not_indexed" for n in again.notices)
    assert "telemetry" in {h.package for h in again.hits}


async def test_left_out_packages_are_grouped_by_why_with_names_not_reasons(
    fake_hex: FakeHex, tmp_path: Path
) -> None:
    # plug 1.20.3 has no docs tarball: it fails, with a long reason, on every sync.
    pins = {**INDEXED, "plug": "1.20.3"}
    service = make(fake_hex, tmp_path, pins)
    try:
        await service.sync(wait=True)
        states = {s.name: s for s in await service.project_packages()}
        assert states["plug"].state is SyncState.FAILED and states["plug"].reason
        # A dependency added to the lock since: not indexed yet when the search comes.
        (project_root(service) / "mix.lock").write_text(lock_text(pins | NOT_INDEXED))
        result = await service.search_project_deps("decode", mode="fts")
    finally:
        await service.aclose()
    (notice,) = [n for n in result.notices if n.code == "packages_not_indexed"]
    assert notice.message.startswith("2 of the project's 5 packages are not searched yet.")
    assert "(telemetry 1.2.1)" in notice.message
    failed = "1 failed (plug 1.20.3): list_indexed_packages (`hexlocal list`) says why"
    assert failed in notice.message
    assert states["plug"].reason[:40] not in notice.message  # the reason is not repeated
    assert len(notice.message) < 400


async def test_a_package_without_all_its_vectors_answers_by_keyword_and_says_so(
    svc: Hexlocal, tmp_path: Path
) -> None:
    # telemetry's chunks are in, its vectors not (an ingestion cut short): project-wide
    # search takes it in, rather than calling it missing, and says it ranks by keyword.
    chunks = [
        chunk_of(
            item(
                "telemetry.html#attach/4",
                "Attaches the handler to the event.",
                package="telemetry",
                version="1.2.1",
            )
        )
    ]
    store = Store(tmp_path / "hexlocal.db")  # the index the svc fixture opened
    try:
        write = attrs.evolve(package_write("telemetry", "1.2.1", chunks), vectors=None)
        store.replace_package(write)
    finally:
        store.close()
    result = await svc.search_project_deps("attach a handler to an event", mode="fts")
    assert "telemetry" in {h.package for h in result.hits}
    assert not any(n.code == "packages_not_indexed" for n in result.notices)
    (notice,) = [n for n in result.notices if n.code == "embedding_in_progress"]
    assert notice.message.startswith("telemetry answered by keyword")


async def test_rerank_switched_off_runs_as_rrf_and_the_result_says_so(svc: Hexlocal) -> None:
    query = "encode a map to JSON"
    indexed = list(INDEXED)  # the queued package may finish between two searches
    asked = await svc.search_project_deps(query, packages=indexed, mode="rerank")
    fused = await svc.search_project_deps(query, packages=indexed, mode="rrf")
    assert asked.mode is not None and asked.mode.requested is SearchMode.RERANK
    assert asked.mode.used is SearchMode.RRF and "AI_RERANK_MODEL=off" in (asked.mode.reason or "")
    assert labels(asked.hits) == labels(fused.hits)  # the same ranking, now named
    assert fused.to_dict()["mode"] == {"requested": "rrf", "used": "rrf", "reason": None}
    one = await svc.search_docs("jason", query, mode="rerank")
    assert one.to_dict()["mode"]["used"] == "rrf"
    assert labels(one.hits) == labels((await svc.search_docs("jason", query, mode="rrf")).hits)
    for search in (
        svc.search_project_deps(query, mode="bm25"),
        svc.search_docs("jason", query, mode="bm25"),
    ):
        with pytest.raises(UserInputError, match="unknown search mode 'bm25'"):
            await search


async def test_packages_restricts_the_scope(svc: Hexlocal) -> None:
    result = await svc.search_project_deps(
        "MIME type of a file extension", packages=["jason", "nimble_options"], mode="fts"
    )
    assert result.hits and {h.package for h in result.hits} <= {"jason", "nimble_options"}
    assert not any(n.code == "packages_not_indexed" for n in result.notices)

    unknown = await svc.search_project_deps("decode", packages=["jason", "ecto"], mode="fts")
    codes = {n.code: n.message for n in unknown.notices}
    assert "ecto" in codes["package_not_in_project"]
    assert {h.package for h in unknown.hits} == {"jason"}

    with pytest.raises(UserInputError):
        await svc.search_project_deps("decode", packages=["Not A Name"])


async def test_a_big_package_does_not_drown_a_small_one(fake_hex: FakeHex, tmp_path: Path) -> None:
    # plug 1.19.2 has 547 chunks, nimble_options 64; "options" is all over plug's docs.
    service = make(fake_hex, tmp_path, {"plug": "1.19.2", "nimble_options": "1.1.1"})
    try:
        for name, version in (("plug", "1.19.2"), ("nimble_options", "1.1.1")):
            await service.ingest(name, version)
        sizes = {p.name: p.chunk_count for p in service.list_packages()}
        assert sizes["plug"] > 5 * sizes["nimble_options"]
        query = "validate options against a schema"
        small = await service.search_docs("nimble_options", query, limit=1, mode="fts")
        result = await service.search_project_deps(query, limit=5, mode="fts")
        refs = [(h.package, h.ref) for h in result.hits]
        assert ("nimble_options", small.hits[0].ref) in refs, refs
    finally:
        await service.aclose()


def hit(
    package: str,
    rank: int,
    *,
    fts: bool = True,
    vec: bool = True,
    content: str = "",
    exact: bool = False,
) -> Hit:
    return Hit(
        chunk_id=hash((package, rank)) & 0xFFFF,
        package=package,
        version="1.0.0",
        ref=f"{package}.html#{rank}",
        title=f"{package} {rank}",
        doc_type="function",
        content=content,
        hexdocs_url="",
        source_url=None,
        fts_rank=rank if fts else None,
        vec_rank=rank if vec else None,
        final_rank=rank,
        exact=exact,
    )


def test_fusion_weighs_ranks_not_sizes() -> None:
    engine = SearchEngine(None, None, None)  # type: ignore[arg-type]  # only its tuning is read
    big = [hit("elixir", r) for r in range(1, 6)]
    small = [hit("jason", 1)]
    vector_only = [hit("mime", 1, fts=False)]
    fused = fuse_packages([big, vector_only, small], engine, "encode a map", 5)
    packages = [h.package for h in fused]
    # Rank 1 of the small package ties rank 1 of the big one and beats its rank 2; a
    # package only the vector arm reached comes after every keyword match at equal rank.
    assert packages[:2] == ["elixir", "jason"] and "mime" not in packages[:5]
    assert len(fused) == 5


def test_keyword_only_fusion_prefers_the_hit_with_more_of_the_query() -> None:
    engine = SearchEngine(None, None, None)  # type: ignore[arg-type]  # only its tuning is read
    one_word = [hit("alpha", 1, vec=False, content="a pool of workers")]
    every_word = [hit("beta", 2, vec=False, content="checkout a worker from the pool, lazily")]
    fused = fuse_packages([one_word, every_word], engine, "lazily checkout pool worker", 2)
    # beta's hit is only its package's second, but it holds every word of the query.
    assert [h.package for h in fused] == ["beta", "alpha"]


def test_exact_hits_keep_their_packages_order() -> None:
    engine = SearchEngine(None, None, None)  # type: ignore[arg-type]  # only its tuning is read
    # The item's chunks as the package returned them (top-down), though the arms placed
    # its third chunk best; another package's non-exact hit comes after them all.
    item_chunks = [
        attrs.evolve(hit("iex", r, exact=True), fts_rank=4 - r, vec_rank=4 - r) for r in (1, 2, 3)
    ]
    fused = fuse_packages([[hit("mix", 1)], item_chunks], engine, "break!/4", 4)
    assert [h.ref for h in fused[:3]] == ["iex.html#1", "iex.html#2", "iex.html#3"]
    assert fused[3].package == "mix"


async def test_the_chunk_nearest_the_query_leads_whichever_package(tmp_path: Path) -> None:
    # Titles and texts of digits only: no query word to cover, so only meaning can rank.
    store = Store(tmp_path / "index.db")
    for name, base in (("alpha", 100), ("beta", 200)):
        docs = [item(f"{base + n}", f"{base + n} {n}", package=name) for n in range(1, 4)]
        write_package(store, name, [chunk_of(d) for d in docs])
    target = chunk_of(item("202", "202 2", package="beta"))
    engine = SearchEngine(store, HashingEmbedder(), None)
    try:
        outcome = await search_many(
            engine, ["alpha", "beta"], target.embedding_text(), limit=3, mode="vector"
        )
    finally:
        store.close()
    # Each package's own first hit has rank 1; beta's is the query's own text.
    assert (outcome.hits[0].package, outcome.hits[0].ref) == ("beta", "202")
    assert {"embed", "vec", "distances", "merge", "total"} <= set(outcome.timings_ms)


async def test_project_wide_search_embeds_the_question_as_one_search_does(
    tmp_path: Path,
) -> None:
    # One embedding for all packages, of the same texts a single-package search embeds:
    # the question and its plain words (search/query_rewrite.py), in one call.
    store = Store(tmp_path / "index.db")
    for name in ("alpha", "beta"):
        write_package(store, name, [chunk_of(item(f"{name}1", "text", package=name))])
    embedder = HashingEmbedder()
    calls: list[list[str]] = []
    original = embedder.embed

    async def recording(texts: Sequence[str]) -> Vectors:
        calls.append(list(texts))
        return await original(texts)

    embedder.embed = recording  # type: ignore[method-assign]
    engine = SearchEngine(store, embedder, None)
    question = "How can I make my pool bigger?"
    try:
        await search_many(engine, ["alpha", "beta"], question, limit=3, mode="vector")
        across = list(calls)
        calls.clear()
        await engine.search("alpha", question, limit=3, mode="vector", exact=False)
    finally:
        store.close()
    assert across == calls == [[question, "make pool bigger"]]


# -- the faces ------------------------------------------------------------------------------


async def test_mcp_search_docs_without_a_package_searches_the_project(
    fake_hex: FakeHex, tmp_path: Path
) -> None:
    from fastmcp import Client
    from mcp_types import TextContent

    from hexlocal_mcp.server import create_server

    settings = project(fake_hex, tmp_path, INDEXED)

    def factory() -> Hexlocal:
        return build(
            settings,
            embedder=HashingEmbedder(),
            reranker=None,
            registry=client_for(settings),
            load_models=False,
        )

    async with Client(create_server(factory)) as client:
        for name in ("jason", "mime"):
            await client.call_tool("search_docs", {"package": name, "query": "x"})
        found = await client.call_tool(
            "search_docs", {"query": "MIME type of a file extension"}, raise_on_error=False
        )
        assert not found.is_error
        data = found.structured_content
        assert data is not None and data["package"] == ALL_PACKAGES
        assert data["results"][0]["package"] == "mime"
        block = found.content[0]
        assert isinstance(block, TextContent)
        assert "mime@2.0.7" in block.text
        assert "nimble_options 1.1.1" in block.text  # named: locked, not indexed
        both = await client.call_tool(
            "search_docs",
            {"query": "x", "package": "jason", "packages": ["mime"]},
            raise_on_error=False,
        )
        assert both.is_error


async def test_cli_search_all(
    fake_hex: FakeHex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from click.testing import CliRunner

    from hexlocal_cli.main import cli

    service = make(fake_hex, tmp_path, INDEXED)
    await service.ingest("jason", "1.4.4")
    await service.aclose()
    for name, value in {
        "HEX_API_URL": fake_hex.api_url,
        "HEX_MIRROR": fake_hex.mirror_url,
        "PROJECT_ROOT": str(tmp_path / "project"),
        "DATABASE_PATH": str(tmp_path / "hexlocal.db"),
        "AI_RERANK_MODEL": "off",
        "HEXLOCAL_SYNC_ELIXIR": "false",
    }.items():
        monkeypatch.setenv(name, value)

    cli_builds_with_fakes(monkeypatch)

    def run(*args: str) -> tuple[int, str]:
        result = CliRunner().invoke(cli, list(args), prog_name="hexlocal")
        return result.exit_code, result.output

    code, out = await asyncio.to_thread(run, "search", "--all", "decode JSON", "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["package"] == ALL_PACKAGES and data["results"][0]["package"] == "jason"
    code, out = await asyncio.to_thread(run, "search", "--all", "decode JSON", "--mode", "fts")
    assert code == 0 and "jason@1.4.4" in out, out
    code, out = await asyncio.to_thread(run, "search", "--all", "jason", "decode")
    assert code == 2 and "only QUERY" in out


# -- the eval mode that drops the package ----------------------------------------------------


async def test_eval_all_packages_drops_each_querys_package(svc: Hexlocal) -> None:
    from hexlocal_core.evaluation import EvalOptions, load_queries

    dev = shared(SHARED_EVAL / "dev.jsonl", "the shared eval set")
    queries = [q for q in load_queries(dev) if q.package in INDEXED]
    assert queries
    runs = {}
    for all_packages in (False, True):
        options = EvalOptions(modes=("fts",), all_packages=all_packages, warmup=False)
        report = await svc.evaluate(queries, options, source="dev")
        runs[all_packages] = report
    per_package, project = runs[False], runs[True]
    assert [r.status for r in project.results] == [r.status for r in per_package.results]
    prefixes = {"jason": "Jason", "mime": "MIME", "nimble_options": "NimbleOptions"}
    foreign = [
        doc.ref
        for r in project.results
        if (run := r.run("fts")) is not None
        for doc in run.returned
        if not doc.ref.startswith(prefixes[r.query.package])
        and not doc.ref.startswith(("readme", "changelog", "license"))
    ]
    assert foreign, "every hit came from the query's own package: it was not dropped"
    score = {s.kind: s for s in project.scores}["all"]
    assert score.queries == len(queries) and score.recall_at_5 > 0


# -- rerank across packages ------------------------------------------------------------------


def _three_packages(store: Store) -> list[str]:
    names = ["alpha", "beta", "gamma"]
    for base, name in enumerate(names, start=1):
        docs = [
            item(f"{name}-{n}", f"connection pool checkout {base}{n} {n}", package=name)
            for n in range(1, 8)
        ]
        write_package(store, name, [chunk_of(d) for d in docs])
    return names


async def test_project_wide_rerank_reads_the_fused_top_once(tmp_path: Path) -> None:
    # One cross-encoder call over the fused list's pool, not one per package (40 packages
    # made that 400 query-passage pairs a query), and its opinion still moves the list.
    store = Store(tmp_path / "index.db")
    names = _three_packages(store)
    prefers_last = ScriptedReranker(lambda n: [float(i) for i in range(n)])
    engine = SearchEngine(store, HashingEmbedder(), prefers_last)
    query = "connection pool checkout"
    try:
        fused = await search_many(engine, names, query, limit=5, mode="rrf")
        reranked = await search_many(engine, names, query, limit=5, mode="rerank")
    finally:
        store.close()
    assert prefers_last.calls == [(query, POOL)]
    assert all(h.rerank_score is not None for h in reranked.hits)
    assert [h.chunk_id for h in reranked.hits] != [h.chunk_id for h in fused.hits]
    # Bounded authority, as in one package: retrieval's first hit keeps a top-5 place.
    assert fused.hits[0].chunk_id in {h.chunk_id for h in reranked.hits}
    assert [h.final_rank for h in reranked.hits] == [1, 2, 3, 4, 5]
    assert {"rerank", "merge", "total"} <= set(reranked.timings_ms)


async def test_project_wide_rerank_without_a_cross_encoder_says_so_once(tmp_path: Path) -> None:
    store = Store(tmp_path / "index.db")
    names = _three_packages(store)
    engine = SearchEngine(store, HashingEmbedder(), None)
    try:
        first = await search_many(engine, names, "connection pool", limit=5, mode="rerank")
        second = await search_many(engine, names, "connection pool", limit=5, mode="rerank")
        fused = await search_many(engine, names, "connection pool", limit=5, mode="rrf")
    finally:
        store.close()
    assert [n.code for n in first.notices] == ["rerank_unavailable"]
    assert second.notices == ()
    assert [h.chunk_id for h in first.hits] == [h.chunk_id for h in fused.hits]


@pytest.mark.parametrize("phase", list(Phase))
def test_a_package_whose_chunks_are_in_stays_searched_in_every_phase(phase: Phase) -> None:
    """Sync's second pass finishes a package from its stored chunks, starting at
    `resolving`: the package must not drop out of a project search meanwhile."""
    indexing = PackageState(
        "telemetry",
        SyncState.INDEXING,
        kind="hex",
        locked_version="1.2.1",
        indexed_version="1.2.1",
        chunks=75,
        phase=phase,
    )
    assert is_searchable(indexing)
    assert not is_searchable(attrs.evolve(indexing, indexed_version="1.2.0"))  # another version
    assert not is_searchable(attrs.evolve(indexing, chunks=0, indexed_version=None))
