"""The repository's scripts (`scripts/*.py`), loaded as modules for the tests that check
what they generate or list: they are not a package, so they are loaded by path."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.support.paths import REPO_ROOT


def load_script(name: str) -> ModuleType:
    """`scripts/<name>.py` as a module, loaded once per test process."""
    key = f"scripts_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, REPO_ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module  # registered before it runs, as an import would
    spec.loader.exec_module(module)
    return module
