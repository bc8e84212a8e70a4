#!/usr/bin/env bash
# Creates the benchmarks' own virtual environments, idempotently (stamp files):
#   benchmarks/.venv                 the project (editable) with its test extras, matplotlib for the chart and
#                                    async-kinesis, the first peer consumer;
#   benchmarks/.venv-kinesis-python  kinesis-python, the second peer consumer: it installs a top-level package
#                                    named `kinesis`, as async-kinesis does, so the two cannot share a venv.
# Both are separate from the project's .venv so that the peers' pinned dependencies (aiobotocore pins botocore)
# never touch it. The servers (ZooKeeper, kinesalite) come from scripts/setup.sh: `make bench` runs both.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=benchmarks/.venv
PEER_VENV=benchmarks/.venv-kinesis-python

log() { printf '[bench-setup] %s\n' "$*"; }

fresh() {  # fresh STAMP FILE...: the stamp exists and is newer than every FILE
  local stamp=$1; shift
  [ -f "$stamp" ] || return 1
  for f in "$@"; do [ "$stamp" -nt "$f" ] || return 1; done
}

make_venv() {  # no --system-site-packages: nothing leaks in from the machine
  [ -x "$1/bin/python" ] || { log "creating $1 with $($PYTHON --version)"; "$PYTHON" -m venv "$1"; }
}

if fresh "$VENV/.installed" pyproject.toml benchmarks/requirements.txt benchmarks/setup.sh; then
  log "up to date ($VENV)"
else
  make_venv "$VENV"
  log "installing kinesis-spout[test], matplotlib and async-kinesis into $VENV (the first pyspark build takes about a minute)"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet -e '.[test]' -r benchmarks/requirements.txt
  touch "$VENV/.installed"
fi

# kinesis-python (2019) is optional: when it cannot be installed, its benchmark row says why.
if fresh "$PEER_VENV/.installed" benchmarks/setup.sh; then
  log "up to date ($PEER_VENV)"
else
  make_venv "$PEER_VENV"
  log "installing kinesis-python into $PEER_VENV"
  if "$PEER_VENV/bin/python" -m pip install --quiet 'kinesis-python==0.2.1' >"$PEER_VENV/install.log" 2>&1; then
    touch "$PEER_VENV/.installed"
  else
    log "kinesis-python did not install (see $PEER_VENV/install.log); its benchmark row will say so"
  fi
fi
log "ready"
