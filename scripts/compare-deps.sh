#!/usr/bin/env bash
# Installs what scripts/compare.py needs beside the build's packages: the
# reference servers redis-server and memcached (their clients, redis-tools
# and libmemcached-tools, come with scripts/deps.sh), with apt-get and only
# if missing; then runs its arguments (e.g. `scripts/compare-deps.sh
# scripts/compare.py redis`). compare.py starts each server itself, on the
# cores it names: a packaged service that started on install is stopped, so
# that it does not hold the default ports.
set -euo pipefail
cd "$(dirname "$0")/.."
PSP_EXTRA_PACKAGES="redis-server memcached python3" scripts/deps.sh
for svc in redis-server memcached; do
  service "$svc" stop >/dev/null 2>&1 || true
done
if [ $# -gt 0 ]; then
  exec "$@"
fi
