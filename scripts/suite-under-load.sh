#!/usr/bin/env bash
# Runs the whole test suite RUNS times in a row (default 3) beside a
# background load of one busy core, and says how many tests failed in each
# run: the check that every test passes every time on a loaded 2-core
# machine (docs/verification.md, "The suite under load").
#
#   scripts/suite-under-load.sh [RUNS]
#
# Builds the tests first (not under load), then keeps one core busy with a
# shell loop for the runs only. Logs go to target/suite-under-load/run-N.log.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-3}"
case "$runs" in ''|*[!0-9]*|????*) echo "suite-under-load.sh: RUNS must be a whole number in [1, 100], not '$runs'" >&2; exit 2 ;; esac
if [ "$runs" -lt 1 ] || [ "$runs" -gt 100 ]; then
  echo "suite-under-load.sh: RUNS must be a whole number in [1, 100], not '$runs'" >&2
  exit 2
fi
out="${CARGO_TARGET_DIR:-target}/suite-under-load"
mkdir -p "$out"
cargo test --workspace --no-run >/dev/null
sh -c 'while :; do :; done' &
busy=$!
trap 'kill "$busy" 2>/dev/null || true' EXIT
failed_runs=0
for i in $(seq 1 "$runs"); do
  start=$SECONDS
  if cargo test --workspace --no-fail-fast >"$out/run-$i.log" 2>&1; then rc=0; else rc=$?; fi
  failures=$(grep -c -E '^test .* FAILED$' "$out/run-$i.log" || true)
  echo "run $i: exit $rc, $failures failed test(s), $((SECONDS - start)) s, load average $(cut -d' ' -f1-3 /proc/loadavg) ($out/run-$i.log)"
  grep -E '^test .* FAILED$' "$out/run-$i.log" || true
  if [ "$rc" != 0 ]; then failed_runs=$((failed_runs + 1)); fi
done
echo "$failed_runs of $runs runs failed"
[ "$failed_runs" = 0 ]
