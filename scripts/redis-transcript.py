#!/usr/bin/env python3
"""Reference transcripts of Redis commands: each case file's commands sent in
order on one connection, and the replies.

    scripts/redis-transcript.py record CASES.json PORT > TRANSCRIPT.jsonl
    scripts/redis-transcript.py compare CASES.json PORT_REFERENCE PORT_PSP

CASES.json is a JSON list of commands (each a list of strings), e.g.
crates/proto/tests/data/redis7-scripting.cases.json; its recorded
transcript is the .jsonl beside it. `record` writes one JSON line per
command: [args, reply] (the reply's bytes as Latin-1 text), from a
redis-server on PORT (`redis-server --port PORT --save ''`; the cases start
with FLUSHALL). `compare` sends the same commands to both servers and
prints each reply that differs; exit code 1 if any does.
`cargo test -p psp-proto --test transcripts` replays every recorded
transcript against the in-memory store.
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


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "record":
        cases = json.load(open(sys.argv[2]))
        for c, r in zip(cases, talk(int(sys.argv[3]), cases)):
            print(json.dumps([c, r.decode("latin1")]))
    elif len(sys.argv) == 5 and sys.argv[1] == "compare":
        cases = json.load(open(sys.argv[2]))
        a = talk(int(sys.argv[3]), cases)
        b = talk(int(sys.argv[4]), cases)
        diffs = 0
        for c, x, y in zip(cases, a, b):
            if x != y:
                diffs += 1
                print(f"DIFF {c}\n  reference: {x!r}\n  psp:       {y!r}")
        print(f"{len(cases)} commands, {diffs} differences")
        sys.exit(1 if diffs else 0)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
