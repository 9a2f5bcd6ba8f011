"""Kramdown attribute lists out of doc text (`exdoc_md.without_attribute_lists`)."""

from __future__ import annotations

import pytest

from hexlocal_core.ingest.exdoc_md import without_attribute_lists


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("> #### Warning {: .warning}\n>\n> Careful.", "> #### Warning\n>\n> Careful."),
        ("{: .info}\n> Note", "\n> Note"),
        ("  [](){: #new_2_heir }\n- **`{heir,Pid,HeirData}`**", "\n- **`{heir,Pid,HeirData}`**"),
        (
            "Returns `{:ok, value}` or `{:error, reason}`.",
            "Returns `{:ok, value}` or `{:error, reason}`.",
        ),
        ("    iex> {:ok, 1}\n    {:ok, 1}", "    iex> {:ok, 1}\n    {:ok, 1}"),
        (
            "```markdown\n> #### Tip {: .tip}\n```\nafter {: .x}",
            "```markdown\n> #### Tip {: .tip}\n```\nafter",
        ),
        ("no braces at all", "no braces at all"),
        (
            "the relation_{:\n  #n_ary_relation }, and [](){:\n#cartesian } more",
            "the relation_, and more",
        ),
        ("    {{:., [], [:a]}, [], [x]}", "    {{:., [], [:a]}, [], [x]}"),
    ],
)
def test_attribute_lists_go_and_everything_else_stays(text: str, expected: str) -> None:
    assert without_attribute_lists(text) == expected
