"""The job an RQ worker runs in redis_frameworks.py (RQ imports it by name)."""


def add(a, b):
    return a + b
