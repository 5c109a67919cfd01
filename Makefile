# Two commands set everything up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
SAMPLE := examples/sessions/gemini3pro_sphinx-doc__sphinx-9229.traj.json

.PHONY: run test lint typecheck bench check check-baseline schema clean

$(STAMP): pyproject.toml plugins/compactkit-cap-output/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	$(BIN)/python -m pip install --quiet -e plugins/compactkit-cap-output
	touch $(STAMP)

run: $(STAMP)
	@mkdir -p out
	$(BIN)/compactkit inspect --top 3 $(SAMPLE)
	$(BIN)/compactkit run $(SAMPLE) --budget 30000 --explain \
		-o out/demo.compact.json --report-json out/demo.report.json
	$(BIN)/compactkit expand out/demo.compact.json -o out/demo.expanded.json
	$(BIN)/compactkit diff $(SAMPLE) out/demo.expanded.json

TEST_WORKERS ?= auto
test: $(STAMP)  # in parallel (pytest-xdist; TEST_WORKERS=0 for one process), a module per worker
	$(BIN)/python -m pytest -q -p no:langsmith_plugin -n $(TEST_WORKERS) --dist loadscope

lint: $(STAMP)
	$(BIN)/ruff check compactkit tests benchmarks plugins fuzz
	$(BIN)/ruff format --check compactkit tests benchmarks plugins fuzz

typecheck: $(STAMP)
	$(BIN)/mypy compactkit

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -r benchmarks/requirements.txt
	$(BIN)/python -m pytest benchmarks --benchmark-enable -q -s -p no:cacheprovider \
		-p no:langsmith_plugin

check: $(STAMP)  # compactkit's own gate: [[tool.compactkit.check]] in pyproject.toml
	$(BIN)/compactkit check --workers 2

check-baseline: $(STAMP)  # accept the current figures (commit compactkit-baseline.json after)
	$(BIN)/compactkit check --workers 2 --update-baseline

schema: $(STAMP)
	$(BIN)/python -m compactkit.schema > docs/context.schema.json

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

.PHONY: fuzz fuzz-smoke
FUZZ_RUNS ?= 100000
FUZZ_SECONDS ?= 3

fuzz: $(STAMP)  # every reader under atheris, FUZZ_RUNS inputs each, then hypothesis on real records
	$(BIN)/python -m pip install --quiet -r fuzz/requirements.txt
	$(BIN)/python fuzz/run.py --all --runs $(FUZZ_RUNS)
	COMPACTKIT_FUZZ_EXAMPLES=2000 $(BIN)/python -m pytest -q -p no:langsmith_plugin \
		tests/formats/test_fuzz_records.py tests/test_fuzz_regressions.py

fuzz-smoke: $(STAMP)  # CI: each target for FUZZ_SECONDS under atheris
	$(BIN)/python -m pip install --quiet -r fuzz/requirements.txt
	$(BIN)/python fuzz/run.py --all --seconds $(FUZZ_SECONDS)
