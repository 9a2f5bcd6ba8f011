"""docs/architecture.md names only modules that exist: every path it gives (`index/seam.py`,
`usecases/ingest.Ingestion`, `hexlocal_core/usecases/`) and every `module.name` whose module
is ours resolves to a file, folder or top-level name in the tree. A rename or a removal
fails here until the map is updated."""

from __future__ import annotations

import ast
import importlib.util
import re
from functools import cache

import pytest

from tests.support.paths import REPO_ROOT

DOC = REPO_ROOT / "docs" / "architecture.md"
CODE_ROOTS = ("hexlocal_core", "hexlocal_mcp", "hexlocal_cli", "tests", "scripts", "benchmarks")
# A path: segments ending in `/`, a module (`.py`) or a module and a name (`a/b.name`).
_PATH = re.compile(
    r"(?<![\w./-])(?P<path>(?:[A-Za-z_][\w-]*/)+(?:[A-Za-z_][\w-]*\.md|[A-Za-z_]\w*(?:\.py)?)?|[A-Za-z_]\w*\.py)"
    r"(?:\.(?P<name>[A-Za-z_]\w*))?"
)
# `module.name` in backticks, the module in lower case: `service.Hexlocal`, `pg.db.Executor`.
_DOTTED = re.compile(
    r"`(?P<module>[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)*)\.(?P<name>[A-Za-z_]\w*)"
)


@cache
def tree() -> tuple[frozenset[str], frozenset[str]]:
    """(files, folders) of the code and docs, as paths relative to the repository."""
    files: set[str] = set()
    folders: set[str] = set()
    for root in CODE_ROOTS:
        for path in (REPO_ROOT / root).rglob("*"):
            if "__pycache__" in path.parts:
                continue
            relative = path.relative_to(REPO_ROOT).as_posix()
            (folders if path.is_dir() else files).add(relative)
        folders.add(root)
    docs = REPO_ROOT / "docs"
    files |= {p.relative_to(REPO_ROOT).as_posix() for p in docs.rglob("*.md")}
    folders |= {p.relative_to(REPO_ROOT).as_posix() for p in docs.rglob("*") if p.is_dir()}
    return frozenset(files), frozenset(folders)


def _ends_with(candidates: frozenset[str], path: str) -> list[str]:
    return sorted(c for c in candidates if c == path or c.endswith("/" + path))


def resolve(path: str) -> list[str]:
    """The files or folders of the tree a path written in the doc can mean."""
    files, folders = tree()
    if path.endswith("/"):
        return _ends_with(folders, path.rstrip("/"))
    if path.endswith((".py", ".md")):
        return _ends_with(files, path)
    return _ends_with(files, path + ".py") or _ends_with(folders, path)


@cache
def top_level_names(module: str) -> frozenset[str]:
    body = ast.parse((REPO_ROOT / module).read_text(encoding="utf-8")).body
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return frozenset(names)


def is_ours(path: str) -> bool:
    """Whether a path names code or docs of this repository (not a user's `guides/`)."""
    first = path.split("/")[0]
    subpackages = {p.split("/")[-1] for p in tree()[1]}
    return path.endswith(".py") or first == "docs" and path != "docs/" or first in subpackages


def references(text: str) -> list[tuple[str, str | None]]:
    """(path, name or None) for every module reference in the text, in order, once each."""
    found: dict[tuple[str, str | None], None] = {}
    for m in _PATH.finditer(text):
        if is_ours(m["path"]):
            name = m["name"] if m["name"] and not m["path"].endswith((".py", ".md", "/")) else None
            found[(m["path"], name)] = None
    for m in _DOTTED.finditer(text):
        if m["name"] in ("py", "md"):
            continue  # a file name, read above
        module = m["module"].replace(".", "/")
        top = m["module"].split(".")[0]
        if resolve(module) or importlib.util.find_spec(top) is None:
            found[(module, m["name"])] = None
    return list(found)


def problem(path: str, name: str | None) -> str | None:
    """Why a reference does not resolve, or None when it does."""
    matches = resolve(path)
    if not matches:
        return f"{path}: no such module or folder"
    modules = [m for m in matches if m.endswith(".py")]
    if name is not None and modules and not any(name in top_level_names(m) for m in modules):
        return f"{path}.{name}: {', '.join(modules)} defines no {name}"
    return None


def test_the_extractor_reads_paths_and_dotted_names() -> None:
    text = (
        "`index/seam.py` and `usecases/ingest.Ingestion.prepare`; `service.Hexlocal`, "
        "`hexlocal_core/usecases/`; the project's README.md, docs/, guides/; `asyncio.to_thread`"
    )
    assert references(text) == [
        ("index/seam.py", None),
        ("usecases/ingest", "Ingestion"),
        ("hexlocal_core/usecases/", None),
        ("service", "Hexlocal"),
    ]


@pytest.mark.parametrize(
    ("path", "name", "ok"),
    [
        ("index/seam.py", None, True),
        ("usecases/ingest", "Ingestion", True),
        ("usecases/ingest", "NoSuchThing", False),
        ("index/pg/", None, True),
        ("ingest/no_such_module.py", None, False),
        ("service", "build", True),
        ("no_such_module", "Name", False),
    ],
)
def test_a_reference_resolves_only_when_it_exists(path: str, name: str | None, ok: bool) -> None:
    assert (problem(path, name) is None) is ok


def test_every_module_the_architecture_doc_names_exists() -> None:
    found = references(DOC.read_text(encoding="utf-8"))
    assert len(found) > 50  # the map names most modules; an extractor that finds none is broken
    assert [p for ref in found if (p := problem(*ref)) is not None] == []
