#!/usr/bin/env bash
# Sets up everything kinesis_spout needs on this machine, idempotently:
#   venv      a .venv with the package (editable) and its test extras
#   zookeeper Debian's zookeeper package (the server jar the fixtures start)
#   emulators the npm Kinesis emulators (kinesalite, kinesis-local) in emulators/node_modules
# Usage: scripts/setup.sh [venv] [zookeeper] [emulators]   (no argument: all three)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
ZK_JAR=/usr/share/java/zookeeper.jar

log() { printf '[setup] %s\n' "$*"; }

setup_venv() {
  local stamp=.venv/.installed
  if [ -f "$stamp" ] && [ "$stamp" -nt pyproject.toml ]; then
    log "venv: up to date (.venv)"; return
  fi
  if [ ! -x .venv/bin/python ]; then
    log "venv: creating .venv with $($PYTHON --version)"
    "$PYTHON" -m venv .venv
  fi
  log "venv: installing kinesis-spout[test] (the first pyspark build takes about a minute)"
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e '.[test]'
  touch "$stamp"
}

setup_zookeeper() {
  if [ -f "$ZK_JAR" ]; then
    log "zookeeper: present ($ZK_JAR)"; return
  fi
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
      SUDO=sudo
    else
      cat >&2 <<MSG
[setup] ZooKeeper is missing and this user cannot install packages.
[setup] Install Debian's zookeeper package as root, then run make again:
[setup]     sudo apt-get update && sudo apt-get install -y zookeeper
[setup] (or point the tests and the demo at your own server: see README.md, "Using your own servers")
MSG
      exit 1
    fi
  else
    SUDO=
  fi
  log "zookeeper: installing Debian's zookeeper package"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends zookeeper >/dev/null
  [ -f "$ZK_JAR" ] || { echo "[setup] zookeeper installed but $ZK_JAR is missing" >&2; exit 1; }
}

setup_emulators() {
  local stamp=emulators/node_modules/.installed
  if [ -f "$stamp" ] && [ "$stamp" -nt emulators/package.json ]; then
    log "emulators: up to date (emulators/node_modules)"; return
  fi
  command -v npm >/dev/null || { echo "[setup] npm is missing: install Node.js 18+ (Debian: apt-get install -y nodejs npm)" >&2; exit 1; }
  log "emulators: installing kinesalite and kinesis-local with npm"
  if [ -f emulators/package-lock.json ]; then
    npm ci --prefix emulators --no-audit --no-fund --loglevel=error
  else
    npm install --prefix emulators --no-audit --no-fund --loglevel=error
  fi
  touch "$stamp"
}

steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(venv zookeeper emulators)
for step in "${steps[@]}"; do
  case "$step" in
    venv) setup_venv ;;
    zookeeper) setup_zookeeper ;;
    emulators) setup_emulators ;;
    *) echo "[setup] unknown step: $step (expected venv, zookeeper or emulators)" >&2; exit 2 ;;
  esac
done
