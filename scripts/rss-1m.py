#!/usr/bin/env python3
"""Memory for 1 M keys of 100-byte values: psp serve --protocol resp
(in-memory store) against redis-server (docs/results.md, "Semantics, and the
client libraries people use").

  scripts/rss-1m.py

For each system: start it, note its resident set (VmRSS), load KEYS keys
`key:<i>` with VALUE-byte values through `redis-cli --pipe`, check DBSIZE,
note VmRSS again. Prints both and the ratio of what the keys added.
Environment: PSP (target/release/psp), PORT (7403), KEYS (1000000),
VALUE (100).
"""

import os
import subprocess
import time

psp = os.environ.get("PSP", "target/release/psp")
port = os.environ.get("PORT", "7403")
keys = int(os.environ.get("KEYS", "1000000"))
value = int(os.environ.get("VALUE", "100"))


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise SystemExit("no VmRSS")


def cli(*args):
    return subprocess.run(["redis-cli", "-p", port, *args], capture_output=True,
                          text=True).stdout.strip()


payload = bytearray()
v = b"v" * value
for i in range(keys):
    k = b"key:%d" % i
    payload += b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(v), v)

rows = {}
for system in ("psp", "redis"):
    cmd = ([psp, "serve", "--protocol", "resp", "--address", f"127.0.0.1:{port}",
            "--workers", "2", "--no-raise-priority"] if system == "psp" else
           ["redis-server", "--port", port, "--save", "", "--appendonly", "no"])
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        if cli("PING") == "PONG":
            break
        time.sleep(0.1)
    before = rss_kib(p.pid)
    subprocess.run(["redis-cli", "-p", port, "--pipe"], input=bytes(payload),
                   capture_output=True, check=True)
    n = int(cli("DBSIZE"))
    time.sleep(1)
    after = rss_kib(p.pid)
    p.terminate()
    p.wait(timeout=30)
    rows[system] = (before, after, n)
    print(f"{system}: {n} keys, VmRSS {before / 1024:.1f} MiB before, "
          f"{after / 1024:.1f} MiB after: {(after - before) / 1024:.1f} MiB for the keys")
ratio = (rows["psp"][1] - rows["psp"][0]) / (rows["redis"][1] - rows["redis"][0])
total = rows["psp"][1] / rows["redis"][1]
print(f"psp / redis-server: {ratio:.2f}x for the keys, {total:.2f}x in all")
