#!/usr/bin/env bash
# Memory soak of psp serve: a steady open-loop load for DURATION seconds while
# the server's resident set size is sampled every INTERVAL seconds.
# Usage: scripts/soak.sh [DURATION_S=600] [RPS=3000] [OUT=results/soak.csv]
# Prints the CSV (seconds, rss_kib) and the server's and client's summaries.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-600}
rps=${2:-3000}
out=${3:-results/soak.csv}
interval=10
psp=${PSP:-target/release/psp}
port=7311
mkdir -p "$(dirname "$out")"
"$psp" serve --address 127.0.0.1:$port --workload high-bimodal --policy darc:samples=500 \
  --workers 1 --duration $((duration + 5))s --no-raise-priority --json >"$out.server.json" 2>"$out.server.log" &
server=$!
sleep 1
"$psp" load --server 127.0.0.1:$port --workload high-bimodal --workers 1 --rps "$rps" \
  --duration "${duration}s" --no-raise-priority --json >"$out.load.json" 2>/dev/null &
client=$!
echo "seconds,rss_kib" >"$out"
start=$(date +%s)
while kill -0 "$server" 2>/dev/null; do
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$server/status" 2>/dev/null || true)
  [ -n "$rss" ] && echo "$(( $(date +%s) - start )),$rss" >>"$out"
  sleep "$interval"
done
wait "$client" || true
wait "$server" || true
cat "$out"
