#!/usr/bin/env bash
# `psp netbench` over both datapaths, several runs, and the medians
# (docs/results.md, "Kernel bypass: the AF_XDP datapath"): the echo server and `psp serve` each on udp
# and on xdp, servers in PREFIX-srv and the client in PREFIX-cli (the veth
# pair of `scripts/netns.sh up --prefix PREFIX`, made here if missing).
#
# Usage (as root, from the repo root, after `cargo build --release`):
#   scripts/xdp-netbench.sh [OUT_DIR=results/xdp-netbench]
#   scripts/xdp-netbench.sh --summary OUT_DIR     # only the tables
# Environment: PSP (target/release/psp), PREFIX (nb), RUNS (3), WORKERS (1),
# RATES (5000,25000,50000,...,350000), DURATION (2s), EXTRA (more netbench
# flags, e.g. "--client-datapath xdp").
set -euo pipefail
cd "$(dirname "$0")/.."

summary_only=0
if [ "${1:-}" = "--summary" ]; then
  summary_only=1
  shift
fi
out=${1:-results/xdp-netbench}
psp=${PSP:-target/release/psp}
prefix=${PREFIX:-nb}
runs=${RUNS:-3}
workers=${WORKERS:-1}
rates=${RATES:-5000,25000,50000,75000,100000,125000,150000,175000,200000,250000,300000,350000}
duration=${DURATION:-2s}
mkdir -p "$out"

if [ "$summary_only" = 0 ]; then
  scripts/netns.sh status --prefix "$prefix" >/dev/null 2>&1 ||
    scripts/netns.sh up --prefix "$prefix" >/dev/null
  for r in $(seq 1 "$runs"); do
    # shellcheck disable=SC2086
    "$psp" netbench --netns "$prefix" --datapaths udp,xdp --workers "$workers" \
      --rates "$rates" --duration "$duration" ${EXTRA:-} --json \
      >"$out/run$r.json" 2>"$out/run$r.log"
    echo "run $r done" >&2
  done
fi

python3 - "$out" <<'PY'
import glob, json, statistics, sys
runs = [json.load(open(f)) for f in sorted(glob.glob(f"{sys.argv[1]}/run*.json"))]
med = statistics.median
def fmt(v): return "none" if v is None else f"{v:,.0f}"
print(f"{len(runs)} runs, {runs[0]['workers']} worker(s), policy {runs[0]['policy']}, "
      f"{runs[0]['duration_s']:.0f} s per rate, loss <= {runs[0]['max_loss']*100:g}%")
print()
print("| datapath | server | sustained rps, median [runs] | vs echo, same datapath |")
print("|---|---|---|---|")
sus = {}
for dp in ["udp", "xdp"]:
    for srv in ["psp-serve", "echo"]:
        v = [r["datapaths"][dp]["sustained_rps"][srv] for r in runs if dp in r["datapaths"]]
        v = [x for x in v if x is not None]
        sus[(dp, srv)] = med(v) if v else None
    for srv in ["psp-serve", "echo"]:
        v = [r["datapaths"][dp]["sustained_rps"][srv] for r in runs if dp in r["datapaths"]]
        ratio = [r["datapaths"][dp]["ratio_psp_over_echo"] for r in runs if dp in r["datapaths"]]
        ratio = [x for x in ratio if x is not None]
        col = f"{med(ratio):.2f} [{min(ratio):.2f}-{max(ratio):.2f}]" if srv == "psp-serve" and ratio else ""
        print(f"| {dp} | {srv} | {fmt(sus[(dp, srv)])} [{', '.join(fmt(x) for x in v)}] | {col} |")
xu = [r["ratio_psp_serve_xdp_over_udp"] for r in runs if r.get("ratio_psp_serve_xdp_over_udp")]
if xu:
    print()
    print(f"psp serve, xdp over udp: median {med(xu):.2f} [{min(xu):.2f}-{max(xu):.2f}]")
print()
print("| datapath | server | rate | p50 (us) | p99 (us), median [runs] | p99 vs echo |")
print("|---|---|---|---|---|---|")
for rate in (5000.0, 25000.0):
    for dp in ["udp", "xdp"]:
        rows = {}
        for srv in ["psp-serve", "echo"]:
            pts = [p for r in runs for p in r["points"]
                   if p["datapath"] == dp and p["server"] == srv and p["offered_rps"] == rate]
            if pts:
                rows[srv] = (med([p["p50_latency_us"] for p in pts]),
                             [p["p99_latency_us"] for p in pts])
        for srv, (p50, v) in rows.items():
            ratio = ""
            if srv == "psp-serve" and "echo" in rows:
                ratio = f"{med(v) / med(rows['echo'][1]):.1f}x"
            print(f"| {dp} | {srv} | {rate:,.0f} | {p50:.0f} | {med(v):.0f} [{', '.join(f'{x:.0f}' for x in v)}] | {ratio} |")
PY
