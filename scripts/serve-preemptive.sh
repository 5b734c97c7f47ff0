#!/usr/bin/env bash
# The preemptive policies behind the network server, each beside the
# simulator's prediction for the same arrivals (docs/results.md, "Every policy
# behind psp serve"): for every seed and policy, `psp serve` runs on loopback,
# `psp load` offers the workload's open-loop Poisson arrivals (the seed fixes
# them), and `psp sim` runs the same arrivals on the ideal simulator. The JSON
# of each run is kept; a table of the short type's p99.9 latency follows, with
# each policy's ratio to c-FCFS (runtime and simulator) and the runtime over
# the simulator.
#
# Usage (from the repo root, after `cargo build --release`):
#   scripts/serve-preemptive.sh [OUT_DIR=results/serve-preemptive]
#   scripts/serve-preemptive.sh --summary OUT_DIR     # only the table
# Environment: PSP (binary; default target/release/psp), SEEDS ("1 2 3"),
# WORKLOAD (extreme-bimodal-x1000), WORKERS (2), LOAD (0.5), DURATION (10s),
# APP (spin; kv needs a workload of GET and SCAN types, e.g. rocksdb),
# POLICIES (c-fcfs first: the reference; the quanta scaled like the
# workload: x1000 gives ts and concord 5 ms, tq 2 ms, SYNERGY's `long` 10 ms),
# PORT (7411), TYPE (the type whose p99.9 is tabled; default: the first).
set -euo pipefail
cd "$(dirname "$0")/.."

summary_only=0
if [ "${1:-}" = "--summary" ]; then
  summary_only=1
  shift
fi
out=${1:-results/serve-preemptive}
psp=${PSP:-target/release/psp}
seeds=${SEEDS:-"1 2 3"}
workload=${WORKLOAD:-extreme-bimodal-x1000}
workers=${WORKERS:-2}
load=${LOAD:-0.5}
duration=${DURATION:-10s}
app=${APP:-spin}
policies=${POLICIES:-"c-fcfs ts:quantum=5000 concord:quantum=5000 synergy:long=10000 tq:quantum=2000"}
port=${PORT:-7411}
type=${TYPE:-}

command -v python3 >/dev/null || { echo "serve-preemptive.sh: python3 is needed" >&2; exit 1; }
mkdir -p "$out"

if [ "$summary_only" = 0 ]; then
  secs=${duration%s}
  for seed in $seeds; do
    for policy in $policies; do
      name=$(echo "$policy" | tr ':=,' '___')
      stem="$out/$name-seed$seed"
      # The server outlives the load by a few seconds, then drains.
      "$psp" serve --workers "$workers" --workload "$workload" --app "$app" \
        --policy "$policy" --address "127.0.0.1:$port" \
        --duration "$((${secs%.*} + 4))s" --json >"$stem.serve.json" 2>"$stem.serve.err" &
      server=$!
      sleep 1.5
      "$psp" load --server "127.0.0.1:$port" --workload "$workload" --app "$app" \
        --workers "$workers" --load "$load" --duration "$duration" --seed "$seed" \
        --policy "$policy" --json >"$stem.load.json" 2>"$stem.load.err"
      wait "$server"
      "$psp" sim --workload "$workload" --workers "$workers" --load "$load" \
        --duration "$duration" --seed "$seed" --policy "$policy" --json >"$stem.sim.json"
      echo "seed $seed $policy done" >&2
    done
  done
fi

python3 - "$out" "$type" $policies <<'EOF'
import glob, json, statistics, sys
out, want = sys.argv[1], sys.argv[2]
policies = sys.argv[3:]

def short_p999(path):
    d = json.load(open(path))
    types = d["types"]
    t = next((t for t in types if t["name"] == want), types[0]) if want else types[0]
    return t["p999_latency_us"], t["name"]

def runs(policy, kind):
    name = policy.replace(":", "_").replace("=", "_").replace(",", "_")
    vals = {}
    for f in sorted(glob.glob(f"{out}/{name}-seed*.{kind}.json")):
        seed = f.split("-seed")[-1].split(".")[0]
        vals[seed] = short_p999(f)[0]
    return vals

ref_run, ref_sim = runs(policies[0], "load"), runs(policies[0], "sim")
tname = short_p999(glob.glob(f"{out}/*.load.json")[0])[1]
print(f"{tname} p99.9 latency (us), median of seeds [min-max]; ratios per seed, then their median")
print()
print("| policy | psp serve + psp load | simulator | c-FCFS / policy (runtime) | c-FCFS / policy (simulator) | runtime / simulator |")
print("|---|---|---|---|---|---|")
def fmt(vals):
    v = list(vals.values())
    return f"{statistics.median(v):.0f} [{min(v):.0f}-{max(v):.0f}]"
def ratio(num, den):
    r = [num[s] / den[s] for s in den if s in num and den[s] > 0]
    return f"{statistics.median(r):.2f} [{min(r):.2f}-{max(r):.2f}]" if r else "-"
for p in policies:
    run, sim = runs(p, "load"), runs(p, "sim")
    if not run:
        continue
    print(f"| `{p}` | {fmt(run)} | {fmt(sim)} | {ratio(ref_run, run)} | {ratio(ref_sim, sim)} | {ratio(run, sim)} |")
EOF
