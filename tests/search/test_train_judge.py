"""The judge's training script, run for two steps on a tiny slice so it cannot rot.

Tests never train for real: this mines a handful of groups from jason's docs (indexed with
the real embedder, as the script's index must be), takes two optimiser steps, and checks
what the product later loads: the exported checkpoint builds the same ONNX graph torch
computes, the int8 copy is made and judged, and the provenance says what was done.
Torch is a training dependency only (`pip install torch==2.13.0`); without it this skips.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from hexlocal_core.adapters.local_embedder import LocalEmbedder
from hexlocal_core.index.sqlite.store import Store
from hexlocal_core.ingest.hexdocs import parse_hexdocs
from hexlocal_core.ingest.pipeline import IngestRequest, ingest_items
from hexlocal_core.ingest.tarball import read_docs_tarball
from tests.support.paths import HEXDOCS, REPO_ROOT

pytest.importorskip("torch", reason="training needs torch: pip install torch==2.13.0")
sys.path.insert(0, str(REPO_ROOT / "scripts"))

import train_judge  # noqa: E402


@pytest.fixture(scope="module")
def real_index(tmp_path_factory: pytest.TempPathFactory, local_embedder: LocalEmbedder) -> Path:
    path = tmp_path_factory.mktemp("judge-index") / "index.db"
    files = read_docs_tarball((HEXDOCS / "jason-1.4.4.tar.gz").read_bytes(), max_bytes=10**8)
    items = parse_hexdocs(files, package="jason", version="1.4.4").items
    store = Store(path)
    try:
        asyncio.run(
            ingest_items(store, local_embedder, IngestRequest("jason", "1.4.4", "hexdocs", items))
        )
    finally:
        store.close()
    return path


def test_two_steps_export_a_checkpoint_the_product_loads(real_index: Path, tmp_path: Path) -> None:
    out = tmp_path / "judge"
    argv = ["--db", str(real_index), "--out", str(out), "--corpus", str(HEXDOCS)]
    argv += ["--anchors", "4", "--cloze", "4", "--labelled", "dev", "--max-steps", "2"]
    assert train_judge.main(argv) == 0

    provenance = json.loads((out / "provenance.json").read_text(encoding="utf-8"))
    assert provenance["steps"] == 2
    assert provenance["seed"] == 0 and provenance["script"] == "scripts/train_judge.py"
    assert provenance["groups"]["anchor"] > 0 and provenance["groups"]["cloze"] > 0
    assert provenance["groups"]["labelled"] > 0  # the dev set's jason queries
    assert provenance["packages"] == ["jason"]
    assert provenance["check"]["torch_vs_onnx_max_abs"] < 1e-4
    assert 0.0 <= provenance["check"]["int8_rank_agreement"] <= 1.0
    for name in ("model.safetensors", "config.json", "tokenizer.json", "model.onnx"):
        assert (out / name).is_file(), name
    assert (out / "model.int8.onnx").is_file()


def test_held_out_packages_give_no_pairs(real_index: Path, tmp_path: Path) -> None:
    argv = ["--db", str(real_index), "--out", str(tmp_path / "judge"), "--corpus", str(HEXDOCS)]
    argv += ["--hold-out", "jason", "--labelled", "dev", "--max-steps", "1"]
    with pytest.raises(SystemExit, match="no training pairs"):
        train_judge.main(argv)


def test_the_sets_that_judge_the_judge_are_never_training_data(tmp_path: Path) -> None:
    argv = ["--db", str(tmp_path / "x.db"), "--out", str(tmp_path / "j")]
    with pytest.raises(SystemExit):
        train_judge.main([*argv, "--labelled", "heldout_eighth"])


def test_an_anchor_becomes_a_query_without_the_name_it_links() -> None:
    from hexlocal_core.ingest.anchors import Anchor

    anchor = Anchor(
        "elixir",
        "Date.html#compare/2",
        "elixir",
        "Enum.html#sort/2-sorting-structs",
        "Use Date.compare/2 to sort dates by when they happened, not by their fields.",
        "Date.compare/2",
    )
    query = train_judge.anchor_query(anchor)
    assert query is not None and "compare/2" not in query
    assert "sort dates by when they happened" in query
    short = Anchor("elixir", "Date.html", "elixir", "x.html", "See Date.", "Date")
    assert train_judge.anchor_query(short) is None


def test_an_items_first_sentence_is_its_cloze_query() -> None:
    doc = "Returns a stream that runs the given function concurrently on each element.\n\nMore."
    assert train_judge.first_sentence(doc) == (
        "Returns a stream that runs the given function concurrently on each element.",
        "More.",
    )
    assert train_judge.first_sentence("    iex> code()") is None
    assert train_judge.first_sentence("Too short. Rest.") is None
