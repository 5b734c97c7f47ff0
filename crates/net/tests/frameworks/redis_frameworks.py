"""redis-py against psp serve --protocol resp on PORT: its Lock (SET NX PX
and a Lua release), register_script (EVALSHA, EVAL after NOSCRIPT),
CLIENT LIST, a consumer parked in BLPOP that a push serves, and a pub/sub
round trip (a channel and a pattern, in RESP2, as Celery's events and
result backend listen), and an RQ worker (python3-rq) that consumes an
enqueued job: BLPOP, its pub/sub command channel, its registries (sorted
sets), MULTI, and the result recorded in a stream. Prints one line per
check; exits non-zero at the first that fails.

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

# Pub/sub: a listener on a channel and on a pattern, messages published
# from another connection (alone, inside MULTI as Celery's result backend
# publishes, and from a script), in the order sent.
listener = redis.Redis(port=port).pubsub()
listener.subscribe("events")
listener.psubscribe("task-*")
first = [listener.get_message(timeout=2) for _ in range(2)]
assert [m["type"] for m in first] == ["subscribe", "psubscribe"], first
pub = redis.Redis(port=port)
assert pub.publish("events", "one") == 1
with pub.pipeline(transaction=True) as p:
    p.set("task-1-result", "done")
    p.publish("task-1", "done")
    p.execute()
assert pub.eval("return redis.call('publish', 'events', 'two')", 0) == 1
assert pub.publish("nobody", "x") == 0
assert pub.pubsub_numsub("events") == [(b"events", 1)]
got = []
deadline = time.time() + 5
while len(got) < 3 and time.time() < deadline:
    m = listener.get_message(timeout=0.5)
    if m is not None:
        got.append((m["type"], m.get("pattern"), m["channel"], m["data"]))
assert got == [
    ("message", None, b"events", b"one"),
    ("pmessage", b"task-*", b"task-1", b"done"),
    ("message", None, b"events", b"two"),
], got
listener.unsubscribe()
listener.punsubscribe()
listener.close()
time.sleep(0.2)
assert pub.publish("events", "gone") == 0, "unsubscribed"
print("pubsub ok")

# RQ: a job enqueued, a burst worker (which forks a work horse) runs it and
# records its result in a stream, read back by the job.
from rq import Queue, Worker  # noqa: E402

rqc = redis.Redis(port=port)
queue = Queue("psp-test", connection=rqc)
job = queue.enqueue("rq_jobs.add", 2, 3)
Worker([queue], connection=rqc).work(burst=True)
job.refresh()
assert job.get_status() == "finished", job.get_status()
assert job.result == 5, job.result
print("rq ok")
