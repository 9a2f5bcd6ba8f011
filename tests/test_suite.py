"""The test suite's own rules (tests/README.md): test modules import shared code from
tests/support/ and tests/fakes/, never from one another; each folder of tests mirrors a
part of the code; code that is not a test lives only in the two shared packages; waits go
through the waiting helper; a run under CI without the shared data fails, not skips."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import shared

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
CODE_PACKAGES = ("hexlocal_core", "hexlocal_mcp", "hexlocal_cli")
SHARED_CODE = {"support", "fakes"}  # importable by any test module
DATA = {"fixtures"}  # files tests read, no Python
# Folders that mirror no single package: the top of hexlocal_core, and the suites that
# cut across the layers (PostgreSQL's engine against the seam, hostile input and faults).
OWN_FOLDERS = {"core", "pg", "reliability"}
FACES = {"mcp": "hexlocal_mcp", "cli": "hexlocal_cli"}
# Tests of the repository as a whole stay at the top of tests/.
AT_TOP = {"conftest.py", "__init__.py", "test_architecture.py", "test_deploy_files.py",
          "test_suite.py", "test_architecture_doc.py", "test_readme.py",
          "test_settings_docs.py", "test_decision_records.py", "test_bench_report.py"}  # fmt: skip


def _python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(path: Path) -> list[tuple[int, str]]:
    package = _module_of(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    return _imports_in(path.read_text(encoding="utf-8"), package)


def _imports_in(text: str, package: list[str]) -> list[tuple[int, str]]:
    """Every module name an import names (lazy ones inside functions too), with relative
    imports resolved against `package`, the dotted parts of the file's package."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def _is_test_module(name: str) -> bool:
    parts = name.split(".")
    return parts[0] == "tests" and any(
        part.startswith("test_") or part == "conftest" for part in parts[1:]
    )


def _test_module_imports(path: Path) -> list[str]:
    return sorted(
        {f"line {line}: {name}" for line, name in _imported(path) if _is_test_module(name)}
    )


@pytest.mark.parametrize("path", _python_files(), ids=lambda p: str(p.relative_to(TESTS)))
def test_no_module_imports_a_test_module(path: Path) -> None:
    # A helper two test files share moves to tests/support/ (a fake of a remote service to
    # tests/fakes/): a test module changed for its own reasons must not break another.
    assert _test_module_imports(path) == [], "import shared code from tests.support instead"


def test_the_import_rule_sees_test_module_imports() -> None:
    text = (
        "from tests.search.test_fusion import write\n"
        "from .test_fusion import rows\n"
        "from tests import conftest\n"
        "def f():\n    import tests.versions.test_versions\n"
        "from tests.support.helpers import item\n"
        "from tests.fakes.fake_hex import FakeHex\n"
        "import test_x\n"  # not under tests: a library of that name
    )
    found = _imports_in(text, ["tests", "search"])
    assert sorted({line for line, name in found if _is_test_module(name)}) == [1, 2, 3, 5]


def _misplaced() -> list[str]:
    problems: list[str] = []
    core_packages = {
        p.name for p in (ROOT / "hexlocal_core").iterdir() if (p / "__init__.py").is_file()
    }
    folders = core_packages | set(FACES) | OWN_FOLDERS | SHARED_CODE | DATA
    for entry in sorted(TESTS.iterdir()):
        name = entry.name
        if name == "__pycache__" or name.startswith("."):
            continue
        if entry.is_file():
            if entry.suffix == ".py" and name not in AT_TOP:
                problems.append(f"{name}: tests go in the folder of the code they test")
            continue
        if name not in folders:
            problems.append(f"{name}/: no package of the code is called that")
            continue
        if name in DATA:
            continue
        if not (entry / "__init__.py").is_file():
            problems.append(f"{name}/: no __init__.py (two folders' test_x.py would clash)")
        if name in SHARED_CODE:
            continue
        for path in sorted(entry.rglob("*.py")):
            if path.name not in {"__init__.py", "conftest.py"} and not path.name.startswith(
                "test_"
            ):
                where = path.relative_to(TESTS)
                problems.append(f"{where}: shared code lives in tests/support/ or tests/fakes/")
    return problems


def test_each_folder_mirrors_the_code_and_holds_only_tests() -> None:
    assert _misplaced() == [], "see tests/README.md for where a test file goes"


# -- waiting: a loop that sleeps is a poll, and a poll goes through tests/support/waiting.py


def _sleeping_loops(text: str) -> list[int]:
    """Lines of `while`/`for` loops whose body calls a sleep (`asyncio.sleep`,
    `time.sleep`, a bare `sleep`): hand-made polls, with or without a deadline."""
    found: list[int] = []
    for loop in ast.walk(ast.parse(text)):
        if not isinstance(loop, ast.While | ast.For | ast.AsyncFor):
            continue
        for node in (n for stmt in loop.body for n in ast.walk(stmt)):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name == "sleep":
                    found.append(loop.lineno)
                    break
    return found


WAITING = TESTS / "support" / "waiting.py"
POLL_CHECKED = [p for p in _python_files() if "fakes" not in p.parts and p != WAITING]


@pytest.mark.parametrize("path", POLL_CHECKED, ids=lambda p: str(p.relative_to(TESTS)))
def test_polls_go_through_the_waiting_helper(path: Path) -> None:
    # `eventually` / `wait_until` bound every wait and fail saying what did not happen; a
    # hand-made loop tends to run out silently or wait for ever. (The fakes' loops are
    # the remote service's behaviour, not a test waiting.)
    assert _sleeping_loops(path.read_text(encoding="utf-8")) == [], "use tests.support.waiting"


def test_the_poll_rule_sees_a_hand_made_poll() -> None:
    text = (
        "import asyncio, time\n"
        "async def f(x):\n"
        "    for _ in range(200):\n"
        "        if x():\n            break\n"
        "        await asyncio.sleep(0.05)\n"
        "    while not x():\n        time.sleep(0.1)\n"
        "    await asyncio.sleep(0.3)\n"  # not in a loop: not a poll
    )
    assert _sleeping_loops(text) == [3, 7]


# -- the shared data: skipped locally when absent, never under CI --------------------------


@pytest.mark.parametrize(
    ("ci", "outcome"), [("", pytest.skip.Exception), ("true", pytest.fail.Exception)]
)
def test_missing_shared_data_skips_locally_and_fails_under_ci(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, ci: str, outcome: type[BaseException]
) -> None:
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="the corpus not found at .*nowhere"):
        shared(tmp_path / "nowhere", "the corpus")
    assert shared(tmp_path, "tmp") == tmp_path


def _run_corpus_test(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """One test that needs the corpus, in a pytest of its own, with the shared data
    pointed at an empty folder."""
    test = "tests/versions/test_versions.py::test_corpus_release_lists_are_in_our_descending_order"
    environ = {k: v for k, v in os.environ.items() if k != "CI"}
    environ.update(HEXLOCAL_SHARED=str(tmp_path / "empty"), PYTHONPATH=str(ROOT), **env)
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", test]
    return subprocess.run(args, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=60)


@pytest.mark.integration
def test_a_run_without_the_shared_data_skips_locally_and_fails_under_ci(tmp_path: Path) -> None:
    local = _run_corpus_test(tmp_path)
    assert local.returncode == 0 and "1 skipped" in local.stdout, local.stdout[-2000:]
    assert "the shared corpus not found at" in local.stdout
    ci = _run_corpus_test(tmp_path, CI="true")
    assert ci.returncode not in (0, 5), ci.stdout[-2000:]  # 5: nothing collected
    assert "CI=true but the shared data is not at" in ci.stdout + ci.stderr
