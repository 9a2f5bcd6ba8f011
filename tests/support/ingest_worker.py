"""A process that ingests one package, for the crash-safety test to kill at random points.

    python -m tests.support.ingest_worker PACKAGE VERSION

Settings come from the environment (DATABASE_PATH, PROJECT_ROOT, HEX_API_URL,
HEX_MIRROR: a standalone fake hex.pm). The service is the real one (real parser, real
SQLite, the durable job row) with the deterministic HashingEmbedder, so a run takes
seconds. Each phase is printed as it starts (`phase <name> <seconds since start>`), so the
test knows where a kill landed; the last line is `done <report as JSON>`.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from hexlocal_core.config import Settings
from hexlocal_core.index.rows import PackageWrite
from hexlocal_core.index.sqlite.store import Store
from hexlocal_core.model import IngestProgress
from hexlocal_core.service import build
from tests.fakes.fake_hex import client_for
from tests.support.helpers import HashingEmbedder

STARTED = time.perf_counter()


def say(line: str) -> None:
    # stdout is a pipe read by the test: flush each line so a SIGKILL loses none.
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def main(package: str, version: str) -> None:
    settings = Settings.from_env()
    service = build(
        settings,
        embedder=HashingEmbedder(),
        reranker=None,
        registry=client_for(settings),
        load_models=False,
    )
    last = ""
    write = Store.replace_package

    def replace_package(store: Store, package: PackageWrite) -> list[int]:
        # Progress says "writing" just before the chunks' transaction; its edges are exact
        # here. The vectors follow, a transaction per slice ("embedding").
        say(f"phase transaction {time.perf_counter() - STARTED:.3f}")
        ids = write(store, package)
        say(f"phase committed {time.perf_counter() - STARTED:.3f}")
        return ids

    Store.replace_package = replace_package  # type: ignore[method-assign]

    def on_progress(p: IngestProgress) -> None:
        nonlocal last
        if p.phase != last:
            last = p.phase
            say(f"phase {p.phase} {time.perf_counter() - STARTED:.3f}")

    say(f"phase started {time.perf_counter() - STARTED:.3f}")
    try:
        report, _ = await service.ingest(package, version, progress=on_progress)
    finally:
        await service.aclose()
    assert report is not None
    say("done " + json.dumps({"chunks": report.chunks, "seconds": report.seconds}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
