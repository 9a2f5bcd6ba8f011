"""The project's own docs: incremental indexing, search, drift, and `hexlocal index-docs`
(once, `--watch` in process, and Ctrl-C on a real `--watch` process).

Real files under tmp, real SQLite and chunker; the HashingEmbedder records every batch,
so "only the changed chunk was re-embedded" is asserted on what it was given.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hexlocal_cli.project_docs_cmd import watch_docs
from hexlocal_core.config import Settings
from hexlocal_core.index.sqlite.db import scalar
from hexlocal_core.ingest.markdown_files import PROJECT_PACKAGE
from hexlocal_core.service import Hexlocal
from hexlocal_core.usecases.project_docs import ProjectIndexReport
from tests.support.harness import CliHarness, service_for
from tests.support.helpers import HashingEmbedder, db
from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.integration

GUIDE_SECTIONS = (
    ("Building releases", "assemble"),
    ("Runtime configuration", "configure"),
    ("Hot upgrades", "upgrade"),
    ("Clustering nodes", "cluster"),
)


def section(title: str, word: str, extra: str = "") -> str:
    """A section of ~700 characters: the chunker keeps each one a chunk of its own."""
    body = " ".join(
        f"The {word} step {i} explains how {word} behaves when the release boots." for i in range(9)
    )
    return f"## {title}\n\n{body}{extra}\n"


def guide(extra: str = "") -> str:
    parts = [section(t, w, extra if w == "upgrade" else "") for t, w in GUIDE_SECTIONS]
    return "# Deployment guide\n\n" + "\n".join(parts)


def write_project(root: Path) -> None:
    (root / "docs").mkdir(parents=True)
    (root / "README.md").write_text("# Widget app\n\nWidgets for everyone.\n")
    (root / "docs" / "guide.md").write_text(guide())
    faq = section("Why widgets", "widget") + "\n" + section("Licensing", "license")
    (root / "docs" / "faq.md").write_text("# FAQ\n\n" + faq)
    (root / "docs" / "notes.txt").write_text("not markdown: never indexed")


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    project = tmp_path / "project"
    write_project(project)
    env = {
        "PROJECT_ROOT": str(project),
        "DATABASE_PATH": str(tmp_path / "index.db"),
        "AI_RERANK_MODEL": "off",
        "HEX_API_URL": "http://127.0.0.1:9/api",  # never called: nothing here is a package
        "HEX_MIRROR": "http://127.0.0.1:9/repo",
    }
    return Settings.from_env(env)


@pytest.fixture
def embedder() -> HashingEmbedder:
    return HashingEmbedder()


@pytest.fixture
async def service(settings: Settings, embedder: HashingEmbedder) -> AsyncIterator[Hexlocal]:
    svc = service_for(settings, embedder)
    yield svc
    await svc.aclose()


def counts(report: ProjectIndexReport) -> tuple[int, ...]:
    return (
        report.files,
        report.chunks,
        report.unchanged,
        report.added,
        report.removed,
        report.changed,
        report.embedded,
    )


async def test_first_index_counts_every_file_and_chunk(service: Hexlocal) -> None:
    report = await service.index_project_docs()
    # README (1 chunk), guide (one chunk per section: 4), faq (2); notes.txt is no markdown.
    assert counts(report) == (3, 7, 0, 7, 0, 0, 7)
    refs = scalar(db(service), "SELECT group_concat(DISTINCT ref) FROM chunks")
    assert sorted(refs.split(",")) == ["README.md", "docs/faq.md", "docs/guide.md"]
    again = await service.index_project_docs()
    assert counts(again) == (3, 7, 7, 0, 0, 0, 0)


async def test_editing_one_section_re_embeds_only_that_chunk(
    service: Hexlocal, settings: Settings, embedder: HashingEmbedder
) -> None:
    await service.index_project_docs()
    embedder.batches.clear()
    (settings.project_root / "docs" / "guide.md").write_text(guide(" Upgrades need appups."))
    report = await service.index_project_docs()
    assert counts(report) == (3, 7, 6, 0, 0, 1, 1)
    [[text]] = embedder.batches
    assert text.startswith("Deployment guide\n## Hot upgrades") and "appups" in text


async def test_deleting_a_file_removes_its_chunks(
    service: Hexlocal, settings: Settings, embedder: HashingEmbedder
) -> None:
    await service.index_project_docs()
    embedder.batches.clear()
    (settings.project_root / "docs" / "faq.md").unlink()
    report = await service.index_project_docs()
    assert counts(report) == (2, 5, 5, 0, 2, 0, 0)
    assert embedder.batches == []
    conn = db(service)
    assert scalar(conn, "SELECT count(*) FROM chunks WHERE ref = 'docs/faq.md'") == 0
    assert scalar(conn, "SELECT count(*) FROM chunk_vecs") == 5
    for path in ("README.md", "docs/guide.md"):
        (settings.project_root / path).unlink()
    emptied = await service.index_project_docs()
    assert counts(emptied) == (0, 0, 0, 0, 5, 0, 0)
    assert PROJECT_PACKAGE not in [p.name for p in service.list_packages()]


async def test_search_finds_a_section(service: Hexlocal) -> None:
    before = await service.search_project_docs("cluster")
    assert not before.hits
    assert [n.code for n in before.notices] == ["project_docs_not_indexed"]
    await service.index_project_docs()
    result = await service.search_project_docs("cluster", limit=3)
    top = result.hits[0]
    assert (top.ref, top.title) == ("docs/guide.md", "Deployment guide")
    assert top.content.startswith("## Clustering nodes")
    assert top.source == "project" and top.source_url and top.source_url.startswith("file://")


async def test_drift_rereads_the_paths_that_were_indexed(
    service: Hexlocal, settings: Settings
) -> None:
    guide_path = settings.project_root / "docs" / "guide.md"
    await service.index_project_docs([guide_path])
    [report] = await service.drift()
    assert (report.unchanged, report.added, report.removed, report.drifted) == (4, 0, 0, False)
    guide_path.write_text(guide(" Changed."))
    [changed] = await service.drift()
    assert (changed.unchanged, changed.changed, changed.drifted) == (3, 1, True)


# -- the command ------------------------------------------------------------------------------


async def test_index_docs_command(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    cli = CliHarness(monkeypatch)
    cli.use(settings)
    first = await cli.run("index-docs", "--json")
    assert first.exit_code == 0, first.output
    data = json.loads(first.stdout)
    assert (data["files"], data["chunks"], data["added"], data["embedded"]) == (3, 7, 7, 7)
    only_guide = await cli.run("index-docs", str(settings.project_root / "docs" / "guide.md"))
    assert only_guide.exit_code == 0, only_guide.output
    assert "Project docs" in only_guide.stdout
    outside = await cli.run("index-docs", str(settings.database_path.parent))
    assert outside.exit_code == 2 and "outside PROJECT_ROOT" in outside.output


async def test_watch_reindexes_on_save_and_stops(service: Hexlocal, settings: Settings) -> None:
    await service.index_project_docs()
    stop = asyncio.Event()
    reports: asyncio.Queue[tuple[ProjectIndexReport, set[str]]] = asyncio.Queue()
    errors: list[Exception] = []
    watcher = asyncio.create_task(
        watch_docs(
            service,
            None,
            stop_event=stop,
            on_report=lambda r, changed: reports.put_nowait((r, changed)),
            on_error=errors.append,
            debounce_ms=100,
            root=settings.project_root,
        )
    )
    target = settings.project_root / "docs" / "guide.md"
    try:
        # The watcher has no "ready" signal: save until a run reports (bounded).
        for attempt in range(40):
            target.write_text(guide(f" Saved {attempt}."))
            (settings.project_root / "docs" / "scratch.txt").write_text(str(attempt))
            try:
                report, changed = await asyncio.wait_for(reports.get(), 0.5)
                break
            except TimeoutError:
                continue
        else:
            pytest.fail("no re-index within 20 s of saving")
        assert (report.changed, report.added, report.removed) == (1, 0, 0)
        assert report.embedded == 1
        assert str(target) in changed and not any(p.endswith(".txt") for p in changed)
    finally:
        stop.set()
        runs = await asyncio.wait_for(watcher, 10)
    assert runs >= 1 and errors == []


@pytest.mark.timeout(180)  # its own waits: 60 s for the watch, 60 s for the exit
def test_ctrl_c_stops_watching_with_exit_0(settings: Settings, tmp_path: Path) -> None:
    """A real `hexlocal index-docs --watch` (default build, local model) and a real SIGINT."""
    keep = ("HEXLOCAL_MODEL_CACHE", "XDG_DATA_HOME", "XDG_CACHE_HOME", "HOME", "PATH")
    env = {name: os.environ[name] for name in keep if name in os.environ}
    env.update(
        PYTHONPATH=str(REPO_ROOT),  # the checkout under test, not whatever is installed
        HF_HUB_OFFLINE="1",
        PROJECT_ROOT=str(settings.project_root),
        DATABASE_PATH=str(settings.database_path),
        AI_RERANK_MODEL="off",
    )
    hexlocal = Path(sys.executable).parent / "hexlocal"
    lines: queue.Queue[str] = queue.Queue()
    with subprocess.Popen(
        [str(hexlocal), "index-docs", "--watch"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:  # closes the pipes on the way out
        reader = threading.Thread(target=_pump, args=(proc.stderr, lines), daemon=True)
        reader.start()
        try:
            _wait_for_line(lines, "Watching", timeout=60)
            proc.send_signal(signal.SIGINT)
            # 60 s, not 20: two full-suite runs here saw no exit within 20 s (the process
            # was then killed, so whether it was slow or stuck is unknown); the stderr it
            # printed is in the failure message to tell the two apart next time.
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                said = []
                while not lines.empty():
                    said.append(lines.get())
                raise AssertionError(f"no exit 60 s after SIGINT; stderr: {said}") from None
            assert proc.stdout is not None
            out = proc.stdout.read()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
            reader.join(timeout=5)
    assert proc.returncode == 0
    assert "7 chunks" in out  # the first run's line
    rest = []
    while not lines.empty():
        rest.append(lines.get())
    assert any("Stopped watching" in line for line in rest), rest
    assert not any("Traceback" in line for line in rest), rest


def _pump(stream: object, lines: queue.Queue[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        lines.put(line)


def _wait_for_line(lines: queue.Queue[str], marker: str, *, timeout: float) -> None:
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1)
        except queue.Empty:
            continue
        seen.append(line)
        if marker in line:
            return
    pytest.fail(f"{marker!r} never appeared on stderr: {seen}")
