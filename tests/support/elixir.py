"""The real Elixir compiler for tests that need real beams: a sample module with every kind
of doc, compiled as `mix compile` leaves an app; skipped when Elixir is not installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SAMPLE_EX = '''
defmodule Hexlocal.Sample do
  @moduledoc """
  A sample module for **hexlocal**.
  """
  @moduledoc since: "0.2.0"

  @typedoc "An opaque handle."
  @opaque handle :: {:handle, term}

  @doc "Greets `name`."
  @doc since: "0.1.0"
  def greet(name, greeting \\\\ "hi"), do: greeting <> " " <> name

  @doc false
  def secret, do: :ok

  @deprecated "Use greet/1 instead"
  @doc "Greets the old way."
  def old_greet(name), do: greet(name)

  def undocumented(x), do: x

  @doc "Doubles `x`."
  defmacro twice(x), do: quote(do: unquote(x) * 2)
end

defmodule Hexlocal.Hidden do
  @moduledoc false
  @doc "Hidden because its module is."
  def visible?, do: false
end
'''


def elixirc(
    root: Path, sources: list[str], out: Path, *, code_paths: tuple[Path, ...] = ()
) -> None:
    """The real elixirc compiling `sources` (relative to `root`, where it runs, so the
    beams record those paths) into `out`; the test is skipped when Elixir is absent."""
    compiler = shutil.which("elixirc")
    if compiler is None:
        pytest.skip("elixirc is not on PATH")
    out.mkdir(parents=True, exist_ok=True)
    paths = [arg for path in code_paths for arg in ("-pa", str(path))]
    args = [compiler, *paths, "-o", str(out), *sources]
    subprocess.run(args, cwd=root, check=True, capture_output=True, timeout=120)


def compile_sample(root: Path) -> None:
    """SAMPLE_EX compiled by the real elixirc into root's _build, as the app sample 0.3.0."""
    (root / "sample.ex").write_text(SAMPLE_EX)
    ebin = root / "_build/dev/lib/sample/ebin"
    elixirc(root, ["sample.ex"], ebin)
    (ebin / "sample.app").write_text('{application,sample,[{vsn,"0.3.0"},{modules,[]}]}.\n')


def compile_app(top: Path, app: str, sources: dict[str, str], *, vsn: str = "0.1.0") -> Path:
    """Compiles `sources` (paths under `top` -> Elixir code) with the real elixirc into
    `top/_build/dev/lib/<app>/ebin`, as `mix compile` leaves an app (its .app file too).
    Skips the test when elixirc is not installed."""
    elixirc = shutil.which("elixirc")
    if elixirc is None:
        pytest.skip("elixirc is not on PATH")
    for name, code in sources.items():
        (top / name).parent.mkdir(parents=True, exist_ok=True)
        (top / name).write_text(code)
    ebin = top / "_build" / "dev" / "lib" / app / "ebin"
    ebin.mkdir(parents=True, exist_ok=True)
    for old in ebin.glob("*.beam"):
        old.unlink()
    args = [elixirc, "--ignore-module-conflict", "-o", str(ebin), *sources]
    subprocess.run(args, cwd=top, check=True, capture_output=True, timeout=180)
    modules = ",".join(f"'{p.stem}'" for p in sorted(ebin.glob("*.beam")))
    (ebin / f"{app}.app").write_text(
        f'{{application,{app},[{{modules,[{modules}]}},{{vsn,"{vsn}"}}]}}.\n'
    )
    return ebin
