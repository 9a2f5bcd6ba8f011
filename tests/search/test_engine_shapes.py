"""The engine on pasted error messages, over a real index of a real package's docs.

The index is jason 1.4.4 from the shared corpus (parse + `ingest_items`), embedded by the
deterministic hashing embedder: what is tested is what the engine searches for when the
query is an error paste, not embedding quality.
"""

from __future__ import annotations

import pytest

from hexlocal_core.index.sqlite.store import Store
from hexlocal_core.search.engine import SearchEngine, plan_query
from hexlocal_core.search.fusion import rrf
from hexlocal_core.search.query_shape import Shape
from hexlocal_core.search.tuning import SearchTuning
from tests.support.helpers import HashingEmbedder

PACKAGE = "jason"  # 1.4.4, the `jason_index` fixture (conftest.py)
# As Elixir prints it: the raising function in the message and the top stack frame, the
# argument dump and the app's own frames around it.
FUNCTION_CLAUSE = "\n".join(
    [
        "** (FunctionClauseError) no function clause matching in Jason.Formatter.minimize/2",
        "",
        "    The following arguments were given to Jason.Formatter.minimize/2:",
        "",
        "        # 1",
        '        %{"user" => %{"id" => 1}}',
        "",
        "    (jason 1.4.4) lib/formatter.ex:99: Jason.Formatter.minimize/2",
        "    (my_app 0.1.0) lib/my_app/export.ex:12: MyApp.Export.run/1",
    ]
)


@pytest.fixture
def store(jason_store: Store) -> Store:
    return jason_store


async def _top_refs(store: Store, query: str, tuning: SearchTuning) -> list[str]:
    engine = SearchEngine(store, HashingEmbedder(), None, tuning=tuning)
    outcome = await engine.search(PACKAGE, query, limit=5, mode="rrf")
    return [hit.ref for hit in outcome.hits]


async def test_an_error_paste_finds_the_function_that_raised(store: Store) -> None:
    refs = await _top_refs(store, FUNCTION_CLAUSE, SearchTuning())
    assert refs[0] == "Jason.Formatter.html#minimize/2"
    # Searched as raw text, the paste's noise puts a sub-section (its options) first.
    raw = await _top_refs(store, FUNCTION_CLAUSE, SearchTuning(error_queries=False))
    assert raw[0] != "Jason.Formatter.html#minimize/2"


@pytest.mark.parametrize(
    "query",
    ["Jason.Formatter.minimize/2", "pretty print JSON with indentation", "encode_to_iodata!/2"],
)
def test_other_shapes_are_searched_as_typed(query: str) -> None:
    plan = plan_query(query, SearchTuning())
    assert (plan.fts_text, plan.vec_texts[0]) == (query, query)


def test_an_error_plan_drops_the_noise_and_keeps_the_raising_function() -> None:
    plan = plan_query(FUNCTION_CLAUSE, SearchTuning())
    assert plan.shape is Shape.ERROR
    for text in (plan.fts_text, *plan.vec_texts):
        assert "lib/formatter.ex" not in text and "99" not in text and "1.4.4" not in text
        assert "Jason.Formatter.minimize/2" in text


@pytest.mark.parametrize(("shape", "leader"), [(Shape.ERROR, "keyword"), (Shape.PROSE, "vector")])
def test_an_error_paste_leans_on_the_keyword_arm(shape: Shape, leader: str) -> None:
    # Pasted errors are the docs' own words (the message, the raising function): the
    # keyword arm alone matched the fusion on both error sets, so its second-best chunk
    # outranks the vector arm's best; a question's arms weigh the same.
    keyword_ranking, vector_ranking = ["shared", "keyword"], ["vector"]
    fused = rrf([keyword_ranking, vector_ranking], weights=SearchTuning().arm_weights(shape))
    assert [k for k in fused if k in ("keyword", "vector")][0] == leader
