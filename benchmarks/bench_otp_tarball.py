"""OTP doc tarball benchmark: one download, then each application's items from it.

The tarball (default: the shared corpus's OTP 27.3.4.1, trimmed to erts, kernel and
stdlib) is served by the loopback fake of erlang/otp's release downloads
(tests/fakes/fake_otp.py: a 302 to signed storage, as GitHub answers) and fetched by
`OtpDocsClient` once per application asked, as ingesting them one after another would:
the requests column shows the kept tarball serving all but the first. Then
`release_apps`, and per application `app_items` (read + ExDoc parse), timed, and again
under tracemalloc for the peak of Python allocations. Prints one row per application and
the tarball's figures (compressed, uncompressed tar stream, entries).

    python benchmarks/bench_otp_tarball.py [--tarball FILE] [--apps erts,kernel,stdlib] [--json]

A full release's tarball (every application, ~30 MB) can be measured with --tarball; its
name must be otp_doc_html_<vsn>.tar.gz.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import io
import os
import re
import sys
import tarfile
import tempfile
import time
import tracemalloc
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.common import finish  # noqa: E402
from hexlocal_core.ingest.otp_tarball import app_items, release_apps  # noqa: E402
from tests.fakes.fake_otp import FakeOtpReleases, otp_client_for, otp_settings_for  # noqa: E402

DEFAULT_TARBALL = REPO.parent / "shared/corpus/otp/otp_doc_html_27.3.4.1.tar.gz"
_NAME = re.compile(r"^otp_doc_html_(?P<vsn>(?P<major>[0-9]+)[0-9.]*)\.tar\.gz$")
MIB = 1024 * 1024


async def download(data: bytes, vsn: str, times: int) -> tuple[float, int]:
    """Seconds for the first fetch through the fake, and the asset requests `times` cost."""
    async with FakeOtpReleases() as fake:
        fake.tarballs[vsn] = data
        with tempfile.TemporaryDirectory(prefix="bench-otp-") as folder:
            settings = otp_settings_for(fake, Path(folder))
            async with otp_client_for(settings) as client:
                started = time.perf_counter()
                await client.fetch_release_docs(vsn)
                first_s = time.perf_counter() - started
                for _ in range(times - 1):
                    await client.fetch_release_docs(vsn)
        return first_s, len(fake.requests_to(fake.asset_path(vsn)))


def stream_figures(data: bytes) -> tuple[int, int]:
    """(uncompressed tar stream bytes, entries), by the standard library."""
    raw = gzip.decompress(data)
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tf:
        return len(raw), sum(1 for _ in tf)


def measure_app(data: bytes, app: str, version: str, major: int) -> dict[str, Any]:
    started = time.perf_counter()
    docs = app_items(data, app, version=version, otp_major=major)
    parse_s = time.perf_counter() - started
    tracemalloc.start()
    app_items(data, app, version=version, otp_major=major)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    types = Counter(item.doc_type.value for item in docs.items)
    return {
        "app": app,
        "version": version,
        "items": len(docs.items),
        "api": len(docs.items) - types["extras"],
        "guides": types["extras"],
        "parse_s": parse_s,
        "peak_mib": peak / MIB,
    }


def table(data: dict[str, Any]) -> Table:
    out = Table(
        title=(
            f"{data['tarball']}: {data['compressed_mib']:.1f} MiB, tar stream "
            f"{data['stream_mib']:.1f} MiB in {data['entries']} entries, {data['apps_in_release']} "
            f"apps (release_apps {data['release_apps_s']:.2f} s); first download "
            f"{data['download_s']:.2f} s, {data['asset_requests']} request(s) for "
            f"{len(data['rows'])} apps"
        )
    )
    for column in ("app", "version", "items", "api", "guides", "parse s", "peak MiB"):
        out.add_column(column, justify="left" if column in ("app", "version") else "right")
    for r in data["rows"]:
        out.add_row(
            r["app"],
            r["version"],
            str(r["items"]),
            str(r["api"]),
            str(r["guides"]),
            f"{r['parse_s']:.2f}",
            f"{r['peak_mib']:.0f}",
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tarball", type=Path, default=DEFAULT_TARBALL)
    parser.add_argument("--apps", default="erts,kernel,stdlib")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    name = _NAME.match(args.tarball.name)
    if name is None or not args.tarball.is_file():
        print(f"{args.tarball}: not an otp_doc_html_<vsn>.tar.gz file", file=sys.stderr)
        return 1
    load = os.getloadavg()[0]
    data = args.tarball.read_bytes()
    apps = [a.strip() for a in args.apps.split(",") if a.strip()]
    download_s, requests = asyncio.run(download(data, name["vsn"], len(apps)))
    started = time.perf_counter()
    versions = release_apps(data)
    release_s = time.perf_counter() - started
    stream, entries = stream_figures(data)
    rows = [measure_app(data, app, versions[app], int(name["major"])) for app in apps]
    result = {
        "tarball": args.tarball.name,
        "compressed_mib": len(data) / MIB,
        "stream_mib": stream / MIB,
        "entries": entries,
        "apps_in_release": len(versions),
        "release_apps_s": release_s,
        "download_s": download_s,
        "asset_requests": requests,
        "rows": rows,
    }
    return finish(result, table(result), load, as_json=args.json)


if __name__ == "__main__":
    raise SystemExit(main())
