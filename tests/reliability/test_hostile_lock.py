"""Hostile project files: mix.lock, mise.toml, .tool-versions and `_build/*.app`.

Each case is a project whose files an unlucky user (or an attacker) could hold, resolved
through the real `resolve_version`. Every one must come back with the version the next
source gives plus a notice that names the file and the problem, or a domain error, never
a non-domain exception, within a generous bound (each used to take minutes, raise, or
block forever). A property test then fuzzes the mix.lock parser itself.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hexlocal_core.errors import HexlocalError, UserInputError
from hexlocal_core.model import HexPackageInfo, ResolvedVersion, VersionSource
from hexlocal_core.versions import build_version, lockfile, read_app_vsn, resolve_version
from hexlocal_core.versions.lockfile import LockFile, parse_lock_file
from hexlocal_core.versions.terms import MalformedLock

BOUND_S = 10.0  # generous: the slowest case takes ~1 s of CPU on this 2-core machine
FUZZ_BOUND_S = 2.0
MIB = 1024 * 1024
ENTRY = (
    '  "{name}": {{:hex, :{name}, "{version}", "2e3a008590b0b8d7388c20293e9dcc9cf3e5d642fd2a114e'
    '4cbbb52e595d940a", [:mix], [], "hexpm", "b0c823996102bcd0239b3c2444eb00409b72f6a140c1950bc8'
    'b457d836b30684"}},\n'
)


class NoRegistry:
    """A HexRegistry that must not be asked: every case falls through to _build instead."""

    async def package_info(self, name: str) -> HexPackageInfo:
        raise AssertionError(f"the registry was asked about {name}")

    async def fetch_docs(self, name: str, version: str) -> bytes:
        raise AssertionError("the registry was asked for docs")


def entry(name: str, version: str = "1.4.5") -> str:
    return ENTRY.format(name=name, version=version)


def write_app(root: Path, app: str, vsn: str) -> Path:
    ebin = root / "_build" / "dev" / "lib" / app / "ebin"
    ebin.mkdir(parents=True, exist_ok=True)
    path = ebin / f"{app}.app"
    path.write_text(f'{{application,{app},[{{vsn,"{vsn}"}}]}}.\n')
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)  # bounds every upward walk inside tmp
    (root / "mix.exs").write_text("defmodule App.MixProject do\nend\n")
    return root


@pytest.fixture
def unblock_fifos(tmp_path: Path) -> Iterator[Callable[[Path], None]]:
    """Makes a FIFO the code under test opens by mistake end after 3 s, not never.

    A regression then fails the time bound instead of hanging the suite: a helper
    thread opens the write end once a reader waits on it, and closes it.
    """
    fifos: list[Path] = []
    stop = threading.Event()

    def release() -> None:
        deadline = time.monotonic() + 3.0
        while not stop.wait(0.05):
            if time.monotonic() < deadline:
                continue
            for fifo in fifos:
                try:
                    os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
                except OSError:
                    pass  # no reader is blocked on it: the code under test did not open it

    def make(path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(path)
        fifos.append(path)

    thread = threading.Thread(target=release, daemon=True)
    thread.start()
    yield make
    stop.set()
    thread.join()


async def resolve(name: str, root: Path) -> tuple[ResolvedVersion, float]:
    started = time.monotonic()
    resolved = await resolve_version(name, None, project_root=root, registry=NoRegistry())
    return resolved, time.monotonic() - started


# --------------------------------------------------------------------------- mix.lock


@dataclass(frozen=True)
class LockCase:
    id: str
    text: Callable[[], str]
    notice: str  # the code of the one notice, "" for none
    says: str  # what the notice's message must contain


def _huge() -> str:
    entries = [entry(f"dep{i}") for i in range(2 * MIB // len(entry("dep0")) + 10)]
    return "%{\n" + "".join(entries) + "}\n"


def _token_bomb() -> str:
    # Under the byte cap, but one token per byte: 55 s and 857 MB at 7.8 MB before the fix.
    return '%{"junk": {:x, [' + "1," * (MIB - 20) + "]}}\n"


LOCK_CASES = [
    LockCase("over the size cap", _huge, "mixlock_too_large", "2 MiB"),
    LockCase("a token bomb", _token_bomb, "mixlock_too_large", "tokens"),
    LockCase(
        "a 5000-digit integer in the entry",
        lambda: "%{\n" + entry("other") + '  "jason": {:hex, :jason, ' + "9" * 5000 + "},\n}",
        "mixlock_bad_entry",
        "version should be a str",
    ),
    LockCase(
        "deeply nested terms",
        lambda: "%{\n" + entry("jason") + '  "x": {:x, ' + "[" * 5000 + "]" * 5000 + "}\n}",
        "mixlock_unreadable",
        "nested too deeply",
    ),
    LockCase(
        "a surrogate escape",
        lambda: '%{"x": {:x, "\\u{D800}"}}',
        "mixlock_unreadable",
        "surrogate",
    ),
    LockCase("not UTF-8", lambda: "%{\udcff}", "mixlock_unreadable", "not UTF-8"),
    LockCase(
        "an unterminated 1 MiB string",
        lambda: '%{"x": "' + "a" * MIB,
        "mixlock_unreadable",
        "unterminated string",
    ),
    LockCase(
        "2 MiB of '#' in a string",
        lambda: '%{"x": {:x, "' + "#" * (2 * MIB - 40) + '"}}',
        "",
        "",
    ),
]


@pytest.mark.parametrize("case", LOCK_CASES, ids=[c.id for c in LOCK_CASES])
async def test_a_hostile_lock_falls_through_to_build(project: Path, case: LockCase) -> None:
    lock = project / "mix.lock"
    lock.write_bytes(case.text().encode("utf-8", errors="surrogateescape"))
    app = write_app(project, "jason", "1.4.4")

    resolved, seconds = await resolve("jason", project)

    assert seconds < BOUND_S
    assert [n.code for n in resolved.notices] == ([case.notice] if case.notice else [])
    if case.notice:
        assert (resolved.version, resolved.source) == ("1.4.4", VersionSource.BUILD)
        assert resolved.detail == str(app)
        [notice] = resolved.notices
        assert case.says in notice.message and str(lock) in notice.message
        assert len(notice.message) < 400  # a one-line answer, not an echo of the file


async def test_a_big_integer_spoils_only_its_own_entry(project: Path) -> None:
    (project / "mix.lock").write_text(
        "%{\n" + entry("jason", "1.4.4") + '  "bad": {:hex, :bad, "1.0.0", ' + "7" * 5000 + "},\n}"
    )
    resolved, _ = await resolve("jason", project)
    assert (resolved.version, resolved.source, resolved.notices) == (
        "1.4.4",
        VersionSource.MIX_LOCK,
        (),
    )


async def test_a_version_with_spaces_is_used_stripped(project: Path) -> None:
    (project / "mix.lock").write_text("%{\n" + entry("jason", " 1.4.4 ") + "}")
    resolved, _ = await resolve("jason", project)
    # Unstripped, it went into the docs URL and gave a 404.
    assert (resolved.version, resolved.source) == ("1.4.4", VersionSource.MIX_LOCK)
    assert resolved.lock_entry is not None and resolved.lock_entry.version == "1.4.4"


async def test_a_fifo_named_mix_lock_does_not_block(
    project: Path, unblock_fifos: Callable[[Path], None]
) -> None:
    unblock_fifos(project / "mix.lock")
    write_app(project, "jason", "1.4.4")
    resolved, seconds = await resolve("jason", project)
    assert seconds < 2.0  # the helper would only release a blocked reader after 3 s
    assert (resolved.version, resolved.source) == ("1.4.4", VersionSource.BUILD)
    [notice] = resolved.notices
    assert notice.code == "mixlock_unreadable" and "not a regular file" in notice.message


# --------------------------------------------------------------------------- _build


def test_a_fifo_app_file_does_not_block(
    project: Path, unblock_fifos: Callable[[Path], None]
) -> None:
    fifo = project / "_build" / "dev" / "lib" / "jason" / "ebin" / "jason.app"
    unblock_fifos(fifo)
    started = time.monotonic()
    assert build_version("jason", project) is None
    assert read_app_vsn(fifo) is None  # what ingestion calls on a path it found itself
    assert time.monotonic() - started < 2.0  # a blocked open is released after 3 s


def test_a_hostile_app_file_is_bounded(project: Path) -> None:
    app = write_app(project, "jason", "1.4.4")
    # Many unclosed {vsn,' values: an unbounded [^']* made the search quadratic.
    app.write_text("{vsn,'" * (1024 * 1024 // 6))
    started = time.monotonic()
    assert build_version("jason", project) is None
    assert time.monotonic() - started < BOUND_S


# --------------------------------------------------------------------------- pin files


@dataclass(frozen=True)
class PinCase:
    id: str
    filename: str
    text: str | None  # None: a FIFO
    says: str


PIN_CASES = [
    PinCase("5000-deep arrays", "mise.toml", "[tools]\nx = " + "[" * 5000 + "]" * 5000, "deeply"),
    PinCase(
        "5000-deep inline tables", "mise.toml", "a = " + "{b = " * 5000 + "1" + "}" * 5000, "deeply"
    ),
    PinCase("a 20000-part dotted key", "mise.toml", ".".join(["b"] * 20_000) + " = 1", "dots"),
    PinCase("a 5000-digit integer", "mise.toml", "x = " + "1" * 5000, "digits long"),
    PinCase("a FIFO mise.toml", "mise.toml", None, "not a regular file"),
    PinCase("a FIFO .tool-versions", ".tool-versions", None, "not a regular file"),
    PinCase("a 1 MiB .tool-versions", ".tool-versions", "x" * MIB, "over the cap"),
]


@pytest.mark.parametrize("case", PIN_CASES, ids=[c.id for c in PIN_CASES])
async def test_a_hostile_pin_file_is_a_notice(
    tmp_path: Path, case: PinCase, unblock_fifos: Callable[[Path], None]
) -> None:
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / ".tool-versions").write_text("elixir 1.18.4-otp-27\n")  # the next source
    app = root / "apps" / "web"
    app.mkdir(parents=True)
    hostile = app / case.filename
    if case.text is None:
        unblock_fifos(hostile)
    else:
        hostile.write_text(case.text)

    resolved, seconds = await resolve("ex_unit", app)

    assert seconds < BOUND_S
    assert (resolved.version, resolved.detail) == ("1.18.4", str(root / ".tool-versions"))
    [notice] = resolved.notices
    assert notice.code == "elixir_pin_unreadable"
    assert str(hostile) in notice.message and case.says in notice.message


async def test_a_hostile_pin_with_nothing_after_it_asks_for_a_version(
    project: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (project / "mise.toml").write_text("x = " + "[" * 5000)
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(UserInputError, match="Pass a version"):
        await resolve("elixir", project)


# --------------------------------------------------------------------------- fuzzing

_PIECES = st.sampled_from(
    ["%{", "}", "{", "[", "]", ",", "=>", ":hex", ":a", ':"q a"', '"1.0.0"', '"k":', "k:",
     "'c'", "1", "-2", "0x1F", "0x_", "1.5e3", "9" * 60, "true", "nil", "foo", "#c\n", " ",
     "\n", '"\\x{41}"', '"\\u{D800}"', '"#{x}"', '"""', "\\", '"', "'", ":", "@", "é"]
)  # fmt: skip
_TERMS = st.one_of(
    st.lists(_PIECES, max_size=60).map("".join),
    st.text(max_size=200),
    st.lists(
        st.sampled_from([entry("jason"), entry("x", " 1.0 "), "%{", "}", ","]), max_size=8
    ).map("".join),
)


@settings(
    max_examples=2000,
    deadline=None,  # the bound is FUZZ_BOUND_S per case, checked below
    suppress_health_check=list(HealthCheck),
)
@given(_TERMS)
def test_the_lock_parser_answers_any_text_with_a_lock_or_a_domain_error(text: str) -> None:
    started = time.monotonic()
    try:
        lock = parse_lock_file(text, source="fuzz.lock")
    except MalformedLock as exc:
        assert str(exc).startswith("fuzz.lock") and len(str(exc)) < 400
    else:
        assert isinstance(lock, LockFile)
        for name, problem in lock.problems.items():
            assert isinstance(name, str) and problem.startswith("fuzz.lock")
        for found in lock.entries.values():
            assert found.version is None or found.version == found.version.strip()
    assert time.monotonic() - started < FUZZ_BOUND_S


def test_the_lock_reader_never_raises_outside_the_domain(tmp_path: Path) -> None:
    # The file-level paths (stat, open, decode, cache) on the shapes above.
    path = tmp_path / "mix.lock"
    for raw in (b"", b"\xff\xfe", b"%{}", b"%{" * 100, "é".encode(), b"%{\x00}"):
        path.write_bytes(raw)
        try:
            lockfile.load_lock(path)
        except HexlocalError as exc:
            assert str(path) in str(exc)
