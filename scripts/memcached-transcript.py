#!/usr/bin/env python3
"""Reference transcripts of memcached commands: each case (raw request
bytes, `\\r\\n` written as such) sent in order on one connection, and the
reply bytes that came back.

    scripts/memcached-transcript.py record CASES.json PORT > TRANSCRIPT.jsonl
    scripts/memcached-transcript.py compare CASES.json PORT_REFERENCE PORT_PSP

CASES.json is a JSON list of strings (requests, Latin-1); the transcript is
one JSON line per case: [request, reply]. `record` talks to a memcached on
PORT (`memcached -p PORT -U 0`; the cases start with `flush_all`);
`compare` sends the same cases to both and prints each reply that differs
(exit code 1 if any does). `cargo test -p psp-proto --test transcripts`
replays every recorded memcached transcript against the in-memory store.
"""
import json
import socket
import sys
import time


def talk(port, cases):
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(0.2)
    res = []
    for c in cases:
        s.sendall(c.encode("latin-1"))
        time.sleep(0.02)
        buf = b""
        while True:
            try:
                d = s.recv(65536)
            except socket.timeout:
                break
            if not d:
                break
            buf += d
        res.append(buf.decode("latin-1"))
    return res


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "record":
        cases = json.load(open(sys.argv[2]))
        for c, r in zip(cases, talk(int(sys.argv[3]), cases)):
            print(json.dumps([c, r]))
    elif len(sys.argv) == 5 and sys.argv[1] == "compare":
        cases = json.load(open(sys.argv[2]))
        a = talk(int(sys.argv[3]), cases)
        b = talk(int(sys.argv[4]), cases)
        diffs = 0
        for c, x, y in zip(cases, a, b):
            if x != y:
                diffs += 1
                print("DIFF", repr(c))
                print("  reference:", repr(x))
                print("  psp:      ", repr(y))
        print(f"{len(cases)} cases, {diffs} differences")
        sys.exit(1 if diffs else 0)
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
