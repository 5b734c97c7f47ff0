#!/usr/bin/env python3
"""psp serve under several policies against the reference server, driven by
the reference server's own benchmark client (docs/results.md, "Redis clients: GETs beside LRANGE 0 599").

  scripts/compare.py redis [OUT]       RESP over TCP against redis-server,
                                       measured by redis-benchmark
  scripts/compare.py memcached [OUT]   memcached over UDP against memcached,
                                       measured by memcaslap
  scripts/compare.py summary OUT RUN... the median of each figure over runs
                                       made by one of the above, with its
                                       range (OUT/summary.json, .svg)

Every server runs on the same cores (taskset CORES), and so do the clients.
Each client's own figures are reported, not psp's:

redis: a list `mylist` of 1,000 elements is made (redis-benchmark's LPUSH),
  then 1. GET only: redis-benchmark GET, its throughput and latency;
  2. GETs and LRANGE 0 599 at once: two redis-benchmark processes; GET's
  p50/p99/p99.9 (p99.9: the first line of its percentile distribution at or
  above 99.9%) and LRANGE's throughput and p99.

memcached (UDP, values of VALUE bytes): 1. gets only: one memcaslap, 90% gets
  and 10% sets (its default mix) of single keys; 2. the same beside a second
  memcaslap doing multi-key gets of MULTI keys. memcaslap reports latency as
  a log2 histogram (bucket i holds [2^(i-1), 2^i) us): a percentile here is
  the upper bound of the bucket it falls in, so it is exact to a factor of 2.
  A memcaslap run that dies on its own assertion (a reply id it did not
  expect) is run again, twice at most; compare.json's client_aborts and a
  line under the table count those re-runs.

Writes a table on stdout, OUT/compare.json and OUT/compare.svg (GET p99 and
p99.9 of the mixed run, and GET-only throughput, per system).

Set-up: scripts/compare-deps.sh (redis-server, memcached and the clients),
cargo build --release.
Environment: PSP (target/release/psp), CORES (0,1), WORKERS (2), PORT (7400),
  SYSTEMS (redis: "psp:darc psp:c-fcfs psp:synergy redis redis:io-threads=2";
  memcached: "psp:darc psp:c-fcfs psp:synergy memcached"; a +flag=value
  suffix adds a psp serve flag: psp:darc+inline-worker=off), PSP_ARGS (more
  psp serve flags, e.g. "--poll-yield off"),
  redis: GETS (GET requests per run, 100000), LRANGES (4000), CLIENTS (20
  GET clients; the LRANGE client has 4);
  memcached: DURATION_S (seconds per run, 10), CONCURRENCY (16 for gets, 4 for
  multi-gets), MULTI (keys per multi-get, 16), VALUE (bytes, 16).
"""

import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time

summary_of = []
if len(sys.argv) == 7 and sys.argv[1] == "multiget-loader":
    pass  # run below, once the functions are defined
elif len(sys.argv) > 3 and sys.argv[1] == "summary":
    summary_of = [json.load(open(os.path.join(d, "compare.json"))) for d in sys.argv[3:]]
elif len(sys.argv) < 2 or sys.argv[1] not in ("redis", "memcached"):
    raise SystemExit(__doc__)
kind = summary_of[0]["kind"] if summary_of else sys.argv[1]
out_dir = sys.argv[2] if len(sys.argv) > 2 else f"results/compare-{kind}"
psp = os.environ.get("PSP", "target/release/psp")
cores = os.environ.get("CORES", "0,1")
workers = os.environ.get("WORKERS", "2")
port = os.environ.get("PORT", "7400")
psp_args = os.environ.get("PSP_ARGS", "").split()
default_systems = {
    "redis": "psp:darc psp:c-fcfs psp:synergy redis redis:io-threads=2",
    "memcached": "psp:darc psp:c-fcfs psp:synergy memcached",
}.get(kind, "")
systems = os.environ.get("SYSTEMS", default_systems).split()
if kind != "multiget-loader":
    os.makedirs(out_dir, exist_ok=True)


def taskset(cmd):
    return ["taskset", "-c", cores] + cmd


def server_cmd(system):
    if system.startswith("psp:"):
        protocol = "resp" if kind == "redis" else "memcache-udp"
        # A +flag=value suffix adds --flag value (psp:c-fcfs+inline-worker=off).
        policy, *flags = system[4:].split("+")
        extra = [a for f in flags for a in ("--" + f.split("=")[0], f.split("=", 1)[1])]
        return [psp, "serve", "--protocol", protocol, "--address", f"127.0.0.1:{port}",
                "--workers", workers, "--policy", policy,
                "--no-raise-priority", "--json"] + extra + psp_args
    if system.startswith("redis"):
        cmd = ["redis-server", "--port", port, "--save", "", "--appendonly", "no"]
        if ":" in system:
            cmd += ["--io-threads", system.split("=")[1], "--io-threads-do-reads", "yes"]
        return cmd
    if system == "memcached":
        return ["memcached", "-l", "127.0.0.1", "-p", port, "-U", port, "-t", workers,
                "-u", os.environ.get("USER", "root")]
    raise SystemExit(f"unknown system {system}")


# One socket for every UDP readiness probe, open to the end: a late answer to
# a probe given up on lands here, never on a port a client took since. Each
# probe has its own request id; a server counts as up on an answer to one
# sent since it was started (`probe_from`).
probe = None
probe_id = 0
probe_from = 0


def ready():
    global probe, probe_id
    if kind == "redis":
        r = subprocess.run(["redis-cli", "-p", port, "PING"], capture_output=True, text=True)
        return r.stdout.strip() == "PONG"
    if probe is None:
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        probe.settimeout(0.2)
    probe_id = (probe_id + 1) % 65536
    # memcached's UDP frame: request id, sequence 0 of 1 datagram.
    frame = probe_id.to_bytes(2, "big") + b"\x00\x00\x00\x01\x00\x00version\r\n"
    try:
        probe.sendto(frame, ("127.0.0.1", int(port)))
        while True:
            data = probe.recv(2048)
            if b"VERSION" in data and int.from_bytes(data[:2], "big") >= probe_from:
                return True
    except OSError:
        return False


def start(system):
    global probe_from
    probe_from = probe_id + 1
    log = open(os.path.join(out_dir, system.replace(":", "_") + ".server.out"), "w")
    p = subprocess.Popen(taskset(server_cmd(system)), stdout=log, stderr=subprocess.STDOUT)
    for _ in range(100):
        if p.poll() is not None:
            raise SystemExit(f"{system} exited: see {log.name}")
        if ready():
            return p
        time.sleep(0.1)
    p.kill()
    raise SystemExit(f"{system} did not start")


def stop(p):
    p.terminate()
    p.wait(timeout=30)


def client(args):
    """Starts a client on the servers' cores; returns it (stdout captured)."""
    return subprocess.Popen(taskset(args), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


current = {"system": None}


def output(p, phase):
    """A client's whole output, kept in OUT/SYSTEM.PHASE.client.out."""
    text = p.communicate()[0]
    name = f"{current['system'].replace(':', '_')}.{phase}.client.out"
    with open(os.path.join(out_dir, name), "w") as f:
        f.write(text)
    return text


def parse_redis(text):
    """redis-benchmark's own figures: throughput, summary latencies (ms), and
    p99.9 from its percentile distribution."""
    r = {}
    m = re.search(r"throughput summary: ([\d.]+) requests per second", text)
    r["rps"] = float(m.group(1)) if m else None
    m = re.search(r"avg\s+min\s+p50\s+p95\s+p99\s+max\s*\n\s*([\d.\s]+)", text)
    if m:
        v = [float(x) for x in m.group(1).split()[:6]]
        r.update(avg_ms=v[0], p50_ms=v[2], p95_ms=v[3], p99_ms=v[4], max_ms=v[5])
    r["p999_ms"] = None
    for pct, ms in re.findall(r"([\d.]+)% <= ([\d.]+) milliseconds", text):
        if float(pct) >= 99.9:
            r["p999_ms"] = float(ms)
            break
    return r


def parse_memcaslap(text):
    """memcaslap's own figures for its gets: throughput (its Global line),
    average, and percentiles from its log2 histogram (upper bucket bounds)."""
    r = {"rps": None, "avg_ms": None, "p50_ms": None, "p99_ms": None, "p999_ms": None,
         "misses": None}
    table = re.search(r"Get Statistics\nType.*\n(?:Period.*\n)?Global\s+(.*)\n", text)
    if table:
        v = table.group(1).split()
        r["rps"], r["misses"] = float(v[2]), int(v[4])
    block = re.search(r"Get Statistics \((\d+) events\)(.*?)(?:\n\n|\Z)", text, re.S)
    if not block:
        return r
    m = re.search(r"Avg:\s+(\d+)", block.group(2))
    r["avg_ms"] = int(m.group(1)) / 1000 if m else None
    counts = {}
    for start, cols in re.findall(r"^\s+(\d+):((?:\s+\d+)+)\s*$", block.group(2), re.M):
        for i, c in enumerate(cols.split()):
            counts[int(start) + i] = int(c)
    total = sum(counts.values())
    for name, q in (("p50_ms", 0.5), ("p99_ms", 0.99), ("p999_ms", 0.999)):
        seen = 0
        for bucket in sorted(counts):
            seen += counts[bucket]
            if seen >= q * total:
                r[name] = 2 ** bucket / 1000
                break
    r["events"] = total
    return r


def run_redis():
    gets = os.environ.get("GETS", "100000")
    lranges = os.environ.get("LRANGES", "4000")
    clients = os.environ.get("CLIENTS", "20")
    bench = ["redis-benchmark", "-p", port]
    get = bench + ["-n", gets, "-c", clients, "-r", "1000", "GET", "key:__rand_int__"]
    subprocess.run(bench + ["-t", "lpush", "-n", "1000", "-q"], capture_output=True)
    only = parse_redis(output(client(get), "get_only"))
    g = client(get)
    lr = client(bench + ["-n", lranges, "-c", "4", "LRANGE", "mylist", "0", "599"])
    return {"get_only": only, "mixed_get": parse_redis(output(g, "mixed_get")),
            "mixed_long": parse_redis(output(lr, "mixed_long"))}


def multiget_loader(host, port, keys, conc, seconds, value):
    """A closed-loop memcached UDP client of multi-key gets (memcaslap's own
    UDP multi-get aborts on an assertion against memcached 1.6.18 itself):
    sets its keys, then keeps `conc` multi-gets of `keys` keys in flight for
    `seconds`; prints its throughput and latency percentiles as JSON."""
    import random
    import select
    addr = (host, port)
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(conc)]

    def frame(rid, body):
        return rid.to_bytes(2, "big") + b"\x00\x00\x00\x01\x00\x00" + body

    names = [f"mgk{i}".encode() for i in range(1000)]
    s0 = socks[0]
    s0.settimeout(1.0)
    for i, k in enumerate(names):
        s0.sendto(frame(i, b"set " + k + b" 0 0 %d\r\n" % value + b"v" * value + b"\r\n"),
                  addr)
        s0.recv(2048)
    s0.settimeout(None)
    rng = random.Random(1)
    lat, sent_at, rid, lost = [], {}, 0, 0

    def send(sock):
        nonlocal rid
        rid = (rid + 1) % 65536
        body = b"get " + b" ".join(rng.sample(names, keys)) + b"\r\n"
        sent_at[sock] = (rid, time.perf_counter())
        sock.sendto(frame(rid, body), addr)

    for sock in socks:
        send(sock)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        readable, _, _ = select.select(socks, [], [], 0.2)
        now = time.perf_counter()
        for sock in socks:
            if sock in readable:
                data = sock.recv(65536)
                want, t = sent_at[sock]
                if int.from_bytes(data[:2], "big") != want:
                    continue  # a late reply to a request given up on
                lat.append(now - t)
                send(sock)
            elif now - sent_at[sock][1] > 1.0:
                lost += 1  # no reply in 1 s: counted, asked again
                send(sock)
    lat.sort()

    def pick(q):
        return lat[min(len(lat) - 1, int(q * len(lat)))] * 1000 if lat else None

    print(json.dumps({"rps": len(lat) / seconds, "p50_ms": pick(0.5), "p99_ms": pick(0.99),
                      "p999_ms": pick(0.999), "lost": lost, "count": len(lat)}))


def aborted(text):
    """memcaslap died on one of its own assertions (its UDP client checks each
    reply's request id against the one request it has in flight, and aborts,
    figures unprinted, on any other: seen once at the start of a run on a
    loaded machine, never reproduced; the server's side of it is checked by
    the test each_reply_reaches_the_socket_that_asked_under_its_request_id)."""
    return "Assertion" in text and "Get Statistics" not in text


# memcaslap runs re-run after such an abort (at most twice per phase), per system.
client_aborts = {}


def run_memcached():
    seconds = os.environ.get("DURATION_S", "10")
    conc = os.environ.get("CONCURRENCY", "16")
    value = os.environ.get("VALUE", "16")
    multi = os.environ.get("MULTI", "16")
    slap = ["memcaslap", "-s", f"127.0.0.1:{port}", "-U", "-T", "1", "-t", f"{seconds}s",
            "-S", f"{seconds}s", "-X", value]
    aborts = client_aborts.setdefault(current["system"], 0)
    for attempt in range(3):
        text = output(client(slap + ["-c", conc]), "get_only")
        if not aborted(text) or attempt == 2:
            break
        aborts += 1
    only = parse_memcaslap(text)
    for attempt in range(3):
        mg = client([sys.executable, __file__, "multiget-loader", port, multi, "4", seconds,
                     value])
        g = client(slap + ["-c", conc])
        get_text = output(g, "mixed_get")
        text = output(mg, "mixed_long")
        if not aborted(get_text) or attempt == 2:
            break
        aborts += 1
    client_aborts[current["system"]] = aborts
    get = parse_memcaslap(get_text)
    try:
        long = json.loads(text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise SystemExit(f"the multi-get loader failed: {text}")
    return {"get_only": only, "mixed_get": get, "mixed_long": long}


if sys.argv[1] == "multiget-loader":
    _, _, lport, lkeys, lconc, lseconds, lvalue = sys.argv
    multiget_loader("127.0.0.1", int(lport), int(lkeys), int(lconc), float(lseconds),
                    int(lvalue))
    sys.exit(0)

ref_name = "redis" if kind == "redis" else "memcached"


def with_ratios(results):
    """Each system's GET-only throughput over the reference's, in one run."""
    ref = results.get(ref_name, {}).get("get_only", {}).get("rps")
    for r in results.values():
        rps = r["get_only"].get("rps")
        r["get_only"]["vs_reference"] = rps / ref if ref and rps else None
    return results


def median(values):
    """The median of the figures a run gave (None: none did)."""
    v = [x for x in values if x is not None]
    return statistics.median(v) if v else None


results, spread = {}, {}
if summary_of:
    # The median of each figure over the runs, and its range.
    cores, workers = summary_of[0]["cores"], summary_of[0]["workers"]
    for d in summary_of:
        with_ratios(d["systems"])
    for name in summary_of[0]["systems"]:
        runs = [d["systems"][name] for d in summary_of if name in d["systems"]]
        results[name], spread[name] = {}, {}
        for phase in runs[0]:
            keys = sorted({k for r in runs for k in r[phase]
                           if isinstance(r[phase][k], (int, float))})
            vals = {k: [r[phase].get(k) for r in runs] for k in keys}
            results[name][phase] = {k: median(v) for k, v in vals.items()}
            spread[name][phase] = {k: [min(x for x in v if x is not None),
                                       max(x for x in v if x is not None)]
                                   for k, v in vals.items() if any(x is not None for x in v)}
    doc = {"kind": kind, "cores": cores, "workers": workers, "runs": sys.argv[3:],
           "reference": ref_name, "median": results, "range": spread}
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(doc, f, indent=2)
else:
    for system in systems:
        current["system"] = system
        p = start(system)
        try:
            results[system] = run_redis() if kind == "redis" else run_memcached()
        finally:
            stop(p)
        print(f"{system}: {results[system]}", file=sys.stderr)
    with_ratios(results)
    doc = {"kind": kind, "cores": cores, "workers": workers, "psp_args": psp_args,
           "reference": ref_name, "systems": results, "client_aborts": client_aborts}
    with open(os.path.join(out_dir, "compare.json"), "w") as f:
        json.dump(doc, f, indent=2)


def fmt(v, nd=2):
    return "-" if v is None else f"{v:.{nd}f}"


def cell(system, phase, key, nd):
    """A figure, with its range over the runs when summarizing."""
    v = results[system][phase].get(key)
    r = spread.get(system, {}).get(phase, {}).get(key)
    if r is None or v is None:
        return fmt(v, nd)
    return f"{fmt(v, nd)} ({fmt(r[0], nd)}-{fmt(r[1], nd)})"


long_name = "LRANGE_600" if kind == "redis" else f"multi-get x{os.environ.get('MULTI', '16')}"
print(f"| system | GET only: rps | vs {ref_name} | GET p99 (ms) | with {long_name}: GET p50 "
      f"| GET p99 | GET p99.9 | {long_name} rps | {long_name} p99 (ms) |")
print("|---|---|---|---|---|---|---|---|---|")
for s in results:
    print(f"| {s} | {cell(s, 'get_only', 'rps', 0)} | {cell(s, 'get_only', 'vs_reference', 2)} | "
          f"{cell(s, 'get_only', 'p99_ms', 3)} | {cell(s, 'mixed_get', 'p50_ms', 3)} | "
          f"{cell(s, 'mixed_get', 'p99_ms', 3)} | {cell(s, 'mixed_get', 'p999_ms', 3)} | "
          f"{cell(s, 'mixed_long', 'rps', 0)} | {cell(s, 'mixed_long', 'p99_ms', 2)} |")
aborts = {s: n for s, n in client_aborts.items() if n}
if aborts:
    print("\nmemcaslap runs re-run after memcaslap aborted on its own assertion: "
          + ", ".join(f"{s} {n}" for s, n in aborts.items()))


def svg_bars(path, title, groups, series, unit, log=False):
    """A grouped bar chart: groups (systems) x series (name, values), as SVG;
    `log`: a logarithmic axis, a tick per decade (tails differ by orders of
    magnitude)."""
    import math
    width, height, left, bottom, top = 760, 360, 70, 70, 40
    plot_w, plot_h = width - left - 20, height - top - bottom
    values = [v for _, vals in series for v in vals if v]
    peak = max(values + [1e-9])
    if log and values:
        lo = 10 ** math.floor(math.log10(min(values)))
        hi = 10 ** math.ceil(math.log10(peak))
        hi = hi * 10 if hi == lo else hi
        decades = round(math.log10(hi / lo))

        def scale(v):
            return plot_h * math.log10(v / lo) / math.log10(hi / lo)

        ticks = [(lo * 10 ** k, plot_h * k / decades) for k in range(decades + 1)]
    else:
        def scale(v):
            return plot_h * v / peak

        ticks = [(peak * k / 4, plot_h * k / 4) for k in range(5)]
    colors = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759"]
    slot = plot_w / max(len(groups), 1)
    bar = slot * 0.8 / max(len(series), 1)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="DejaVu Sans, sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
           f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
           f'stroke="black"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="black"/>']
    for v, dy in ticks:
        y = top + plot_h - dy
        out.append(f'<text x="{left - 5}" y="{y + 4}" text-anchor="end">{v:.3g}</text>')
        out.append(f'<line x1="{left}" y1="{y}" x2="{left + plot_w}" y2="{y}" '
                   f'stroke="#ddd"/>')
    out.append(f'<text x="15" y="{top + plot_h / 2}" transform="rotate(-90 15 '
               f'{top + plot_h / 2})" text-anchor="middle">{unit}</text>')
    for gi, g in enumerate(groups):
        x0 = left + gi * slot + slot * 0.1
        for si, (_, vals) in enumerate(series):
            v = vals[gi]
            if v is None:
                continue
            h = scale(v)
            out.append(f'<rect x="{x0 + si * bar:.1f}" y="{top + plot_h - h:.1f}" '
                       f'width="{bar:.1f}" height="{h:.1f}" fill="{colors[si % 4]}"/>')
        out.append(f'<text x="{x0 + slot * 0.4:.1f}" y="{top + plot_h + 16}" '
                   f'text-anchor="middle">{g}</text>')
    for si, (name, _) in enumerate(series):
        x = left + 10 + si * 180
        out.append(f'<rect x="{x}" y="{height - 25}" width="12" height="12" '
                   f'fill="{colors[si % 4]}"/>')
        out.append(f'<text x="{x + 16}" y="{height - 15}">{name}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


names = list(results)
of_runs = f", median of {len(summary_of)} runs" if summary_of else ""
svg_bars(os.path.join(out_dir, "compare.svg"),
         f"GET latency beside {long_name} ({kind} clients' own figures, cores {cores}{of_runs})",
         names,
         [("GET p99 (ms)", [results[s]["mixed_get"].get("p99_ms") for s in names]),
          ("GET p99.9 (ms)", [results[s]["mixed_get"].get("p999_ms") for s in names])],
         "ms (log scale)", log=True)
svg_bars(os.path.join(out_dir, "compare-throughput.svg"),
         f"GET-only throughput ({kind} client's own figure, cores {cores}{of_runs})",
         names, [("requests/s", [results[s]["get_only"].get("rps") for s in names])],
         "requests/s")
