"""Elixir's docs for the OTP functions it wraps: which Elixir functions count as wrappers
(read from beams the real elixirc compiled), and the section an OTP item gains (the real
OTP 27 install's items)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexlocal_core.ingest.beam import items_from_beam_dir
from hexlocal_core.ingest.beam_sources import BuildApp
from hexlocal_core.ingest.elixir_wrappers import (
    MAX_DOC_CHARS,
    ElixirWrapper,
    with_wrappers,
    wrappers_in,
)
from hexlocal_core.ingest.otp_links import otp_link
from hexlocal_core.model import DocType
from tests.support.elixir import compile_app
from tests.support.otp_corpus import APPS27, OTP27, install

CLOCK_EX = """
defmodule Hexlocal.Clock do
  @moduledoc "A clock for tests."

  @doc "Reads the hexlocal test clock, which never goes backwards."
  def monotonic_time, do: :erlang.monotonic_time()

  @doc "Sets a flag of the calling process."
  def flag(flag, value) when is_atom(flag), do: :erlang.process_flag(flag, value)

  @doc "Raises unless the name is an atom, then looks the process up."
  def whereis(name) do
    if is_atom(name), do: :erlang.whereis(name), else: raise(ArgumentError, "not an atom")
  end

  @doc "Uses a table to answer something else: not a wrapper of the lookup."
  def defines?(table, key), do: :ets.lookup(table, key) != []

  @doc "Two OTP calls: wraps neither."
  def both(unit), do: {:erlang.monotonic_time(), :os.system_time(unit)}

  @doc "Calls Elixir too: not a thin wrapper."
  def system_time(unit), do: String.to_atom(:erlang.atom_to_binary(:erlang.system_time(unit)))

  def monitor(pid), do: :erlang.monitor(:process, pid)

  @doc false
  def send_after(dest, msg, time), do: :erlang.send_after(time, dest, msg)

  @deprecated "Use something else"
  @doc "Old."
  def unique_integer, do: :erlang.unique_integer()
end
"""


@pytest.fixture(scope="module")
def elixir_app(tmp_path_factory: pytest.TempPathFactory) -> BuildApp:
    top = tmp_path_factory.mktemp("elixir_home")
    ebin = compile_app(top, "elixir", {"lib/clock.ex": CLOCK_EX}, vsn="1.18.4")
    return BuildApp("elixir", "1.18.4", ebin)


@pytest.fixture(scope="module")
def erts27(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install(tmp_path_factory, OTP27) / "lib" / APPS27["erts"]


def test_a_documented_function_making_one_otp_call_it_shares_a_word_with_wraps_it(
    elixir_app: BuildApp,
) -> None:
    wrappers = wrappers_in([elixir_app])
    assert {key: [w.title for w in found] for key, found in wrappers.items()} == {
        "erlang.monotonic_time/0": ["Hexlocal.Clock.monotonic_time/0"],
        "erlang.process_flag/2": ["Hexlocal.Clock.flag/2"],  # its guard is not a call
        "erlang.whereis/1": ["Hexlocal.Clock.whereis/1"],  # nor is raising
    }
    (clock,) = wrappers["erlang.monotonic_time/0"]
    assert clock.doc.startswith("Reads the hexlocal test clock")


def test_folders_that_hold_no_beams_give_no_wrappers(tmp_path: Path) -> None:
    (tmp_path / "Elixir.Broken.beam").write_bytes(b"FOR1\x00\x00\x00\x04BEAM")
    apps = [BuildApp("elixir", "1.18.4", tmp_path), BuildApp("logger", "1.18.4", tmp_path / "x")]
    assert wrappers_in(apps) == {}


def test_an_otp_function_gains_its_wrappers_docs_after_its_own(
    erts27: Path, elixir_app: BuildApp
) -> None:
    items = items_from_beam_dir(
        erts27 / "ebin", package="erts", version="15.2.7", link=otp_link("erts", 27)
    ).items
    wrapped = {i.ref: i for i in with_wrappers(items, wrappers_in([elixir_app]))}
    before = {i.ref: i for i in items}

    monotonic = wrapped["erlang.html#monotonic_time/0"]
    own = before["erlang.html#monotonic_time/0"].markdown.rstrip()
    assert monotonic.markdown.startswith(own)
    assert monotonic.markdown[len(own) :] == (
        "\n\n## In Elixir: [`Hexlocal.Clock.monotonic_time/0`]"
        "(https://hexdocs.pm/elixir/1.18.4/Hexlocal.Clock.html#monotonic_time/0)\n\n"
        "Reads the hexlocal test clock, which never goes backwards."
    )
    # Nothing else changes: other functions, and a type of the same name and arity.
    changed = {ref for ref in wrapped if wrapped[ref] != before[ref]}
    assert changed == {
        "erlang.html#monotonic_time/0",
        "erlang.html#process_flag/2",
        "erlang.html#whereis/1",
    }
    assert all(wrapped[ref].doc_type is DocType.FUNCTION for ref in changed)


def test_a_long_wrapper_doc_is_clipped_at_a_word() -> None:
    wrapper = ElixirWrapper("Process.monitor/1", "word " * 400, "https://example.test/p")
    section = wrapper.section()
    body = section.split("\n\n", 1)[1]
    assert len(body) <= MAX_DOC_CHARS + len(" ...") and body.endswith("word ...")
