#!/usr/bin/env bash
# Mutation testing of the modules where a mistake loses data (`make mutation`; configuration: [tool.mutmut] in
# pyproject.toml, per-module test lists in scripts/mutation_run.py). Idempotent: sets up its own venv
# (.venv-mutation) and the servers the tests start, runs mutmut at the lowest CPU priority with MUTATION_JOBS
# workers (default 2), then prints the score per module and the mutants not killed.
# Two passes: every mutant against one fast test of its module, then the survivors against more of them.
# mutmut keeps its results in mutants/: a second run tests only mutants of changed functions. `rm -rf mutants` for a
# run from scratch; MUTATION_ARGS=--retest-survivors to test the survivors again after adding tests, and
# MUTATION_ARGS="--retest-survivors --restat tests/integration/kinesis/test_reader.py::*" after editing tests recorded
# before (a pattern per edited file; words split on spaces, never globbed: no quotes inside).
# MUTATION_ONLY=kinesis_spout/tracking/ mutates only the modules under that path (pure ones: against the unit
# tests alone, no server), in a mutants/ of its own (move the full round's aside first).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=.venv-mutation
MUTMUT_VERSION=3.8.1
PYTEST_TIMEOUT_VERSION=2.4.0

log() { printf '[mutation] %s\n' "$*"; }

scripts/setup.sh zookeeper emulators

stamp=$VENV/.installed
if [ -f "$stamp" ] && [ "$stamp" -nt pyproject.toml ] && [ "$stamp" -nt "$0" ]; then
  log "venv: up to date ($VENV)"
else
  [ -x $VENV/bin/python ] || { log "venv: creating $VENV"; "$PYTHON" -m venv $VENV; }
  log "venv: installing kinesis-spout[test], mutmut $MUTMUT_VERSION, pytest-timeout $PYTEST_TIMEOUT_VERSION"
  $VENV/bin/python -m pip install --quiet --upgrade pip
  $VENV/bin/python -m pip install --quiet -e '.[test]' "mutmut==$MUTMUT_VERSION" \
    "pytest-timeout==$PYTEST_TIMEOUT_VERSION"
  touch "$stamp"
fi

# the fixtures find the emulators next to the package; mutmut runs the tests on a copy of it in mutants/
export KINESIS_SPOUT_NODE_MODULES="$PWD/emulators/node_modules"
# mutmut redraws a progress line: keep only its last state
run() {
  nice -n 19 $VENV/bin/python scripts/mutation_run.py --max-children "${MUTATION_JOBS:-2}" "$@" 2>&1 \
    | tr '\r' '\n' | awk '/^[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]/ { last = $0; next } { print } END { if (last) print last }'
  return "${PIPESTATUS[0]}"
}
start=$(date +%s)
# first pass: each I/O module's mutants against the module's fastest test that reaches them; second pass: the
# survivors against the tests written for the module's mutants and the module's fastest tests up to 1 s of
# measured test time (MUTATION_BUDGET_S)
# shellcheck disable=SC2086 # MUTATION_ARGS is a list of words, not globbed (--restat takes fnmatch patterns)
set -f
run ${MUTATION_ARGS:-} || { log "mutmut failed (exit $?)"; exit 1; }
log "first pass: $(( $(date +%s) - start )) s"
MUTATION_BUDGET_S=${MUTATION_BUDGET_S:-1} run --second-pass || { log "mutmut failed (exit $?)"; exit 1; }
log "wall time: $(( $(date +%s) - start )) s"
$VENV/bin/python scripts/mutation_report.py
