#!/usr/bin/env python3
"""Scripting's reference transcript: the commands of crates/proto/tests/
data/redis7-scripting.jsonl sent in order on one connection, and the
replies.

    scripts/redis-script-transcript.py record PORT > crates/proto/tests/data/redis7-scripting.jsonl
    scripts/redis-script-transcript.py compare PORT_REFERENCE PORT_PSP

`record` writes one JSON line per command: [args, reply] (the reply's bytes
as Latin-1 text), from a redis-server on PORT (redis-server --port PORT
--save ''). `compare` sends the same commands to both servers (each on a
fresh FLUSHALLed store) and prints each reply that differs; exit code 1 if
any does. `cargo test -p psp-proto --test scripting` replays the recorded
file against the in-memory store.
"""
import json
import socket
import sys


def enc(args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def talk(port, cmds):
    """Each command's whole reply, in order, on one connection."""
    s = socket.create_connection(("127.0.0.1", port))
    res = []
    for c in cmds:
        s.sendall(enc(c))
        buf = b""
        s.settimeout(0.5)
        while True:
            try:
                b = s.recv(65536)
            except socket.timeout:
                break
            if not b:
                break
            buf += b
            s.settimeout(0.05)
        res.append(buf)
    s.close()
    return res


CASES = [
 ["FLUSHALL"],
 ["EVAL","return 1","0"],["EVAL","return 3.99","0"],["EVAL","return 'x'","0"],["EVAL","return {1,2,{3,'a'},nil,5}","0"],["EVAL","return true","0"],["EVAL","return false","0"],["EVAL","return nil","0"],
 ["EVAL","return redis.call('set',KEYS[1],ARGV[1])","1","k","v"],["EVAL","return redis.call('get',KEYS[1])","1","k"],["EVAL","return redis.call('incr',KEYS[1])","1","k"],
 ["EVAL","return redis.pcall('incr',KEYS[1])","1","k"],["EVAL","return {err='My Error'}","0"],["EVAL","return redis.error_reply('x y')","0"],["EVAL","return redis.status_reply('FINE')","0"],
 ["EVAL","return x(","0"],["EVAL","error('boom')","0"],["EVAL","return redis.call('nosuch')","0"],["EVAL","return 1","-1"],["EVAL","return 1","2","a"],["EVAL","return 1","abc"],
 ["EVALSHA","0000000000000000000000000000000000000000","0"],["SCRIPT","LOAD","return 42"],["EVALSHA","1fa00e76656cc152ad327c13fe365858fd7be306","0"],["SCRIPT","EXISTS","1fa00e76656cc152ad327c13fe365858fd7be306","abc"],["SCRIPT","FLUSH"],["SCRIPT","EXISTS","1fa00e76656cc152ad327c13fe365858fd7be306"],
 ["EVAL","return redis.call('get')","0"],["EVAL","return redis.call('set',KEYS[1],{})","1","a"],["EVAL","return redis.call('multi')","0"],["EVAL","return redis.call('set',KEYS[1],1.5)","1","a"],["EVAL","return redis.call('get',KEYS[1])","1","a"],["EVAL","return tostring(KEYS[1])..ARGV[2]","1","a","b","c"],["EVAL","return redis.sha1hex('')","0"],["EVAL","return redis.call('ping')","0"],["EVAL","return {1,2,3.7,'x',false,'y'}","0"],
 ["EVAL","local n = redis.call('rpush', KEYS[1], 'a', 'b'); return {n, redis.call('lrange', KEYS[1], 0, -1), redis.call('get', KEYS[2]) }","2","L","nokey"],
 ["EVAL","return redis.call('hgetall', KEYS[1])","1","L"],
 ["EVAL","if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end","1","lock","tok"],
 ["SET","lock","tok"],
 ["EVAL","if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end","1","lock","tok"],
 ["EVAL","return pcall(function() return redis.call('incr', KEYS[1]) end)","1","L"],
 ["SCRIPT","FLUSH","bogus"],["SCRIPT","nope"],["SCRIPT","LOAD"],["SCRIPT","FLUSH","a","b"],["SCRIPT","KILL"],["SCRIPT","FLUSH","ASYNC"],["MULTI"],["EVAL","return redis.call('incr',KEYS[1])","1","c"],["EVAL","return redis.call('incr',KEYS[1])","1","c"],["EXEC"],["EVAL","return redis.call('get',KEYS[1])","1","c"],
]


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "record":
        for c, r in zip(CASES, talk(int(sys.argv[2]), CASES)):
            print(json.dumps([c, r.decode("latin1")]))
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        a = talk(int(sys.argv[2]), CASES)
        b = talk(int(sys.argv[3]), CASES)
        diffs = 0
        for c, x, y in zip(CASES, a, b):
            if x != y:
                diffs += 1
                print(f"DIFF {c}\n  reference: {x!r}\n  psp:       {y!r}")
        print(f"{len(CASES)} commands, {diffs} differences")
        sys.exit(1 if diffs else 0)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
