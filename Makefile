# The front door: `make demo` runs the word count on embedded servers, `make test` runs the suite.
# Both set up what they need first (scripts/setup.sh), and skip what is already there.
PY := .venv/bin/python
PYTEST_ARGS ?=
# Quiets mkdocs-material's banner about its successor, printed on every build
export NO_MKDOCS_2_WARNING := 1

.PHONY: setup demo dist test test-fast test-unit test-spark test-crash lint docs docs-check docs-serve bench bench-smoke soak \
	scale scale-curve mutation clean

setup:
	@scripts/setup.sh

# The demo sets up what it needs only (scripts/setup.sh demo: the package, moto's server, ZooKeeper; Redis and
# memcached too for DEMO_ARGS="--exactly-once ..."), none of the contributor's tools.
demo:
	@scripts/setup.sh demo $(if $(findstring exactly-once,$(DEMO_ARGS)),servers)
	$(PY) examples/wordcount.py --demo $(DEMO_ARGS)

# A wheel of this checkout in dist/ (DIST_DIR=...), the install that works until a release is on PyPI:
# pip install 'dist/kinesis_spout-VERSION-py3-none-any.whl[state,metrics]'
DIST_DIR ?= dist
dist:
	@scripts/setup.sh bare
	$(PY) -m pip wheel --quiet --no-deps --wheel-dir $(DIST_DIR) .
	@ls -1 $(DIST_DIR)/kinesis_spout-*.whl

# The whole suite on two pytest-xdist workers (all but the browser check of the site: addopts in pyproject.toml) (-n 2; --dist worksteal: an idle worker takes tests queued for the
# other). Each worker starts its own servers on free ports, in temporary directories of its own.
test: setup lint
	$(PY) scripts/spark_class_archive.py
	$(PY) -m pytest -n 2 --dist worksteal $(PYTEST_ARGS)

# The checks a contributor runs (configuration in pyproject.toml): ruff (lint and import order), mypy, then the
# import contracts (lint-imports, [tool.importlinter]: layers, no cycles, no private names across modules).
lint: setup
	.venv/bin/ruff check kinesis_spout tests benchmarks examples scripts
	.venv/bin/mypy
	.venv/bin/lint-imports --no-cache

# Markers say what a test needs (tests/conftest.py applies them from its fixtures; list in pyproject.toml): spark (a
# Spark session or driver), cluster (a standalone Spark cluster), crash (SIGKILL/SIGSTOP loops), zookeeper, emulators,
# state_servers; slow = spark, cluster or crash. Any selection: make test-fast PYTEST_ARGS="-m 'zookeeper'".
# The contributor's loop, under 3 minutes on 2 cores: every module's behaviour on the real servers, without the Spark
# sessions, the standalone cluster, the crash loops (-m 'not slow') and the moto runs of the tests also run on
# kinesalite (backend_twin); `make test` runs those too. Four workers: these tests mostly wait on servers and clocks.
test-fast: setup
	$(PY) -m pytest -n 4 --dist worksteal -m 'not slow and not backend_twin and not browser' $(PYTEST_ARGS)

# The tests in tests/unit (pure logic, a few use a server), in one process
test-unit: setup
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

# The Spark adapters: every test that starts a Spark session or a Spark driver (-m spark)
test-spark: setup
	$(PY) -m pytest -n 2 --dist worksteal -m spark $(PYTEST_ARGS)

# The crash tests: consumers, drivers and workers SIGKILLed or SIGSTOPped in loops, and nothing lost (-m crash)
test-crash: setup
	$(PY) -m pytest -n 2 --dist worksteal -m crash $(PYTEST_ARGS)

# The documentation site (mkdocs.yml, docs/) into site/: the generated reference pages are checked against the code
# first (scripts/docs_reference.py; `--write` renders them again), and --strict fails on any broken link or reference.
docs: setup
	$(PY) scripts/docs_reference.py --check
	$(PY) scripts/architecture.py --check
	.venv/bin/mkdocs build --strict

# The site as a reader sees it: build it, serve it on a free loopback port, open every page in headless Chromium
# (Debian's chromium and chromium-driver, installed by `scripts/setup.sh browser` for this target only) and check
# that no page logs a console error and that the search finds "checkpoint".
docs-check: setup
	@scripts/setup.sh browser
	$(PY) -m pytest -p no:cacheprovider -m browser tests/integration/tooling/test_docs_site.py $(PYTEST_ARGS)

# The site with live reload while writing: http://127.0.0.1:8000
docs-serve: setup
	.venv/bin/mkdocs serve

# Benchmarks in their own venv (benchmarks/setup.sh), results in benchmarks/results/ (make bench BENCH_ARGS=--quick)
bench:
	@scripts/setup.sh zookeeper emulators
	@benchmarks/setup.sh
	benchmarks/.venv/bin/python -m benchmarks $(BENCH_ARGS)

# A few seconds of every benchmark with tiny sizes, results in a temporary directory (the test suite does this too)
bench-smoke: setup
	$(PY) -m benchmarks --smoke --no-chart

# The chaos soak, on demand (not part of `make test`): every path (spout, leases, pipeline, exactly-once,
# readstream-driver, readstream-executors, and their network variants spout-network, leases-network,
# pipeline-network, exactly-once-network, readstream-driver-network, readstream-executors-network on network
# namespaces) under a live producer, with SIGKILLs, ZooKeeper restarts, sessions expired by SIGSTOP, throttling
# bursts and (network variants) partitions from ZooKeeper, Kinesis or the driver, a ZooKeeper leader cut from its
# ensemble and slow links, at seeded random moments; exit code 1 if a record was lost or still behind, a count is
# inexact or a checkpoint moved backwards.
# Results: benchmarks/results/soak.md (and soak.json). Every path takes about 100 minutes on 2 cores: split it with
# --paths. Any selection: make soak SOAK_ARGS="--paths spout,leases --kills 5", SOAK_ARGS=--quick (3 faults per
# path), --seed N replays.
soak: setup
	$(PY) -m benchmarks.soak $(SOAK_ARGS)

# Lease workers at scale, on demand (not part of `make test`): kinesalite, ZooKeeper and every lease worker each on a
# node of its own (a network namespace: kinesis_spout.testing.nodes; loopback addresses where namespaces cannot be
# made); seconds to balance, moves, failover after SIGKILLs, a join, ZooKeeper load and worker CPU at rest, every
# record delivered. Results: benchmarks/results/scale.md (and scale.json). The issue's size is the default (1,024
# shards, 16 workers, 4 killed); a quick run: make scale SCALE_ARGS="--shards 64 --workers 4 --kill 1".
# Then Spark on several nodes: a standalone cluster (master and three one-core workers, ZooKeeper and kinesalite,
# each on a node of its own), readMode=executors against driver reads (backlog and caught up), readMode=auto, a
# worker node cut during a batch counted exactly once. Results: benchmarks/results/scale-spark.md (and .json).
# 256 shards by default; SCALE_SPARK_ARGS="--shards 256,1024" adds the 1,024-shard size, --quick is 16 shards.
# Last, the plots (matplotlib: the benchmarks' own venv): the lease workers' curve from its committed points and the
# Spark curve with this run's Spark figures (scale-curve.png, scale-spark-curve.png and their reports).
SCALE_SPARK_ARGS ?= --shards 256
scale: setup
	$(PY) -m benchmarks.scale $(SCALE_ARGS)
	$(PY) -m benchmarks.scale.spark $(SCALE_SPARK_ARGS)
	@benchmarks/setup.sh
	benchmarks/.venv/bin/python -m benchmarks.scale --curve-report
	benchmarks/.venv/bin/python -m benchmarks.scale.spark_curve

# The curve, on demand: the scale run at 16, 64 and 256 shards (one worker per 64 shards, at least 2, a quarter
# killed), the 1,024-shard point reused from scale.json, a model fitted to them and carried to 10,000 shards.
# Results: benchmarks/results/scale-curve.md, .json and .png (matplotlib: the benchmarks' own venv). Then the Spark
# curve, from the committed Spark runs (scale-spark*.json, no Spark run): scale-spark-curve.md, .json and .png.
CURVE_ARGS ?= --curve 16,64,256 --rest 10 --phase-timeout 300
scale-curve: setup
	@benchmarks/setup.sh
	benchmarks/.venv/bin/python -m benchmarks.scale $(CURVE_ARGS)
	benchmarks/.venv/bin/python -m benchmarks.scale.spark_curve

# Mutation testing of the modules where a mistake loses data, on demand (not part of `make test`): its own venv
# (.venv-mutation), mutmut at nice 19 with MUTATION_JOBS workers; prints the score per module and the survivors.
# Results: benchmarks/results/mutation.md. MUTATION_ARGS=--retest-survivors tests the survivors again.
mutation:
	@scripts/mutation.sh

clean:
	rm -rf .venv .venv-mutation mutants emulators/node_modules .pytest_cache .hypothesis build dist site *.egg-info
