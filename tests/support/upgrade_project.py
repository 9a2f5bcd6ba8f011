"""The acceptance project of upgrade_impact, compiled for real: `tests/fixtures/upgrade_project`.

A small Mix project (app `shop`) whose mix.lock pins ecto 3.12.5 and decimal 2.3.0. It is
compiled without its deps, as a project whose deps are not fetched would be: the real
elixirc builds `lib/` into `_build/dev/lib/shop/ebin` with two compile-time stand-ins on
the code path (`stubs/`: `use Ecto.Repo` and `import Ecto.Query` must expand), and the
calls into ecto and decimal stay calls to modules that are absent ("undefined module"
warnings). Tests that change the project copy it first (`copy_project`).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.elixir import elixirc
from tests.support.paths import REPO_ROOT

SOURCE = REPO_ROOT / "tests" / "fixtures" / "upgrade_project"
_compiled: dict[Path, Path] = {}


def compile_project(root: Path) -> Path:
    """Compiles the project at `root` in place (stubs to `root/_stubs`); returns its ebin."""
    stubs = root / "_stubs"
    elixirc(root, ["stubs/ecto_stubs.ex"], stubs)
    ebin = root / "_build" / "dev" / "lib" / "shop" / "ebin"
    sources = sorted(p.relative_to(root).as_posix() for p in (root / "lib").rglob("*.ex"))
    elixirc(root, sources, ebin, code_paths=(stubs,))
    (ebin / "shop.app").write_text('{application,shop,[{vsn,"0.1.0"},{modules,[]}]}.\n')
    return ebin


def compiled_project(factory: pytest.TempPathFactory) -> Path:
    """The compiled project, built once per session (read-only for the tests)."""
    key = factory.getbasetemp()
    if key not in _compiled:
        root = factory.mktemp("upgrade") / "shop"
        shutil.copytree(SOURCE, root)
        compile_project(root)
        _compiled[key] = root
    return _compiled[key]


def copy_project(source: Path, dest: Path, *, with_build: bool = True) -> Path:
    """A copy of the project at `dest` the test may change (its `_build` left out on ask)."""
    ignore = None if with_build else shutil.ignore_patterns("_build", "_stubs")
    shutil.copytree(source, dest, ignore=ignore, symlinks=True)
    return dest
