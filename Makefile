# The front door: `make demo` runs the word count on embedded servers, `make test` runs the suite.
# Both set up what they need first (scripts/setup.sh), and skip what is already there.
PY := .venv/bin/python
PYTEST_ARGS ?=

.PHONY: setup demo test test-fast test-unit lint bench bench-smoke mutation clean

setup:
	@scripts/setup.sh

demo: setup
	$(PY) examples/wordcount.py --demo $(DEMO_ARGS)

test: setup lint
	$(PY) -m pytest $(PYTEST_ARGS)

# The checks a contributor runs (configuration in pyproject.toml): ruff (lint and import order), mypy, then the
# import contracts (lint-imports, [tool.importlinter]: layers, no cycles, no private names across modules).
lint: setup
	.venv/bin/ruff check kinesis_spout tests benchmarks examples scripts
	.venv/bin/mypy
	.venv/bin/lint-imports --no-cache

# The contributor's loop: everything but the tests marked slow (crash, failover, Spark sessions)
test-fast: setup
	$(PY) -m pytest -m 'not slow' $(PYTEST_ARGS)

test-unit: setup
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

# Benchmarks in their own venv (benchmarks/setup.sh), results in benchmarks/results/ (make bench BENCH_ARGS=--quick)
bench:
	@scripts/setup.sh zookeeper emulators
	@benchmarks/setup.sh
	benchmarks/.venv/bin/python -m benchmarks $(BENCH_ARGS)

# A few seconds of every benchmark with tiny sizes, results in a temporary directory (the test suite does this too)
bench-smoke: setup
	$(PY) -m benchmarks --smoke --no-chart

# Mutation testing of the modules where a mistake loses data, on demand (not part of `make test`): its own venv
# (.venv-mutation), mutmut at nice 19 with MUTATION_JOBS workers; prints the score per module and the survivors.
# Results: benchmarks/results/mutation.md. MUTATION_ARGS=--retest-survivors tests the survivors again.
mutation:
	@scripts/mutation.sh

clean:
	rm -rf .venv .venv-mutation mutants emulators/node_modules .pytest_cache .hypothesis build *.egg-info
