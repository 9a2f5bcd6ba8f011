"""Processes sharing one SQLite index ingest a package version once.

The claim is a kernel file lock beside the database (index/sqlite/file_claim.py). Checked with
two stores on one file in this process (each lock is its own open file, as another
process's would be), with a real second process that is killed while it holds the claim,
and end to end: two services on one index, the second one's search meeting a package the
first is embedding.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hexlocal_core.index.sqlite.file_claim import claim_dir
from hexlocal_core.index.sqlite.store import Store
from hexlocal_core.service import Hexlocal, build
from tests.fakes.fake_hex import FakeHex
from tests.support.helpers import GatedEmbedder, HashingEmbedder
from tests.support.hex_fixtures import client_for, settings_for
from tests.support.paths import REPO_ROOT
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

REPO = REPO_ROOT
WAIT_S = 20.0  # upper bound for a state to be reached; never a speed assertion


def test_one_claim_per_package_version_until_released(tmp_path: Path) -> None:
    first, second = Store(tmp_path / "index.db"), Store(tmp_path / "index.db")
    try:
        held = first.try_ingest_claim("jason", "1.4.4")
        assert held is not None
        assert second.try_ingest_claim("jason", "1.4.4") is None
        other = second.try_ingest_claim("jason", "1.4.5")  # another version is not held
        assert other is not None
        held.release()
        held.release()  # a second release does nothing
        again = second.try_ingest_claim("jason", "1.4.4")
        assert again is not None
        again.release()
        other.release()
    finally:
        first.close()
        second.close()


def test_a_process_killed_while_holding_the_claim_leaves_it_free(tmp_path: Path) -> None:
    db = tmp_path / "index.db"
    Store(db).close()
    holder = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from hexlocal_core.index.sqlite.file_claim import try_file_claim
        claim = try_file_claim(Path({str(db)!r}), "jason", "1.4.4")
        print("held" if claim is not None else "refused", flush=True)
        time.sleep(600)
        """
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True, env=env
    )
    store = Store(db)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        assert store.try_ingest_claim("jason", "1.4.4") is None
        proc.send_signal(signal.SIGKILL)  # no release, no cleanup: the kernel drops the lock
        proc.wait(timeout=WAIT_S)
        claim = store.try_ingest_claim("jason", "1.4.4")
        assert claim is not None
        claim.release()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=WAIT_S)
        if proc.stdout is not None:
            proc.stdout.close()
        store.close()


def test_no_lock_file_folder_means_no_claim_not_no_ingestion(tmp_path: Path) -> None:
    store = Store(tmp_path / "index.db")
    try:
        claim_dir(store.path).write_text("a file where the folder would go")
        claim = store.try_ingest_claim("jason", "1.4.4")
        assert claim is not None  # unclaimed: the store's writes stay whole regardless
        claim.release()
    finally:
        store.close()


def _service(fake: FakeHex, tmp_path: Path, embedder: HashingEmbedder) -> Hexlocal:
    settings = settings_for(
        fake,
        tmp_path,
        ai_rerank_model="off",
        sync_on_start=False,
        answer_while_embedding=True,
        database_path=tmp_path / "shared.db",
    )
    return build(
        settings, embedder=embedder, reranker=None, registry=client_for(settings), load_models=False
    )


async def test_a_second_process_answers_from_the_first_ones_work_without_embedding(
    fake_hex: FakeHex, tmp_path: Path
) -> None:
    # Two MCP clients open on one project: both ask about jason while the first one's
    # vectors are still being made. The second answers by keyword and waits for those
    # vectors instead of embedding the package a second time.
    gated, counting = GatedEmbedder(), HashingEmbedder()
    first = _service(fake_hex, tmp_path, gated)
    second = _service(fake_hex, tmp_path, counting)
    try:
        answer = await first.search_docs("jason", "decode JSON", "1.4.4")
        assert answer.hits and any(n.code == "embedding_in_progress" for n in answer.notices)
        other = await second.search_docs("jason", "decode JSON", "1.4.4")
        assert other.hits and any(n.code == "embedding_in_progress" for n in other.notices)
        gated.gate.set()
        await eventually(  # it polls the claim
            lambda: second.ingestion_status("jason")[0].state == "done",
            what="the second process's job ending once the first one's vectors are in",
            timeout=WAIT_S,
            detail=lambda: second.ingestion_status("jason"),
        )
        assert all(p.complete for p in second.list_packages())
        assert counting.batches == []  # the second embedded none of jason's chunks
        assert len(fake_hex.requests_to("/repo/docs/jason-*")) == 1
    finally:
        await first.aclose()
        await second.aclose()
