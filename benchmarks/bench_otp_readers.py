"""OTP docs readers: erts, kernel and stdlib of the corpus's OTP installs, read into items.

OTP 25 keeps its docs in `doc/chunks/*.chunk` (erlang+html, converted to markdown); OTP 27
and 29 in each beam's Docs chunk (markdown; OTP 29 compressed). Prints one row per release
and application: modules, items, items whose text is "Equivalent to ..." or "Documented
together with ..." (their own or their `equiv`'s), chunks, and the seconds to read the
folder (files, ETF, conversion, equiv and opaque types) and to chunk.

    python benchmarks/bench_otp_readers.py [--corpus DIR] [--json]
"""

from __future__ import annotations

import argparse
import os
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.common import finish  # noqa: E402
from hexlocal_core.chunk import SectionChunker  # noqa: E402
from hexlocal_core.ingest.beam import (  # noqa: E402
    BeamItems,
    items_from_beam_dir,
    items_from_chunk_dir,
)
from hexlocal_core.ingest.otp_links import otp_link  # noqa: E402

APPS = ("erts", "kernel", "stdlib")
RELEASES = ("otp-25.2.3", "otp-27.3.4.1", "otp-29.1.2")


def _read(lib: Path, app: str, major: int) -> tuple[str, BeamItems]:
    (folder,) = lib.glob(f"{app}-*")
    version = folder.name.split("-", 1)[1]
    link = otp_link(app, major)
    chunks = folder / "doc" / "chunks"
    if chunks.is_dir():
        return version, items_from_chunk_dir(chunks, package=app, version=version, link=link)
    return version, items_from_beam_dir(folder / "ebin", package=app, version=version, link=link)


def _row(lib: Path, release: str, app: str) -> dict[str, Any]:
    major = int(release.split("-")[1].split(".")[0])
    started = time.perf_counter()
    version, found = _read(lib, app, major)
    read_s = time.perf_counter() - started
    started = time.perf_counter()
    chunks = [c for item in found.items for c in SectionChunker().chunk(item)]
    chunk_s = time.perf_counter() - started
    equiv = sum(
        item.markdown.startswith(("Equivalent to", "Documented together with"))
        for item in found.items
    )
    return {
        "release": release,
        "app": f"{app} {version}",
        "source": ".chunk" if (lib / f"{app}-{version}" / "doc" / "chunks").is_dir() else "beam",
        "modules": found.modules,
        "items": len(found.items),
        "equiv_text": equiv,
        "chunks": len(chunks),
        "read_s": round(read_s, 3),
        "chunk_s": round(chunk_s, 3),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=REPO.parent / "shared/corpus/otp")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for release in RELEASES:
            tarball = args.corpus / f"{release}-install.tar.gz"
            if not tarball.is_file():
                print(f"skipped {release}: {tarball} not found", file=sys.stderr)
                continue
            with tarfile.open(tarball) as tar:
                tar.extractall(tmp, filter="data")
            rows.extend(_row(Path(tmp) / release / "lib", release, app) for app in APPS)
    table = Table(*rows[0].keys(), title="OTP docs readers") if rows else Table()
    for row in rows:
        table.add_row(*(str(v) for v in row.values()))
    return finish({"rows": rows}, table, load_before, as_json=args.json)


if __name__ == "__main__":
    sys.exit(main())
