#!/usr/bin/env bash
# Installs what scripts/compare.py needs beside the build's packages: the
# reference servers redis-server and memcached (their clients, redis-tools
# and libmemcached-tools, come with scripts/deps.sh), with apt-get and only
# if missing; then runs its arguments (e.g. `scripts/compare-deps.sh
# scripts/compare.py redis`). compare.py starts each server itself, on the
# cores it names: a server's packaged service that started because this
# script installed it is stopped, so that it does not hold the default port
# (one that was there before is left alone).
set -euo pipefail
cd "$(dirname "$0")/.."
servers=(redis-server memcached)
new=()
for pkg in "${servers[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || new+=("$pkg")
done
PSP_EXTRA_PACKAGES="${servers[*]} python3" scripts/deps.sh
for svc in "${new[@]}"; do
  service "$svc" stop >/dev/null 2>&1 || true
done
if [ $# -gt 0 ]; then
  exec "$@"
fi
