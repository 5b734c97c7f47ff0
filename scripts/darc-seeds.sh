#!/usr/bin/env bash
# Seed sweep of DARC against its variant darc+ and c-FCFS (docs/darc-variant.md):
# for every workload and seed, `psp sweep` in the simulator finds each policy's
# sustainable throughput (every type's p99.9 slowdown <= 10, <= 0.1% loss); the
# JSON of each sweep is kept, then a table per seed and workload is printed with
# medians and minimums and how often the variant falls below darc and c-fcfs.
#
# Usage (from the repo root, after `cargo build --release`):
#   scripts/darc-seeds.sh [OUT_DIR=results/darc-seeds]
#   scripts/darc-seeds.sh --summary OUT_DIR      # only the table, from kept JSON
# Environment: PSP (binary; default target/release/psp, else
# $CARGO_TARGET_DIR/release/psp), SEEDS ("1 2 ... 10"), WORKLOADS (the five
# below), POLICIES ("darc,darc+,c-fcfs"; the first is the baseline, the second
# the variant, the third the work-conserving reference), WORKERS (14),
# DURATION (per workload by default, as `psp reproduce` sets them: long enough
# that the discarded first 10% holds DARC's first profiling window of 50,000
# completions from 30% load up, i.e. 6s on high-bimodal, 2s on tpcc, 40s on
# rocksdb, 1s otherwise; shorter points measure DARC's c-FCFS warm-up; a value
# here applies to every workload),
# THREADS (1: sweeps one point at a time), REUSE (1: keep existing JSON files).
# Needs python3 for the summary.
set -euo pipefail
cd "$(dirname "$0")/.."

summary_only=0
if [ "${1:-}" = "--summary" ]; then
  summary_only=1
  shift
fi
out=${1:-results/darc-seeds}
seeds=${SEEDS:-"1 2 3 4 5 6 7 8 9 10"}
workloads=${WORKLOADS:-"high-bimodal extreme-bimodal tpcc rocksdb zippydb"}
policies=${POLICIES:-"darc,darc+,c-fcfs"}
workers=${WORKERS:-14}
duration=${DURATION:-}
threads=${THREADS:-1}
reuse=${REUSE:-0}

command -v python3 >/dev/null || { echo "darc-seeds.sh: python3 is needed for the summary" >&2; exit 1; }

if [ "$summary_only" = 0 ]; then
  psp=${PSP:-}
  if [ -z "$psp" ]; then
    psp=target/release/psp
    [ -x "$psp" ] || psp="${CARGO_TARGET_DIR:-target}/release/psp"
  fi
  [ -x "$psp" ] || { echo "darc-seeds.sh: no psp binary at $psp (cargo build --release, or set PSP)" >&2; exit 1; }
  mkdir -p "$out"
  for w in $workloads; do
    d=$duration
    if [ -z "$d" ]; then
      case $w in
        high-bimodal) d=6s ;;
        tpcc) d=2s ;;
        rocksdb) d=40s ;;
        *) d=1s ;;
      esac
    fi
    for s in $seeds; do
      f="$out/$w-seed$s.json"
      if [ "$reuse" = 1 ] && [ -s "$f" ]; then continue; fi
      echo "sweep $w seed $s ($d)" >&2
      "$psp" sweep --workload "$w" --workers "$workers" --seed "$s" --duration "$d" \
        --policies "$policies" --json --no-plot --out "$f.full" --threads "$threads" \
        2>/dev/null >"$f.tmp"
      mv "$f.tmp" "$f"
      rm -f "$f.full"
    done
  done
fi

python3 - "$out" "$policies" "$workloads" "$seeds" <<'EOF'
import json, os, statistics, sys

out, policies, workloads, seeds = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split()
# The policy list may hold parameters with commas; names as psp prints them.
rows = {}
names = None
for w in workloads:
    for s in seeds:
        f = os.path.join(out, f"{w}-seed{s}.json")
        if not os.path.exists(f):
            continue
        j = json.load(open(f))
        got = [(p["policy"], p["max_rps_within_slo"] or 0.0) for p in j["policies"]]
        names = names or [n for n, _ in got]
        rows.setdefault(w, []).append((s, j["peak_rps"], [v for _, v in got]))
if not rows:
    sys.exit(f"no sweep JSON under {out}")
base, var = names[0], names[1]
ref = names[2] if len(names) > 2 else None
k = lambda v: f"{v / 1e3:9.1f}"
head = "workload         seed " + "".join(f"{n[:9]:>10}" for n in names) + f"{var[:6] + '/' + base[:6]:>15}"
if ref:
    head += f"{var[:6] + '/' + ref[:6]:>15}"
print("Sustainable throughput (krps) at every type's p99.9 slowdown <= 10, loss <= 0.1%")
print(head)
summary = []
for w in workloads:
    if w not in rows:
        continue
    vals = rows[w]
    for s, peak, v in vals:
        line = f"{w:16} {s:>4} " + "".join(f"{k(x):>10}" for x in v)
        line += f"{v[1] / v[0] if v[0] else float('nan'):15.3f}"
        if ref:
            line += f"{v[1] / v[2] if v[2] else float('nan'):15.3f}"
        print(line)
    cols = list(zip(*[v for _, _, v in vals]))
    med = [statistics.median(c) for c in cols]
    mn = [min(c) for c in cols]
    r_base = [v[1] / v[0] for _, _, v in vals if v[0]]
    r_ref = [v[1] / v[2] for _, _, v in vals if ref and v[2]]
    print(f"{w:16} {'med':>4} " + "".join(f"{k(x):>10}" for x in med)
          + f"{statistics.median(r_base):15.3f}" + (f"{statistics.median(r_ref):15.3f}" if ref else ""))
    print(f"{w:16} {'min':>4} " + "".join(f"{k(x):>10}" for x in mn)
          + f"{min(r_base):15.3f}" + (f"{min(r_ref):15.3f}" if ref else ""))
    below_base = sum(1 for _, _, v in vals if v[1] < v[0])
    below_ref = sum(1 for _, _, v in vals if ref and v[1] < v[2])
    summary.append((w, len(vals), med, mn, below_base, below_ref, min(r_base), min(r_ref) if r_ref else None))
print()
print(f"{'workload':16} seeds  median({', '.join(names)})  min(...)  {var}<{base}  {var}<{ref}  worst {var}/{base}")
for w, n, med, mn, bb, br, rb, rr in summary:
    print(f"{w:16} {n:5}  {'/'.join(f'{x / 1e3:.0f}' for x in med)}  {'/'.join(f'{x / 1e3:.0f}' for x in mn)}"
          f"  {bb:>3}/{n}  {br:>3}/{n}  {rb:.3f}")
EOF
