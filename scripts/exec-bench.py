#!/usr/bin/python3
"""Drives MULTI/EXEC transactions against a RESP server and prints the
server's own EXEC time per call (INFO commandstats) and the rate.

    scripts/exec-bench.py PORT [TRANSACTIONS_PER_THREAD]

Four threads (redis-py, /usr/bin/python3 with python3-redis), each
running `MULTI; INCR ctrI:J; GET ctrI:J+1; EXEC` pipelines over 50 keys
(docs/results.md, "6.10 EXEC locks only its keys' shards"). The rate is
the Python client's limit; the EXEC time is the server's."""
import sys
import threading
import time

import redis

port = int(sys.argv[1])
n = int(sys.argv[2]) if len(sys.argv) > 2 else 3000


def worker(i):
    r = redis.Redis(port=port)
    for j in range(n):
        p = r.pipeline(transaction=True)
        p.incr(f"ctr{i}:{j % 50}")
        p.get(f"ctr{i}:{(j + 1) % 50}")
        p.execute()


threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
t0 = time.time()
for t in threads:
    t.start()
for t in threads:
    t.join()
elapsed = time.time() - t0
e = redis.Redis(port=port).info("commandstats").get("cmdstat_exec", {})
print(f"tx/s {4 * n / elapsed:.0f} exec calls {e.get('calls')} usec_per_call {e.get('usec_per_call')}")
