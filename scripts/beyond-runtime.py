#!/usr/bin/env python3
"""darc-lend against darc, darc+ and SYNERGY on the real runtime (`psp run`),
beside the simulator's prediction for the same arrivals (`--compare-sim`).

    scripts/beyond-runtime.py run OUTDIR      # every app x policy x seed
    scripts/beyond-runtime.py summary OUTDIR  # the table, from OUTDIR's JSON

Apps: the spin application on extreme-bimodal-x1000 (500 us 99.5%, 50 ms
0.5%), and RocksDB (`--app kv`) on the GET/SCAN profile measured on this VM
(docs/figures/net/kv-rocksdb-measured.toml). Environment: PSP (binary,
default target/release/psp), WORKERS (2), LOAD (0.7), DURATION (10s), SEEDS
("1 2 3"), APPS ("spin kv").

Each run's JSON is kept as OUTDIR/<app>/<policy>-s<seed>.json; the summary
gives, per type, the median p99.9 latency over the seeds [min-max], measured
and predicted.
"""

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

APPS = {
    "spin": (
        "extreme-bimodal-x1000",
        # The spin app declares a request long (feedback_start) at 10 ms:
        # SYNERGY's default 10 us would declare every 500 us request long.
        ["darc-lend:samples=1000", "darc:samples=1000", "darc+:samples=1000", "synergy:long=10000"],
    ),
    "kv": (
        "docs/figures/net/kv-rocksdb-measured.toml",
        ["darc-lend:samples=1000", "darc:samples=1000", "darc+:samples=1000", "synergy"],
    ),
}


def env(name, default):
    return os.environ.get(name, default)


def file_name(policy, seed):
    return f"{policy.replace(':', '_').replace(',', '_').replace('=', '-')}-s{seed}.json"


def run(out):
    psp = env("PSP", "target/release/psp")
    seeds = env("SEEDS", "1 2 3").split()
    for app in env("APPS", "spin kv").split():
        workload, policies = APPS[app]
        d = Path(out) / app
        d.mkdir(parents=True, exist_ok=True)
        for seed in seeds:
            for policy in policies:
                cmd = [
                    psp, "run", "--workload", workload, "--app", app,
                    "--workers", env("WORKERS", "2"), "--load", env("LOAD", "0.7"),
                    "--duration", env("DURATION", "10s"), "--seed", seed,
                    "--policy", policy, "--compare-sim", "--json",
                ]
                print("+", " ".join(cmd), file=sys.stderr)
                res = subprocess.run(cmd, capture_output=True, text=True, check=True)
                (d / file_name(policy, seed)).write_text(res.stdout)


def cell(values):
    if not values:
        return "–"
    m = statistics.median(values)
    return f"{m:,.0f} [{min(values):,.0f}-{max(values):,.0f}]"


def summary(out):
    seeds = env("SEEDS", "1 2 3").split()
    for app in env("APPS", "spin kv").split():
        workload, policies = APPS[app]
        d = Path(out) / app
        rows = []
        names = None
        for policy in policies:
            measured, predicted, preempted = {}, {}, []
            for seed in seeds:
                f = d / file_name(policy, seed)
                if not f.exists():
                    continue
                r = json.loads(f.read_text())
                names = [t["name"] for t in r["types"]]
                for t in r["types"]:
                    measured.setdefault(t["name"], []).append(t["p999_latency_us"])
                for t in r["extra"]["sim_prediction"]["types"]:
                    predicted.setdefault(t["name"], []).append(t["p999_latency_us"])
                preempted.append(r["extra"]["preemptions"])
            rows.append((policy, measured, predicted, preempted))
        if names is None:
            continue
        print(f"\n{app} ({workload}), p99.9 latency in us, median of {len(seeds)} seeds [min-max]\n")
        head = "| policy |" + "".join(f" {n} | {n}, simulator |" for n in names) + " preemptions |"
        print(head)
        print("|---" * (2 * len(names) + 2) + "|")
        for policy, m, p, pre in rows:
            cells = "".join(f" {cell(m.get(n, []))} | {cell(p.get(n, []))} |" for n in names)
            print(f"| `{policy}` |{cells} {cell(pre)} |")


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("run", "summary"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    {"run": run, "summary": summary}[sys.argv[1]](sys.argv[2])


if __name__ == "__main__":
    main()
