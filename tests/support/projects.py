"""Mix projects in tmp for the version-resolution tests: a mix.lock pinning jason, and a
registry that fails the test if it is asked anything."""

from __future__ import annotations

from pathlib import Path

from hexlocal_core.model import HexPackageInfo

JASON_LINE = (
    '  "jason": {:hex, :jason, "VERSION", "2e3a008590b0b8d7388c20293e9dcc9cf3e5d642fd2a114e4cb'
    'bb52e595d940a", [:mix], [{:decimal, "~> 1.0 or ~> 2.0 or ~> 3.0", [hex: :decimal, repo: '
    '"hexpm", optional: true]}], "hexpm", "b0c823996102bcd0239b3c2444eb00409b72f6a140c1950bc8b4'
    '57d836b30684"},\n'
)


def write_lock(root: Path, *lines: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "mix.exs").write_text("defmodule App.MixProject do\nend\n")
    lock = root / "mix.lock"
    lock.write_text("%{\n" + "".join(lines) + "}\n")
    return lock


def jason_lock(root: Path, version: str) -> Path:
    return write_lock(root, JASON_LINE.replace("VERSION", version))


class NoRegistry:
    """A HexRegistry that must not be asked (Elixir's own apps, lock hits)."""

    async def package_info(self, name: str) -> HexPackageInfo:
        raise AssertionError(f"the registry was asked about {name}")

    async def fetch_docs(self, name: str, version: str) -> bytes:
        raise AssertionError("the registry was asked for docs")
