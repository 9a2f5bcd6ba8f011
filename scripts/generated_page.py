"""The command line of every docs page generated from the code (gen_cli_docs.py,
gen_settings_docs.py, gen_notices_docs.py): write the page, or with --check exit 1 when
the page on disk is not what the code would write."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def generate(target: Path, render: Callable[[], str], *, script: str, source: str) -> None:
    """`script` is the generator's file name, `source` what the page is made from."""
    page = target.relative_to(REPO)
    parser = argparse.ArgumentParser(description=f"Regenerate {page} from {source}.")
    parser.add_argument("--check", action="store_true", help=f"fail if {page} is stale")
    args = parser.parse_args()
    text = render()
    if args.check:
        current = target.read_text(encoding="utf-8") if target.exists() else ""
        if current != text:
            sys.exit(f"{target} is out of date; run python scripts/{script}")
        return
    target.write_text(text, encoding="utf-8")
    print(f"wrote {page}")
