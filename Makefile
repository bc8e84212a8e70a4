# The front door: `make demo` runs the word count on embedded servers, `make test` runs the suite.
# Both set up what they need first (scripts/setup.sh), and skip what is already there.
PY := .venv/bin/python
PYTEST_ARGS ?=

.PHONY: setup demo test test-unit bench clean

setup:
	@scripts/setup.sh

demo: setup
	$(PY) -m kinesis_spout.demo $(DEMO_ARGS)

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

test-unit: setup
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

clean:
	rm -rf .venv emulators/node_modules .pytest_cache .hypothesis build *.egg-info
