"""What the benchmarks share: how a run ends (one JSON document, or a table with the load).

Benchmarks are scripts (`python benchmarks/bench_x.py`); they put the checkout on
sys.path, so this module is imported as `benchmarks.common`.
"""

from __future__ import annotations

import json
import os
from typing import Any

from rich.console import Console
from rich.table import Table


def finish(data: dict[str, Any], table: Table, load_before: float, *, as_json: bool) -> int:
    """Prints `data` (with the load average before the run) as JSON, or the table and the
    load averages; the exit code of a run that got this far."""
    if as_json:
        print(json.dumps({"load_before": load_before, **data}, indent=2, default=str))
        return 0
    console = Console(highlight=False, width=140)
    console.print(table)
    after = os.getloadavg()[0]
    console.print(f"load average before {load_before:.1f}, after {after:.1f}", style="dim")
    return 0
