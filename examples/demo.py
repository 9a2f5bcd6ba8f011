"""`make demo`: a real search, end to end, with the local models.

With network access hexlocal talks to hex.pm itself. On a machine without it (CI, this
sandbox) the demo serves the shared corpus of real HexDocs tarballs from a loopback fake
of hex.pm, so the same download -> parse -> embed -> search path runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("HEXLOCAL_SHARED", REPO.parent / "shared")) / "corpus"

QUERIES = [
    ("jason", "1.4.4", "can decoding user-supplied JSON into atom keys be abused?"),
    ("jason", "1.4.4", "Jason.encode!/2"),
    ("nimble_pool", "1.1.0", "what happens when a worker is checked out for too long"),
]


def start_fake_hex() -> str:
    sys.path.insert(0, str(REPO))
    import asyncio

    from tests.fakes.fake_hex import FakeHex

    ready = threading.Event()
    holder: dict[str, str] = {}

    def serve() -> None:
        async def main() -> None:
            async with FakeHex(corpus=CORPUS) as fake:
                holder["api"], holder["mirror"] = fake.api_url, fake.mirror_url
                ready.set()
                while True:
                    await asyncio.sleep(3600)

        asyncio.run(main())

    threading.Thread(target=serve, daemon=True).start()
    ready.wait(10)
    return f"{holder['api']} {holder['mirror']}"


def main() -> int:
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    workdir = Path(tempfile.mkdtemp(prefix="hexlocal-demo-"))
    env.setdefault("DATABASE_PATH", str(workdir / "demo.db"))
    env.setdefault("PROJECT_ROOT", str(workdir))
    env.setdefault("AI_RERANK_MODEL", "off")
    if "HEX_API_URL" not in env and CORPUS.is_dir():
        api, mirror = start_fake_hex().split()
        env["HEX_API_URL"], env["HEX_MIRROR"] = api, mirror
        print(f"(no network: serving ../shared/corpus as hex.pm at {api})", file=sys.stderr)
    hexlocal = str(Path(sys.executable).parent / "hexlocal")
    for package, version, query in QUERIES:
        print(f"\n$ hexlocal search {package} {query!r} --version {version}", flush=True)
        started = time.perf_counter()
        code = subprocess.call(
            [hexlocal, "search", package, query, "--version", version, "--limit", "3"], env=env
        )
        print(f"({time.perf_counter() - started:.1f} s, exit {code})", flush=True)
        if code != 0:
            return code
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
