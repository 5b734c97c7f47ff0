#!/usr/bin/env python3
"""GET clients beside slow Lua scripts, against psp serve and redis-server
on the same cores (docs/results.md, "Slow scripts beside GETs").

    scripts/redis-script-mix.py [OUT]

For each system and run: starts the server on CORES, loads nothing (the
GETs miss, as redis-benchmark's keys do), starts SCRIPT_CLIENTS
redis-benchmark connections looping EVAL of a script that counts to LOOP
(about 10 ms on the 2-vCPU development VM) and then increments a counter,
runs redis-benchmark's GET test with GET_CLIENTS connections for
GET_REQUESTS requests, and reads the counter before and after the GET run:
GET p50/p99/max as redis-benchmark reports them, scripts/s over the GET
run's wall time. Writes OUT/script-mix.json and prints a table with, per
system, the median [min-max] over the runs and the ratio to
redis-server's.

Environment: PSP (target/release/psp), SYSTEMS ("psp psp+policy=c-fcfs
redis"), CORES (0,1), WORKERS (2), RUNS (3), LOOP (200000),
SCRIPT_CLIENTS (2), GET_CLIENTS (16), GET_REQUESTS (100000), PORT (7441).
Set-up: scripts/compare-deps.sh (redis-server, redis-benchmark),
cargo build --release.
"""
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "results", "script-mix")
PSP = os.environ.get("PSP", os.path.join(ROOT, "target", "release", "psp"))
SYSTEMS = os.environ.get("SYSTEMS", "psp psp+policy=c-fcfs redis").split()
CORES = os.environ.get("CORES", "0,1")
WORKERS = os.environ.get("WORKERS", "2")
RUNS = int(os.environ.get("RUNS", "3"))
LOOP = os.environ.get("LOOP", "200000")
SCRIPT_CLIENTS = os.environ.get("SCRIPT_CLIENTS", "2")
GET_CLIENTS = os.environ.get("GET_CLIENTS", "16")
GET_REQUESTS = os.environ.get("GET_REQUESTS", "100000")
PORT = int(os.environ.get("PORT", "7441"))
SCRIPT = (
    "local n = tonumber(ARGV[1]) local i = 0 while i < n do i = i + 1 end "
    "return redis.call('incr', KEYS[1])"
)


def start(system, port):
    pin = ["taskset", "-c", CORES]
    if system == "redis":
        cmd = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"]
    else:
        flags = [f"--{f.replace('=', ' ', 1)}" for f in system.split("+")[1:]]
        cmd = [PSP, "serve", "--protocol", "resp", "--address", f"127.0.0.1:{port}",
               "--workers", WORKERS, "--no-raise-priority"]
        for f in flags:
            cmd += f.split(" ", 1)
    p = subprocess.Popen(pin + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        r = subprocess.run(["redis-cli", "-p", str(port), "PING"], capture_output=True, text=True)
        if r.stdout.strip() == "PONG":
            return p
        time.sleep(0.05)
    p.kill()
    sys.exit(f"{system} did not start")


def counter(port):
    r = subprocess.run(["redis-cli", "-p", str(port), "GET", "scripts"], capture_output=True, text=True)
    return int(r.stdout.strip() or 0)


def one(system, port):
    server = start(system, port)
    try:
        pin = ["taskset", "-c", CORES]
        scripts = subprocess.Popen(
            pin + ["redis-benchmark", "-p", str(port), "-c", SCRIPT_CLIENTS, "-n", "100000000",
                   "EVAL", SCRIPT, "1", "scripts", LOOP],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        before, t0 = counter(port), time.time()
        r = subprocess.run(
            pin + ["redis-benchmark", "-p", str(port), "-c", GET_CLIENTS, "-n", GET_REQUESTS,
                   "-t", "get", "--csv"], capture_output=True, text=True)
        wall = time.time() - t0
        after = counter(port)
        scripts.kill()
        scripts.wait()
        rows = [line.replace('"', "").split(",") for line in r.stdout.strip().splitlines()]
        head, vals = rows[0], rows[1]
        fig = dict(zip(head, vals))
        return {
            "get_rps": float(fig["rps"]),
            "get_p50_ms": float(fig["p50_latency_ms"]),
            "get_p99_ms": float(fig["p99_latency_ms"]),
            "get_max_ms": float(fig["max_latency_ms"]),
            "scripts_per_s": (after - before) / wall,
            "wall_s": wall,
        }
    finally:
        server.kill()
        server.wait()


def spread(v):
    return f"{statistics.median(v):.3g} [{min(v):.3g}-{max(v):.3g}]"


def main():
    os.makedirs(OUT, exist_ok=True)
    results = {s: [] for s in SYSTEMS}
    port = PORT
    for run in range(RUNS):
        for s in SYSTEMS:
            port += 1
            results[s].append(one(s, port))
            print(run, s, results[s][-1], flush=True)
    with open(os.path.join(OUT, "script-mix.json"), "w") as f:
        json.dump({"loop": LOOP, "script_clients": SCRIPT_CLIENTS, "get_clients": GET_CLIENTS,
                   "get_requests": GET_REQUESTS, "cores": CORES, "results": results}, f, indent=1)
    ref = results.get("redis")
    print("| system | GET p50 (ms) | GET p99 (ms) | GET max (ms) | GET/s | scripts/s | GET p99 / redis | scripts/s / redis |")
    print("|---|---|---|---|---|---|---|---|")
    for s, rs in results.items():
        col = lambda k: [r[k] for r in rs]
        ratio = lambda k: (spread([a[k] / b[k] for a, b in zip(rs, ref)]) if ref else "-")
        print(f"| {s} | {spread(col('get_p50_ms'))} | {spread(col('get_p99_ms'))} | "
              f"{spread(col('get_max_ms'))} | {spread(col('get_rps'))} | {spread(col('scripts_per_s'))} | "
              f"{ratio('get_p99_ms')} | {ratio('scripts_per_s')} |")


if __name__ == "__main__":
    main()
