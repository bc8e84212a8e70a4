#!/usr/bin/env bash
# Sets up everything kinesis_spout needs on this machine, idempotently:
#   venv      a .venv with the package (editable), its test extras and the contributor's tools (.[test,dev])
#   demo      what `make demo` needs only: a .venv with the package and moto's server (.[demo]), and ZooKeeper
#   bare      a .venv with pip only (`make dist` builds the wheel with it)
#   servers   Debian's zookeeper, redis-server and memcached packages (the servers the fixtures start)
#   emulators the npm Kinesis emulators (kinesalite, kinesis-local) in emulators/node_modules
#   browser   Debian's chromium and chromium-driver, for `make docs-check` only (never part of the default steps)
# Usage: scripts/setup.sh [venv] [demo] [bare] [servers] [emulators] [browser]
#        (no argument: venv, servers and emulators; "zookeeper" = "servers")
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
ZK_JAR=/usr/share/java/zookeeper.jar

log() { printf '[setup] %s\n' "$*"; }

# Creates .venv (with an up-to-date pip) when it is missing.
make_venv() {
  if [ ! -x .venv/bin/python ]; then
    log "venv: creating .venv with $($PYTHON --version)"
    "$PYTHON" -m venv .venv
    .venv/bin/python -m pip install --quiet --upgrade pip
  fi
}

# Installs the package (editable) with the extras $1 into .venv, unless its stamp $2 (or the full install's) is newer
# than pyproject.toml.
install_venv() {
  local extras=$1 stamp=$2 full=.venv/.installed
  for done in "$stamp" "$full"; do
    if [ -f "$done" ] && [ "$done" -nt pyproject.toml ]; then
      log "venv: up to date (.venv, kinesis-spout[$extras])"; return
    fi
  done
  make_venv
  log "venv: installing kinesis-spout[$extras] (the first pyspark build takes about a minute)"
  .venv/bin/python -m pip install --quiet -e ".[$extras]"
  touch "$stamp"
}

# [test] is what a user's tests need; [dev] adds the contributor's tools (ruff, mypy, import-linter, mkdocs,
# selenium), which `make test` (lint first) and `make docs` need in this checkout.
setup_venv() { install_venv test,dev .venv/.installed; }

# [demo] is moto's server, the demo's embedded Kinesis: `make demo` needs none of the contributor's tools.
setup_demo_venv() { install_venv demo .venv/.installed-demo; }

# Sets SUDO to "" (root) or "sudo" (password-less sudo), or explains what to install by hand and exits 1.
need_root() {
  local what=$1; shift
  if [ "$(id -u)" = 0 ]; then SUDO=; return; fi
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then SUDO=sudo; return; fi
  cat >&2 <<MSG
[setup] Missing Debian packages: $*, and this user cannot install packages.
[setup] Install them as root, then run make again:
[setup]     sudo apt-get update && sudo apt-get install -y $*
[setup] ($what)
MSG
  exit 1
}

# Debian packages for the servers the fixtures start: ZooKeeper (checkpoints, leases), Redis and Memcached (the
# exactly-once state backends). Only the missing ones are installed.
# With the argument "zookeeper-only" (the demo), only ZooKeeper.
setup_servers() {
  local missing=() wanted="zookeeper, redis-server, memcached"
  [ "${1:-}" = zookeeper-only ] && wanted=zookeeper
  [ -f "$ZK_JAR" ] || missing+=(zookeeper)
  if [ "$wanted" != zookeeper ]; then
    command -v redis-server >/dev/null || [ -x /usr/bin/redis-server ] || missing+=(redis-server)
    command -v memcached >/dev/null || [ -x /usr/bin/memcached ] || missing+=(memcached)
  fi
  if [ ${#missing[@]} -eq 0 ]; then
    log "servers: present ($wanted)"; return
  fi
  need_root 'or point the tests and the demo at your own servers: see docs/testing.md, "Using your own servers"' "${missing[@]}"
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

# Debian's chromium and chromium-driver: the headless browser `make docs-check` opens every page of the site in.
# Only that target asks for this step; `make test` never needs a browser.
setup_browser() {
  local missing=()
  command -v chromium >/dev/null || missing+=(chromium)
  command -v chromedriver >/dev/null || missing+=(chromium-driver)
  if [ ${#missing[@]} -eq 0 ]; then
    log "browser: present (chromium, chromedriver)"; return
  fi
  need_root 'only make docs-check needs them' "${missing[@]}"
  log "browser: installing Debian packages: ${missing[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(venv servers emulators)
for step in "${steps[@]}"; do
  case "$step" in
    venv) setup_venv ;;
    demo) setup_demo_venv; setup_servers zookeeper-only ;;
    bare) make_venv ;;
    servers|zookeeper) setup_servers ;;
    emulators) setup_emulators ;;
    browser) setup_browser ;;
    *) echo "[setup] unknown step: $step (expected venv, demo, bare, servers, emulators or browser)" >&2; exit 2 ;;
  esac
done
