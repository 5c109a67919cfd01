# Two commands set everything up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
SAMPLE := examples/sessions/codemie_rollout-019e1625.head120.jsonl

.PHONY: run test lint typecheck bench schema clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/compactkit inspect $(SAMPLE)

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check compactkit tests benchmarks
	$(BIN)/ruff format --check compactkit tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy compactkit

bench: $(STAMP)
	$(BIN)/python -m pytest benchmarks --benchmark-enable -q

schema: $(STAMP)
	$(BIN)/python -m compactkit.schema > docs/context.schema.json

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
