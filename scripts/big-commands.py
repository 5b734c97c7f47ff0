#!/usr/bin/env python3
"""GETs beside big commands: psp serve (in-memory store) against
redis-server on the same cores (docs/results.md, "Big commands beside GETs").

  scripts/big-commands.py [OUT]

For each system (SYSTEMS, interleaved over RUNS): start it on CORES, load
100,000 string keys and the big keys (a 100,000-field hash, a 100,000-member
set, a 100,000-element list, a 100,000-member sorted set, two 50,000-member
sets) with `redis-cli --pipe`, then
  1. GETs alone: redis-benchmark, CLIENTS connections, GETS GETs of random
     keys;
  2. for each big command in turn (KEYS *, HGETALL, SMEMBERS, LRANGE 0 -1,
     SUNION, ZRANGE 0 -1): the same GETs beside a second redis-benchmark of
     2 connections running BIG of that command.
Reports redis-benchmark's own figures: GET p50/p99/p99.9 and the big
command's rate, and the error replies either saw. Writes OUT/big.json and a
table on stdout (medians over runs, with the range).

Environment: PSP (target/release/psp), CORES (0,1), WORKERS (2), PORT
(7403), RUNS (3), SYSTEMS ("psp psp:c-fcfs redis": psp is psp serve's
default policy, psp:P policy P), PSP_ARGS (more psp serve flags; psp
serve raises its dispatcher's priority, as it does by default: run as
root or with CAP_SYS_NICE), GETS (100000), CLIENTS (16), BIG (40),
COMMANDS (all: keys,hgetall,smembers,lrange,sunion,zrange), SMALL (1: the
same mix over small keys: a 3-field hash, 10-element list and set, ...).
Set-up: scripts/compare-deps.sh, cargo build --release.
"""

import json
import os
import re
import statistics
import subprocess
import sys
import time

out_dir = sys.argv[1] if len(sys.argv) > 1 else "results/big-commands"
psp = os.environ.get("PSP", "target/release/psp")
cores = os.environ.get("CORES", "0,1")
workers = os.environ.get("WORKERS", "2")
port = os.environ.get("PORT", "7403")
runs = int(os.environ.get("RUNS", "3"))
systems = os.environ.get("SYSTEMS", "psp psp:c-fcfs redis").split()
gets = os.environ.get("GETS", "100000")
clients = os.environ.get("CLIENTS", "16")
big = os.environ.get("BIG", "40")
small = os.environ.get("SMALL", "") == "1"
n_big = 10 if small else 100_000
COMMANDS = {
    "keys": ["KEYS", "*"] if not small else ["KEYS", "key:1?"],
    "hgetall": ["HGETALL", "big:hash"],
    "smembers": ["SMEMBERS", "big:set"],
    "lrange": ["LRANGE", "big:list", "0", "-1"],
    "sunion": ["SUNION", "big:s1", "big:s2"],
    "zrange": ["ZRANGE", "big:zset", "0", "-1"],
}
commands = os.environ.get("COMMANDS", ",".join(COMMANDS)).split(",")
os.makedirs(out_dir, exist_ok=True)


def taskset(cmd):
    return ["taskset", "-c", cores] + cmd


def server_cmd(system):
    if system.startswith("psp"):
        cmd = [psp, "serve", "--protocol", "resp", "--address", f"127.0.0.1:{port}",
               "--workers", workers] + os.environ.get("PSP_ARGS", "").split()
        if ":" in system:
            cmd += ["--policy", system.split(":", 1)[1]]
        return cmd
    if system == "redis":
        return ["redis-server", "--port", port, "--save", "", "--appendonly", "no"]
    raise SystemExit(f"unknown system {system}")


def start(system):
    log = open(os.path.join(out_dir, system.replace(":", "_") + ".server.out"), "w")
    p = subprocess.Popen(taskset(server_cmd(system)), stdout=log, stderr=subprocess.STDOUT)
    for _ in range(100):
        if p.poll() is not None:
            raise SystemExit(f"{system} exited: see {log.name}")
        r = subprocess.run(["redis-cli", "-p", port, "PING"], capture_output=True, text=True)
        if r.stdout.strip() == "PONG":
            return p
        time.sleep(0.1)
    p.kill()
    raise SystemExit(f"{system} did not start")


def resp(words):
    out = [f"*{len(words)}\r\n".encode()]
    for w in words:
        w = w if isinstance(w, bytes) else str(w).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(w), w))
    return b"".join(out)


def load():
    """The keys, through redis-cli --pipe (which checks every reply)."""
    data = bytearray()
    for i in range(100_000):
        data += resp(["SET", f"key:{i}", "v" * 16])
    chunk = 1000
    for start_at in range(0, n_big, chunk):
        ids = range(start_at, min(start_at + chunk, n_big))
        data += resp(["HSET", "big:hash"] + [x for i in ids for x in (f"f{i}", "v")])
        data += resp(["SADD", "big:set"] + [f"m{i}" for i in ids])
        data += resp(["RPUSH", "big:list"] + [f"e{i}" for i in ids])
        data += resp(["ZADD", "big:zset"] + [x for i in ids for x in (i, f"m{i}")])
    half = max(n_big // 2, 1)
    for start_at in range(0, half, chunk):
        ids = range(start_at, min(start_at + chunk, half))
        data += resp(["SADD", "big:s1"] + [f"m{i}" for i in ids])
        data += resp(["SADD", "big:s2"] + [f"m{i + half // 2}" for i in ids])
    r = subprocess.run(["redis-cli", "-p", port, "--pipe"], input=bytes(data),
                       capture_output=True)
    if b"errors: 0" not in r.stdout:
        raise SystemExit(f"loading failed: {r.stdout[-300:]!r} {r.stderr[-300:]!r}")


def bench(args):
    return subprocess.Popen(taskset(["redis-benchmark", "-p", port] + args),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def parse(text):
    """redis-benchmark's own figures: throughput, p50/p99 (its summary) and
    p99.9 (its percentile distribution), and the error replies it printed."""
    r = {"errors": len(re.findall(r"^(?:Error|ERR|-)", text, re.M))}
    m = re.search(r"throughput summary: ([\d.]+) requests per second", text)
    r["rps"] = float(m.group(1)) if m else None
    m = re.search(r"avg\s+min\s+p50\s+p95\s+p99\s+max\s*\n\s*([\d.\s]+)", text)
    if m:
        v = [float(x) for x in m.group(1).split()[:6]]
        r.update(p50_ms=v[2], p99_ms=v[4], max_ms=v[5])
    r["p999_ms"] = None
    for pct, ms in re.findall(r"([\d.]+)% <= ([\d.]+) milliseconds", text):
        if float(pct) >= 99.9:
            r["p999_ms"] = float(ms)
            break
    return r


def get_args():
    return ["-n", gets, "-c", clients, "-r", "100000", "GET", "key:__rand_int__"]


def one_system(system, run):
    p = start(system)
    try:
        load()
        res = {"get_only": parse(bench(get_args()).communicate()[0])}
        for name in commands:
            b = bench(["-n", big, "-c", "2"] + COMMANDS[name])
            t0 = time.time()
            g = parse(bench(get_args()).communicate()[0])
            text = b.communicate()[0]
            with open(os.path.join(out_dir, f"{system.replace(':', '_')}.{run}.{name}.out"),
                      "w") as f:
                f.write(text)
            res[name] = {"get": g, "big": parse(text), "wall_s": time.time() - t0}
        return res
    finally:
        p.terminate()
        p.wait(timeout=30)


def med(values):
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    return f"{statistics.median(values):.3g} ({min(values):.3g}-{max(values):.3g})"


results = {s: [] for s in systems}
for run in range(runs):
    for s in systems:
        results[s].append(one_system(s, run))
        print(f"run {run + 1} {s} done", file=sys.stderr, flush=True)
with open(os.path.join(out_dir, "big.json"), "w") as f:
    json.dump(results, f, indent=1)

print(f"{'small' if small else 'big'} keys; medians of {runs} runs (range); "
      f"GET latencies in ms, big commands per second")
print("| command | system | GET p50 | GET p99 | GET p99.9 | big/s | errors (GET, big) |")
print("|---|---|---|---|---|---|---|")
for s in systems:
    rs = results[s]
    print(f"| GETs alone | {s} | {med([r['get_only'].get('p50_ms') for r in rs])} | "
          f"{med([r['get_only'].get('p99_ms') for r in rs])} | "
          f"{med([r['get_only'].get('p999_ms') for r in rs])} | - | "
          f"{sum(r['get_only']['errors'] for r in rs)} |")
for name in commands:
    for s in systems:
        rs = [r[name] for r in results[s]]
        print(f"| {' '.join(COMMANDS[name])} | {s} | {med([r['get'].get('p50_ms') for r in rs])} | "
              f"{med([r['get'].get('p99_ms') for r in rs])} | "
              f"{med([r['get'].get('p999_ms') for r in rs])} | "
              f"{med([r['big'].get('rps') for r in rs])} | "
              f"{sum(r['get']['errors'] for r in rs)}, {sum(r['big']['errors'] for r in rs)} |")
