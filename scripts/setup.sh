#!/usr/bin/env bash
# Sets up everything kinesis_spout needs on this machine, idempotently:
#   venv      a .venv with the package (editable) and its test extras
#   servers   Debian's zookeeper, redis-server and memcached packages (the servers the fixtures start)
#   emulators the npm Kinesis emulators (kinesalite, kinesis-local) in emulators/node_modules
# Usage: scripts/setup.sh [venv] [servers] [emulators]   (no argument: all three; "zookeeper" = "servers")
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

# Debian packages for the servers the fixtures start: ZooKeeper (checkpoints, leases), Redis and Memcached (the
# exactly-once state backends). Only the missing ones are installed.
setup_servers() {
  local missing=()
  [ -f "$ZK_JAR" ] || missing+=(zookeeper)
  command -v redis-server >/dev/null || [ -x /usr/bin/redis-server ] || missing+=(redis-server)
  command -v memcached >/dev/null || [ -x /usr/bin/memcached ] || missing+=(memcached)
  if [ ${#missing[@]} -eq 0 ]; then
    log "servers: present (zookeeper, redis-server, memcached)"; return
  fi
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
      SUDO=sudo
    else
      cat >&2 <<MSG
[setup] Missing Debian packages: ${missing[*]}, and this user cannot install packages.
[setup] Install them as root, then run make again:
[setup]     sudo apt-get update && sudo apt-get install -y ${missing[*]}
[setup] (or point the tests and the demo at your own servers: see README.md, "Using your own servers")
MSG
      exit 1
    fi
  else
    SUDO=
  fi
  log "servers: installing Debian packages: ${missing[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  [ -f "$ZK_JAR" ] || { echo "[setup] zookeeper installed but $ZK_JAR is missing" >&2; exit 1; }
  # The packages' own services are not needed: the fixtures start private servers on free ports.
  for service in redis-server memcached; do
    if command -v systemctl >/dev/null && systemctl is-active --quiet "$service" 2>/dev/null; then
      $SUDO systemctl stop "$service" || true
    fi
  done
}

setup_emulators() {
  local stamp=emulators/node_modules/.installed
  if [ -L emulators/node_modules ]; then  # another checkout's install, shared: never reinstalled from here
    log "emulators: emulators/node_modules links to $(readlink emulators/node_modules); left as it is"; return
  fi
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
[ ${#steps[@]} -gt 0 ] || steps=(venv servers emulators)
for step in "${steps[@]}"; do
  case "$step" in
    venv) setup_venv ;;
    servers|zookeeper) setup_servers ;;
    emulators) setup_emulators ;;
    *) echo "[setup] unknown step: $step (expected venv, servers or emulators)" >&2; exit 2 ;;
  esac
done
