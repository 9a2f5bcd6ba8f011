"""The dependency rules of the layout: core logic knows no adapter library, faces no
printing to the protocol channel, imports across the core and the faces form no cycle, and
SQL is written only in hexlocal_core/index/."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent  # the checkout: tests/ sits at its top
ADAPTER_LIBS = {"aiohttp", "onnxruntime", "fastmcp", "mcp", "tokenizers", "onnx", "huggingface_hub"}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


CORE = sorted(
    p for p in (ROOT / "hexlocal_core").rglob("*.py") if "adapters" not in p.relative_to(ROOT).parts
)


@pytest.mark.parametrize("path", CORE, ids=lambda p: str(p.relative_to(ROOT)))
def test_core_logic_imports_no_adapter_library(path: Path) -> None:
    assert not (_imports(path) & ADAPTER_LIBS)


@pytest.mark.parametrize(
    "path", sorted((ROOT / "hexlocal_mcp").rglob("*.py")), ids=lambda p: p.name
)
def test_mcp_server_never_prints(path: Path) -> None:
    calls = [
        node
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "print"
    ]
    assert calls == [], "stdout is the MCP protocol channel; log to stderr instead"


def test_core_imports_no_face() -> None:
    for path in (ROOT / "hexlocal_core").rglob("*.py"):
        assert not (_imports(path) & {"hexlocal_mcp", "hexlocal_cli", "click", "rich"}), path


# -- import direction: no cycles in the core or the faces ---------------------------------

PACKAGES = ("hexlocal_core", "hexlocal_mcp", "hexlocal_cli")


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that runs (at import time or later), skipping the bodies of
    `if TYPE_CHECKING:` blocks: those are for the type checker only and never execute."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _resolve(name: str, modules: set[str]) -> str | None:
    """The module of ours an imported dotted name lives in (None if outside)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports when it runs, for every module under
    `root` of the core and the faces."""
    paths = {
        _module_name(p, root): p for package in PACKAGES for p in (root / package).rglob("*.py")
    }
    modules = set(paths)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in paths.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                # `from pkg import mod` imports the module pkg.mod; `from mod import name`
                # imports mod. Parent packages are not edges: Python initialises them
                # first, but a package's __init__ that imports nothing back is no cycle.
                targets = [f"{base}.{alias.name}" for alias in node.names]
            for target in targets:
                found = _resolve(target, modules)
                if found is not None and found != module:
                    graph[module].add(found)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_cycle_finder_sees_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_type_checking_imports_are_not_runtime_edges() -> None:
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "import x.runtime\n"
        "if TYPE_CHECKING:\n    import x.types_only\n"
        "def f():\n    import x.lazy\n"
    )
    names = [a.name for n in _runtime_imports(tree) if isinstance(n, ast.Import) for a in n.names]
    assert sorted(names) == ["x.lazy", "x.runtime"]


def test_no_import_cycle_in_the_core_or_the_faces() -> None:
    # Imports point one way (faces -> use cases -> core logic -> index -> model/ports), so
    # a module can be read, tested and replaced without the modules above it. A lazy import
    # inside a function still counts: it hides a cycle from Python, not from the reader.
    assert _cycles(_import_graph()) == []


def test_a_cycle_through_a_face_and_a_lazy_import_is_seen(tmp_path: Path) -> None:
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "hexlocal_mcp" / "server.py").write_text(
        "def serve():\n    from hexlocal_mcp import http\n"
    )
    (tmp_path / "hexlocal_mcp" / "http.py").write_text("from hexlocal_mcp.server import serve\n")
    (tmp_path / "hexlocal_cli" / "main.py").write_text("import hexlocal_mcp.server\n")
    assert _cycles(_import_graph(tmp_path)) == [["hexlocal_mcp.http", "hexlocal_mcp.server"]]


# -- storage behind one seam: SQL only in hexlocal_core/index/ ---------------------------

# The same rule as ../shared/tools/arch_check.py: a string constant that starts like a SQL
# statement and names a table (FROM / INTO / TABLE) or is a PRAGMA / BEGIN / UPDATE / DELETE.
SQL_START = re.compile(
    r"^\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|PRAGMA|BEGIN|WITH|REPLACE)\b", re.I
)
SQL_VERBS_ALONE = ("PRAGMA", "BEGIN", "UPDATE", "DELETE")

# Files still holding SQL while their owners move it into hexlocal_core/index/. Shrink this
# list, never grow it: the test also fails when a listed file no longer holds any SQL.
SQL_ALLOWED_OUTSIDE_INDEX: frozenset[str] = frozenset()


def _is_sql(value: str) -> bool:
    upper = value.upper()
    return (
        bool(SQL_START.match(value))
        and len(value) > 12
        and (
            " FROM " in upper
            or " INTO " in upper
            or "TABLE" in upper
            or upper.strip().startswith(SQL_VERBS_ALONE)
        )
    )


def _sql_literals(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _is_sql(node.value)
    ]


def _sql_by_file() -> dict[str, list[int]]:
    index = ROOT / "hexlocal_core" / "index"
    out: dict[str, list[int]] = {}
    for package in ("hexlocal_core", "hexlocal_mcp", "hexlocal_cli"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if index in path.parents:
                continue
            lines = _sql_literals(path)
            if lines:
                out[str(path.relative_to(ROOT))] = lines
    return out


def test_sql_rule_sees_sql() -> None:
    assert _is_sql("SELECT id FROM chunks WHERE package = ?")
    assert _is_sql("  insert into memories(text) values (?)")
    assert _is_sql("PRAGMA user_version")
    assert not _is_sql("select which version to pin")  # prose: no table named
    assert not _is_sql("create")


def test_sql_lives_only_in_the_index_package() -> None:
    found = _sql_by_file()
    outside = {f"{path}:{line}" for path, lines in found.items() for line in lines}
    allowed = {entry for entry in outside if entry.split(":")[0] in SQL_ALLOWED_OUTSIDE_INDEX}
    assert sorted(outside - allowed) == [], "move these statements into hexlocal_core/index/"
    stale = SQL_ALLOWED_OUTSIDE_INDEX - set(found)
    assert not stale, f"no SQL left in {sorted(stale)}: remove them from the allowlist"


# The storage layer sits under everything but the shared vocabulary: it may import only
# itself and these modules, never search, memory, ingest, use cases or the service.
INDEX_MAY_IMPORT = ("hexlocal_core.index", "hexlocal_core.model", "hexlocal_core.ports",
                    "hexlocal_core.errors", "hexlocal_core.redact")  # fmt: skip


def test_storage_imports_no_layer_above_it() -> None:
    graph = _import_graph()
    upward = {
        f"{module} -> {target}"
        for module, targets in graph.items()
        if module.startswith("hexlocal_core.index")
        for target in targets
        if not any(target == ok or target.startswith(ok + ".") for ok in INDEX_MAY_IMPORT)
    }
    assert sorted(upward) == []


# -- one seam, two engines: above index/, nothing knows which database holds the index ---

ENGINE_LIBS = {"apsw", "sqlite_vec", "psycopg", "psycopg_pool", "pgvector"}


def _engine_leaks(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = [f"imports {name}" for name in sorted(_imports(path) & ENGINE_LIBS)]
    found += [
        f"line {node.lineno}: .conn"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr == "conn"
    ]
    return found


def test_no_layer_above_the_index_knows_its_engine() -> None:
    # Callers hold a seam.DocsStore and its Sessions; a connection or a driver import above
    # index/ would tie that caller to SQLite (or PostgreSQL) again.
    index = ROOT / "hexlocal_core" / "index"
    leaks = {
        str(path.relative_to(ROOT)): found
        for package in ("hexlocal_core", "hexlocal_mcp", "hexlocal_cli")
        for path in sorted((ROOT / package).rglob("*.py"))
        if index not in path.parents and (found := _engine_leaks(path))
    }
    assert leaks == {}


def test_engine_leak_rule_sees_a_leak(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import apsw\n\ndef f(store):\n    return store.conn\n")
    assert _engine_leaks(bad) == ["imports apsw", "line 4: .conn"]


# -- the seam owns its types: above index/, only the seam, its values and the token rule ---

# What a caller above index/ may import from it: the Protocols, the values that cross the
# seam, and the token rule the sanitizer shares with both engines' full-text tables.
SEAM_MODULES = ("hexlocal_core.index.seam", "hexlocal_core.index.rows",
                "hexlocal_core.index.tokens")  # fmt: skip
# The store choice the composition root asks: the one place above index/ that names one.
COMPOSITION_ROOT = ("hexlocal_core/store_choice.py", "open_store")


def _index_imports(tree: ast.AST) -> Iterator[tuple[str, str | None, int]]:
    """(imported index module, the function the import sits in, line) of every import of
    hexlocal_core.index in the tree, runtime or for the type checker alike."""
    stack: list[tuple[ast.AST, str | None]] = [(tree, None)]
    while stack:
        node, function = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            base = node.module
            targets = [f"{base}.{alias.name}" for alias in node.names]
            if base != "hexlocal_core.index":  # `from pkg.mod import Name`: the module is pkg.mod
                targets = [base]
        for target in targets:
            if target == "hexlocal_core.index" or target.startswith("hexlocal_core.index."):
                yield target, function, getattr(node, "lineno", 0)
        stack.extend((child, function) for child in ast.iter_child_nodes(node))


def _engine_imports(path: Path, where: str) -> list[str]:
    """The imports in `path` (shown as `where`) of index/ modules other than the seam's."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for target, function, line in sorted(_index_imports(tree), key=lambda found: found[2]):
        if any(target == ok or target.startswith(ok + ".") for ok in SEAM_MODULES):
            continue
        if (where, function) == COMPOSITION_ROOT:
            continue
        found.append(f"{where}:{line} imports {target}")
    return found


def test_callers_above_the_index_import_only_the_seam_and_its_values() -> None:
    # An engine module (sqlite/*, pg/*) or the SQL they share above index/ would tie that
    # caller to one engine again: it takes `seam.DocsStore` and the values of `rows.py`.
    index = ROOT / "hexlocal_core" / "index"
    leaks = [
        leak
        for package in ("hexlocal_core", "hexlocal_mcp", "hexlocal_cli")
        for path in sorted((ROOT / package).rglob("*.py"))
        if index not in path.parents
        for leak in _engine_imports(path, str(path.relative_to(ROOT)))
    ]
    assert leaks == [], "import index.seam and index.rows; store_choice.open_store picks the engine"


def test_the_seam_rule_sees_an_engine_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from hexlocal_core.index.rows import ChunkRow\n"
        "from hexlocal_core.index.seam import DocsStore\n"
        "from hexlocal_core.index.sqlite.store import Store\n"
        "from hexlocal_core.index import chunk_sql, rows\n"
        "import hexlocal_core.index.pg.store\n"
        "def open_store():\n"
        "    from hexlocal_core.index.pg import store\n"
    )
    assert _engine_imports(bad, "x.py") == [
        "x.py:3 imports hexlocal_core.index.sqlite.store",
        "x.py:4 imports hexlocal_core.index.chunk_sql",
        "x.py:5 imports hexlocal_core.index.pg.store",
        "x.py:7 imports hexlocal_core.index.pg",
    ]
    assert _engine_imports(bad, COMPOSITION_ROOT[0])[-1:] == [
        f"{COMPOSITION_ROOT[0]}:5 imports hexlocal_core.index.pg.store"
    ]  # inside open_store the engine may be named; anywhere else in its module not
