"""Tiny hostile docs inputs that once burned minutes of CPU or gigabytes of memory, or
escaped as non-domain exceptions. A docs tarball and a project's `_build` are
untrusted input.

Each row builds the input, runs it through the real reader/parser/chunker, and checks
the answer is either a clear `HexlocalError` or a bounded result (with a notice or a
counted skip), within a generous time bound and, where memory was the problem, under a
memory bound (tracemalloc peak). The "before" column is what the row cost on the tree
before the fix.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import struct
import tarfile
import threading
import time
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from attrs import frozen

from hexlocal_core.chunk import chunk_items
from hexlocal_core.errors import HexlocalError, IngestError, UnsafeArchive
from hexlocal_core.ingest.beam import items_from_beam_dir, read_beam_docs
from hexlocal_core.ingest.beam_file import BeamSkipped
from hexlocal_core.ingest.exdoc_html import HtmlPage
from hexlocal_core.ingest.hexdocs import parse_hexdocs
from hexlocal_core.ingest.navigation import is_navigation_only
from hexlocal_core.ingest.tarball import read_docs_tarball
from hexlocal_core.model import DocItem

pytestmark = pytest.mark.integration

MB = 1024 * 1024
MAX_DOCS_BYTES = 200 * MB  # the default HEXLOCAL_MAX_DOCS_BYTES


# -- builders ----------------------------------------------------------------------------


def _tar(files: dict[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def _search_data(*items: dict[str, str]) -> bytes:
    value = {"content_type": "text/markdown", "items": list(items)}
    return ("searchData=" + json.dumps(value)).encode()


def _docs_tarball(doc: str, *, title: str = "Guide", ref: str = "guide.html") -> bytes:
    entry = {"type": "extras", "ref": ref, "title": title, "doc": doc}
    return gzip.compress(_tar({"dist/search_data-X.js": _search_data(entry)}), mtime=0)


def _beam(chunks: dict[str, bytes]) -> bytes:
    body = b"BEAM"
    for chunk_id, data in chunks.items():
        body += chunk_id.encode() + struct.pack(">I", len(data)) + data
        body += b"\0" * (-len(data) % 4)
    return b"FOR1" + struct.pack(">I", len(body)) + body


def _atoms(*names: str) -> bytes:
    out = struct.pack(">i", len(names))
    for name in names:
        out += bytes([len(name)]) + name.encode()
    return out


def _nil_list_beam(count: int = 60_000_000) -> bytes:
    """A `.beam` whose Docs chunk is a compressed ETF list of `count` NILs (~61 KB)."""
    term = bytes([108]) + struct.pack(">I", count) + bytes([106]) * count + bytes([106])
    docs = bytes([131, 80]) + struct.pack(">I", len(term)) + zlib.compress(term, 9)
    return _beam({"AtU8": _atoms("Elixir.Bomb"), "Docs": docs})


def _parse(tarball: bytes) -> tuple[list[DocItem], dict[str, int]]:
    files = read_docs_tarball(tarball, max_bytes=MAX_DOCS_BYTES, package="hostile")
    parsed = parse_hexdocs(files, package="hostile", version="1.0.0")
    return list(parsed.items), dict(parsed.counts)


def _parse_and_chunk(tarball: bytes) -> tuple[int, tuple[str, ...]]:
    items, _ = _parse(tarball)
    chunked = chunk_items(items)
    for chunk in chunked.chunks:  # chunks are still slices of the published text
        assert chunk.content in chunk.item.markdown
    notices = chunked.notices("hostile", "1.0.0")
    return len(chunked.chunks), tuple(n.code for n in notices)


# -- the table ---------------------------------------------------------------------------


@frozen
class Case:
    name: str
    before: str  # what it cost before the fix
    run: Callable[[Path], object]
    seconds: float  # generous upper bound
    max_mb: float | None = None  # tracemalloc peak bound, where memory was the problem


def _many_gzip_members(_tmp: Path) -> object:
    data = _docs_tarball("# Hello\n\ntext") + gzip.compress(b"", mtime=0) * 128_000
    assert len(data) > 2 * MB
    with pytest.raises(UnsafeArchive, match="gzip members"):
        read_docs_tarball(data, max_bytes=MAX_DOCS_BYTES)
    return "refused"


def _fence_lines(_tmp: Path) -> object:
    data = _docs_tarball("```\n" * 200_000)
    assert len(data) < 4096
    chunks, notices = _parse_and_chunk(data)
    assert 0 < chunks <= 1_200 and notices == ("docs_truncated",)
    return chunks


def _nested_list(_tmp: Path) -> object:
    data = _docs_tarball("".join("  " * level + "- x\n" for level in range(10_000)))
    chunks, notices = _parse_and_chunk(data)
    assert 0 < chunks <= 1_200 and notices == ("docs_truncated",)
    return chunks


def _heading_lines(_tmp: Path) -> object:
    # 20 items of 20k lines each: every item within its own bounds, the package
    # over its line budget, so later items are left out instead of parsed.
    items = [
        {"type": "extras", "ref": f"g{n}.html", "title": f"G{n}", "doc": "# h\nx\n" * 10_000}
        for n in range(20)
    ]
    data = gzip.compress(_tar({"dist/search_data-X.js": _search_data(*items)}), mtime=0)
    chunks, notices = _parse_and_chunk(data)
    assert chunks > 0 and notices == ("docs_truncated",)
    return chunks


def _nil_list_docs_chunk(_tmp: Path) -> object:
    data = _nil_list_beam()
    assert len(data) < 64 * 1024
    with pytest.raises(BeamSkipped, match="terms") as info:
        read_beam_docs(data)
    assert info.value.reason == "bad_etf"
    return "refused"


def _fifo_beam(tmp: Path) -> object:
    ebin = tmp / "_build" / "dev" / "lib" / "demo" / "ebin"
    ebin.mkdir(parents=True)
    os.mkfifo(ebin / "Elixir.Stuck.beam")
    found: list[object] = []
    worker = threading.Thread(
        target=lambda: found.append(items_from_beam_dir(ebin, package="demo", version="1.0.0")),
        daemon=True,  # if reading ever blocks again, the test fails instead of hanging
    )
    worker.start()
    worker.join(timeout=10)
    assert found, "reading a FIFO named *.beam blocked"
    result = found[0]
    assert getattr(result, "skipped", None) == {"not_regular": 1}
    return "skipped"


def _json_recursion_bomb(_tmp: Path) -> object:
    bomb = b"searchData=" + b"[" * 100_000 + b"]" * 100_000
    data = gzip.compress(_tar({"dist/search_data-X.js": bomb}), mtime=0)
    with pytest.raises(IngestError, match="nests its JSON too deeply"):
        _parse(data)
    return "refused"


def _lone_surrogates(_tmp: Path) -> object:
    # json.dumps writes a lone surrogate as the escape "\ud800", as a hostile index would.
    items, _ = _parse(_docs_tarball("text \ud800 more", title="T\udfff"))
    assert items[0].markdown == "text \ufffd more" and items[0].title == "T\ufffd"
    items[0].markdown.encode("utf-8")  # what storing it needs
    return len(items)


def _huge_arities(_tmp: Path) -> object:
    entries = [
        {"type": "function", "ref": f"M.html#f/{digits}", "title": "M.f", "doc": "d"}
        for digits in ("9" * 5000, "9" * 20, "256")
    ]
    entries.append({"type": "function", "ref": "M.html#g/2", "title": "M.g/2", "doc": "d"})
    data = gzip.compress(_tar({"dist/search_data-X.js": _search_data(*entries)}), mtime=0)
    items, counts = _parse(data)
    assert [i.arity for i in items] == [None, None, None, 2]
    assert counts["oversized_arity"] == 3
    return len(items)


def _long_member_name(_tmp: Path) -> object:
    name = "a" * (2 * MB) + ".html"
    data = gzip.compress(_tar({name: b"<p>x</p>"}), mtime=0)
    with pytest.raises(UnsafeArchive) as info:
        read_docs_tarball(data, max_bytes=MAX_DOCS_BYTES)
    assert len(str(info.value)) <= 300
    return "refused"


def _bracket_line(_tmp: Path) -> object:
    assert not is_navigation_only("- " + "[" * 50_000)
    return "content"


def _html_list_oddities(_tmp: Path) -> object:
    body = (
        '<ol start="abc"><li>a</li></ol><ol start="' + "9" * 5000 + '"><li>b</li></ol>'
        "<ul><li><pre>a" + "\n" * 100_000 + "b</pre></li></ul>"
    )
    page = f'<html><body><div id="moduledoc">{body}</div></body></html>'.encode()
    text = HtmlPage(page).own_markdown(None, set()) or ""
    assert "1. a" in text and "1. b" in text
    return len(text)


CASES = [
    Case("128k empty gzip members", "80 s", _many_gzip_members, 10),
    Case("200k fence lines in one doc", "> 4 min", _fence_lines, 30),
    Case("10k nested list levels", "137 s, 116k chunks", _nested_list, 30),
    Case("20 docs of 20k heading lines", "~40 s, all 400k lines parsed", _heading_lines, 60),
    Case("61 KB .beam: compressed list of NILs", "4.9 GB RSS", _nil_list_docs_chunk, 30, 400),
    Case("FIFO named *.beam in _build", "blocked forever", _fifo_beam, 15),
    Case("JSON recursion bomb in search_data", "RecursionError", _json_recursion_bomb, 10),
    Case("lone surrogate in doc and title", "UnicodeEncodeError", _lone_surrogates, 10),
    Case("ref arity of 5000 / 20 digits", "ValueError / OverflowError", _huge_arities, 10),
    Case("2 MB tar member name", "2 MB error message", _long_member_name, 10),
    Case("list line of 50k '['", "204 s", _bracket_line, 5),
    Case("<ol start=abc>, <pre> in <li>", "ValueError", _html_list_oddities, 10),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_ingest_input_is_answered_clearly_in_bounded_time(
    case: Case, tmp_path: Path
) -> None:
    if case.max_mb is not None:
        tracemalloc.start()
    started = time.perf_counter()
    try:
        case.run(tmp_path)
    except HexlocalError as exc:  # pragma: no cover - each row catches what it expects
        pytest.fail(f"unexpected {type(exc).__name__}: {exc}")
    finally:
        elapsed = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1] if case.max_mb is not None else 0
        if case.max_mb is not None:
            tracemalloc.stop()
    assert elapsed < case.seconds, f"{case.name}: {elapsed:.1f} s (was {case.before})"
    if case.max_mb is not None:
        assert peak < case.max_mb * MB, f"{case.name}: peak {peak / MB:.0f} MB"
