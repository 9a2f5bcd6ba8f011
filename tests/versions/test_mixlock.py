"""The mix.lock reader: the real corpus locks, the literal grammar, errors, location."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from hexlocal_core import untrusted
from hexlocal_core.model import Atom, LockEntry
from hexlocal_core.versions import lockfile
from hexlocal_core.versions.location import find_lock, find_mix_root, project_dirs
from hexlocal_core.versions.lockfile import (
    MAX_LOCK_BYTES,
    load_lock,
    parse_lock,
    parse_lock_file,
    read_lock,
)
from hexlocal_core.versions.terms import BigNumber, LockTooLarge, MalformedLock, parse_elixir_term

LOCKS = {
    "phoenixframework_phoenix.mix.lock": 40,
    "livebook-dev_livebook.mix.lock": 67,
    "elixir-ecto_ecto.mix.lock": 9,
    "hexpm_hexdocs.mix.lock": 29,
}
_HEX_LINE = re.compile(r'^\s*"([a-z0-9_]+)": \{:hex, :([a-z0-9_]+), "([^"]+)"', re.MULTILINE)


# --------------------------------------------------------------------------- real locks


@pytest.mark.parametrize(("filename", "count"), sorted(LOCKS.items()))
def test_every_entry_of_the_real_locks_parses(corpus: Path, filename: str, count: int) -> None:
    path = corpus / "mixlock" / filename
    entries = read_lock(path)

    assert len(entries) == count
    # Cross-check every Hex entry against a plain line scan of the file.
    expected = {m[1]: (m[2], m[3]) for m in _HEX_LINE.finditer(path.read_text())}
    hex_entries = {n: e for n, e in entries.items() if e.kind == "hex"}
    assert {n: (e.package, e.version) for n, e in hex_entries.items()} == expected
    for entry in hex_entries.values():
        assert entry.repo == "hexpm"
        assert len(entry.options["checksum"]) == 64 and len(entry.options["outer_checksum"]) == 64
        assert entry.options["managers"]


def test_lock_counts_match_the_manifest(corpus: Path) -> None:
    manifest = json.loads((corpus / "hexdocs" / "MANIFEST.json").read_text())
    for item in manifest["mixlock"]:
        entries = read_lock(corpus / item["file"])
        kinds: dict[str, int] = {}
        for entry in entries.values():
            kinds[entry.kind] = kinds.get(entry.kind, 0) + 1
        assert len(entries) == item["entries"] and kinds == item["entries_by_scm"], item["file"]


def test_known_entries(corpus: Path) -> None:
    phoenix = read_lock(corpus / "mixlock" / "phoenixframework_phoenix.mix.lock")
    assert phoenix["jason"] == LockEntry(
        name="jason",
        kind="hex",
        version="1.4.5",
        package="jason",
        repo="hexpm",
        options={
            "checksum": "2e3a008590b0b8d7388c20293e9dcc9cf3e5d642fd2a114e4cbbb52e595d940a",
            "managers": ["mix"],
            "outer_checksum": "b0c823996102bcd0239b3c2444eb00409b72f6a140c1950bc8b457d836b30684",
        },
        deps=("decimal",),
    )
    assert phoenix["cowboy"].deps == ("cowlib", "ranch")
    assert phoenix["cowboy"].options["managers"] == ["make", "rebar3"]

    ecto = read_lock(corpus / "mixlock" / "elixir-ecto_ecto.mix.lock")
    assert (ecto["telemetry"].version, ecto["telemetry"].options["managers"]) == (
        "1.2.1",
        ["rebar3"],
    )

    livebook = read_lock(corpus / "mixlock" / "livebook-dev_livebook.mix.lock")
    kit = livebook["elixirkit"]
    assert (kit.kind, kit.version, kit.package) == ("git", None, None)
    assert kit.repo == "https://github.com/livebook-dev/elixirkit.git"
    assert kit.ref == "6c1b3f25e7efe12305dfe62c56ed07ad55bb9cd3"
    assert kit.options == {}
    # The lock key is the app; the Hex package can be named differently.
    assert (livebook["eini"].package, livebook["eini"].version) == ("eini_beam", "2.2.4")
    assert "eini" in livebook["aws_credentials"].deps


# --------------------------------------------------------------------------- grammar


@pytest.mark.parametrize(
    ("text", "term"),
    [
        ("%{}", {}),
        ('%{"a" => 1, "b" => 2,}', {"a": 1, "b": 2}),
        ('%{"a": 1, b: 2}', {Atom("a"): 1, Atom("b"): 2}),
        ('%{"foo-bar": :ok}', {Atom("foo-bar"): Atom("ok")}),
        ("[1, -2, 3_000, 0x1F, 1.5]", [1, -2, 3000, 31, 1.5]),
        (
            "{:a, :b?, :c!, :\"quoted atom\", :'single'}",
            (Atom("a"), Atom("b?"), Atom("c!"), Atom("quoted atom"), Atom("single")),
        ),
        ("[true, false, nil, :true, :nil]", [True, False, None, True, None]),
        ("[a: 1, b: [c: :d]]", [(Atom("a"), 1), (Atom("b"), [(Atom("c"), Atom("d"))])]),
        ("[1, a: 2]", [1, (Atom("a"), 2)]),
        (
            '{:dep, "~> 1.0", hex: :dep, optional: false}',
            (Atom("dep"), "~> 1.0", [(Atom("hex"), Atom("dep")), (Atom("optional"), False)]),
        ),
        ('"tab\\tnl\\nq\\"bs\\\\hash\\#{x}"', 'tab\tnl\nq"bs\\hash#{x}'),
        ('"\\x41\\x{42}\\u0043\\u{1F600}\\e\\s\\0"', "ABC\U0001f600\x1b \x00"),
        ('"line \\\ncontinued"', "line continued"),
        ("'charlist'", "charlist"),
        ('"üñí©ødé"', "üñí©ødé"),
        (
            '# leading comment\n%{ # inline\n  "a": [ # here\n 1, # one\n ], # done\n}\n# end',
            {Atom("a"): [1]},
        ),
        ('%{"x": {:hex, :x, "1.0.0"},}', {Atom("x"): (Atom("hex"), Atom("x"), "1.0.0")}),
        ("{}", ()),
        ("[]", []),
    ],
)
def test_literal_grammar(text: str, term: Any) -> None:
    assert parse_elixir_term(text) == term


@pytest.mark.parametrize(
    ("text", "where", "what"),
    [
        ("", "1:1", "unexpected the end of the file"),
        ('%{"a": "unterminated}', "1:8", "unterminated string"),
        ('%{"a": 1 "b": 2}', "1:10", "expected ',' or '}'"),
        ('%{"a": "#{System.cmd()}"}', "1:9", "interpolation"),
        ('%{\n  "a": @attr\n}', "2:8", "unexpected character '@'"),
        ('%{"a": 1}}', "1:10", "after the end of the term"),
        ("[a: 1, 2]", "1:8", "keyword pairs must come last"),
        ('%{"a" 1}', "1:7", "expected '=>'"),
        ('"\\x{110000}"', "1:2", "beyond the last Unicode"),
        ('"""\nheredoc\n"""', "1:1", "heredocs"),
        ("%{[1] => 2}", "1:3", "cannot be a key"),
        ("[" * 100 + "]" * 100, "1:66", "nested too deeply"),
        ('%{"a": foo}', "1:8", "unexpected ident 'foo'"),
    ],
)
def test_malformed_terms_say_where(text: str, where: str, what: str) -> None:
    with pytest.raises(MalformedLock) as caught:
        parse_elixir_term(text, source="mix.lock")
    assert f"mix.lock:{where}:" in str(caught.value)
    assert what in str(caught.value)


# --------------------------------------------------------------------------- entries


def test_older_and_rarer_entry_shapes() -> None:
    text = """%{
      "old": {:hex, :old, "0.1.0"},
      "six": {:hex, :six, "1.0.0", "abc", [:mix], [{:old, "~> 0.1", [hex: :old]}]},
      "org": {:hex, :org_pkg, "2.0.0", "abc", [:mix], [], "hexpm:acme"},
      "branchy": {:git, "https://x.test/b.git", "deadbeef", [branch: "main", submodules: true]},
      "local" => {:path, "../local", [in_umbrella: true]},
      "plugin": {:hg, "https://example.com/x", "r1"},
    }"""
    entries = parse_lock(text)
    assert (entries["old"].version, entries["old"].repo, entries["old"].deps) == (
        "0.1.0",
        "hexpm",
        (),
    )
    assert entries["six"].deps == ("old",)
    assert (entries["org"].package, entries["org"].repo) == ("org_pkg", "hexpm:acme")
    assert entries["branchy"].options == {"branch": "main", "submodules": True}
    assert (entries["branchy"].kind, entries["branchy"].ref) == ("git", "deadbeef")
    assert (entries["local"].kind, entries["local"].path) == ("path", "../local")
    assert entries["local"].options == {"in_umbrella": True}
    assert entries["plugin"].kind == "hg"
    assert entries["plugin"].options == {"raw": ["https://example.com/x", "r1"]}


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("[1, 2]", "expected a map"),
        ('%{"a": 1}', "entry 'a' is not a {:scm, ...} tuple"),
        ('%{"a": {:hex, :a, 1.0}}', "entry 'a' is a malformed :hex tuple"),
        ('%{"a": {:hex, "a", "1.0.0"}}', "package should be a Atom"),
        ('%{"a": {:hex, :a}}', "malformed :hex tuple"),
        ('%{"a": {:git, "url"}}', "malformed :git tuple"),
        ('%{"a": {:git, "u", "r", [1]}}', "keyword list"),
        ('%{"a": {:hex, :a, "1.0.0", "c", [:mix], [1]}}', "a dependency should be"),
        ('%{1 => {:hex, :a, "1.0.0"}}', "a key is not a name"),
    ],
)
def test_malformed_entries_name_the_entry(text: str, what: str) -> None:
    with pytest.raises(MalformedLock, match=re.escape(what)):
        parse_lock(text, source="/p/mix.lock")


def test_read_lock_refuses_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(MalformedLock, match="cannot be read"):
        read_lock(tmp_path / "missing.lock")
    binary = tmp_path / "mix.lock"
    binary.write_bytes(b"%{\xff\xfe}")
    with pytest.raises(MalformedLock, match="not UTF-8"):
        read_lock(binary)


# --------------------------------------------------------------------------- location


def _touch(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_find_lock_in_the_project(tmp_path: Path) -> None:
    lock = _touch(tmp_path / "app" / "mix.lock")
    _touch(tmp_path / "app" / "mix.exs")
    assert find_lock(tmp_path / "app") == lock


def test_find_lock_walks_up_from_an_umbrella_child(tmp_path: Path) -> None:
    root = tmp_path / "umbrella"
    _touch(root / ".git" / "HEAD")
    _touch(root / "mix.exs")
    lock = _touch(root / "mix.lock")
    child = root / "apps" / "web"
    _touch(child / "mix.exs")  # apps/ itself has no mix.exs
    assert find_lock(child) == lock


def test_find_lock_ignores_a_lock_above_the_vcs_root(tmp_path: Path) -> None:
    _touch(tmp_path / "mix.exs")
    _touch(tmp_path / "mix.lock")
    repo = tmp_path / "checkout"
    _touch(repo / ".git" / "HEAD")
    _touch(repo / "mix.exs")
    assert find_lock(repo) is None


def test_find_lock_ignores_an_ancestor_that_is_not_a_mix_project(tmp_path: Path) -> None:
    _touch(tmp_path / "mix.lock")  # a stray lock with no mix.exs beside it
    _touch(tmp_path / "project" / "mix.exs")
    assert find_lock(tmp_path / "project") is None


def test_find_lock_from_a_deep_subfolder(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    _touch(root / ".git" / "HEAD")
    _touch(root / "mix.exs")
    lock = _touch(root / "mix.lock")
    deep = root / "lib" / "my_app" / "live" / "components" / "forms" / "inputs"
    deep.mkdir(parents=True)
    assert find_lock(deep) == lock  # six levels: the old walk gave up after four
    assert find_mix_root(deep) == root


def test_find_lock_stops_at_the_home_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _touch(tmp_path / "mix.exs")
    _touch(tmp_path / "mix.lock")  # above home: never the project's
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    project = home / "code" / "lib"
    project.mkdir(parents=True)
    assert find_lock(project) is None
    assert [d.name for d in project_dirs(project)] == ["lib", "code", "home"]


# --------------------------------------------------------------------------- hostile terms


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ('"\\u{D800}"', "surrogate"),
        ("0x_", "malformed number"),
        ("%{{[1]} => 2}", "cannot be a key"),
        ("[" + "1," * 50 + "]", "more than 40 tokens"),
    ],
)
def test_hostile_terms_are_malformed_locks(text: str, what: str) -> None:
    with pytest.raises(MalformedLock, match=re.escape(what)):
        parse_elixir_term(text, source="mix.lock", max_tokens=40)


def test_a_huge_integer_stays_text() -> None:
    digits = "9" * 5000  # int() would raise ValueError past 4300 digits
    assert parse_elixir_term(f"[{digits}, 12]") == [BigNumber(digits), 12]


def test_a_malformed_entry_leaves_the_others_usable() -> None:
    text = '%{"ok": {:hex, :ok, "1.0.0"}, "big": {:hex, :big, ' + "9" * 5000 + "}, 7 => 1}"
    lock = parse_lock_file(text, source="/p/mix.lock")
    assert list(lock.entries) == ["ok"]
    assert set(lock.problems) == {"big", "7"}
    assert "version should be a str" in lock.problems["big"] and len(lock.problems["big"]) < 300
    with pytest.raises(MalformedLock, match="'big'"):
        parse_lock(text, source="/p/mix.lock")  # the strict reader still refuses it


def test_messages_do_not_echo_megabytes() -> None:
    with pytest.raises(MalformedLock) as caught:
        parse_elixir_term('%{"a": 1 "' + "x" * 1_000_000 + '"}')
    assert "expected ',' or '}'" in str(caught.value) and len(str(caught.value)) < 300


def test_a_version_is_stripped() -> None:
    entries = parse_lock('%{"jason": {:hex, :jason, " 1.4.4\\n"}}')
    assert entries["jason"].version == "1.4.4"


# --------------------------------------------------------------------------- reading


def test_read_lock_refuses_a_lock_over_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "mix.lock"
    path.write_text("%{" + " " * MAX_LOCK_BYTES + "}")
    with pytest.raises(LockTooLarge, match=r"more than the 2 MiB"):
        read_lock(path)


def test_read_lock_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    with pytest.raises(MalformedLock, match="not a regular file"):
        read_lock(tmp_path)


def _old(path: Path) -> None:
    """Moves the mtime out of the racy window; the ctime stays now."""
    past = path.stat().st_mtime - 3600
    os.utime(path, (past, past))


@pytest.fixture
def counted_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    reads: list[Path] = []
    real = untrusted.read_regular

    def counting(path: Path, max_bytes: int) -> bytes:
        reads.append(path)
        return real(path, max_bytes)

    monkeypatch.setattr(lockfile, "read_regular", counting)
    return reads


def test_an_unchanged_lock_is_parsed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted_reads: list[Path]
) -> None:
    monkeypatch.setattr(lockfile, "RACY_WINDOW_NS", -(10**12))  # the ctime is now, too
    path = tmp_path / "mix.lock"
    path.write_text('%{"a": {:hex, :a, "1.0.0"}}')
    first, second = load_lock(path), load_lock(path)
    assert second is first and counted_reads == [path]

    path.write_text('%{"a": {:hex, :a, "2.0.0"}}')  # same size; a new mtime, set apart
    _old(path)
    assert load_lock(path).entries["a"].version == "2.0.0"
    assert counted_reads == [path, path]


def test_a_lock_changed_just_now_is_read_every_time(
    tmp_path: Path, counted_reads: list[Path]
) -> None:
    # Within the racy window a second same-size write could keep every stat field.
    path = tmp_path / "mix.lock"
    path.write_text('%{"a": {:hex, :a, "1.0.0"}}')
    load_lock(path)
    load_lock(path)
    assert counted_reads == [path, path]


def test_a_malformed_lock_is_cached_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted_reads: list[Path]
) -> None:
    monkeypatch.setattr(lockfile, "RACY_WINDOW_NS", -(10**12))
    path = tmp_path / "mix.lock"
    path.write_text("%{ broken")
    for _ in range(3):
        with pytest.raises(MalformedLock, match="mix.lock:1:4"):
            load_lock(path)
    assert counted_reads == [path]
