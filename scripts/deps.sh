#!/usr/bin/env bash
# Installs the system packages the build needs, if missing, then runs its
# arguments (e.g. `scripts/deps.sh cargo test --workspace`).
#
# The key-value application (crates/apps, `--app kv`) embeds RocksDB through
# the `rocksdb` crate linked to Debian's librocksdb instead of building RocksDB
# from source (~25 minutes on two cores): it needs librocksdb-dev (the library
# and its headers) and libclang-dev (the crate's bindings generator reads the
# headers with libclang). `.cargo/config.toml` points the crate at them, and
# links with mold where it is installed (scripts/mold-gcc; the test build
# links some 30 executables). The
# tests also drive real clients: redis-cli, redis-benchmark, memcaslap,
# nutcracker, redis-py (python3-redis, run as /usr/bin/python3) and an RQ
# worker (python3-rq), and pymemcache (python3-pymemcache).
set -euo pipefail

need=()
# PSP_EXTRA_PACKAGES: more packages to install the same way (scripts/compare-deps.sh).
for pkg in librocksdb-dev libclang-dev mold iproute2 ethtool iputils-ping redis-tools libmemcached-tools nutcracker python3-redis python3-rq python3-pymemcache ${PSP_EXTRA_PACKAGES:-}; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "scripts/deps.sh: installing ${need[*]} (apt-get)" >&2
  sudo=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo="sudo"
    else
      echo "scripts/deps.sh: need root (or sudo) to apt-get install ${need[*]}" >&2
      exit 2
    fi
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi
if [ $# -gt 0 ]; then
  exec "$@"
fi
