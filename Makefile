# Two commands set everything up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# two levels, a stamp each: `make run` installs the package alone (what the demo needs); `make test`
# and the other targets add the dev extra and the bundled plugin on top
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
SAMPLE := examples/sessions/gemini3pro_sphinx-doc__sphinx-9229.traj.json
OUT ?= out

.PHONY: run test lint typecheck bench check check-baseline schema docs figures clean

$(RUN_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(DEV_STAMP): $(RUN_STAMP) plugins/compactkit-cap-output/pyproject.toml
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	$(BIN)/python -m pip install --quiet -e plugins/compactkit-cap-output
	touch $@

run: $(RUN_STAMP)
	@mkdir -p $(OUT)
	$(BIN)/compactkit inspect --top 3 $(SAMPLE)
	$(BIN)/compactkit run $(SAMPLE) --budget 30000 --explain \
		-o $(OUT)/demo.compact.json --report-json $(OUT)/demo.report.json
	$(BIN)/compactkit expand $(OUT)/demo.compact.json -o $(OUT)/demo.expanded.json
	$(BIN)/compactkit diff $(SAMPLE) $(OUT)/demo.expanded.json
	@printf '%s\n' '' 'wrote:' \
		'  $(OUT)/demo.compact.json                 the session compacted within 30,000 tokens' \
		'  $(OUT)/demo.compact.json.recovery.jsonl  what was removed, by etag (expand reads it)' \
		'  $(OUT)/demo.report.json                  the run report: tokens and changes per strategy' \
		'  $(OUT)/demo.expanded.json                expanded back: no differences from the input' \
		'next: $(BIN)/compactkit --help  (or `. $(BIN)/activate` and type compactkit)'

TEST_WORKERS ?= auto
test: $(DEV_STAMP)  # in parallel (pytest-xdist; TEST_WORKERS=0 for one process), a module per worker
	$(BIN)/python -m pytest -q -p no:langsmith_plugin -n $(TEST_WORKERS) --dist loadscope

lint: $(DEV_STAMP)
	$(BIN)/ruff check compactkit tests benchmarks plugins fuzz
	$(BIN)/ruff format --check compactkit tests benchmarks plugins fuzz

typecheck: $(DEV_STAMP)
	$(BIN)/mypy compactkit

bench: $(DEV_STAMP)
	$(BIN)/python -m pip install --quiet -r benchmarks/requirements.txt
	$(BIN)/python -m pytest benchmarks --benchmark-enable -q -s -p no:cacheprovider \
		-p no:langsmith_plugin

check: $(RUN_STAMP)  # compactkit's own gate: [[tool.compactkit.check]] in pyproject.toml
	$(BIN)/compactkit check --workers 2

check-baseline: $(RUN_STAMP)  # accept the current figures (commit compactkit-baseline.json after)
	$(BIN)/compactkit check --workers 2 --update-baseline

schema: $(RUN_STAMP)
	$(BIN)/python -m compactkit.schema > docs/context.schema.json

docs: $(RUN_STAMP)  # docs/cli.md's option tables, from the commands (tests/cli/test_docs_tables.py)
	$(BIN)/python -m compactkit.cli._docs docs/cli.md

figures: $(DEV_STAMP)  # the docs' corpus figures, measured (minutes): docs/figures.json, then the pages
	$(BIN)/python -m benchmarks.figures

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

.PHONY: fuzz fuzz-smoke
FUZZ_RUNS ?= 100000
FUZZ_SECONDS ?= 3

fuzz: $(DEV_STAMP)  # every reader under atheris, FUZZ_RUNS inputs each, then hypothesis on real records
	$(BIN)/python -m pip install --quiet -r fuzz/requirements.txt
	$(BIN)/python fuzz/run.py --all --runs $(FUZZ_RUNS)
	COMPACTKIT_FUZZ_EXAMPLES=2000 $(BIN)/python -m pytest -q -p no:langsmith_plugin \
		tests/formats/test_fuzz_records.py tests/test_fuzz_regressions.py

fuzz-smoke: $(DEV_STAMP)  # CI: each target for FUZZ_SECONDS under atheris
	$(BIN)/python -m pip install --quiet -r fuzz/requirements.txt
	$(BIN)/python fuzz/run.py --all --seconds $(FUZZ_SECONDS)
