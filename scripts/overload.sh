#!/usr/bin/env bash
# RocksDB's GET/SCAN mix behind psp serve at and past its capacity, with and
# without a queueing bound (--max-wait): what reaches clients in time, what
# times out, and what the server serves after its client gave up
# (docs/results.md, "Overload: a queueing bound instead of late work").
#
#   scripts/overload.sh [OUT]
#
# Profiles the kv application once (psp profile, OUT/prof.toml). Then, for
# each LOAD, variant and SEED: starts psp serve (2 workers, the profile's
# types) with the variant's flags, runs psp load at the load rated by the
# server's own means (--server-profile, --calibrate 3s) for 10 s with the
# client's 1 s timeout, and keeps both JSON reports as
# OUT/VARIANT.LOAD.SEED.{serve,load}.json. Prints, per load and variant,
# the median [min-max] over the seeds of: GETs and SCANs answered OK and
# their p99.9, client timeouts, OVERLOADED replies, responses that arrived
# after the client's timeout ("late": work done for a client that had given
# up) and the server's expired count.
# Environment: PSP (target/release/psp), LOADS ("0.9 1.2"), SEEDS ("1 2 3"),
# BOUND (900ms: the 1 s timeout less a SCAN's tail and the path),
# VARIANTS ("default default+bound c-fcfs c-fcfs+bound").
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-results/overload}
PSP=${PSP:-target/release/psp}
LOADS=${LOADS:-0.9 1.2}
SEEDS=${SEEDS:-1 2 3}
BOUND=${BOUND:-900ms}
VARIANTS=${VARIANTS:-default default+bound c-fcfs c-fcfs+bound}
mkdir -p "$OUT"
[ -f "$OUT/prof.toml" ] || "$PSP" profile --app kv --workload rocksdb --out "$OUT/prof.toml"
flags() {
    case $1 in
    default) ;;
    default+bound) echo "--max-wait $BOUND" ;;
    c-fcfs) echo "--policy c-fcfs" ;;
    c-fcfs+bound) echo "--policy c-fcfs --max-wait $BOUND" ;;
    *) echo "unknown variant $1" >&2; exit 2 ;;
    esac
}
port=7611
for load in $LOADS; do
    for seed in $SEEDS; do
        for v in $VARIANTS; do
            port=$((port + 2))
            stem="$OUT/$v.$load.$seed"
            # shellcheck disable=SC2046
            "$PSP" serve --workers 2 --workload "$OUT/prof.toml" --app kv \
                --address 127.0.0.1:$port --metrics 127.0.0.1:$((port + 1)) \
                --duration 60s --json $(flags "$v") >"$stem.serve.json" 2>"$stem.serve.err" &
            server=$!
            sleep 2
            "$PSP" load --server 127.0.0.1:$port --workload "$OUT/prof.toml" --app kv \
                --workers 2 --load "$load" --duration 10s --seed "$seed" \
                --server-profile 127.0.0.1:$((port + 1)) --calibrate 3s --json \
                >"$stem.load.json" 2>"$stem.load.err"
            kill -INT $server
            wait $server
        done
    done
done
python3 - "$OUT" "$LOADS" "$SEEDS" "$VARIANTS" <<'PY'
import json, statistics, sys
out, loads, seeds, variants = sys.argv[1], *(a.split() for a in sys.argv[2:])
def spread(v):
    return f"{statistics.median(v):g} [{min(v):g}-{max(v):g}]"
for load in loads:
    for v in variants:
        runs = []
        for s in seeds:
            l = json.load(open(f"{out}/{v}.{load}.{s}.load.json"))
            srv = json.load(open(f"{out}/{v}.{load}.{s}.serve.json"))
            runs.append((l, srv))
        line = [f"load {load} {v}:"]
        for i, name in enumerate(["GET", "SCAN"]):
            t = [r[0]["types"][i] for r in runs]
            assert all(x["name"] == name for x in t)
            line.append(
                f"{name} ok {spread([x['count'] for x in t])} "
                f"p99.9 ms {spread([round(x['p999_latency_us'] / 1e3, 1) for x in t])} "
                f"timeouts {spread([x['timeouts'] for x in t])} "
                f"OVERLOADED {spread([x['dropped'] for x in t])}"
            )
        line.append(f"late {spread([r[0]['extra']['late_responses'] for r in runs])}")
        line.append(f"expired {spread([r[1]['expired'] for r in runs])}")
        print(" | ".join(line))
PY
