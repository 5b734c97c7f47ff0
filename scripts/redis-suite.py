#!/usr/bin/env python3
"""redis-benchmark's default suite against psp serve (in-memory store) and
redis-server on the same cores (docs/results.md, "Drop-in Redis").

  scripts/redis-suite.py [OUT]

For each system, RUNS times: start it on CORES, run `redis-benchmark -q -n N
--csv` (every default test) and the same with `-P 16`, stop it. Prints, per
test, the median requests/s of each system with its range, and psp's ratio
to redis-server; writes OUT/suite.json.

Environment: PSP (target/release/psp), CORES (0,1), WORKERS (2), PORT
(7401), N (100000), RUNS (3), POLICY (psp serve's default when unset),
PIPELINES ("1 16"), PSP_ARGS (more psp serve flags).
Set-up: scripts/compare-deps.sh, cargo build --release.
"""

import csv
import io
import json
import os
import statistics
import subprocess
import sys
import time

out_dir = sys.argv[1] if len(sys.argv) > 1 else "results/redis-suite"
psp = os.environ.get("PSP", "target/release/psp")
cores = os.environ.get("CORES", "0,1")
workers = os.environ.get("WORKERS", "2")
port = os.environ.get("PORT", "7401")
n = os.environ.get("N", "100000")
runs = int(os.environ.get("RUNS", "3"))
policy = os.environ.get("POLICY")
pipelines = os.environ.get("PIPELINES", "1 16").split()
psp_args = os.environ.get("PSP_ARGS", "").split()
os.makedirs(out_dir, exist_ok=True)


def server_cmd(system):
    if system == "psp":
        cmd = [psp, "serve", "--protocol", "resp", "--address", f"127.0.0.1:{port}",
               "--workers", workers, "--no-raise-priority"]
        if policy:
            cmd += ["--policy", policy]
        return cmd + psp_args
    return ["redis-server", "--port", port, "--save", "", "--appendonly", "no"]


def start(system):
    log = open(os.path.join(out_dir, f"{system}.server.out"), "w")
    p = subprocess.Popen(["taskset", "-c", cores] + server_cmd(system), stdout=log,
                         stderr=subprocess.STDOUT)
    for _ in range(100):
        if p.poll() is not None:
            raise SystemExit(f"{system} exited: see {log.name}")
        r = subprocess.run(["redis-cli", "-p", port, "PING"], capture_output=True, text=True)
        if r.stdout.strip() == "PONG":
            return p
        time.sleep(0.1)
    p.kill()
    raise SystemExit(f"{system} did not start")


def suite(pipeline):
    r = subprocess.run(["taskset", "-c", cores, "redis-benchmark", "-p", port, "-q", "-n", n,
                        "-P", pipeline, "--csv"], capture_output=True, text=True, timeout=1200)
    if r.returncode != 0:
        raise SystemExit(f"redis-benchmark failed: {r.stderr}")
    rows = list(csv.reader(io.StringIO(r.stdout)))
    return {row[0]: float(row[1]) for row in rows[1:] if len(row) > 1}, r.stderr.count("Error")


results = {}  # (system, pipeline) -> test -> [rps...]
errors = {}
for run in range(runs):
    for system in ("psp", "redis"):
        p = start(system)
        try:
            for pl in pipelines:
                got, errs = suite(pl)
                errors[f"{system} -P {pl}"] = errors.get(f"{system} -P {pl}", 0) + errs
                for test, rps in got.items():
                    results.setdefault(f"{system} -P {pl}", {}).setdefault(test, []).append(rps)
        finally:
            p.terminate()
            p.wait(timeout=30)

table = []
for pl in pipelines:
    print(f"\n-P {pl}: requests/s, median of {runs} (min-max)")
    print(f"{'test':<24} {'psp':>22} {'redis-server':>22} {'psp/redis':>9}")
    for test, psp_rps in results[f"psp -P {pl}"].items():
        red = results[f"redis -P {pl}"].get(test, [float("nan")])
        mp, mr = statistics.median(psp_rps), statistics.median(red)
        ratio = mp / mr if mr else float("nan")
        fmt = lambda v: f"{statistics.median(v):,.0f} ({min(v):,.0f}-{max(v):,.0f})"
        print(f"{test:<24} {fmt(psp_rps):>22} {fmt(red):>22} {ratio:>9.2f}")
        table.append({"pipeline": int(pl), "test": test, "psp_rps": psp_rps,
                      "redis_rps": red, "ratio": ratio})
print(f"\nerror replies seen by redis-benchmark: {errors}")
json.dump({"n": int(n), "runs": runs, "cores": cores, "workers": int(workers),
           "policy": policy or "default", "rows": table, "errors": errors},
          open(os.path.join(out_dir, "suite.json"), "w"), indent=1)
