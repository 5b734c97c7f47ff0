#!/usr/bin/env python3
"""psp serve --protocol resp under several policies against redis-server,
measured by redis-benchmark (docs/results.md, section 16).

For each system, on the same cores (taskset): a list `mylist` of 1,000
elements is made (redis-benchmark's LPUSH), then
  1. GET only: redis-benchmark GET, its throughput and latency;
  2. GETs and LRANGE 0 599 at once: two redis-benchmark processes, GET's
     p50/p99/p99.9 and LRANGE's throughput and p99.
Each client's own numbers are reported (redis-benchmark's summary and its
percentile distribution; p99.9 is the first distribution line at or above
99.9%). Writes a table on stdout and OUT/compare.json.

Usage (after cargo build --release; redis-tools and redis-server installed):
  scripts/redis-compare.py [OUT=results/redis-compare]
Environment: PSP (target/release/psp), CORES (0,1), WORKERS (2),
  SYSTEMS ("psp:darc psp:c-fcfs psp:synergy redis redis:io-threads=2"),
  GETS (get requests per run, 100000), LRANGES (4000), CLIENTS (20 for
  GET, 4 for LRANGE), PORT (7400).
"""

import json
import os
import re
import subprocess
import sys
import time

out_dir = sys.argv[1] if len(sys.argv) > 1 else "results/redis-compare"
psp = os.environ.get("PSP", "target/release/psp")
cores = os.environ.get("CORES", "0,1")
workers = os.environ.get("WORKERS", "2")
systems = os.environ.get(
    "SYSTEMS", "psp:darc psp:c-fcfs psp:synergy redis redis:io-threads=2"
).split()
gets = int(os.environ.get("GETS", "100000"))
lranges = int(os.environ.get("LRANGES", "4000"))
port = os.environ.get("PORT", "7400")
os.makedirs(out_dir, exist_ok=True)


def start(system):
    if system.startswith("psp:"):
        cmd = [psp, "serve", "--protocol", "resp", "--address", f"127.0.0.1:{port}",
               "--workers", workers, "--policy", system[4:], "--kv-keys", "1000",
               "--no-raise-priority", "--json"]
    else:
        cmd = ["redis-server", "--port", port, "--save", "", "--appendonly", "no"]
        if ":" in system:
            cmd += ["--io-threads", system.split("=")[1], "--io-threads-do-reads", "yes"]
    log = open(os.path.join(out_dir, system.replace(":", "_") + ".server.out"), "w")
    p = subprocess.Popen(["taskset", "-c", cores] + cmd, stdout=log,
                         stderr=subprocess.STDOUT)
    for _ in range(100):
        r = subprocess.run(["redis-cli", "-p", port, "PING"], capture_output=True, text=True)
        if r.stdout.strip() == "PONG":
            return p
        time.sleep(0.1)
    raise SystemExit(f"{system} did not start")


def stop(system, p):
    p.terminate()
    p.wait(timeout=30)


def bench(args):
    """Starts redis-benchmark; returns the process (stdout captured)."""
    return subprocess.Popen(
        ["taskset", "-c", cores, "redis-benchmark", "-p", port] + args,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def parse(text):
    """redis-benchmark's own figures: throughput, summary latencies (ms),
    and p99.9 from its percentile distribution."""
    r = {}
    m = re.search(r"throughput summary: ([\d.]+) requests per second", text)
    r["rps"] = float(m.group(1)) if m else None
    m = re.search(r"avg\s+min\s+p50\s+p95\s+p99\s+max\s*\n\s*([\d.\s]+)", text)
    if m:
        v = [float(x) for x in m.group(1).split()[:6]]
        r.update(avg_ms=v[0], p50_ms=v[2], p95_ms=v[3], p99_ms=v[4], max_ms=v[5])
    r["p999_ms"] = None
    for pct, ms in re.findall(r"([\d.]+)% <= ([\d.]+) milliseconds", text):
        if float(pct) >= 99.9:
            r["p999_ms"] = float(ms)
            break
    return r


results = {}
for system in systems:
    p = start(system)
    try:
        subprocess.run(["redis-benchmark", "-p", port, "-t", "lpush", "-n", "1000", "-q"],
                       capture_output=True)
        only = bench(["-n", str(gets), "-c", os.environ.get("CLIENTS", "20"), "-r", "1000",
                      "GET", "key:__rand_int__"])
        get_only = parse(only.communicate()[0])
        g = bench(["-n", str(gets), "-c", os.environ.get("CLIENTS", "20"), "-r", "1000",
                   "GET", "key:__rand_int__"])
        lr = bench(["-n", str(lranges), "-c", "4", "LRANGE", "mylist", "0", "599"])
        mixed_get, mixed_lrange = parse(g.communicate()[0]), parse(lr.communicate()[0])
    finally:
        stop(system, p)
    results[system] = {"get_only": get_only, "mixed_get": mixed_get,
                       "mixed_lrange": mixed_lrange}
    print(f"{system}: {results[system]}", file=sys.stderr)

with open(os.path.join(out_dir, "compare.json"), "w") as f:
    json.dump({"cores": cores, "workers": workers, "gets": gets, "lranges": lranges,
               "systems": results}, f, indent=2)


def fmt(v, nd=2):
    return "-" if v is None else f"{v:.{nd}f}"


ref = results.get("redis", {}).get("get_only", {}).get("rps")
print("| system | GET only: rps | vs redis-server | GET p99 (ms) | with LRANGE_600: GET p50 | GET p99 | GET p99.9 | LRANGE rps | LRANGE p99 (ms) |")
print("|---|---|---|---|---|---|---|---|---|")
for s, r in results.items():
    go, mg, ml = r["get_only"], r["mixed_get"], r["mixed_lrange"]
    ratio = f"{go['rps'] / ref:.2f}x" if ref and go.get("rps") else "-"
    print(f"| {s} | {fmt(go.get('rps'), 0)} | {ratio} | {fmt(go.get('p99_ms'), 3)} | "
          f"{fmt(mg.get('p50_ms'), 3)} | {fmt(mg.get('p99_ms'), 3)} | {fmt(mg.get('p999_ms'), 3)} | "
          f"{fmt(ml.get('rps'), 0)} | {fmt(ml.get('p99_ms'), 2)} |")
