#!/usr/bin/env bash
# Installs what scripts/compare.py needs beside the build's packages
# (scripts/deps.sh): the reference servers redis-server and memcached, and
# their clients redis-benchmark/redis-cli (redis-tools) and memcaslap
# (libmemcached-tools), with apt-get and only if missing; then runs its
# arguments (e.g. `scripts/compare-deps.sh scripts/compare.py redis`).
# The servers' packaged services are not started here (no init system in a
# container); compare.py starts each server itself, on the cores it names.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for pkg in redis-server memcached redis-tools libmemcached-tools python3; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "scripts/compare-deps.sh: installing ${need[*]} (apt-get)" >&2
  sudo=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo="sudo"
    else
      echo "scripts/compare-deps.sh: need root (or sudo) to apt-get install ${need[*]}" >&2
      exit 2
    fi
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
  # A packaged service that did start holds the default ports: stop it.
  for svc in redis-server memcached; do
    $sudo service "$svc" stop >/dev/null 2>&1 || true
  done
fi
scripts/deps.sh
if [ $# -gt 0 ]; then
  exec "$@"
fi
