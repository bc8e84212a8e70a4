# The front door: `make demo` runs the word count on embedded servers, `make test` runs the suite.
# Both set up what they need first (scripts/setup.sh), and skip what is already there.
PY := .venv/bin/python
PYTEST_ARGS ?=

.PHONY: setup demo test test-unit bench bench-smoke clean

setup:
	@scripts/setup.sh

demo: setup
	$(PY) examples/wordcount.py --demo $(DEMO_ARGS)

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

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

clean:
	rm -rf .venv emulators/node_modules .pytest_cache .hypothesis build *.egg-info
