"""redis-py against psp serve --protocol resp on PORT: its Lock (SET NX PX
and a Lua release), register_script (EVALSHA, EVAL after NOSCRIPT),
CLIENT LIST, and a consumer parked in BLPOP that a push serves. Prints one
line per check; exits non-zero at the first that fails. (An RQ 1.13 worker
gets as far as waking from BLPOP on an enqueue, then needs Redis streams
and pub/sub, which psp does not have yet.)

    /usr/bin/python3 redis_frameworks.py PORT
"""
import sys
import threading
import time

import redis

port = int(sys.argv[1])
r = redis.Redis(port=port)

# redis-py's Lock: SET NX PX to take it, a Lua script to release it.
lock = r.lock("resource", timeout=5)
assert lock.acquire(blocking=False), "lock taken"
assert not r.lock("resource").acquire(blocking=False), "held by the first"
lock.release()
assert r.lock("resource").acquire(blocking=False), "free again"
print("lock ok")

# register_script: EVALSHA, then EVAL again after a SCRIPT FLUSH (NOSCRIPT).
incr = r.register_script("return redis.call('incrby', KEYS[1], ARGV[1])")
assert incr(keys=["n"], args=[5]) == 5
r.script_flush()
assert incr(keys=["n"], args=[5]) == 10
print("script ok")

# CLIENT LIST as redis-py parses it (RQ reads its own connection's
# address from it).
r.client_setname("framework-test")
assert any(c["name"] == "framework-test" for c in r.client_list()), r.client_list()
print("client list ok")

# BLPOP as a queue consumer waits in it (RQ's worker, Celery's BRPOP): a
# client parked on an empty list is served by another client's push.
got = []
consumer = threading.Thread(
    target=lambda: got.append(redis.Redis(port=port).blpop(["jobs"], timeout=10))
)
consumer.start()
time.sleep(0.5)
assert not got, "parked until a push"
redis.Redis(port=port).rpush("jobs", "job-1")
consumer.join(timeout=10)
assert got == [(b"jobs", b"job-1")], got
assert redis.Redis(port=port).blpop(["jobs"], timeout=0.2) is None, "timeout"
print("blpop ok")
