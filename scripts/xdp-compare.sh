#!/usr/bin/env bash
# Policies behind `psp serve` on both datapaths (docs/results.md, "Kernel bypass: the AF_XDP datapath"):
# for every seed, datapath and policy, `psp serve` runs in namespace
# PREFIX-srv and `psp load` (on the same datapath) in PREFIX-cli, over the
# veth pair of `scripts/netns.sh up --prefix PREFIX` (made here if missing).
# The JSON of each run is kept; a table of the chosen type's p99.9 latency at
# the client follows (median of the seeds, with their range), and each
# policy's ratio to the first one on the same datapath.
#
# Usage (as root, from the repo root, after `cargo build --release`):
#   scripts/xdp-compare.sh [OUT_DIR=results/xdp-compare]
#   scripts/xdp-compare.sh --summary OUT_DIR     # only the table
# Environment: PSP (binary; default target/release/psp), PREFIX (nb), SEEDS
# ("1 2 3"), DATAPATHS ("udp xdp"), WORKLOAD (extreme-bimodal-x1000), APP
# (spin), WORKERS (2), LOAD (0.5), DURATION (10s), POLICIES ("c-fcfs
# darc:samples=1000"; the first is the reference), TYPE (the type tabled;
# default: the first).
set -euo pipefail
cd "$(dirname "$0")/.."

summary_only=0
if [ "${1:-}" = "--summary" ]; then
  summary_only=1
  shift
fi
out=${1:-results/xdp-compare}
psp=${PSP:-target/release/psp}
prefix=${PREFIX:-nb}
seeds=${SEEDS:-"1 2 3"}
datapaths=${DATAPATHS:-"udp xdp"}
workload=${WORKLOAD:-extreme-bimodal-x1000}
app=${APP:-spin}
workers=${WORKERS:-2}
load=${LOAD:-0.5}
duration=${DURATION:-10s}
policies=${POLICIES:-"c-fcfs darc:samples=1000"}
type=${TYPE:-}
server=10.77.0.1:7000

command -v python3 >/dev/null || { echo "xdp-compare.sh: python3 is needed" >&2; exit 1; }
mkdir -p "$out"

if [ "$summary_only" = 0 ]; then
  scripts/netns.sh status --prefix "$prefix" >/dev/null 2>&1 ||
    scripts/netns.sh up --prefix "$prefix" >/dev/null
  secs=${duration%s}
  for seed in $seeds; do
    for dp in $datapaths; do
      for policy in $policies; do
        name=$(echo "$policy" | tr ':=,' '___')
        stem="$out/$dp-$name-seed$seed"
        # The server outlives the load by a few seconds, then drains.
        ip netns exec "$prefix-srv" "$psp" serve --datapath "$dp" --address "$server" \
          --workers "$workers" --workload "$workload" --app "$app" --policy "$policy" \
          --duration "$((${secs%.*} + 4))s" --json >"$stem.serve.json" 2>"$stem.serve.err" &
        pid=$!
        sleep 1.5
        ip netns exec "$prefix-cli" "$psp" load --datapath "$dp" --server "$server" \
          --workload "$workload" --app "$app" --workers "$workers" --load "$load" \
          --duration "$duration" --seed "$seed" --policy "$policy" \
          --json >"$stem.load.json" 2>"$stem.load.err"
        wait "$pid"
        echo "seed $seed $dp $policy done" >&2
      done
    done
  done
fi

python3 - "$out" "$type" "$datapaths" $policies <<'PY'
import glob, json, statistics, sys
out, want, datapaths = sys.argv[1], sys.argv[2], sys.argv[3].split()
policies = sys.argv[4:]

def p999(path):
    d = json.load(open(path))
    t = next((t for t in d["types"] if t["name"] == want), d["types"][0]) if want else d["types"][0]
    return t["p999_latency_us"] / 1000, t["name"], d.get("timeouts", 0)

def runs(dp, policy):
    name = policy.replace(":", "_").replace("=", "_").replace(",", "_")
    return [p999(f) for f in sorted(glob.glob(f"{out}/{dp}-{name}-seed*.load.json"))]

rows = {}
tname = None
for dp in datapaths:
    for p in policies:
        r = runs(dp, p)
        if r:
            tname = r[0][1]
            rows[(dp, p)] = ([v for v, _, _ in r], sum(t for _, _, t in r))
print(f"{tname} p99.9 latency at the client, ms: median of {max(len(v) for v, _ in rows.values())} seeds [range]; ratio: the first policy's median over this one's (same datapath)")
print()
print("| datapath | policy | p99.9 (ms) | vs " + policies[0] + " | timeouts (all seeds) |")
print("|---|---|---|---|---|")
for dp in datapaths:
    ref = rows.get((dp, policies[0]))
    for p in policies:
        if (dp, p) not in rows:
            continue
        v, t = rows[(dp, p)]
        m = statistics.median(v)
        ratio = statistics.median(ref[0]) / m if ref and m > 0 else float("nan")
        print(f"| {dp} | {p} | {m:.2f} [{min(v):.2f}-{max(v):.2f}] | {ratio:.2f}x | {t} |")
PY
