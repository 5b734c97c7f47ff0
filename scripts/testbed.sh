#!/usr/bin/env bash
# The real-runtime comparisons on a testbed machine, each point beside the
# simulator's prediction for the same point, in one report directory:
#
#  0. machine: cores, isolated cores (isolcpus, nohz_full), the frequency
#     governor, SMT, kernel, memory, load average; what would distort a
#     measurement is a warning in the report, never a failure.
#  1. fig6: Perséphone Fig. 6's four workloads (high-bimodal,
#     extreme-bimodal, tpcc, rocksdb; spin handlers) with `psp run` (the
#     in-process generator, the real dispatcher and workers) under each
#     policy at each load, and `psp sim` on the same workload, workers, load,
#     duration, seed and policy.
#  2. kv: `psp profile --app kv` measures RocksDB's GET and SCAN first; the
#     workload file it writes is served by `psp serve --app kv` and offered by
#     `psp load` (open-loop Poisson over UDP on loopback) at a rate calibrated
#     on the server's own measured service times (CALIBRATE), then simulated
#     at that rate.
#  3. redis, memcached: scripts/compare.py's GET-beside-long-request mixes
#     (redis-benchmark, memcaslap) against `psp serve --protocol resp` /
#     `memcache-udp` under each policy, and the reference server where it is
#     installed; skipped with a note where the clients are absent. Closed-loop
#     clients: no simulator column.
#
# Writes OUT_DIR/report.md (machine check, a table per experiment, the
# commands), OUT_DIR/report.json (every number), OUT_DIR/*.svg (p99.9
# slowdown against load, runtime solid and simulator dashed) and keeps every
# command's JSON and stderr under OUT_DIR/{fig6,kv,mixes}.
#
# Usage (paths relative to the repo root; after `cargo build --release -p psp-cli`):
#   scripts/testbed.sh [OUT_DIR=results/testbed]
#   scripts/testbed.sh --report OUT_DIR      # only the report, from kept runs
# Environment (defaults by SCALE; every list is space-separated):
#   PSP          the binary (target/release/psp)
#   SCALE        full (default on >= 16 cores: about 6-8 minutes there),
#                small (default below 16 cores: 1 s runs, 2 loads) or ci (one
#                workload, one load, c-fcfs and darc-fair, 0.5 s runs, --idle
#                park, tiny mixes: what crates/cli/tests/integration/testbed.rs runs)
#   EXPERIMENTS  which parts run ("fig6 kv redis memcached")
#   WORKERS      `psp run` workers (min(14, cores - 2), at least 1)
#   SERVE_WORKERS  workers of psp serve, whose client needs a core of its own
#                (min(WORKERS, cores - 3), at least 1)
#   DURATION     arrival period of each point (full 5s, small 1s, ci 0.5s)
#   SEED         arrivals' seed, the same for runtime and simulator (1)
#   WORKLOADS    fig6 workloads ("high-bimodal extreme-bimodal tpcc rocksdb";
#                ci: high-bimodal)
#   LOADS        fig6 loads, fractions of the workload's peak on WORKERS
#                (full "0.5 0.7 0.9", small "0.5 0.8", ci "0.5")
#   POLICIES     fig6 policies ("c-fcfs darc darc-fair"; ci "c-fcfs darc-fair")
#   KV_LOADS     kv loads (full and small "0.5 0.8", ci "0.5")
#   KV_POLICIES  kv policies ("c-fcfs darc-fair")
#   PROFILE_REQUESTS  timed requests per type of `psp profile` (10000, small
#                1000, ci 200)
#   CALIBRATE    kv: `psp load --calibrate` (full 2s, small 500ms, ci 200ms): a
#                run at the load first, whose service times as psp serve
#                measured them set the measured run's rate, so KV_LOADS are
#                loads of the server's capacity under contention; the
#                simulator then runs the same rate
#   MIX_SYSTEMS  compare.py systems ("psp:c-fcfs psp:darc-fair", plus redis /
#                memcached where that server is installed, except at ci)
#   GETS, LRANGES, CLIENTS  redis mix sizes (100000 4000 20; small 20000 1000
#                8; ci 2000 200 4)
#   MIX_SECONDS  memcached mix seconds per phase (full 5, small and ci 1)
#   PORT         compare.py's port (7470); psp serve of the kv part takes any
#                free port
#   IDLE         --idle of psp run and psp serve (psp's default, park with a
#                short spin; ci: park)
# Needs python3 (the report) and coreutils' timeout; compare.py needs taskset.
set -euo pipefail
cd "$(dirname "$0")/.."

me=testbed.sh
die() {
  echo "$me: $*" >&2
  exit 1
}
say() { echo "$me: $*" >&2; }

report_only=0
if [ "${1:-}" = "--report" ]; then
  report_only=1
  shift
  [ $# -ge 1 ] || die "--report needs the OUT_DIR of an earlier run"
fi
out=${1:-results/testbed}
psp=${PSP:-target/release/psp}
command -v python3 >/dev/null || die "python3 is needed for the report"
command -v timeout >/dev/null || die "timeout (coreutils) is needed"

cores=$(nproc)
clamp() { # clamp VALUE LOW HIGH
  local v=$1
  if [ "$v" -lt "$2" ]; then v=$2; fi
  if [ "$v" -gt "$3" ]; then v=$3; fi
  echo "$v"
}
scale=${SCALE:-}
if [ -z "$scale" ]; then
  if [ "$cores" -ge 16 ]; then scale=full; else scale=small; fi
fi
case $scale in
  full)
    d_duration=5s d_loads="0.5 0.7 0.9" d_workloads="high-bimodal extreme-bimodal tpcc rocksdb"
    d_policies="c-fcfs darc darc-fair" d_kv_loads="0.5 0.8" d_profile=10000 d_calibrate=2s
    d_gets=100000 d_lranges=4000 d_clients=20 d_mix_seconds=5 d_idle="" d_reference=1
    ;;
  small)
    d_duration=1s d_loads="0.5 0.8" d_workloads="high-bimodal extreme-bimodal tpcc rocksdb"
    d_policies="c-fcfs darc darc-fair" d_kv_loads="0.5 0.8" d_profile=1000 d_calibrate=500ms
    d_gets=20000 d_lranges=1000 d_clients=8 d_mix_seconds=1 d_idle="" d_reference=1
    ;;
  ci)
    d_duration=0.5s d_loads="0.5" d_workloads="high-bimodal"
    d_policies="c-fcfs darc-fair" d_kv_loads="0.5" d_profile=200 d_calibrate=200ms
    d_gets=2000 d_lranges=200 d_clients=4 d_mix_seconds=1 d_idle=park d_reference=0
    ;;
  *) die "SCALE must be full, small or ci, not '$scale'" ;;
esac
experiments=${EXPERIMENTS:-"fig6 kv redis memcached"}
workers=${WORKERS:-$(clamp $((cores - 2)) 1 14)}
serve_workers=${SERVE_WORKERS:-$(clamp $((cores - 3)) 1 "$workers")}
duration=${DURATION:-$d_duration}
seed=${SEED:-1}
workloads=${WORKLOADS:-$d_workloads}
loads=${LOADS:-$d_loads}
policies=${POLICIES:-$d_policies}
kv_loads=${KV_LOADS:-$d_kv_loads}
kv_policies=${KV_POLICIES:-"c-fcfs darc-fair"}
profile_requests=${PROFILE_REQUESTS:-$d_profile}
calibrate=${CALIBRATE:-$d_calibrate}
gets=${GETS:-$d_gets}
lranges=${LRANGES:-$d_lranges}
clients=${CLIENTS:-$d_clients}
mix_seconds=${MIX_SECONDS:-$d_mix_seconds}
port=${PORT:-7470}
idle=${IDLE:-$d_idle}
for e in $experiments; do
  case $e in fig6 | kv | redis | memcached) ;; *) die "EXPERIMENTS: unknown part '$e' (fig6 kv redis memcached)" ;; esac
done

# Seconds of a psp duration (500ms, 0.5s, 5s, 1m).
seconds_of() {
  awk -v d="$1" 'BEGIN {
    if (d ~ /ms$/) { print substr(d, 1, length(d) - 2) / 1000 }
    else if (d ~ /us$/) { print substr(d, 1, length(d) - 2) / 1e6 }
    else if (d ~ /m$/) { print substr(d, 1, length(d) - 1) * 60 }
    else { sub(/s$/, "", d); print d + 0 } }'
}
secs=$(seconds_of "$duration")
# A point that takes longer than this is stuck: generous (the drain, RocksDB's
# start), so that it only ends hangs.
point_timeout=$(awk -v s="$secs" 'BEGIN { printf "%d", s * 4 + 60 }')
idle_args=()
if [ -n "$idle" ]; then idle_args=(--idle "$idle"); fi

# A shell-quoted command line, as the report shows it.
quoted() {
  local s
  s=$(printf '%q ' "$@")
  echo "${s% }"
}

# -- 0. The machine ----------------------------------------------------------

# machine KEY VALUE: one line of OUT_DIR/machine.tsv; warn TEXT: a warning.
machine() { printf '%s\t%s\n' "$1" "$2" >>"$out/machine.tsv"; }
warn() {
  machine warning "$1"
  say "warning: $1"
}

check_machine() {
  : >"$out/machine.tsv"
  machine cores "$cores"
  machine cpu "$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)"
  machine kernel "$(uname -r)"
  machine memory_mib "$(awk '/^MemTotal/ { printf "%d", $2 / 1024 }' /proc/meminfo)"
  machine loadavg "$(cut -d' ' -f1-3 /proc/loadavg)"
  machine psp "$("$psp" --version 2>/dev/null || echo unknown)"
  machine commit "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (work tree modified)')"
  if [ "$cores" -lt 16 ]; then
    warn "$cores cores: the paper's setup needs 16 (dispatcher, generator, 14 workers); WORKERS=$workers here"
  fi
  local isolated cmdline
  isolated=$(cat /sys/devices/system/cpu/isolated 2>/dev/null || true)
  cmdline=$(cat /proc/cmdline 2>/dev/null || true)
  machine isolated "${isolated:-none}"
  machine isolcpus "$(grep -o 'isolcpus=[^ ]*' <<<"$cmdline" || echo none)"
  machine nohz_full "$(grep -o 'nohz_full=[^ ]*' <<<"$cmdline" || echo none)"
  if [ -z "$isolated" ]; then
    warn "no isolated cores (isolcpus= on the kernel command line): other tasks may run on the workers' cores"
  fi
  local governors
  governors=$(cat /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor 2>/dev/null | sort | uniq -c | awk '{ printf "%s%s x%s", sep, $2, $1; sep = ", " }' || true)
  machine governor "${governors:-unknown (no cpufreq)}"
  if [ -z "$governors" ]; then
    warn "no CPU frequency governor visible (/sys/devices/system/cpu/cpu*/cpufreq): frequency scaling unknown"
  elif [ "$governors" != "performance x$cores" ]; then
    warn "frequency governor $governors, not performance on every core: spin times and tails vary with the clock"
  fi
  local smt
  smt="$(cat /sys/devices/system/cpu/smt/control 2>/dev/null || echo unknown), active $(cat /sys/devices/system/cpu/smt/active 2>/dev/null || echo unknown)"
  machine smt "$smt"
  if [ "$(cat /sys/devices/system/cpu/smt/active 2>/dev/null || echo 0)" = 1 ]; then
    warn "SMT is on: two workers may share a physical core (the paper's testbed ran one thread per core)"
  fi
  local busy
  busy=$(awk -v c="$cores" '{ print ($1 > c / 4) ? 1 : 0 }' /proc/loadavg)
  if [ "$busy" = 1 ]; then
    warn "load average $(cut -d' ' -f1 /proc/loadavg) on $cores cores: the machine is not idle"
  fi
}

# -- Points --------------------------------------------------------------------

# point EXPERIMENT WORKLOAD POLICY LOAD WORKERS STATUS RUNTIME_JSON SIM_JSON
#       RUNTIME_CMD SIM_CMD [SERVER_JSON]: one line of OUT_DIR/runs.tsv.
point() {
  local IFS=$'\t'
  echo "$*" >>"$out/runs.tsv"
}

# The simulator's prediction of a point: sim STEM WORKLOAD POLICY LOAD WORKERS.
sim_cmd=()
# sim STEM WORKLOAD POLICY LOAD WORKERS [RPS]: the simulator's point, at
# LOAD of the workload's peak, or at RPS requests/s when given.
sim() {
  local offered=(--load "$4")
  if [ -n "${6:-}" ]; then offered=(--rps "$6"); fi
  sim_cmd=("$psp" sim --workload "$2" --workers "$5" "${offered[@]}" --duration "$duration"
    --seed "$seed" --policy "$3" --json)
  timeout "$point_timeout" "${sim_cmd[@]}" >"$1.sim.json" 2>"$1.sim.err"
}

fig6() {
  mkdir -p "$out/fig6"
  local workload load policy stem status
  for workload in $workloads; do
    for load in $loads; do
      for policy in $policies; do
        stem="$out/fig6/$workload-$load-$(echo "$policy" | tr ':=,' '___')"
        local cmd=("$psp" run --workload "$workload" --workers "$workers" --load "$load"
          --duration "$duration" --seed "$seed" --policy "$policy" "${idle_args[@]}" --json)
        status=ok
        timeout "$point_timeout" "${cmd[@]}" >"$stem.run.json" 2>"$stem.run.err" || status=failed
        sim "$stem" "$workload" "$policy" "$load" "$workers" || status="$status, sim failed"
        point fig6 "$workload" "$policy" "$load" "$workers" "$status" "$stem.run.json" \
          "$stem.sim.json" "$(quoted "${cmd[@]}")" "$(quoted "${sim_cmd[@]}")" ""
        say "fig6 $workload load $load $policy: $status"
      done
    done
  done
}

# start_server STEM ARGS...: starts psp serve (ARGS, listening on any free
# port) in the background as $server, and sets $server_port once it listens.
server="" server_port=""
start_server() {
  local stem=$1 tries=0
  shift
  "$@" >"$stem.serve.json" 2>"$stem.serve.err" &
  server=$!
  server_port=""
  while [ "$tries" -lt 200 ]; do # 20 s for RocksDB to load its keys
    server_port=$(grep -so 'listening on udp://[0-9.]*:[0-9]*' "$stem.serve.err" | sed 's/.*://' || true)
    if [ -n "$server_port" ]; then return 0; fi
    kill -0 "$server" 2>/dev/null || return 1
    sleep 0.1
    tries=$((tries + 1))
  done
  return 1
}

stop_server() {
  kill -TERM "$server" 2>/dev/null || true
  wait "$server" || true
  server=""
}

kv() {
  mkdir -p "$out/kv"
  local profile="$out/kv/kv-measured.toml"
  local pcmd=("$psp" profile --app kv --workload rocksdb --requests "$profile_requests"
    --out "$profile")
  if ! timeout 600 "${pcmd[@]}" >"$out/kv/profile.out" 2>&1; then
    say "kv: psp profile failed (see $out/kv/profile.out); kv part skipped"
    printf 'kv\tpsp profile failed: %s\n' "$(tail -1 "$out/kv/profile.out")" >>"$out/skipped.tsv"
    return 0
  fi
  printf '%s\n' "$(quoted "${pcmd[@]}")" >"$out/kv/profile.cmd"
  local load policy stem status
  for load in $kv_loads; do
    for policy in $kv_policies; do
      stem="$out/kv/kv-$load-$(echo "$policy" | tr ':=,' '___')"
      local scmd=("$psp" serve --app kv --workload "$profile" --workers "$serve_workers"
        --policy "$policy" --address 127.0.0.1:0 --metrics 127.0.0.1:0 "${idle_args[@]}" --json)
      status=ok
      local rps=""
      if start_server "$stem" timeout "$point_timeout" "${scmd[@]}"; then
        local metrics
        metrics=$(grep -so 'metrics on http://[0-9.]*:[0-9]*' "$stem.serve.err" | sed 's#.*http://##' || true)
        local lcmd=("$psp" load --server "127.0.0.1:$server_port" --workload "$profile" --app kv
          --workers "$serve_workers" --load "$load" --duration "$duration" --seed "$seed"
          --policy "$policy" --server-profile "$metrics" --calibrate "$calibrate" --json)
        timeout "$point_timeout" "${lcmd[@]}" >"$stem.load.json" 2>"$stem.load.err" || status=failed
        rps=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["offered_rps"])' \
          "$stem.load.json" 2>/dev/null || true)
      else
        status="failed (the server did not start)"
        local lcmd=(psp load)
      fi
      stop_server
      sim "$stem" "$profile" "$policy" "$load" "$serve_workers" "$rps" || status="$status, sim failed"
      point kv kv-measured "$policy" "$load" "$serve_workers" "$status" "$stem.load.json" \
        "$stem.sim.json" "$(quoted "${scmd[@]}") & $(quoted "${lcmd[@]}")" "$(quoted "${sim_cmd[@]}")" \
        "$stem.serve.json"
      say "kv load $load $policy: $status"
    done
  done
}

# mix KIND CLIENT REFERENCE: scripts/compare.py KIND, or a note why not.
mix() {
  local kind=$1 client=$2 reference=$3 dir="$out/mixes/$1"
  local tool missing=""
  for tool in "$client" taskset; do
    command -v "$tool" >/dev/null || missing="$missing $tool"
  done
  if [ -n "$missing" ]; then
    say "$kind: skipped, not installed:$missing (scripts/deps.sh installs the clients)"
    printf '%s\tnot installed:%s\n' "$kind" "$missing" >>"$out/skipped.tsv"
    return 0
  fi
  local systems=${MIX_SYSTEMS:-"psp:c-fcfs psp:darc-fair"}
  if [ -z "${MIX_SYSTEMS:-}" ] && [ "$d_reference" = 1 ] && command -v "$reference" >/dev/null; then
    systems="$systems ${kind}"
  fi
  mkdir -p "$dir"
  local env_args=(PSP="$psp" CORES="0-$((cores - 1))" WORKERS="$serve_workers" PORT="$port"
    SYSTEMS="$systems" PSP_ARGS="${idle_args[*]}" GETS="$gets" LRANGES="$lranges"
    CLIENTS="$clients" DURATION_S="$mix_seconds")
  local cmd=(env "${env_args[@]}" scripts/compare.py "$kind" "$dir")
  quoted "${cmd[@]}" >"$dir/command"
  if timeout 900 "${cmd[@]}" >"$dir/table.md" 2>"$dir/compare.err"; then
    say "$kind mix: ok"
  else
    say "$kind mix: failed (see $dir/compare.err)"
    printf '%s\tcompare.py failed: %s\n' "$kind" "$(tail -1 "$dir/compare.err")" >>"$out/skipped.tsv"
  fi
}

# -- Run, then report ----------------------------------------------------------

if [ "$report_only" = 0 ]; then
  [ -x "$psp" ] || die "no psp binary at $psp: cargo build --release -p psp-cli (or set PSP)"
  mkdir -p "$out"
  all_policies=""
  if [[ " $experiments " == *" fig6 "* ]]; then all_policies="$policies"; fi
  if [[ " $experiments " == *" kv "* ]]; then all_policies="$all_policies $kv_policies"; fi
  for p in $all_policies; do
    err=$("$psp" sim --workload high-bimodal --workers 1 --load 0.1 --duration 10ms --policy "$p" 2>&1 >/dev/null) ||
      die "policy '$p': $(tail -1 <<<"$err") (one new to the source needs cargo build --release -p psp-cli)"
  done
  rm -f "$out/runs.tsv" "$out/skipped.tsv"
  : >"$out/runs.tsv"
  : >"$out/skipped.tsv"
  started=$SECONDS
  check_machine
  printf '%s\n' "scale=$scale" "experiments=$experiments" "workers=$workers" \
    "serve_workers=$serve_workers" "duration=$duration" "seed=$seed" "idle=${idle:-default}" \
    >"$out/settings.txt"
  n_fig6=0
  if [[ " $experiments " == *" fig6 "* ]]; then
    n_fig6=$(($(wc -w <<<"$workloads") * $(wc -w <<<"$loads") * $(wc -w <<<"$policies")))
  fi
  say "SCALE=$scale: $n_fig6 fig6 points of $duration on $workers workers, then $experiments ($cores cores)"
  for e in $experiments; do
    case $e in
      fig6) fig6 ;;
      kv) kv ;;
      redis) mix redis redis-benchmark redis-server ;;
      memcached) mix memcached memcaslap memcached ;;
    esac
  done
  echo "elapsed_s=$((SECONDS - started))" >>"$out/settings.txt"
fi
[ -f "$out/runs.tsv" ] || die "$out holds no runs.tsv: not a testbed.sh directory"

python3 - "$out" <<'EOF'
import glob, json, math, os, sys

out = sys.argv[1]


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def tsv(name):
    path = os.path.join(out, name)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


machine = {"warnings": []}
for key, value in tsv("machine.tsv"):
    if key == "warning":
        machine["warnings"].append(value)
    else:
        machine[key] = value
settings = {}
if os.path.exists(os.path.join(out, "settings.txt")):
    for line in open(os.path.join(out, "settings.txt")):
        k, _, v = line.strip().partition("=")
        settings[k] = v


def figures(d):
    """The numbers of one point's JSON (psp run, psp load or psp sim)."""
    if d is None:
        return None
    return {
        "offered_rps": d.get("offered_rps"), "achieved_rps": d.get("achieved_rps"),
        "dropped": d.get("dropped"), "shed": d.get("shed"), "timeouts": d.get("timeouts"),
        "errors": d.get("errors"), "loss_fraction": d.get("loss_fraction"),
        "p999_slowdown": d.get("overall", {}).get("p999_slowdown"),
        "reservation_updates": d.get("extra", {}).get("reservation_updates"),
        "measured_utilization": d.get("extra", {}).get("measured_utilization"),
        "types": [{k: t.get(k) for k in ("name", "count", "p50_latency_us", "p99_latency_us",
                                          "p999_latency_us", "p999_slowdown", "dropped",
                                          "timeouts", "errors")}
                  for t in d.get("types", [])],
    }


def warnings_of(path):
    """The warnings a command printed on stderr (e.g. service times off)."""
    err = path.replace(".json", ".err")
    if not os.path.exists(err):
        return []
    return [l.strip() for l in open(err) if l.lstrip().startswith("warning")]


def server_figures(d):
    """psp serve's own counters: what it refused, shed or could not finish."""
    if d is None:
        return None
    keys = ("received", "completed", "overloaded", "shed_unanswered", "dropped_by_os",
            "truncated_dropped", "stranded", "handler_errors", "reservation_updates",
            "measured_utilization", "declared_utilization")
    return {k: d.get(k) for k in keys}


rows = {"fig6": [], "kv": []}
for (exp, workload, policy, ld, workers, status, run_json, sim_json, run_cmd,
     sim_cmd, server_json) in (r + [""] * (11 - len(r)) for r in tsv("runs.tsv")):
    run = figures(load(run_json))
    server = server_figures(load(server_json)) if server_json else None
    if run is not None and server is not None:
        # The server, not its client, knows the reservation updates.
        run["reservation_updates"] = server["reservation_updates"]
    rows[exp].append({
        "workload": workload, "policy": policy, "load": float(ld), "workers": int(workers),
        "status": status, "runtime": run, "sim": figures(load(sim_json)),
        "server": server,
        "runtime_warnings": warnings_of(run_json),
        "commands": {"runtime": run_cmd, "sim": sim_cmd},
        "files": {"runtime": os.path.relpath(run_json, out),
                  "sim": os.path.relpath(sim_json, out)},
    })
mixes, skipped = {}, {k: v for k, v in tsv("skipped.tsv")}
for kind in ("redis", "memcached"):
    d = load(os.path.join(out, "mixes", kind, "compare.json"))
    if d is not None:
        cmd = open(os.path.join(out, "mixes", kind, "command")).read().strip()
        table = open(os.path.join(out, "mixes", kind, "table.md")).read().strip()
        mixes[kind] = {"command": cmd, "table": table, **d}

report = {"machine": machine, "settings": settings, "experiments": rows, "mixes": mixes,
          "skipped": skipped}
with open(os.path.join(out, "report.json"), "w") as f:
    json.dump(report, f, indent=2)


def num(v, nd=1):
    if v is None:
        return "-"
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return str(v)
    return f"{v:,.{nd}f}" if isinstance(v, float) else f"{v:,}"


def p999(fig, name):
    if fig is None:
        return None
    return next((t["p999_latency_us"] for t in fig["types"] if t["name"] == name), None)


def lost(fig):
    if fig is None:
        return "-"
    return f"{num(fig['dropped'])} / {num(fig['shed'])} / {num(fig['timeouts'])}"


def svg_lines(path, title, series, ylabel):
    """p99.9 against load: one colour per policy, runtime solid, simulator
    dashed, log y; a marker on every point."""
    pts = [p for s in series for p in s[3] if p[1] and p[1] > 0]
    if not pts:
        return False
    w, h, left, right, top, bottom = 720, 380, 80, 170, 40, 50
    pw, ph = w - left - right, h - top - bottom
    xs = sorted({p[0] for p in pts})
    x0, x1 = (xs[0] - 0.05, xs[-1] + 0.05)
    lo = 10 ** math.floor(math.log10(min(p[1] for p in pts)))
    hi = 10 ** math.ceil(math.log10(max(p[1] for p in pts)))
    hi = hi * 10 if hi <= lo else hi
    X = lambda x: left + pw * (x - x0) / (x1 - x0)
    Y = lambda y: top + ph - ph * math.log10(y / lo) / math.log10(hi / lo)
    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
         f'font-family="DejaVu Sans, sans-serif" font-size="12">',
         f'<rect width="{w}" height="{h}" fill="white"/>',
         f'<text x="{left + pw / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>']
    for k in range(round(math.log10(hi / lo)) + 1):
        v = lo * 10 ** k
        s.append(f'<line x1="{left}" y1="{Y(v):.1f}" x2="{left + pw}" y2="{Y(v):.1f}" stroke="#ddd"/>')
        s.append(f'<text x="{left - 6}" y="{Y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    for x in xs:
        s.append(f'<text x="{X(x):.1f}" y="{top + ph + 18}" text-anchor="middle">{x:g}</text>')
    s.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="black"/>')
    s.append(f'<text x="{left + pw / 2}" y="{h - 10}" text-anchor="middle">load (fraction of peak)</text>')
    s.append(f'<text x="18" y="{top + ph / 2}" transform="rotate(-90 18 {top + ph / 2})" '
             f'text-anchor="middle">{ylabel}</text>')
    for i, (label, color, dashed, points) in enumerate(series):
        points = [(X(x), Y(y)) for x, y in points if y and y > 0]
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        if len(points) > 1:
            d = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
            s.append(f'<polyline points="{d}" fill="none" stroke="{color}" stroke-width="2"{dash}/>')
        for x, y in points:
            s.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{"white" if dashed else color}" '
                     f'stroke="{color}"/>')
        ly = top + 10 + 18 * i
        s.append(f'<line x1="{left + pw + 10}" y1="{ly}" x2="{left + pw + 34}" y2="{ly}" '
                 f'stroke="{color}" stroke-width="2"{dash}/>')
        s.append(f'<text x="{left + pw + 40}" y="{ly + 4}">{label}</text>')
    s.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(s) + "\n")
    return True


colors = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1"]
md = [f"# Testbed report: {out}", ""]
md += ["## Machine", "", "| | |", "|---|---|"]
md += [f"| {k} | {v} |" for k, v in machine.items() if k != "warnings"]
md += [""]
md += [f"- **warning**: {w}" for w in machine["warnings"]] or ["No warnings."]
md += ["", "## Settings", "", "| | |", "|---|---|"]
md += [f"| {k} | {v} |" for k, v in settings.items()]
md += [""]


def ratio(a, b):
    return f"{a / b:.2f}" if a is not None and b else "-"


def loss(fig):
    return "-" if fig is None or fig["loss_fraction"] is None else f"{100 * fig['loss_fraction']:.2f}"


points = [(exp, r) for exp in ("fig6", "kv") for r in rows[exp]]
if points:
    md += ["## Summary: the workload's first type, runtime against simulator", "",
           "| experiment | workload | load | policy | status | type | runtime p99.9 (us) "
           "| simulator p99.9 (us) | runtime / simulator | runtime loss (%) |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for exp, r in points:
        run, sim = r["runtime"], r["sim"]
        first = ((run or sim or {"types": [{"name": "-"}]})["types"] or [{"name": "-"}])[0]["name"]
        a, b = p999(run, first), p999(sim, first)
        md.append(f"| {exp} | {r['workload']} | {r['load']:g} | `{r['policy']}` | {r['status']} "
                  f"| {first} | {num(a)} | {num(b)} | {ratio(a, b)} | {loss(run)} |")
    md.append("")

titles = {
    "fig6": "Fig. 6 workloads: `psp run` (in-process generator) against `psp sim`",
    "kv": "kv: `psp serve --app kv` + `psp load` (its rate calibrated on the server's measured service times) against `psp sim` (the profiled workload at the same rate)",
}
plots = []
for exp in ("fig6", "kv"):
    if not rows[exp]:
        continue
    md += [f"## {titles[exp]}", "",
           "Cells: runtime / simulator. p99.9 latency in us per type; lost: dropped / shed / "
           "timeouts of the runtime; upd: DARC reservation updates the runtime made.", ""]
    for workload in dict.fromkeys(r["workload"] for r in rows[exp]):
        rs = [r for r in rows[exp] if r["workload"] == workload]
        types = []
        for r in rs:
            for fig in (r["runtime"], r["sim"]):
                for t in (fig or {"types": []})["types"]:
                    if t["name"] not in types:
                        types.append(t["name"])
        md += [f"### {workload} ({rs[0]['workers']} workers)", "",
               "| workload | load | policy | status | achieved / offered rps | "
               + " | ".join(f"{t} p99.9 (us)" for t in types)
               + " | p99.9 slowdown | lost | upd |",
               "|---|---|---|---|---|" + "---|" * len(types) + "---|---|---|"]
        for r in rs:
            run, sim = r["runtime"], r["sim"]
            cells = [f"{num(p999(run, t))} / {num(p999(sim, t))}" for t in types]
            rps = f"{num(run and run['achieved_rps'], 0)} / {num(run and run['offered_rps'], 0)}"
            slow = f"{num(run and run['p999_slowdown'])} / {num(sim and sim['p999_slowdown'])}"
            md.append(f"| {workload} | {r['load']:g} | `{r['policy']}` | {r['status']} | {rps} | "
                      + " | ".join(cells)
                      + f" | {slow} | {lost(run)} | {num(run and run['reservation_updates'])} |")
        md.append("")
        notes = {f"runtime: {w}" for r in rs for w in r["runtime_warnings"]}
        for r in rs:
            refused = {k: v for k, v in (r["server"] or {}).items()
                       if k in ("overloaded", "shed_unanswered", "dropped_by_os",
                                "truncated_dropped", "stranded") and v}
            if refused:
                notes.add(f"server at load {r['load']:g} under {r['policy']}: "
                          + ", ".join(f"{k} {v}" for k, v in refused.items()))
        md += [f"- {n}" for n in sorted(notes)]
        name = f"{exp}-{workload}.svg"
        series = []
        for i, policy in enumerate(dict.fromkeys(r["policy"] for r in rs)):
            prs = sorted((r for r in rs if r["policy"] == policy), key=lambda r: r["load"])
            for kind, dashed in (("runtime", False), ("sim", True)):
                series.append((f"{policy} ({'simulator' if dashed else 'runtime'})",
                               colors[i % len(colors)], dashed,
                               [(r["load"], (r[kind] or {}).get("p999_slowdown")) for r in prs]))
        if svg_lines(os.path.join(out, name), f"{workload}: overall p99.9 slowdown", series,
                     "p99.9 slowdown (log)"):
            plots.append(name)
            md += ["", f"![{name}]({name})"]
        md.append("")
    md += ["Commands:", "", "```"]
    if exp == "kv" and os.path.exists(os.path.join(out, "kv", "profile.cmd")):
        md.append(open(os.path.join(out, "kv", "profile.cmd")).read().strip())
    for r in rows[exp]:
        md += [r["commands"]["runtime"], r["commands"]["sim"]]
    md += ["```", ""]

for kind, d in mixes.items():
    md += [f"## {kind} mix: scripts/compare.py (the clients' own figures; no simulator)", "",
           d["table"], "", f"![{kind}](mixes/{kind}/compare.svg)", "", "```", d["command"],
           "```", ""]
if skipped:
    md += ["## Skipped or failed", ""] + [f"- {k}: {v}" for k, v in skipped.items()] + [""]
with open(os.path.join(out, "report.md"), "w") as f:
    f.write("\n".join(md))
n = sum(len(v) for v in rows.values())
print(f"testbed.sh: {n} points, {len(mixes)} mixes; wrote {out}/report.md, report.json"
      + (f", {len(plots)} plots" if plots else ""), file=sys.stderr)
EOF
