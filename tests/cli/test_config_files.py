"""Merging hexlocal's entry into a client's config file: only the entry changes, every
other byte (comments included) stays, and a file that cannot be merged safely is refused
and left as it was."""

from __future__ import annotations

import json
import os
import stat
import tomllib
from pathlib import Path
from typing import Any

import pytest

from hexlocal_cli.config_files import (
    ConfigFileError,
    blank_comments,
    read_text,
    set_json_entry,
    set_toml_table,
    toml_string,
    write,
)

KEYS = ("mcpServers", "hexlocal")
ENTRY = {"command": "/opt/hexlocal/bin/hexlocal-mcp", "args": [], "env": {"A": "b"}}
FILE = Path("settings.json")


def merged(text: str | None, *, comments: bool = True, entry: Any = ENTRY) -> str:
    return set_json_entry(FILE, text, KEYS, entry, comments=comments)


def parsed(text: str) -> Any:
    return json.loads(blank_comments(text)[0])


@pytest.mark.parametrize(
    ("text", "blanked"),
    [
        ('{"a": 1} // note', '{"a": 1}        '),
        ('{"a": /* x */ 1}', '{"a":         1}'),
        ('{"url": "http://x//y", "b": "/* no */"}', '{"url": "http://x//y", "b": "/* no */"}'),
        ('{"a": [1, 2,], }', '{"a": [1, 2 ]  }'),
        ('{"a": "quote \\" // still a string"}', '{"a": "quote \\" // still a string"}'),
        ("\ufeff{}", " {}"),
    ],
)
def test_comments_and_trailing_commas_become_spaces_strings_stay(text: str, blanked: str) -> None:
    assert blank_comments(text)[0] == blanked
    json.loads(blank_comments(text)[0])


def test_a_new_file_gets_the_entry_alone() -> None:
    assert json.loads(merged(None)) == {"mcpServers": {"hexlocal": ENTRY}}
    assert json.loads(merged("  \n")) == {"mcpServers": {"hexlocal": ENTRY}}


def test_other_servers_and_settings_stay_byte_for_byte() -> None:
    text = (
        '{\n    "theme": "dark",\n    "mcpServers": {\n        "other": {"command": "x"}\n'
        "    }\n}\n"
    )
    new = merged(text, comments=False)
    assert parsed(new) == {
        "theme": "dark",
        "mcpServers": {"other": {"command": "x"}, "hexlocal": ENTRY},
    }
    assert new.replace(new[new.index('"hexlocal"') : new.index('"other"')], "") == text
    assert '\n        "hexlocal": {\n            "command"' in new  # the file's own indent


def test_an_existing_entry_is_replaced_and_nothing_else() -> None:
    old = {"command": "/old/hexlocal-mcp", "args": ["--stale"]}
    text = json.dumps({"a": 1, "mcpServers": {"hexlocal": old, "z": {"command": "z"}}}, indent=2)
    new = merged(text, comments=False)
    assert parsed(new) == {"a": 1, "mcpServers": {"hexlocal": ENTRY, "z": {"command": "z"}}}
    assert new.startswith('{\n  "a": 1,\n  "mcpServers": {\n    "hexlocal": {')


def test_comments_survive_in_a_client_that_reads_them() -> None:
    zed = (
        "// Zed settings\n//\n// see the docs\n{\n  // the theme\n"
        '  "theme": "One Dark", /* keep */\n'
        '  "context_servers": {\n    // mine\n    "other": {"command": "o"},\n  },\n}\n'
    )
    new = set_json_entry(FILE, zed, ("context_servers", "hexlocal"), ENTRY, comments=True)
    for comment in ("// Zed settings", "// the theme", "/* keep */", "// mine"):
        assert comment in new
    assert parsed(new)["context_servers"] == {"hexlocal": ENTRY, "other": {"command": "o"}}
    assert parsed(new)["theme"] == "One Dark"


@pytest.mark.parametrize("text", ["{}", "{ }", "{\n}\n", '{"mcpServers": {}}', "{ // empty\n}"])
def test_empty_objects_take_the_entry(text: str) -> None:
    assert parsed(merged(text))["mcpServers"] == {"hexlocal": ENTRY}


def test_the_last_of_duplicate_keys_is_the_one_edited_as_json_reads_it() -> None:
    text = '{"mcpServers": {"a": {}}, "mcpServers": {"b": {}}}'
    assert parsed(merged(text))["mcpServers"] == {"b": {}, "hexlocal": ENTRY}


@pytest.mark.parametrize(
    ("text", "comments", "says"),
    [
        ('{"mcpServers": {', True, "not valid JSON: Expecting property name"),
        ('{"a": 1,\n "b": }', True, "at line 2 column"),
        ("[1, 2]", True, "holds a JSON list, not an object"),
        ('{"mcpServers": []}', True, "'mcpServers' is a list, not an object"),
        ('{"a": 1} // c', False, "has comments or trailing commas"),
        ('{"a": "never closed}', True, "string is never closed"),
        ('{"a": 1 /* open', True, "comment is never closed"),
    ],
)
def test_what_cannot_be_merged_is_refused_with_where(text: str, comments: bool, says: str) -> None:
    with pytest.raises(ConfigFileError, match=says.replace("(", r"\(")):
        merged(text, comments=comments)


# -- TOML (Codex) ---------------------------------------------------------------------------

BLOCK = (
    '[mcp_servers.hexlocal]\ncommand = "/opt/h/hexlocal-mcp"\nargs = []\n\n'
    '[mcp_servers.hexlocal.env]\nA = "b"\n'
)
TOML_KEYS = ("mcp_servers", "hexlocal")
CODEX = Path("config.toml")


def test_a_codex_config_keeps_everything_but_the_old_entry() -> None:
    text = (
        'model = "o4"  # mine\n\n[mcp_servers.hexlocal]\ncommand = "/old"\n\n'
        '[mcp_servers.hexlocal.env]\nOLD = "1"\n\n[mcp_servers.other]\ncommand = "o"\n\n'
        '[profiles.fast]\nmodel = "mini"\n'
    )
    new = set_toml_table(CODEX, text, TOML_KEYS, BLOCK)
    doc = tomllib.loads(new)
    assert doc["mcp_servers"]["hexlocal"] == {
        "command": "/opt/h/hexlocal-mcp",
        "args": [],
        "env": {"A": "b"},
    }
    assert doc["mcp_servers"]["other"] == {"command": "o"}
    assert doc["profiles"] == {"fast": {"model": "mini"}} and doc["model"] == "o4"
    assert 'model = "o4"  # mine' in new and "OLD" not in new


def test_a_quoted_table_header_is_recognised() -> None:
    text = '[mcp_servers."hexlocal"]\ncommand = "/old"\n'
    assert tomllib.loads(set_toml_table(CODEX, text, TOML_KEYS, BLOCK))["mcp_servers"]["hexlocal"][
        "env"
    ]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('mcp_servers = { hexlocal = { command = "x" } }\n', "in a form hexlocal does not rewrite"),
        ('[mcp_servers]\nhexlocal.command = "x"\n', "in a form hexlocal does not rewrite"),
        ("[mcp_servers\ncommand =", "not valid TOML"),
    ],
)
def test_codex_configs_it_cannot_rewrite_are_refused(text: str, says: str) -> None:
    with pytest.raises(ConfigFileError, match=says):
        set_toml_table(CODEX, text, TOML_KEYS, BLOCK)


@pytest.mark.parametrize("value", ['a "quoted" \\ path', "tab\tnew\nline", "del\x7f", "ünï"])
def test_toml_strings_round_trip(value: str) -> None:
    assert tomllib.loads(f"v = {toml_string(value)}\n")["v"] == value


# -- writing -------------------------------------------------------------------------------


def test_a_changed_file_is_backed_up_then_replaced(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text("old\n")
    path.chmod(0o640)
    written = write(path, "new\n", "old\n", private=False)
    assert written.changed and written.backup is not None
    assert written.backup.read_text() == "old\n" and path.read_text() == "new\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # the user's mode kept
    again = write(path, "newer\n", "new\n", private=False)
    assert again.backup != written.backup and again.backup is not None
    assert again.backup.read_text() == "new\n" and written.backup.read_text() == "old\n"


def test_an_unchanged_file_is_not_touched(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text("same\n")
    before = path.stat().st_mtime_ns
    written = write(path, "same\n", "same\n", private=False)
    assert not written.changed and written.backup is None
    assert path.stat().st_mtime_ns == before and os.listdir(tmp_path) == ["mcp.json"]


def test_secrets_make_the_file_private(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "settings.json"
    write(path, "{}\n", None, private=True)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_symlinked_config_is_written_through(tmp_path: Path) -> None:
    target = tmp_path / "dotfiles" / "mcp.json"
    target.parent.mkdir()
    target.write_text("{}\n")
    link = tmp_path / "mcp.json"
    link.symlink_to(target)
    write(link, '{"a": 1}\n', "{}\n", private=False)
    assert link.is_symlink() and target.read_text() == '{"a": 1}\n'


def test_reading_refuses_what_is_not_a_config(tmp_path: Path) -> None:
    assert read_text(tmp_path / "absent.json") is None
    with pytest.raises(ConfigFileError, match="is not a file"):
        read_text(tmp_path)
    latin = tmp_path / "latin1.json"
    latin.write_bytes(b'{"a": "\xe9"}')
    with pytest.raises(ConfigFileError, match="not UTF-8"):
        read_text(latin)
    huge = tmp_path / "huge.json"
    with huge.open("wb") as out:
        out.truncate(5 * 2**20)
    with pytest.raises(ConfigFileError, match="not a client config"):
        read_text(huge)
