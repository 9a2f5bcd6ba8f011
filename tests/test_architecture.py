"""The dependency rules of the layout: core logic knows no adapter library, faces no
printing to the protocol channel."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
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
