"""pymemcache (python3-pymemcache) against psp serve --protocol memcache on
PORT: its PooledClient from several threads (set, get, get_many of 100
keys, gets and cas, incr, add, delete, touch), and a HashClient over two
servers' addresses (both this one here) as sharding frameworks use it.
Prints one line per check; exits non-zero at the first that fails.

    /usr/bin/python3 memcached_frameworks.py PORT
"""
import sys
import threading

from pymemcache.client.base import PooledClient
from pymemcache.client.hash import HashClient

port = int(sys.argv[1])
# Replies awaited (pymemcache sends sets with noreply by default: a
# pooled read could then overtake its own write on another connection).
pool = PooledClient(
    ("127.0.0.1", port), max_pool_size=4, connect_timeout=5, timeout=10, default_noreply=False
)

# Several threads share the pool: each its own keys, every value read back.
errors = []


def worker(n):
    try:
        for i in range(50):
            k = f"t{n}-{i}"
            assert pool.set(k, f"v{i}".encode()), k
            assert pool.get(k) == f"v{i}".encode(), k
    except Exception as e:  # reported below
        errors.append(repr(e))


threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert not errors, errors
print("pooled ok")

# get_many of 100 ordinary keys (one get line longer than 2 KB).
keys = [f"user:session:{i:06d}:profile" for i in range(100)]
assert pool.set_many({k: b"x" for k in keys}, noreply=False) == []
got = pool.get_many(keys)
assert len(got) == 100 and all(v == b"x" for v in got.values()), len(got)
print("get_many ok")

# gets and cas, incr, add, delete, touch.
pool.set("c", b"1")
value, token = pool.gets("c")
assert value == b"1"
assert pool.cas("c", b"2", token) is True
assert pool.cas("c", b"3", token) is False, "a stale cas is refused"
pool.set("n", b"10")
assert pool.incr("n", 5) == 15
assert pool.add("n", b"0") is False, "add of a present key"
assert pool.touch("n", 100) is True
assert pool.delete("n") is True
assert pool.get("n") is None
print("cas incr ok")

# A HashClient shards keys over its servers (two names for this one).
hc = HashClient([("127.0.0.1", port), ("localhost", port)], use_pooling=True, default_noreply=False)
for i in range(20):
    assert hc.set(f"h{i}", str(i).encode(), noreply=False)
assert all(hc.get(f"h{i}") == str(i).encode() for i in range(20))
print("hash client ok")
