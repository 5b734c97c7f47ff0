#!/usr/bin/env python3
"""Puts `psp serve --metrics` under many, slow, pipelined and hostile HTTP
clients and prints what they got and what the server's memory did
(docs/metrics.md). Python's standard library only; one thread.

  scripts/metrics-stress.py [--psp target/release/psp] [--scrapes 200] [--slow 20]

It starts `psp serve` (darc, 2 workers, metrics on a free port), then, in
turn: SCRAPES clients connected and asking at once; SLOW clients that
dribble a request head a byte a second (reconnecting when closed, so SLOW
are open throughout) while normal scrapes come every 100 ms for 6 s; 10
requests pipelined on one connection; 100 requests one after the other on
one kept-alive connection; a 32 MB header line; 1100 silent connections
at once (past the cap of 1024). Each scrape counts as
answered when it got a 200 and the exposition up to its `# EOF`. The
server's resident size (VmRSS, and its peak VmHWM) is read from
/proc/PID/status before and after.
"""

import argparse
import os
import re
import selectors
import socket
import statistics
import subprocess
import sys
import time

GET = b"GET /metrics HTTP/1.1\r\nHost: psp\r\n\r\n"


def status_kb(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def memory(pid):
    return f"VmRSS {status_kb(pid, 'VmRSS') / 1024:.1f} MiB, VmHWM {status_kb(pid, 'VmHWM') / 1024:.1f} MiB"


def answers(buf):
    """The complete answers at the start of buf: [(status, body)], rest."""
    out = []
    while True:
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            return out, buf
        head = buf[:end].decode("latin-1")
        m = re.search(r"(?im)^content-length:\s*(\d+)", head)
        length = int(m.group(1)) if m else 0
        if len(buf) < end + 4 + length:
            return out, buf
        status = int(head.split(" ", 2)[1])
        out.append((status, buf[end + 4:end + 4 + length]))
        buf = buf[end + 4 + length:]


def full(answer):
    status, body = answer
    return status == 200 and body.endswith(b"# EOF\n")


def concurrent_scrapes(addr, n, deadline_s=30.0):
    """n clients connect, all ask, then all answers are read (one thread, a
    selector). Returns (answered in full, latencies in s)."""
    sel = selectors.DefaultSelector()
    socks = []
    for _ in range(n):
        s = socket.create_connection(addr, timeout=10)
        socks.append(s)
    start = {}
    for s in socks:
        s.sendall(GET)
        start[s] = time.perf_counter()
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, bytearray())
    ok, lat = 0, []
    end = time.monotonic() + deadline_s
    while sel.get_map() and time.monotonic() < end:
        for key, _ in sel.select(timeout=1):
            s, buf = key.fileobj, key.data
            try:
                chunk = s.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                chunk = b""
            buf += chunk
            got, _ = answers(bytes(buf))
            if got or not chunk:
                if got and full(got[0]):
                    ok += 1
                    lat.append(time.perf_counter() - start[s])
                sel.unregister(s)
                s.close()
    for key in list(sel.get_map().values()):
        key.fileobj.close()
    return ok, lat


def one_scrape(addr):
    """One scrape on a connection of its own: (answered in full, latency)."""
    t = time.perf_counter()
    with socket.create_connection(addr, timeout=10) as s:
        s.sendall(GET)
        buf = b""
        while True:
            chunk = s.recv(65536)
            buf += chunk
            got, _ = answers(buf)
            if got or not chunk:
                return bool(got) and full(got[0]), time.perf_counter() - t


def slow_clients(addr, n, seconds):
    """n clients dribble a header byte a second (reconnecting when the
    server closes them) while a normal scrape comes every 100 ms. Returns
    (scrapes answered, scrapes, latencies, closes seen)."""
    head = b"GET /metrics HTTP/1.1\r\nHost: psp\r\nX-Slow: " + b"a" * 10_000

    def dial():
        s = socket.create_connection(addr, timeout=10)
        s.setblocking(False)
        return [s, 0]

    slow = [dial() for _ in range(n)]
    ok = total = closes = 0
    lat = []
    end = time.monotonic() + seconds
    next_byte = time.monotonic()
    while time.monotonic() < end:
        if time.monotonic() >= next_byte:
            next_byte += 1.0
            for i, (s, sent) in enumerate(slow):
                try:
                    if s.recv(4096) == b"":
                        raise ConnectionError
                except BlockingIOError:
                    pass
                except OSError:
                    closes += 1
                    s.close()
                    slow[i] = dial()
                    continue
                try:
                    s.send(head[sent:sent + 1])
                    slow[i][1] += 1
                except OSError:
                    closes += 1
                    s.close()
                    slow[i] = dial()
        good, t = one_scrape(addr)
        ok += good
        total += 1
        lat.append(t)
        time.sleep(0.1)
    for s, _ in slow:
        s.close()
    return ok, total, lat, closes


def pipelined(addr, n):
    """n GETs in one write on one connection: complete answers, in order."""
    with socket.create_connection(addr, timeout=10) as s:
        s.sendall(GET * n)
        buf, got = b"", []
        while len(got) < n:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
            new, buf = answers(buf)
            got += new
        return sum(map(full, got))


def keep_alive(addr, n):
    """n GETs one after the other on one connection."""
    ok = 0
    with socket.create_connection(addr, timeout=10) as s:
        for _ in range(n):
            s.sendall(GET)
            buf = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return ok
                buf += chunk
                got, buf = answers(buf)
                if got:
                    ok += full(got[0])
                    break
    return ok


def big_header(addr, size):
    """A header line of size bytes: (what came back, bytes sent, seconds)."""
    t = time.perf_counter()
    sent = 0
    with socket.create_connection(addr, timeout=10) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: psp\r\nX-Big: ")
        chunk = b"a" * 65536
        try:
            while sent < size:
                s.sendall(chunk)
                sent += len(chunk)
        except OSError:
            pass
        try:
            reply = s.recv(200).split(b"\r\n")[0].decode() or "closed"
        except OSError as e:
            reply = f"closed ({e.__class__.__name__})"
    return reply, sent, time.perf_counter() - t


def flood(addr, n):
    """n connections opened at once and left silent: how many the server
    refused (503) at once, and how many it closed within 10 s."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, n + 100)), hard))
    socks = [socket.create_connection(addr, timeout=10) for _ in range(n)]
    time.sleep(0.5)
    refused = 0
    for s in socks:
        s.setblocking(False)
        try:
            refused += s.recv(200).startswith(b"HTTP/1.1 503 ")
        except BlockingIOError:
            pass
    end = time.monotonic() + 10
    open_ = set(socks)
    while open_ and time.monotonic() < end:
        time.sleep(0.2)
        for s in list(open_):
            try:
                if s.recv(4096) == b"":
                    open_.discard(s)
            except BlockingIOError:
                pass
            except OSError:
                open_.discard(s)
    for s in socks:
        s.close()
    return refused, n - len(open_)


def ms(s):
    return f"{s * 1000:.1f} ms"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--psp", default="target/release/psp")
    ap.add_argument("--scrapes", type=int, default=200)
    ap.add_argument("--slow", type=int, default=20)
    args = ap.parse_args()

    cmd = [args.psp, "serve", "--workload", "extreme-bimodal-x1000", "--policy",
           "darc:samples=1000", "--workers", "2", "--address", "127.0.0.1:0",
           "--metrics", "127.0.0.1:0"]
    print("$", " ".join(cmd))
    srv = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        addr = None
        for line in srv.stdout:
            m = re.search(r"metrics on http://([\d.]+):(\d+)/metrics", line)
            if m:
                addr = (m.group(1), int(m.group(2)))
                break
        if addr is None:
            sys.exit("psp serve did not say where its metrics are")
        pid = srv.pid
        one_scrape(addr)
        with socket.create_connection(addr, timeout=10) as s:
            s.sendall(GET)
            buf = b""
            while not answers(buf)[0]:
                buf += s.recv(65536)
        size = len(answers(buf)[0][0][1])
        print(f"server pid {pid}, metrics at http://{addr[0]}:{addr[1]}/metrics ({size} bytes a scrape)")
        print(f"memory at start:            {memory(pid)}")

        ok, lat = concurrent_scrapes(addr, args.scrapes)
        print(f"{args.scrapes} concurrent scrapes:     {ok}/{args.scrapes} answered; "
              f"latency median {ms(statistics.median(lat))}, max {ms(max(lat))}")
        print(f"memory after them:          {memory(pid)}")

        ok, total, lat, closes = slow_clients(addr, args.slow, 6.0)
        print(f"{args.slow} slow clients held 6 s:  {ok}/{total} scrapes answered meanwhile; "
              f"latency median {ms(statistics.median(lat))}, max {ms(max(lat))}; "
              f"slow clients closed by the server: {closes}")

        print(f"10 pipelined on one conn.:  {pipelined(addr, 10)}/10 answered in order")
        print(f"100 on one kept-alive conn.: {keep_alive(addr, 100)}/100 answered")

        reply, sent, secs = big_header(addr, 32 << 20)
        print(f"32 MB header line:          {reply!r} after {sent >> 10} KiB sent, {secs:.2f} s")
        print(f"memory after it:            {memory(pid)}")
        refused, closed = flood(addr, 1100)
        print(f"1100 silent connections:    {refused} answered 503 at once, "
              f"{closed} closed by the server within 10 s")
        print(f"memory after them:          {memory(pid)}")
        good, t = one_scrape(addr)
        print(f"a scrape after all that:    {'answered' if good else 'NOT answered'} in {ms(t)}")
        print(f"memory at the end:          {memory(pid)}")
    finally:
        srv.terminate()
        srv.wait(timeout=30)


if __name__ == "__main__":
    main()
