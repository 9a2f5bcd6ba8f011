"""From nothing to the first answer: a fresh venv, the built wheel, the first search.

Builds the sdist and wheel, installs the wheel into a new venv (`pip install <wheel>`, no
model package), and runs `hexlocal search jason "decode keys to atoms" --version 1.4.4`
there against the loopback fake Hex and fake Hugging Face hub, so the first answer includes
downloading the embedder (91 MB) and the cross-encoder starts downloading in the
background. Prints install seconds, seconds to the first answer and its notices. The steps
are scripts/fresh_venv.py's, the same as scripts/smoke_wheel.sh's.

    python benchmarks/bench_first_answer.py [--from-index] [--json]

--from-index installs the dependencies from the configured pip index, as a user does;
without it they come from a wheelhouse cached per dependency list (the first run fills it).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

import fresh_venv  # noqa: E402  (scripts/ is not a package)


def table(report: fresh_venv.Report) -> Table:
    out = Table(title="Fresh venv to first answer (loopback Hex and hub)")
    out.add_column("step")
    out.add_column("seconds", justify="right")
    out.add_column("detail", overflow="fold")
    out.add_row("build sdist + wheel", f"{report.build_s:.1f}", report.wheel)
    out.add_row("create venv", f"{report.venv_s:.1f}", "python -m venv")
    out.add_row("install", f"{report.install_s:.1f}", report.install_mode)
    out.add_row("start fakes", f"{report.serve_s:.1f}", "loopback Hex and hub (checkout venv)")
    hits = f"{report.hits} hits, first {report.first_url or '-'}"
    out.add_row("first answer", f"{report.first_answer_s:.1f}", f"model download included; {hits}")
    for notice in report.notices:
        out.add_row("  notice", "", f"{notice.get('code')}: {notice.get('message')}")
    if not report.notices:
        out.add_row("  notice", "", "(none)")
    checks = ", ".join(f"{flag} {verdict}" for flag, verdict in report.mcp.items())
    out.add_row("hexlocal-mcp checks", f"{report.mcp_s:.1f}", checks or "-")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from-index", action="store_true", help="dependencies from the index")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args()
    report = fresh_venv.run_fresh(from_index=args.from_index)
    if args.json:
        print(json.dumps(asdict(report), indent=2))
    else:
        console = Console(width=100)
        console.print(table(report))
        for failure in report.failures:
            console.print(f"[red]FAILED[/] {failure}", markup=True, highlight=False)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
