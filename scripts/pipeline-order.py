#!/usr/bin/env python3
"""Counts stale reads in redis-py pipelines against a running server
(docs/results.md, "Semantics, and the client libraries people use").

  scripts/pipeline-order.py PORT [PROTOCOL]

20 non-transactional pipelines of SET k i, GET k, DEL k, GET k over 50
keys each; a quadruple is stale when its first GET does not read i or its
second does not read nil. PROTOCOL: 2 or 3 (RESP version, default 2).
Needs `pip install redis`.
"""

import sys

import redis

port = int(sys.argv[1])
protocol = int(sys.argv[2]) if len(sys.argv) > 2 else 2
r = redis.Redis(port=port, protocol=protocol)
bad = 0
for rnd in range(20):
    p = r.pipeline(transaction=False)
    for i in range(50):
        k = f"order:{rnd}:{i}"
        p.set(k, i).get(k).delete(k).get(k)
    out = p.execute()
    for i in range(50):
        q = out[4 * i:4 * i + 4]
        if q[1] != str(i).encode() or q[3] is not None:
            bad += 1
print(f"stale reads: {bad} of 1000")
