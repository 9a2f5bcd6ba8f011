#!/usr/bin/env bash
# The user's path, end to end: build the sdist and the wheel (from that sdist), install the
# wheel into a fresh venv with a plain `pip install <wheel>` (no model package), start the
# loopback fake Hex and fake Hugging Face hub from this checkout, then in the fresh venv:
#   hexlocal search jason "decode keys to atoms" --version 1.4.4 --json   -> a hit with a hexdocs_url
#   hexlocal-mcp --help / --version                                         -> print and exit
#   hexlocal mcp-config claude-code --uvx-from <wheel>   -> `uvx --offline ...`, uv's cache filled
#   that uvx command with every route to a package index closed             -> answers initialize
# and print each step's seconds. Exit 1 when any step fails.
#
#   scripts/smoke_wheel.sh [--from-index] [--wheel FILE] [--keep] [--json FILE]
#
# --from-index installs the dependencies from the configured pip index, exactly as a user
# does (about 2.5-3 min here); without it they come from a wheelhouse cached per dependency
# list (see scripts/fresh_venv.py). --wheel tests a given wheel (a release artifact)
# instead of building one. PYTHON picks the checkout interpreter (.venv/bin/python).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
if [ ! -x "$PYTHON" ]; then
  echo "smoke: $PYTHON not found; run \`make setup\` first (the fakes and model weights come from it)" >&2
  exit 2
fi

# The helper and the fake servers it starts share one process group (job control gives a
# background job its own), so the trap stops the servers even if the helper is killed.
set -m
"$PYTHON" scripts/fresh_venv.py "$@" &
helper=$!
stop() { kill -TERM -- "-$helper" 2>/dev/null || true; }
trap stop EXIT
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM
rc=0
wait "$helper" || rc=$?
exit "$rc"
