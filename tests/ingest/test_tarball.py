"""read_docs_tarball: hostile archives are refused, real HexDocs layouts are read."""

from __future__ import annotations

import gzip
import io
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from hexlocal_core.errors import IngestError, UnsafeArchive
from hexlocal_core.ingest.tarball import is_parser_input, read_docs_tarball
from tests.support.paths import HEXDOCS

MB = 1024 * 1024


def _member(name: str, data: bytes = b"", **attrs: object) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for key, value in attrs.items():
        setattr(info, key, value)
    return info, data


def _tarball(*members: tuple[tarfile.TarInfo, bytes], fmt: int = tarfile.GNU_FORMAT) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=fmt) as tf:
        for info, data in members:
            tf.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return gzip.compress(raw.getvalue())


def _regular(name: str, text: str = "<html></html>") -> tuple[tarfile.TarInfo, bytes]:
    return _member(name, text.encode())


# -- accepted layouts ------------------------------------------------------------------


def test_hex_layout_is_read() -> None:
    data = _tarball(
        _regular("index.html"),
        _regular("Jason.html", "<p>doc</p>"),
        _regular("dist/search_data-ABC.js", "searchData={}"),
        _regular("Jason.md", "# `Jason`"),
        _regular("llms.txt", "# jason"),
    )
    files = read_docs_tarball(data, max_bytes=MB)
    assert files == {
        "index.html": b"<html></html>",
        "Jason.html": b"<p>doc</p>",
        "dist/search_data-ABC.js": b"searchData={}",
        "Jason.md": b"# `Jason`",
        "llms.txt": b"# jason",
    }


def test_dot_slash_prefixes_and_directory_entries_are_normalised() -> None:
    data = _tarball(
        _member("./", type=tarfile.DIRTYPE),
        _regular("./EEx.html", "eex"),
        _member("./dist/", type=tarfile.DIRTYPE),
        _regular("./dist/sidebar_items-1.js", "sidebarNodes={}"),
        _regular("./.build", "EEx.html"),
    )
    files = read_docs_tarball(data, max_bytes=MB)
    assert files == {"EEx.html": b"eex", "dist/sidebar_items-1.js": b"sidebarNodes={}"}


def test_keep_selects_files_and_none_keeps_everything() -> None:
    data = _tarball(_regular("a.html"), _regular("dist/app.css", "css"), _regular(".build", "x"))
    assert set(read_docs_tarball(data, max_bytes=MB)) == {"a.html"}
    assert set(read_docs_tarball(data, max_bytes=MB, keep=None)) == {
        "a.html",
        "dist/app.css",
        ".build",
    }


@pytest.mark.parametrize(
    ("path", "kept"),
    [
        ("Jason.html", True),
        ("Jason.md", True),
        ("llms.txt", True),
        ("dist/search_data-1.js", True),
        ("dist/html-elixir-1.css", False),
        ("assets/logo.png", False),
        ("jason.epub", False),
        ("docs_config.js", False),
        (".build", False),
    ],
)
def test_is_parser_input(path: str, kept: bool) -> None:
    assert is_parser_input(path) is kept


def test_real_elixir_app_tarball(corpus: Path) -> None:
    files = read_docs_tarball((HEXDOCS / "eex-1.18.4.tar.gz").read_bytes(), max_bytes=50 * MB)
    assert "EEx.html" in files
    assert any(p.startswith("dist/search_data-") for p in files)
    assert not any(p.startswith(("./", "/")) for p in files)
    assert ".build" not in files


def test_cap_counts_uncompressed_bytes_not_compressed(corpus: Path) -> None:
    data = (HEXDOCS / "jason-1.4.4.tar.gz").read_bytes()
    uncompressed = len(gzip.decompress(data))
    assert read_docs_tarball(data, max_bytes=uncompressed)
    with pytest.raises(UnsafeArchive, match="limit"):
        read_docs_tarball(data, max_bytes=uncompressed // 2)


# -- refused archives ------------------------------------------------------------------

UNSAFE: list[tuple[str, Callable[[], bytes], str]] = [
    ("traversal", lambda: _tarball(_regular("../x.html")), "escaping"),
    ("nested traversal", lambda: _tarball(_regular("dist/../../x.html")), "escaping"),
    ("absolute path", lambda: _tarball(_regular("/etc/passwd")), "absolute"),
    ("windows drive", lambda: _tarball(_regular("C:/x.html")), "absolute"),
    (
        "symlink",
        lambda: _tarball(_member("a.html", type=tarfile.SYMTYPE, linkname="/etc/passwd")),
        "link",
    ),
    (
        "hardlink",
        lambda: _tarball(
            _regular("a.html"), _member("b.html", type=tarfile.LNKTYPE, linkname="a.html")
        ),
        "link",
    ),
    ("char device", lambda: _tarball(_member("tty", type=tarfile.CHRTYPE)), "device"),
    ("block device", lambda: _tarball(_member("sda", type=tarfile.BLKTYPE)), "device"),
    ("fifo", lambda: _tarball(_member("pipe", type=tarfile.FIFOTYPE)), "FIFO"),
]


@pytest.mark.parametrize(("case", "build", "words"), UNSAFE, ids=[c[0] for c in UNSAFE])
def test_unsafe_members_are_refused(case: str, build: Callable[[], bytes], words: str) -> None:
    with pytest.raises(UnsafeArchive, match=words) as info:
        read_docs_tarball(build(), max_bytes=MB, package="evil")
    assert "evil" in str(info.value)


def test_unsafe_member_refused_even_when_not_kept() -> None:
    with pytest.raises(UnsafeArchive):
        read_docs_tarball(_tarball(_regular("../fonts/x.woff", "x")), max_bytes=MB)


@pytest.mark.parametrize("name", ["index.html", "fonts/huge.woff"], ids=["kept", "skipped"])
def test_gzip_bomb_is_refused_quickly(name: str) -> None:
    bomb = _tarball(_member(name, b"\0" * (10 * MB)))
    assert len(bomb) < 100 * 1024  # 10 MB of zeros compress to a few KB
    started = time.perf_counter()
    with pytest.raises(UnsafeArchive, match="decompression bomb"):
        read_docs_tarball(bomb, max_bytes=MB, package="bomb")
    assert time.perf_counter() - started < 2.0


def test_huge_pax_header_is_capped() -> None:
    # tarfile reads PAX headers whole into memory; the cap must stop it first.
    info, data = _regular("a.html")
    info.pax_headers = {"comment": "x" * (3 * MB)}
    bomb = _tarball((info, data), fmt=tarfile.PAX_FORMAT)
    with pytest.raises(UnsafeArchive):
        read_docs_tarball(bomb, max_bytes=MB)


def test_many_tiny_members_hit_the_cap() -> None:
    members = [_regular(f"p{i}.html", "") for i in range(2500)]  # 512-byte header each
    with pytest.raises(UnsafeArchive):
        read_docs_tarball(_tarball(*members), max_bytes=MB)


# -- broken input ----------------------------------------------------------------------


def _good() -> bytes:
    return _tarball(*[_regular(f"p{i}.html", "x" * 2000) for i in range(20)])


BROKEN: list[tuple[str, Callable[[], bytes], str]] = [
    ("empty", lambda: b"", "not gzip"),
    ("garbage", lambda: b"this is not a tarball at all" * 10, "not gzip"),
    ("gzip magic then garbage", lambda: b"\x1f\x8b" + b"\xff" * 200, "gzip"),
    ("gzip of non-tar", lambda: gzip.compress(b"hello " * 1000), "tar"),
    ("truncated in the middle", lambda: _good()[: len(_good()) // 2], "truncated"),
    ("trailer cut off", lambda: _good()[:-4], "truncated"),
]


@pytest.mark.parametrize(("case", "build", "words"), BROKEN, ids=[c[0] for c in BROKEN])
def test_broken_input_is_an_ingest_error(case: str, build: Callable[[], bytes], words: str) -> None:
    with pytest.raises(IngestError, match=words) as info:
        read_docs_tarball(build(), max_bytes=MB, package="jason")
    assert not isinstance(info.value, UnsafeArchive)
    assert "jason" in str(info.value)


def test_concatenated_gzip_members_are_followed() -> None:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for name in ("a.html", "b.html"):
            info, data = _regular(name, name)
            tf.addfile(info, io.BytesIO(data))
    blob = raw.getvalue()
    data = gzip.compress(blob[:700]) + gzip.compress(blob[700:])
    assert set(read_docs_tarball(data, max_bytes=MB)) == {"a.html", "b.html"}


def test_max_bytes_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        read_docs_tarball(_good(), max_bytes=0)
