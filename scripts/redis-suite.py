#!/usr/bin/env python3
"""redis-benchmark's default suite against psp serve (in-memory store) and
redis-server on the same cores (docs/results.md, "redis-benchmark's default suite").

  scripts/redis-suite.py [OUT]

For each system, RUNS times (systems interleaved): start it on CORES, run
`redis-benchmark -q -n N --csv` (every default test) and the same with
`-P 16`, stop it. Prints, per test, the median requests/s of each system
with its range, and each psp system's ratio to redis-server; writes
OUT/suite.json.

Also the server's CPU time per request (user + system time of all its
threads over the suite, from /proc/PID/stat, divided by the requests the
suite makes).

Environment: PSP (target/release/psp), PSP_BASE (another psp binary, for
systems named base...), CORES (0,1), WORKERS (2), PORT (7401), N (100000),
RUNS (3), SYSTEMS ("psp psp:c-fcfs redis": psp is psp serve's default
policy, psp:P policy P, psp:P:replies adds --tcp-order replies; a
+flag=value suffix adds --flag value, e.g. psp+inline-worker=off, and +flag
the flag alone, e.g. psp+no-raise-priority (psp serve's dispatcher at the
clients' priority; the default, since 2026-11-28 here, is psp serve's own:
nice -15); base...
the same with PSP_BASE), PIPELINES ("1 16"), PSP_ARGS (more psp serve
flags).
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
systems = os.environ.get("SYSTEMS", "psp psp:c-fcfs redis").split()
pipelines = os.environ.get("PIPELINES", "1 16").split()
tests = os.environ.get("TESTS", "")
psp_args = os.environ.get("PSP_ARGS", "").split()
os.makedirs(out_dir, exist_ok=True)


psp_base = os.environ.get("PSP_BASE", "")


def server_cmd(system):
    if system.startswith("psp") or system.startswith("base"):
        binary = psp if system.startswith("psp") else psp_base
        name, *flags = system.split("+")
        cmd = [binary, "serve", "--protocol", "resp", "--address", f"127.0.0.1:{port}",
               "--workers", workers]
        parts = name.split(":")
        if len(parts) > 1 and parts[1]:
            cmd += ["--policy", parts[1]]
        if len(parts) > 2 and parts[2]:
            cmd += ["--tcp-order", parts[2]]
        for f in flags:
            k, _, v = f.partition("=")
            cmd += [f"--{k}", v] if v else [f"--{k}"]
        return cmd + psp_args
    return ["redis-server", "--port", port, "--save", "", "--appendonly", "no"]


def start(system):
    log = open(os.path.join(out_dir, f"{system.replace(':', '_')}.server.out"), "w")
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


def cpu_seconds(pid):
    """User + system time of process `pid`, all its threads."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def suite(pipeline):
    r = subprocess.run(["taskset", "-c", cores, "redis-benchmark", "-p", port, "-q", "-n", n,
                        "-P", pipeline, "--csv"] + (["-t", tests] if tests else []),
                       capture_output=True, text=True, timeout=1200)
    if r.returncode != 0:
        raise SystemExit(f"redis-benchmark failed: {r.stderr}")
    rows = list(csv.reader(io.StringIO(r.stdout)))
    return {row[0]: float(row[1]) for row in rows[1:] if len(row) > 1}, r.stderr.count("Error")


results = {}  # (system, pipeline) -> test -> [rps...]
errors = {}
cpu = {}  # (system, pipeline) -> [server CPU us per request, per run]
for run in range(runs):
    for system in systems:
        p = start(system)
        try:
            for pl in pipelines:
                cpu0 = cpu_seconds(p.pid)
                got, errs = suite(pl)
                per = (cpu_seconds(p.pid) - cpu0) / (int(n) * len(got)) * 1e6
                cpu.setdefault(f"{system} -P {pl}", []).append(per)
                errors[f"{system} -P {pl}"] = errors.get(f"{system} -P {pl}", 0) + errs
                for test, rps in got.items():
                    results.setdefault(f"{system} -P {pl}", {}).setdefault(test, []).append(rps)
        finally:
            p.terminate()
            p.wait(timeout=30)

table = []
psps = [x for x in systems if x != "redis"]
fmt = lambda v: f"{statistics.median(v):,.0f} ({min(v):,.0f}-{max(v):,.0f})"
fmt2 = lambda v: f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})"
for pl in pipelines:
    print(f"\n-P {pl}: requests/s, median of {runs} (min-max); ratio to redis-server")
    print(f"{'test':<36}" + "".join(f"{x:>26}" for x in systems)
          + "".join(f"{x + '/redis':>16}" for x in psps))
    for test in results[f"{systems[0]} -P {pl}"]:
        row = {x: results[f"{x} -P {pl}"].get(test, [float("nan")]) for x in systems}
        red = statistics.median(row["redis"]) if "redis" in row else float("nan")
        ratios = {x: statistics.median(row[x]) / red for x in psps}
        print(f"{test[:36]:<36}" + "".join(f"{fmt(row[x]):>26}" for x in systems)
              + "".join(f"{ratios[x]:>16.2f}" for x in psps))
        table.append({"pipeline": int(pl), "test": test, "rps": row, "ratio": ratios})
    red = statistics.median(cpu.get(f"redis -P {pl}", [float("nan")]))
    print(f"{'server CPU us/request':<36}"
          + "".join(f"{fmt2(cpu[f'{x} -P {pl}']):>26}" for x in systems)
          + "".join(f"{statistics.median(cpu[f'{x} -P {pl}']) / red:>16.2f}" for x in psps))
print(f"\nerror replies seen by redis-benchmark: {errors}")
json.dump({"n": int(n), "runs": runs, "cores": cores, "workers": int(workers),
           "systems": systems, "rows": table, "errors": errors, "cpu_us_per_request": cpu},
          open(os.path.join(out_dir, "suite.json"), "w"), indent=1)
