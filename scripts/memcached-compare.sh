#!/usr/bin/env bash
# memcaslap against psp serve (in-memory store, memcached's protocol over TCP
# and over UDP) and against memcached -t WORKERS, on the same cores
# (docs/results.md, "memcached clients").
#
#   scripts/memcached-compare.sh [OUT]
#
# For each run (RUNS), transport (tcp, udp) and system (psp, memcached):
# start it on CORES, run memcaslap for DURATION with THREADS threads and
# CONCURRENCY connections, 10% of the gets verified (-v 0.1) and 5% of the
# objects with an expiry (-e 0.05), and record its TPS and its
# verification failures, and the server's CPU time (user + system, all its
# threads) per transaction. Prints one line per run; writes
# OUT/memcached.tsv.
# Environment: PSP (target/release/psp), PSP_BASE (another psp binary: the
# system "base"), SYSTEMS ("psp memcached"; "psp-nice0" is psp serve with
# --no-raise-priority: its dispatcher at the clients' priority, not nice -15), CORES (0,1), WORKERS (2), PORT
# (7402), RUNS (3), DURATION (10s), THREADS (2), CONCURRENCY (16),
# POLICY (psp serve's default when unset), PSP_ARGS (more psp serve flags),
# TRANSPORTS ("tcp udp"). A system "psp+FLAG=VALUE" is psp serve with
# --FLAG VALUE (e.g. psp+tcp-batch=1).
# Set-up: scripts/compare-deps.sh, cargo build --release.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-results/memcached-compare}
PSP=${PSP:-target/release/psp}
CORES=${CORES:-0,1}
WORKERS=${WORKERS:-2}
PORT=${PORT:-7402}
RUNS=${RUNS:-3}
DURATION=${DURATION:-10s}
THREADS=${THREADS:-2}
CONCURRENCY=${CONCURRENCY:-16}
SYSTEMS=${SYSTEMS:-psp memcached}
TRANSPORTS=${TRANSPORTS:-tcp udp}
mkdir -p "$OUT"
echo -e "run\ttransport\tsystem\ttps\tverify_failed\texpired_get_failed\tcpu_us_per_op" > "$OUT/memcached.tsv"

start() { # system transport
  if [ "$1" = psp ] || [ "$1" = psp-nice0 ] || [ "$1" = base ] || [ "${1#psp+}" != "$1" ]; then
    local proto=memcache bin=$PSP extra=""
    [ "$2" = udp ] && proto=memcache-udp
    [ "$1" = base ] && bin=$PSP_BASE
    [ "$1" = psp-nice0 ] && extra=--no-raise-priority
    # psp+FLAG=VALUE: psp serve with --FLAG VALUE.
    if [ "${1#psp+}" != "$1" ]; then
      local flag=${1#psp+}
      extra="--${flag%%=*} ${flag#*=}"
    fi
    # shellcheck disable=SC2086
    taskset -c "$CORES" "$bin" serve --protocol "$proto" --address "127.0.0.1:$PORT" \
      --workers "$WORKERS" $extra ${POLICY:+--policy "$POLICY"} ${PSP_ARGS:-} \
      > "$OUT/$1.$2.server.out" 2>&1 &
  else
    taskset -c "$CORES" memcached -l 127.0.0.1 -p "$PORT" -U "$PORT" -t "$WORKERS" \
      -u "${USER:-root}" > "$OUT/memcached.$2.server.out" 2>&1 &
  fi
  SERVER=$!
  sleep 1
}

cpu_ticks() { # pid: user + system clock ticks of all its threads
  awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0
}

for run in $(seq 1 "$RUNS"); do
  for transport in $TRANSPORTS; do
    for system in $SYSTEMS; do
      start "$system" "$transport"
      udp=""
      [ "$transport" = udp ] && udp="-U"
      log="$OUT/$system.$transport.$run.client.out"
      cpu0=$(cpu_ticks "$SERVER")
      taskset -c "$CORES" memcaslap -s "127.0.0.1:$PORT" -t "$DURATION" -T "$THREADS" \
        -c "$CONCURRENCY" -v 0.1 -e 0.05 $udp > "$log" 2>&1 || true
      cpu1=$(cpu_ticks "$SERVER")
      kill -TERM "$SERVER"; wait "$SERVER" 2>/dev/null || true
      tps=$(grep -oP 'TPS: \K[0-9]+' "$log" | tail -1)
      ops=$(grep -oP 'cmd_get: \K[0-9]+' "$log" | tail -1)
      sets=$(grep -oP 'cmd_set: \K[0-9]+' "$log" | tail -1)
      vf=$(grep -oP 'verify_failed: \K[0-9]+' "$log" | tail -1)
      ef=$(grep -oP 'expired_get: \K[0-9]+' "$log" | tail -1)
      per=$(python3 -c "print(f'{($cpu1 - $cpu0) / $(getconf CLK_TCK) / max(1, ${ops:-0} + ${sets:-0}) * 1e6:.2f}')")
      echo -e "$run\t$transport\t$system\t${tps:-?}\t${vf:-?}\t${ef:-?}\t$per" | tee -a "$OUT/memcached.tsv"
    done
  done
done
