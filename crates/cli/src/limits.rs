//! Every number the command line takes, with its valid range, in one place.
//!
//! Each flag's range is a constant here ([`Count`], [`Real`] or [`Span`]), and
//! each kind of value is checked by one method, with one message:
//! `--flag must be in RANGE, not VALUE`. Bounds that involve several values (the
//! requests a point schedules, the request slots its queues preallocate, the
//! time slices a preemptive policy simulates) are checked here too. Every
//! command runs these checks before it starts any work, so nothing allocates,
//! spins or sleeps in proportion to an unchecked user number.
//!
//! Workload files are checked by `psp-workload` (`Workload::parse`) and policy
//! parameters by `psp-core` (`PolicySpec`'s parser), each in one place as well.
//!
//! A new flag is one constant (e.g. [`MAX_SERVICE`]) and one call:
//! `MAX_SERVICE.parse(&s)?`, or in `psp serve` (flag, else `--config` value)
//! `src.pick(&a.max_service, &f.max_service, |s| limits::MAX_SERVICE.parse(&s))?`.

use std::fmt;
use std::time::Duration;

use anyhow::{Result, bail};
use psp_core::PolicySpec;
use psp_workload::Workload;

use crate::units;

const US: u64 = 1_000;
const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;
const HOUR: u64 = 3_600 * S;
const DAY: u64 = 24 * HOUR;

/// An integer flag's range, `[min, max]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count {
    /// The flag, as users write it.
    pub flag: &'static str,
    /// Smallest valid value.
    pub min: u64,
    /// Largest valid value.
    pub max: u64,
}

impl Count {
    /// The range of `flag`.
    pub const fn new(flag: &'static str, min: u64, max: u64) -> Self {
        Self { flag, min, max }
    }

    /// `v`, when in range.
    ///
    /// # Errors
    /// `v` is out of range: the message names the flag and the range.
    pub fn check(&self, v: usize) -> Result<usize> {
        if (self.min..=self.max).contains(&(v as u64)) {
            Ok(v)
        } else {
            bail!("{} must be in {self}, not {v}", self.flag)
        }
    }
}

impl fmt::Display for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}, {}]", self.min, self.max)
    }
}

/// A real flag's range: `lo` and `hi`, each included or not.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Real {
    /// The flag, as users write it.
    pub flag: &'static str,
    /// Lower bound.
    pub lo: f64,
    /// Whether `lo` is valid.
    pub lo_included: bool,
    /// Upper bound.
    pub hi: f64,
    /// Whether `hi` is valid.
    pub hi_included: bool,
}

impl Real {
    /// `[lo, hi]`.
    pub const fn closed(flag: &'static str, lo: f64, hi: f64) -> Self {
        Self {
            flag,
            lo,
            lo_included: true,
            hi,
            hi_included: true,
        }
    }

    /// `(0, hi]`.
    pub const fn positive(flag: &'static str, hi: f64) -> Self {
        Self {
            lo_included: false,
            ..Self::closed(flag, 0.0, hi)
        }
    }

    /// Whether `v` is in range (NaN never is).
    pub fn contains(&self, v: f64) -> bool {
        let above = if self.lo_included {
            v >= self.lo
        } else {
            v > self.lo
        };
        let below = if self.hi_included {
            v <= self.hi
        } else {
            v < self.hi
        };
        above && below
    }

    /// `v`, when in range.
    ///
    /// # Errors
    /// `v` is out of range, NaN or infinite: the message names the flag and
    /// the range.
    pub fn check(&self, v: f64) -> Result<f64> {
        if self.contains(v) {
            Ok(v)
        } else {
            bail!("{} must be in {self}, not {}", self.flag, short_float(v))
        }
    }
}

impl fmt::Display for Real {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let open = if self.lo_included { '[' } else { '(' };
        let close = if self.hi_included { ']' } else { ')' };
        write!(
            f,
            "{open}{}, {}{close}",
            short_float(self.lo),
            short_float(self.hi)
        )
    }
}

/// `v` as written by hand: plain between 1e-3 and 1e7, else in exponent form
/// (`1e9`, `1e-300`).
fn short_float(v: f64) -> String {
    if v == 0.0 || !v.is_finite() || (1e-3..1e7).contains(&v.abs()) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// A duration flag's range, `[min_ns, max_ns]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// The flag, as users write it.
    pub flag: &'static str,
    /// Shortest valid duration, in ns.
    pub min_ns: u64,
    /// Longest valid duration, in ns.
    pub max_ns: u64,
}

impl Span {
    /// The range of `flag`.
    pub const fn new(flag: &'static str, min_ns: u64, max_ns: u64) -> Self {
        Self {
            flag,
            min_ns,
            max_ns,
        }
    }

    /// `s` (e.g. `1s`, `500ms`) in nanoseconds, when it parses and is in range.
    ///
    /// # Errors
    /// `s` does not parse or is out of range: the message names the flag and
    /// the range.
    pub fn parse_ns(&self, s: &str) -> Result<u64> {
        let ns =
            units::parse_duration_f64_ns(s).map_err(|e| anyhow::anyhow!("{}: {e}", self.flag))?;
        if (self.min_ns as f64..=self.max_ns as f64).contains(&ns) {
            Ok(ns.round() as u64)
        } else {
            bail!("{} must be in {self}, not '{}'", self.flag, s.trim())
        }
    }

    /// `s` as a [`Duration`], when it parses and is in range.
    ///
    /// # Errors
    /// As [`Span::parse_ns`].
    pub fn parse(&self, s: &str) -> Result<Duration> {
        self.parse_ns(s).map(Duration::from_nanos)
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}, {}]", human_ns(self.min_ns), human_ns(self.max_ns))
    }
}

/// `ns` in the largest unit that writes it whole, as the duration flags read it.
fn human_ns(ns: u64) -> String {
    match ns {
        0 => "0s".into(),
        n if n % S == 0 => format!("{}s", n / S),
        n if n % MS == 0 => format!("{}ms", n / MS),
        n if n % US == 0 => format!("{}us", n / US),
        n => format!("{n}ns"),
    }
}

// ------------------------------------------------------------- the ranges

/// `--workers`: application workers (the policies' worker sets are 128 bits).
pub const WORKERS: Count = Count::new("--workers", 1, psp_core::MAX_WORKERS as u64);
/// `--queue-capacity`: bound of each queue a policy keeps (see also
/// [`MAX_SLOTS`]).
pub const QUEUE_CAPACITY: Count = Count::new("--queue-capacity", 1, 1 << 20);
/// `--flows` of `psp load`: client sockets (two descriptors each).
pub const FLOWS: Count = Count::new("--flows", 1, 256);
/// `--flows` of the simulator and `psp run`: the arrivals' client flows (a
/// flow id is 16 bits).
pub const ARRIVAL_FLOWS: Count = Count::new("--flows", 1, psp_workload::MAX_FLOWS as u64);
/// `psp echo --threads`: echo server threads.
pub const ECHO_THREADS: Count = Count::new("--threads", 1, 256);
/// `psp sweep --threads`: simulator threads.
pub const SWEEP_THREADS: Count = Count::new("--threads", 1, 1024);
/// `psp bench --reps`.
pub const REPS: Count = Count::new("--reps", 1, 100);
/// `psp sweep --refine`: bisection steps per policy.
pub const REFINE: Count = Count::new("--refine", 0, 20);
/// `psp sweep --loads`: points per policy in the grid.
pub const LOAD_POINTS: Count = Count::new("--loads (number of loads)", 1, 1000);
/// `psp sweep --policies`, `psp bench --policies`: policies compared.
pub const POLICIES: Count = Count::new("--policies (number of policies)", 1, 32);
/// `psp bench --systems`: cost models each policy is timed under.
pub const SYSTEMS: Count = Count::new("--systems (number of systems)", 1, 8);
/// `psp netbench --rates`: rates tried.
pub const RATE_POINTS: Count = Count::new("--rates (number of rates)", 1, 64);
/// `--tcp-idle-timeout`.
pub const TCP_IDLE_TIMEOUT: Span = Span::new("--tcp-idle-timeout", 1_000 * MS, DAY);
/// `psp netbench --datapaths`: datapaths measured in one run.
pub const DATAPATHS: Count = Count::new("--datapaths (number of datapaths)", 1, 2);
/// `--cores`: core ids (below Linux's CPU_SETSIZE).
pub const CORE_ID: Count = Count::new("--cores (core id)", 0, 1023);
/// `--idle park:SPIN_US`: polling before parking, in µs.
pub const IDLE_SPIN_US: Count = Count::new("--idle park:SPIN_US", 0, 1_000_000);
/// `psp sim --clients`: closed-loop connections of each request type.
pub const CLIENTS: Count = Count::new(
    "--clients (connections per type)",
    0,
    psp_workload::MAX_CONNECTIONS_PER_TYPE as u64,
);
/// `psp sim --clients`: connections in all (each is a client flow).
pub const CLIENTS_TOTAL: Count = Count::new(
    "--clients (connections in all)",
    1,
    psp_workload::MAX_CONNECTIONS as u64,
);

/// `--load`: offered load as a fraction of the workload's peak.
pub const LOAD: Real = Real::positive("--load", 10.0);
/// `psp sweep --loads`: each load, as `--load`.
pub const SWEEP_LOAD: Real = Real {
    flag: "--loads",
    ..LOAD
};
/// `--rps`: offered requests per second (one per ns: the clock's resolution).
pub const RPS: Real = Real::positive("--rps", 1e9);
/// `psp netbench --rates`: each rate, as `--rps`.
pub const RATE: Real = Real::positive("--rates", 1e9);
/// `--warmup`: fraction of the arrival period discarded.
pub const WARMUP: Real = Real {
    hi_included: false,
    ..Real::closed("--warmup", 0.0, 1.0)
};
/// `--max-loss`: tolerated fraction of lost requests.
pub const MAX_LOSS: Real = Real::closed("--max-loss", 0.0, 1.0);
/// `--slo-slowdown`: bound on every type's p99.9 slowdown.
pub const SLO_SLOWDOWN: Real = Real::closed("--slo-slowdown", 1.0, 1e6);
/// `--slo-overall`: bound on the p99.9 slowdown over all requests.
pub const SLO_OVERALL: Real = Real::closed("--slo-overall", 1.0, 1e6);

/// `--duration` of a point (`sim`, `run`, `load`, `sweep`, `bench`, `netbench`):
/// the arrival period.
pub const DURATION: Span = Span::new("--duration", US, HOUR);
/// `--duration` of `psp serve` and `psp echo`: stop by itself after this long.
pub const SERVE_DURATION: Span = Span::new("--duration", MS, 7 * DAY);
/// `--stats-interval`: live statistics period.
pub const STATS_INTERVAL: Span = Span::new("--stats-interval", MS, HOUR);
/// `--interval` of `psp top`: time between two scrapes (the server publishes
/// a snapshot every 100 ms, so a shorter one shows nothing new).
pub const TOP_INTERVAL: Span = Span::new("--interval", 100 * MS, HOUR);
/// `--series-window`: window of `psp sim --series` (the number of windows is
/// bounded too, by psp-metrics).
pub const SERIES_WINDOW: Span = Span::new("--series-window", US, HOUR);
/// `--drain-timeout`: longest wait for admitted requests.
pub const DRAIN_TIMEOUT: Span = Span::new("--drain-timeout", MS, HOUR);
/// `--timeout`: how long the client waits for a response.
pub const TIMEOUT: Span = Span::new("--timeout", 10 * US, 60 * S);
/// `psp serve --max-service`: the spin application's cap on the service time a
/// request may ask for.
pub const MAX_SERVICE: Span = Span::new("--max-service", US, HOUR);
/// `--max-wait`: the longest a request may wait for its start (per type).
pub const MAX_WAIT: Span = Span::new("--max-wait", US, HOUR);
/// `psp load --calibrate`: the calibration run before the measured one.
pub const CALIBRATE: Span = Span::new("--calibrate", 100 * MS, 60 * S);
/// `psp sim --think`: closed-loop clients' mean think time.
pub const THINK: Span = Span::new("--think", 0, psp_workload::MAX_THINK_NS);

/// Most requests one point may schedule: the simulator and the client do work
/// (and the client keeps a record) per request; 1e8 is 10-20 s of simulation.
pub const MAX_REQUESTS: f64 = 1e8;
/// Most request slots a point's queues may preallocate:
/// `(types + 1 + workers) * queue capacity + workers` (the runtime's slab, about
/// 100 bytes a slot, and the policy's queues).
pub const MAX_SLOTS: u64 = 1 << 22;
/// Most quantum expiries a preemptive policy may make the simulator step
/// through in one point (expected requests x mean service / quantum).
pub const MAX_TIME_SLICES: f64 = 1e9;

// The application options' ranges belong to `psp-apps`, which checks them
// (`AppConfig::validate`, `profile`) before anything is opened; they are
// listed here for the reference's table (docs/guide/reference.md) only.

/// `--kv-keys`.
#[cfg(test)]
const KV_KEYS: Count = Count::new("--kv-keys", psp_apps::kv::MIN_KEYS, psp_apps::kv::MAX_KEYS);
/// `--kv-value-bytes`.
#[cfg(test)]
const KV_VALUE_BYTES: Count = Count::new(
    "--kv-value-bytes",
    psp_apps::kv::MIN_VALUE_BYTES,
    psp_apps::kv::MAX_VALUE_BYTES,
);
/// `--kv-max-scan`.
#[cfg(test)]
const KV_MAX_SCAN: Count = Count::new("--kv-max-scan", 1, psp_apps::kv::MAX_SCAN_KEYS);
/// `--tpcc-warehouses`.
#[cfg(test)]
const TPCC_WAREHOUSES: Count = Count::new(
    "--tpcc-warehouses",
    psp_apps::tpcc::MIN_WAREHOUSES,
    psp_apps::tpcc::MAX_WAREHOUSES as u64,
);
/// `--xdp-ring` (and a power of two; `psp-net` checks it).
#[cfg(test)]
const XDP_RING: Count = Count::new(
    "--xdp-ring",
    psp_net::xdp::RING_ENTRIES.0 as u64,
    psp_net::xdp::RING_ENTRIES.1 as u64,
);
/// `--xdp-tx-frames`.
#[cfg(test)]
const XDP_TX_FRAMES: Count = Count::new(
    "--xdp-tx-frames",
    psp_net::xdp::TX_FRAMES.0 as u64,
    psp_net::xdp::TX_FRAMES.1 as u64,
);
/// `--xdp-queues`.
#[cfg(test)]
const XDP_QUEUES: Count = Count::new("--xdp-queues", 1, psp_net::xdp::MAX_QUEUES as u64);
/// `--xdp-busy-poll` (µs).
#[cfg(test)]
const XDP_BUSY_POLL: Count = Count::new(
    "--xdp-busy-poll",
    psp_net::xdp::BUSY_POLL_US.0 as u64,
    psp_net::xdp::BUSY_POLL_US.1 as u64,
);
/// `--tcp-max-connections` (`psp-net` checks the TCP bounds).
#[cfg(test)]
const TCP_MAX_CONNECTIONS: Count = Count::new(
    "--tcp-max-connections",
    psp_net::tcp::CONNECTIONS.0 as u64,
    psp_net::tcp::CONNECTIONS.1 as u64,
);
/// `--tcp-max-request`.
#[cfg(test)]
const TCP_MAX_REQUEST: Count = Count::new(
    "--tcp-max-request",
    psp_net::tcp::MIN_REQUEST as u64,
    psp_net::tcp::MAX_REQUEST as u64,
);
/// `--tcp-max-pipeline`.
#[cfg(test)]
const TCP_MAX_PIPELINE: Count = Count::new(
    "--tcp-max-pipeline",
    psp_net::tcp::PIPELINE.0 as u64,
    psp_net::tcp::PIPELINE.1 as u64,
);
/// `--tcp-max-output`.
#[cfg(test)]
const TCP_MAX_OUTPUT: Count = Count::new(
    "--tcp-max-output",
    psp_net::tcp::OUTPUT.0 as u64,
    psp_net::tcp::OUTPUT.1 as u64,
);
/// `--tcp-batch`.
#[cfg(test)]
const TCP_BATCH: Count = Count::new(
    "--tcp-batch",
    psp_net::tcp::BATCH.0 as u64,
    psp_net::tcp::BATCH.1 as u64,
);
/// `psp profile --requests`.
#[cfg(test)]
const PROFILE_REQUESTS: Count = Count::new("--requests", 1, psp_apps::profile::MAX_REQUESTS);

/// Every integer range (docs/guide/reference.md's table is checked against these).
#[cfg(test)]
const COUNTS: &[Count] = &[
    WORKERS,
    QUEUE_CAPACITY,
    FLOWS,
    ARRIVAL_FLOWS,
    ECHO_THREADS,
    SWEEP_THREADS,
    REPS,
    REFINE,
    LOAD_POINTS,
    POLICIES,
    SYSTEMS,
    RATE_POINTS,
    DATAPATHS,
    CORE_ID,
    IDLE_SPIN_US,
    CLIENTS,
    CLIENTS_TOTAL,
    KV_KEYS,
    KV_VALUE_BYTES,
    KV_MAX_SCAN,
    TPCC_WAREHOUSES,
    PROFILE_REQUESTS,
    XDP_RING,
    XDP_TX_FRAMES,
    XDP_QUEUES,
    XDP_BUSY_POLL,
    TCP_MAX_CONNECTIONS,
    TCP_MAX_REQUEST,
    TCP_MAX_PIPELINE,
    TCP_MAX_OUTPUT,
    TCP_BATCH,
];
/// Every real range.
#[cfg(test)]
const REALS: &[Real] = &[
    LOAD,
    SWEEP_LOAD,
    RPS,
    RATE,
    WARMUP,
    MAX_LOSS,
    SLO_SLOWDOWN,
    SLO_OVERALL,
];
/// Every duration range.
#[cfg(test)]
const SPANS: &[Span] = &[
    DURATION,
    SERVE_DURATION,
    STATS_INTERVAL,
    DRAIN_TIMEOUT,
    MAX_WAIT,
    SERIES_WINDOW,
    TIMEOUT,
    MAX_SERVICE,
    TCP_IDLE_TIMEOUT,
    THINK,
    CALIBRATE,
];

// ---------------------------------------------------- bounds across values

/// The offered rate: `--load` (a fraction of `workload`'s peak on `workers`),
/// `--rps`, or 80% of peak when neither is given; at most [`RPS`]'s bound.
///
/// # Errors
/// A value out of range, or a load whose rate is above [`RPS`]'s bound.
pub fn offered_rate(
    load: Option<f64>,
    rps: Option<f64>,
    workload: &Workload,
    workers: usize,
) -> Result<f64> {
    match (load, rps) {
        (_, Some(r)) => RPS.check(r),
        (Some(l), None) => load_rate("--load", LOAD.check(l)?, workload, workers),
        (None, None) => load_rate("the default --load", 0.8, workload, workers),
    }
}

/// The rate of `load` (a fraction of `workload`'s peak on `workers`, given as
/// `flag`): at most [`RPS`]'s bound.
///
/// # Errors
/// A rate above [`RPS`]'s bound.
pub fn load_rate(flag: &str, load: f64, workload: &Workload, workers: usize) -> Result<f64> {
    let rate = load * workload.peak_rps(workers);
    if !RPS.contains(rate) {
        bail!(
            "{flag} {load} is {} requests/s on {workers} workers of '{}'; the offered rate must be in {RPS}",
            crate::report::rate_text(rate),
            workload.name
        );
    }
    Ok(rate)
}

/// Requests a point at `rate_rps` schedules in `duration_ns`: at most
/// [`MAX_REQUESTS`].
///
/// # Errors
/// More than [`MAX_REQUESTS`].
pub fn requests(rate_rps: f64, duration_ns: u64) -> Result<f64> {
    let n = rate_rps * duration_ns as f64 / 1e9;
    if n > MAX_REQUESTS {
        bail!(
            "--duration {} at {} requests/s schedules {} requests; at most {} per point (shorten --duration or lower the load)",
            human_ns(duration_ns),
            crate::report::rate_text(rate_rps),
            crate::report::rate_text(n),
            crate::report::rate_text(MAX_REQUESTS)
        );
    }
    Ok(n)
}

/// Requests a point of `workload` at `rate_rps` for `duration_ns` on
/// `workers` schedules: [`requests`] without phases; with phases, each phase's
/// rate ([`Workload::phase_rate_rps`]) must be within [`RPS`]'s bound and all
/// the phases together may schedule at most [`MAX_REQUESTS`] (`duration_ns` is
/// then not used: the phases' durations are).
///
/// # Errors
/// A phase rate out of range, or more than [`MAX_REQUESTS`].
pub fn point_requests(
    workload: &Workload,
    workers: usize,
    rate_rps: f64,
    duration_ns: u64,
) -> Result<f64> {
    if workload.phases.is_empty() {
        return requests(rate_rps, duration_ns);
    }
    let mut n = 0.0;
    for (k, (rate, d)) in workload
        .arrival_plan(rate_rps, duration_ns, workers)
        .into_iter()
        .enumerate()
    {
        if !RPS.contains(rate) {
            bail!(
                "workload '{}': phase '{}' offers {} requests/s on {workers} workers; the offered rate must be in {RPS}",
                workload.name,
                workload.phases[k].name,
                crate::report::rate_text(rate)
            );
        }
        n += rate * d as f64 / 1e9;
    }
    if n > MAX_REQUESTS {
        bail!(
            "workload '{}': its phases schedule {n:.3e} requests on {workers} workers; at most {MAX_REQUESTS:e} per point (shorten the phases or lower their rates)",
            workload.name
        );
    }
    Ok(n)
}

/// The work a simulated point does, phases included: its requests
/// ([`point_requests`]) and, for `ts`, its time slices (each phase's requests
/// x its mean service / quantum, summed) within [`MAX_TIME_SLICES`]. Returns
/// the requests.
///
/// # Errors
/// See [`point_requests`] and [`time_slices`].
pub fn point_work(
    spec: &PolicySpec,
    workload: &Workload,
    workers: usize,
    rate_rps: f64,
    duration_ns: u64,
) -> Result<f64> {
    let n = point_requests(workload, workers, rate_rps, duration_ns)?;
    if workload.phases.is_empty() {
        time_slices(spec, workload, n)?;
        return Ok(n);
    }
    let Some(quantum_ns) = sim_slice_ns(spec, workload) else {
        return Ok(n);
    };
    let slices: f64 = workload
        .arrival_plan(rate_rps, duration_ns, workers)
        .iter()
        .enumerate()
        .map(|(k, &(rate, d))| {
            rate * d as f64 / 1e9 * workload.phase(k).mean_service_ns() / quantum_ns.max(1) as f64
        })
        .sum();
    if slices > MAX_TIME_SLICES {
        bail!(
            "policy '{spec}': a {}us quantum cuts the {n:.3e} requests of '{}' into {slices:.3e} time slices; at most {MAX_TIME_SLICES:e} per point (raise quantum, shorten the phases or lower their rates)",
            quantum_ns as f64 / 1e3,
            workload.name
        );
    }
    Ok(n)
}

/// The shortest time slice the simulator may step through for `spec` on
/// `workload` ([`PolicySpec::shortest_slice_ns`] of its shortest type).
fn sim_slice_ns(spec: &PolicySpec, workload: &Workload) -> Option<u64> {
    let shortest = workload
        .type_infos()
        .iter()
        .filter_map(|t| t.mean_service_ns)
        .fold(f64::INFINITY, f64::min);
    spec.shortest_slice_ns(shortest)
}

/// The shortest quantum the real runtime honours: requests reach a
/// preemption point every [`psp_runtime::handler::DEFAULT_SPIN_POINT_NS`]
/// (the synthetic application's), so a shorter slice would only be a
/// slice of that length.
pub const MIN_RUNTIME_QUANTUM_NS: u64 = psp_runtime::handler::DEFAULT_SPIN_POINT_NS;

/// Checks that the runtime can honour `spec`'s quantum (Tiny Quanta's slice,
/// SYNERGY's fixed quantum when its dynamic quantum is off, a time-sharing
/// quantum): at least [`MIN_RUNTIME_QUANTUM_NS`].
///
/// # Errors
/// A shorter quantum.
pub fn runtime_quantum(spec: &PolicySpec) -> Result<()> {
    if let Some(q) = spec
        .fixed_quantum_ns()
        .filter(|&q| q < MIN_RUNTIME_QUANTUM_NS)
    {
        bail!(
            "policy '{spec}': a {}us quantum is shorter than the runtime can honour (requests reach a preemption point every {}us); use quantum >= {}",
            q as f64 / 1e3,
            MIN_RUNTIME_QUANTUM_NS as f64 / 1e3,
            MIN_RUNTIME_QUANTUM_NS as f64 / 1e3
        );
    }
    Ok(())
}

/// Closed-loop clients of `workload` from `--clients SPEC` and `--think THINK`:
/// each type's connections in [`CLIENTS`], all of them in [`CLIENTS_TOTAL`],
/// the think time in [`THINK`], and a workload without phases.
///
/// # Errors
/// A spec that does not parse ([`psp_workload::parse_connections`]) or a
/// value out of range.
pub fn clients(spec: &str, think: &str, workload: &Workload) -> Result<psp_workload::Clients> {
    let counts = psp_workload::parse_connections(spec, workload)
        .map_err(|e| anyhow::anyhow!("--clients: {e}"))?;
    for &n in &counts {
        CLIENTS.check(usize::try_from(n).unwrap_or(usize::MAX))?;
    }
    CLIENTS_TOTAL.check(counts.iter().sum::<u64>() as usize)?;
    let think_ns = THINK.parse_ns(think)?;
    // In range: the conversions cannot fail.
    let counts = counts.into_iter().map(|n| n as u32).collect();
    psp_workload::Clients::new(counts, think_ns, workload)
        .map_err(|e| anyhow::anyhow!("--clients: {e}"))
}

/// The work a closed-loop point does: an upper bound on the requests its
/// `clients` send in `duration_ns` (each type's connections complete a
/// request at most every mean service time plus think time, all of them at
/// most `workers` per shortest mean service time; refused requests, possible
/// when the connections outnumber a queue or the receive ring, come back
/// after [`psp_workload::RETRY_NS`] plus think time) within
/// [`MAX_REQUESTS`], and for a preemptive `spec` its time slices within
/// [`MAX_TIME_SLICES`]. Returns the bound.
///
/// # Errors
/// More than [`MAX_REQUESTS`] requests or [`MAX_TIME_SLICES`] slices.
pub fn closed_loop_work(
    spec: &PolicySpec,
    workload: &Workload,
    clients: &psp_workload::Clients,
    workers: usize,
    receive_capacity: usize,
    duration_ns: u64,
) -> Result<f64> {
    let think_s = clients.think_ns() as f64 / 1e9;
    let mut loops = 0.0;
    let mut retries = 0.0;
    let mut shortest = f64::INFINITY;
    for (t, &n) in workload.types.iter().zip(clients.connections()) {
        if n == 0 {
            continue;
        }
        let service_s = t.service.mean_us() / 1e6;
        shortest = shortest.min(service_s);
        loops += f64::from(n) / (service_s + think_s);
        retries += f64::from(n) / (psp_workload::RETRY_NS as f64 / 1e9 + think_s);
    }
    let mut rate = loops.min(workers as f64 / shortest);
    if clients.total() as usize > receive_capacity {
        rate += retries;
    }
    let n = rate * duration_ns as f64 / 1e9;
    if n > MAX_REQUESTS {
        bail!(
            "--clients {} for --duration {} may send up to {n:.3e} requests; at most {MAX_REQUESTS:e} per point (shorten --duration or use fewer connections)",
            clients.total(),
            human_ns(duration_ns)
        );
    }
    time_slices(spec, workload, n)?;
    Ok(n)
}

/// Request slots a point preallocates: at most [`MAX_SLOTS`].
///
/// # Errors
/// More than [`MAX_SLOTS`].
pub fn slots(types: usize, workers: usize, queue_capacity: usize) -> Result<u64> {
    let n = psp_runtime::runtime::request_slots(types, workers, queue_capacity);
    if n > MAX_SLOTS {
        bail!(
            "--queue-capacity {queue_capacity} with {workers} workers and {types} request types needs {n} request slots; at most {MAX_SLOTS} (lower --queue-capacity)"
        );
    }
    Ok(n)
}

/// Quantum expiries the simulator steps through for `spec` when `requests`
/// requests of `workload` run: at most [`MAX_TIME_SLICES`].
///
/// # Errors
/// More than [`MAX_TIME_SLICES`].
pub fn time_slices(spec: &PolicySpec, workload: &Workload, requests: f64) -> Result<f64> {
    let Some(quantum_ns) = sim_slice_ns(spec, workload) else {
        return Ok(0.0);
    };
    let n = requests * workload.mean_service_ns() / quantum_ns.max(1) as f64;
    if n > MAX_TIME_SLICES {
        bail!(
            "policy '{spec}': a {}us quantum cuts {requests:.3e} requests of '{}' into {n:.3e} time slices; at most {MAX_TIME_SLICES:e} per point (raise quantum, shorten --duration or lower the load)",
            quantum_ns as f64 / 1e3,
            workload.name
        );
    }
    Ok(n)
}

/// `--idle`: spin, yield, park or park:SPIN_US with SPIN_US in [`IDLE_SPIN_US`].
///
/// # Errors
/// Not an idle strategy, or a spin out of range.
pub fn idle(s: &str) -> Result<psp_runtime::IdleStrategy> {
    let idle: psp_runtime::IdleStrategy = s.parse().map_err(|e: String| anyhow::anyhow!(e))?;
    if let psp_runtime::IdleStrategy::SpinPark { spin_us, .. } = idle {
        IDLE_SPIN_US.check(spin_us as usize)?;
    }
    Ok(idle)
}

/// `--poll-yield`: auto, on or off.
///
/// # Errors
/// Not one of them.
pub fn poll_yield(s: &str) -> Result<psp_runtime::PollYield> {
    s.parse()
        .map_err(|e: String| anyhow::anyhow!("--poll-yield: {e}"))
}

/// `--inline-worker`: auto, on or off.
///
/// # Errors
/// Not one of them.
pub fn inline_worker(s: &str) -> Result<psp_runtime::InlineWorker> {
    s.parse()
        .map_err(|e: String| anyhow::anyhow!("--inline-worker: {e}"))
}

/// `--tcp-size-classes SHORT,BIG`: the elements up to which a command that
/// walks its keys is `short`, and past which it is `big`.
///
/// # Errors
/// Not two integers, or out of range (one line).
pub fn size_classes(s: &str) -> Result<psp_proto::SizeBounds> {
    let parsed = s
        .split_once(',')
        .and_then(|(a, b)| Some((a.trim().parse().ok()?, b.trim().parse().ok()?)));
    let Some((short, big)) = parsed else {
        anyhow::bail!("--tcp-size-classes must be SHORT,BIG (two integers), not '{s}'");
    };
    psp_proto::SizeBounds::new(short, big).map_err(|e| anyhow::anyhow!("--tcp-size-classes: {e}"))
}

/// `--max-wait`: per request type (in `types`' order), the longest a
/// request may wait from its arrival to its start. `DUR` bounds every type,
/// `TYPE=DUR,...` the types named (the others are unbounded), and
/// `DUR,TYPE=DUR,...` every type with exceptions; `TYPE=none` leaves a type
/// unbounded. Type names match without regard to case.
///
/// # Errors
/// A duration out of [`MAX_WAIT`]'s range, an unknown or repeated type, two
/// bare durations.
pub fn max_wait(s: &str, types: &[String]) -> Result<Vec<Option<Duration>>> {
    let mut every: Option<Option<Duration>> = None;
    let mut named: Vec<Option<Option<Duration>>> = vec![None; types.len()];
    for part in s.split(',').map(str::trim) {
        let (name, value) = match part.split_once('=') {
            Some((n, v)) => (Some(n.trim()), v.trim()),
            None => (None, part),
        };
        let bound = if value.eq_ignore_ascii_case("none") {
            None
        } else {
            Some(MAX_WAIT.parse(value)?)
        };
        match name {
            None if every.is_some() => {
                bail!("--max-wait: one duration for every type at most, not '{s}'")
            }
            None => every = Some(bound),
            Some(n) => {
                let Some(t) = types.iter().position(|t| t.eq_ignore_ascii_case(n)) else {
                    bail!(
                        "--max-wait: no request type '{n}' (types: {})",
                        types.join(", ")
                    )
                };
                if named[t].replace(bound).is_some() {
                    bail!("--max-wait: type '{n}' given twice");
                }
            }
        }
    }
    let every = every.flatten();
    Ok(named.into_iter().map(|b| b.unwrap_or(every)).collect())
}

/// Smallest non-zero `--max-memory`.
pub const MAX_MEMORY_MIN: usize = 1 << 20;
/// Largest `--max-memory`.
pub const MAX_MEMORY_MAX: usize = 1 << 40;

/// `--max-memory`: bytes with an optional unit (b, kb, mb, gb, tb; powers
/// of 1024, as Redis's `maxmemory`), 0 or in [1mb, 1tb].
///
/// # Errors
/// Not a size, or out of range.
pub fn max_memory(s: &str) -> Result<usize> {
    let t = s.trim().to_ascii_lowercase();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let shift = match unit {
        "" | "b" => 0,
        "k" | "kb" => 10,
        "m" | "mb" => 20,
        "g" | "gb" => 30,
        "t" | "tb" => 40,
        _ => bail!("--max-memory must be a size such as 512mb or 2gb, not '{s}'"),
    };
    let n: u64 = num.parse().map_err(|_| {
        anyhow::anyhow!("--max-memory must be a size such as 512mb or 2gb, not '{s}'")
    })?;
    let bytes = n
        .checked_mul(1 << shift)
        .and_then(|b| usize::try_from(b).ok())
        .filter(|&b| b == 0 || (MAX_MEMORY_MIN..=MAX_MEMORY_MAX).contains(&b))
        .ok_or_else(|| anyhow::anyhow!("--max-memory must be 0 or in [1mb, 1tb], not '{s}'"))?;
    Ok(bytes)
}

/// `--maxmemory-policy`: noeviction or allkeys-lru.
///
/// # Errors
/// Not one of them.
pub fn maxmemory_policy(s: &str) -> Result<psp_proto::db::Eviction> {
    match s {
        "noeviction" => Ok(psp_proto::db::Eviction::NoEviction),
        "allkeys-lru" => Ok(psp_proto::db::Eviction::AllKeysLru),
        _ => bail!("--maxmemory-policy must be noeviction or allkeys-lru, not '{s}'"),
    }
}

/// Loads as fractions of peak: `START:END:STEP` (inclusive) or `A,B,C`; each
/// in [`SWEEP_LOAD`], at most [`LOAD_POINTS`] of them (counted before
/// any is made).
///
/// # Errors
/// A number that does not parse, a load out of range, or too many loads.
pub fn parse_loads(s: &str) -> Result<Vec<f64>> {
    let loads: Vec<f64> = if let [a, b, step] = s.split(':').collect::<Vec<_>>()[..] {
        let (a, b, step): (f64, f64, f64) = (load_number(a)?, load_number(b)?, load_number(step)?);
        SWEEP_LOAD.check(a)?;
        SWEEP_LOAD.check(b)?;
        if !(step > 0.0 && b >= a) {
            bail!("--loads range '{s}' needs START <= END and STEP > 0");
        }
        load_range(a, b, step)?
    } else {
        LOAD_POINTS.check(s.split(',').count())?;
        s.split(',').map(load_number).collect::<Result<_>>()?
    };
    for &l in &loads {
        SWEEP_LOAD.check(l)?;
    }
    Ok(loads)
}

/// Loads from `start` to `end` (inclusive) by `step` > 0, each rounded to
/// 1e-9 so that a grid's loads print as typed; at most
/// [`LOAD_POINTS`] of them (counted before any is made).
///
/// # Errors
/// Too many loads.
pub fn load_range(start: f64, end: f64, step: f64) -> Result<Vec<f64>> {
    let n = ((end - start) / step + 1e-9).floor();
    LOAD_POINTS.check((n as usize).saturating_add(1))?;
    Ok((0..=n as usize)
        .map(|i| ((start + i as f64 * step) * 1e9).round() / 1e9)
        .collect())
}

fn load_number(s: &str) -> Result<f64> {
    s.trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("--loads: cannot parse number '{s}'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads() {
        assert_eq!(parse_loads("0.1:0.3:0.1").unwrap(), vec![0.1, 0.2, 0.3]);
        assert_eq!(parse_loads("0.5,0.9").unwrap(), vec![0.5, 0.9]);
        for bad in [
            "0:1:0.5",
            "0.5:0.1:0.1",
            "x",
            "0.1:1:0",
            "-1",
            "0.000001:10:0.000001",
            "0.1:1:1e-300",
            "0.5,1e9",
            "nan",
            "0.1:inf:0.1",
        ] {
            let e = parse_loads(bad).unwrap_err().to_string();
            assert!(e.contains("--loads"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_point_too_big_is_refused_with_rates_and_counts_a_reader_can_read() {
        // An hour at 35,190 requests/s: 126.7 million requests.
        let e = requests(35_190.0, 3_600_000_000_000)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("35.19k requests/s schedules 126.68M requests; at most 100.00M per point"),
            "{e}"
        );
        assert!(!e.contains("e4") && !e.contains("e8"), "{e}");
    }

    #[test]
    fn size_classes_are_two_ordered_bounds_in_range() {
        let b = size_classes("4, 1000").unwrap();
        assert_eq!((b.short, b.big), (4, 1000));
        for bad in [
            "0,10",
            "10,10",
            "11,10",
            "1,1000000001",
            "32",
            "a,b",
            "1,2,3",
        ] {
            let e = size_classes(bad).expect_err(bad).to_string();
            assert!(
                e.starts_with("--tcp-size-classes") && !e.contains('\n'),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn max_memory_sizes_and_their_range() {
        assert_eq!(max_memory("0").unwrap(), 0);
        assert_eq!(max_memory("64mb").unwrap(), 64 << 20);
        assert_eq!(max_memory("2GB").unwrap(), 2 << 30);
        assert_eq!(max_memory("1048576").unwrap(), 1 << 20);
        for bad in ["1kb", "2tb", "-1", "12xb", "", "mb", "99999999999999999999"] {
            assert!(max_memory(bad).is_err(), "{bad}");
        }
        assert!(maxmemory_policy("allkeys-lru").is_ok());
        assert!(maxmemory_policy("volatile-lru").is_err());
    }

    #[test]
    fn max_wait_bounds_every_type_some_types_or_every_type_with_exceptions() {
        let types: Vec<String> = ["short", "multi", "range"].map(String::from).to_vec();
        let ms = |n| Some(Duration::from_millis(n));
        assert_eq!(max_wait("50ms", &types).unwrap(), vec![ms(50); 3]);
        assert_eq!(
            max_wait("SHORT=1ms,range=2s", &types).unwrap(),
            vec![ms(1), None, ms(2_000)]
        );
        assert_eq!(
            max_wait("10ms, range=none", &types).unwrap(),
            vec![ms(10), ms(10), None]
        );
        for (bad, says) in [
            ("0s", "--max-wait must be in"),
            ("3601s", "--max-wait must be in"),
            ("get=1ms", "no request type 'get'"),
            ("short=1ms,short=2ms", "given twice"),
            ("1ms,2ms", "one duration"),
            ("short=", "--max-wait"),
        ] {
            let e = max_wait(bad, &types).expect_err(bad).to_string();
            assert!(e.contains(says) && !e.contains('\n'), "{bad}: {e}");
        }
    }

    #[test]
    fn ranges_are_well_formed_and_their_bounds_behave() {
        for c in COUNTS {
            assert!(c.min <= c.max, "{}", c.flag);
            assert!(c.check(c.min as usize).is_ok() && c.check(c.max as usize).is_ok());
            let e = c.check(c.max as usize + 1).unwrap_err().to_string();
            assert!(e.contains(c.flag) && e.contains(&c.to_string()), "{e}");
            if c.min > 0 {
                assert!(c.check(c.min as usize - 1).is_err(), "{}", c.flag);
            }
        }
        for r in REALS {
            assert!(r.lo < r.hi, "{}", r.flag);
            for bad in [
                f64::NAN,
                f64::INFINITY,
                f64::NEG_INFINITY,
                r.hi * 2.0 + 1.0,
                r.lo - 1.0,
            ] {
                let e = r.check(bad).unwrap_err().to_string();
                assert!(e.contains(r.flag) && e.contains(&r.to_string()), "{e}");
            }
            assert_eq!(r.check(r.lo).is_ok(), r.lo_included, "{}", r.flag);
            assert_eq!(r.check(r.hi).is_ok(), r.hi_included, "{}", r.flag);
            assert!(r.check((r.lo + r.hi) / 2.0).is_ok(), "{}", r.flag);
        }
        for s in SPANS {
            assert!(s.min_ns < s.max_ns, "{}", s.flag);
            assert_eq!(s.parse_ns(&human_ns(s.min_ns)).unwrap(), s.min_ns);
            assert_eq!(s.parse_ns(&human_ns(s.max_ns)).unwrap(), s.max_ns);
            // A span from 0 (`--think`) takes 0, which `0` may spell, and
            // what rounds to it.
            let below: Vec<String> = if s.min_ns > 0 {
                vec![format!("{}ns", s.min_ns - 1), "0".into(), "1e-300s".into()]
            } else {
                vec!["-1ns".into(), "-0.5us".into()]
            };
            for bad in below.into_iter().chain([
                format!("{}ns", s.max_ns + 1),
                "99999999999999s".into(),
                "1e300s".into(),
                "nan".into(),
                "inf".into(),
                "-1s".into(),
                "soon".into(),
            ]) {
                let e = s.parse_ns(&bad).unwrap_err().to_string();
                assert!(e.contains(s.flag), "{bad}: {e}");
            }
        }
        assert_eq!(DURATION.to_string(), "[1us, 3600s]");
    }

    mod properties {
        use super::*;
        use crate::{Mode, OfferedLoad, PointArgs, PolicyPoint};
        use proptest::prelude::*;

        /// Mostly 10^x for x in `exp` (across a range's bounds), sometimes a
        /// special or arbitrary value.
        fn real(exp: std::ops::Range<f64>) -> impl Strategy<Value = f64> {
            prop_oneof![
                6 => exp.prop_map(|x| 10f64.powf(x)),
                1 => prop_oneof![
                    Just(0.0),
                    Just(-1.0),
                    Just(1e-300),
                    Just(1e308),
                    Just(f64::INFINITY),
                    Just(f64::NAN),
                    any::<f64>(),
                ],
            ]
        }

        fn toml_float(v: f64) -> String {
            match v {
                v if v.is_nan() => "nan".into(),
                v if v.is_infinite() => if v > 0.0 { "inf" } else { "-inf" }.into(),
                v => format!("{v:?}"),
            }
        }

        /// A workload of `n` types with arbitrary fixed or exponential means and
        /// ratios 1/n.
        fn workload() -> impl Strategy<Value = String> {
            (
                prop_oneof![6 => 1usize..4, 1 => 60usize..70],
                prop::collection::vec((real(-3.2..6.2), any::<bool>()), 1..4),
            )
                .prop_map(|(n, services)| {
                    let mut t = String::from("name = \"w\"\n");
                    for i in 0..n {
                        let (us, fixed) = services[i % services.len()];
                        let svc = if fixed {
                            format!("dist = \"fixed\", us = {}", toml_float(us))
                        } else {
                            format!("dist = \"exponential\", mean_us = {}", toml_float(us))
                        };
                        t.push_str(&format!(
                            "[[types]]\nname = \"t{i}\"\nratio = {}\nservice = {{ {svc} }}\n",
                            toml_float(1.0 / n as f64)
                        ));
                    }
                    t
                })
        }

        fn duration() -> impl Strategy<Value = String> {
            prop_oneof![
                real(-7.0..4.0).prop_map(|v| format!("{v}s")),
                real(-1.0..13.0).prop_map(|v| format!("{v}ns")),
                Just("99999999999999s".to_string()),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(1024))]

            /// Whatever the flags and the workload, a point is either rejected
            /// or within every bound: the work it does (requests, time slices)
            /// and the memory it preallocates (request slots) are bounded.
            #[test]
            fn an_accepted_point_is_within_every_bound(
                text in workload(),
                workers in prop_oneof![6 => 1usize..=128, 1 => 0usize..200, 1 => any::<usize>()],
                queue_capacity in prop_oneof![
                    4 => 0usize..5000,
                    1 => 0usize..2_000_000,
                    1 => any::<usize>(),
                ],
                duration in duration(),
                warmup in prop_oneof![3 => 0.0f64..1.0, 1 => real(-3.0..1.0)],
                (load, rps) in prop_oneof![
                    (prop::option::of(real(-3.0..1.5)), Just(None)),
                    (Just(None), prop::option::of(real(-1.0..10.0))),
                ],
                policy in prop::sample::select(&[
                    "darc", "c-fcfs", "d-fcfs", "fp", "edf", "ts", "ts:quantum=0.1",
                    "ts-block:1", "darc-static:1",
                ][..]),
            ) {
                let Ok(w) = Workload::parse(&text, "w") else { return Ok(()) };
                let point = PolicyPoint {
                    point: PointArgs {
                        workload: "w".into(),
                        workers: Some(workers),
                        duration,
                        seed: 1,
                        warmup,
                        queue_capacity,
                        ..crate::default_point_args()
                    },
                    policy: policy.into(),
                    offered: OfferedLoad { load, rps },
                };
                let Ok((w, spec, cfg)) = point.resolve_with(w, Mode::Sim) else {
                    return Ok(());
                };
                let requests = cfg.rate_rps * cfg.duration_ns as f64 / 1e9;
                prop_assert!(cfg.rate_rps > 0.0 && cfg.rate_rps <= RPS.hi);
                prop_assert!(requests <= MAX_REQUESTS);
                prop_assert!((1..=psp_core::MAX_WORKERS).contains(&cfg.workers));
                prop_assert!(w.types.len() <= psp_workload::MAX_TYPES);
                prop_assert!(
                    (w.types.len() + 1 + cfg.workers) as u64 * cfg.queue_capacity as u64
                        + cfg.workers as u64
                        <= MAX_SLOTS
                );
                prop_assert!(cfg.duration_ns >= DURATION.min_ns && cfg.duration_ns <= DURATION.max_ns);
                prop_assert!((0.0..1.0).contains(&cfg.warmup_fraction));
                let mean = w.mean_service_ns();
                prop_assert!((1.0..=1e9).contains(&mean), "mean {}", mean);
                if let Some(q) = spec.fixed_quantum_ns() {
                    prop_assert!(requests * mean / q as f64 <= MAX_TIME_SLICES);
                }
            }
        }
    }

    /// The reference's table of ranges (docs/guide/reference.md) says what
    /// these constants say.
    #[test]
    fn the_reference_lists_every_range() {
        let reference = include_str!("../../../docs/guide/reference.md");
        let rows = COUNTS
            .iter()
            .map(|c| (c.flag, c.to_string()))
            .chain(REALS.iter().map(|r| (r.flag, r.to_string())))
            .chain(SPANS.iter().map(|s| (s.flag, s.to_string())));
        for (flag, range) in rows {
            let row = format!("| `{flag}` | {range} |");
            assert!(
                reference.contains(&row),
                "docs/guide/reference.md lacks the row '{row}'"
            );
        }
    }

    /// The reference's list of policy parameters, from the policies' tables:
    /// one row per parameter; policies with the same table (`darc`, `darc+`)
    /// share rows, each with its own default.
    fn policy_parameter_table() -> String {
        use psp_core::policy::{Accepts, Form, ParamInfo, parameters};
        let params = parameters();
        // Policies in order, each with its rows.
        let mut policies: Vec<(&str, Vec<&ParamInfo>)> = Vec::new();
        for p in &params {
            match policies.last_mut() {
                Some((name, rows)) if *name == p.policy => rows.push(p),
                _ => policies.push((p.policy, vec![p])),
            }
        }
        let same_table = |a: &[&ParamInfo], b: &[&ParamInfo]| {
            a.len() == b.len()
                && a.iter().zip(b).all(|(x, y)| {
                    (x.key, x.form, &x.accepts, x.doc) == (y.key, y.form, &y.accepts, y.doc)
                })
        };
        let mut out = String::from(
            "  | policy | parameter | values | default | what it sets |\n  |---|---|---|---|---|\n",
        );
        let mut i = 0;
        while i < policies.len() {
            let mut group = vec![&policies[i]];
            while i + group.len() < policies.len()
                && same_table(&policies[i].1, &policies[i + group.len()].1)
            {
                group.push(&policies[i + group.len()]);
            }
            i += group.len();
            let names: Vec<String> = group.iter().map(|(n, _)| format!("`{n}`")).collect();
            for (row, p) in group[0].1.iter().enumerate() {
                let param = match p.form {
                    Form::Keyed => format!("`{}`", p.key),
                    Form::Leading => format!("`{}` (first, alone)", p.key),
                    Form::Bare => format!("`{}` (alone)", p.key),
                };
                let values = match &p.accepts {
                    Accepts::Real(r) => r.to_string(),
                    Accepts::Integer(r) => format!("integer in {r}"),
                    Accepts::Names(n) => {
                        let n: Vec<String> = n.iter().map(|v| format!("`{v}`")).collect();
                        n.join(", ")
                    }
                };
                let default_of = |rows: &[&ParamInfo]| match (&rows[row].default, p.form) {
                    (_, Form::Leading) => "required".to_string(),
                    (Some(d), _) => d.clone(),
                    (None, _) => "unset".to_string(),
                };
                let defaults: Vec<String> =
                    group.iter().map(|(_, rows)| default_of(rows)).collect();
                let default = if defaults.iter().all(|d| *d == defaults[0]) {
                    defaults[0].clone()
                } else {
                    let each: Vec<String> = names
                        .iter()
                        .zip(&defaults)
                        .map(|(n, d)| format!("{n}: {d}"))
                        .collect();
                    each.join(", ")
                };
                let cells = [names.join(", "), param, values, default, p.doc.to_string()];
                assert!(cells.iter().all(|c| !c.contains('|')), "{cells:?}");
                out.push_str(&format!("  | {} |\n", cells.join(" | ")));
            }
        }
        out
    }

    /// The reference's list of policy parameters is the policies' tables.
    #[test]
    fn the_reference_lists_every_policy_parameter() {
        let reference = include_str!("../../../docs/guide/reference.md");
        let (begin, end) = (
            "  <!-- policy parameters: begin -->\n",
            "  <!-- policy parameters: end -->",
        );
        let listed = reference
            .split_once(begin)
            .and_then(|(_, rest)| rest.split_once(end))
            .map(|(list, _)| list)
            .expect("docs/guide/reference.md marks its policy parameter list");
        let expected = policy_parameter_table();
        assert!(
            listed == expected,
            "docs/guide/reference.md's policy parameters disagree with the policies' tables; \
             between the markers it should read:\n{expected}"
        );
        // Every parameter of every policy is in it.
        for p in psp_core::policy::parameters() {
            assert!(
                listed.contains(&format!("`{}`", p.key)),
                "{}: {}",
                p.policy,
                p.key
            );
        }
    }

    #[test]
    fn cross_value_bounds() {
        let w = Workload::resolve("extreme-bimodal").unwrap();
        assert!(offered_rate(Some(1e9), None, &w, 16).is_err());
        assert!(offered_rate(None, Some(1e12), &w, 16).is_err());
        assert!(offered_rate(Some(10.0), None, &w, 128).is_ok()); // 4.3e8/s
        assert!(offered_rate(Some(0.5), None, &w, 16).is_ok());
        let tiny = Workload::fixed("tiny", &[("a", 0.001, 1.0)]);
        let e = offered_rate(None, None, &tiny, 128)
            .unwrap_err()
            .to_string();
        assert!(e.contains("the default --load"), "{e}");
        assert!(requests(1e9, S).is_err());
        assert!(requests(5e6, S).is_ok());
        // Phases: their durations and rates count, not --duration's.
        let wc = Workload::resolve("workload-change").unwrap();
        let n = point_requests(&wc, 16, 1.0, HOUR).unwrap();
        // 80% of peak: 5 s at 16 / 50.5 us twice, 16 / 99.505 us, 16 / 100 us.
        let expect = 0.8 * 5.0 * 16e6 * (2.0 / 50.5 + 1.0 / 99.505 + 1.0 / 100.0);
        assert!((n / expect - 1.0).abs() < 1e-9, "{n} vs {expect}");
        let big = Workload::parse(
            "name = \"b\"\n[[types]]\nname = \"a\"\nratio = 1\nservice = { dist = \"fixed\", us = 1.0 }\n[[phases]]\nduration_s = 1\nrps = 6e7\n[[phases]]\nduration_s = 1\n",
            "t",
        )
        .unwrap();
        assert!(point_requests(&big, 1, 3e7, US).is_ok());
        let too_many = point_requests(&big, 1, 5e7, US).unwrap_err().to_string();
        assert!(too_many.contains("phases schedule"), "{too_many}");
        let fast = Workload::parse(
            "name = \"f\"\n[[types]]\nname = \"a\"\nratio = 1\nservice = { dist = \"fixed\", us = 0.001 }\n[[phases]]\nduration_s = 1e-6\nload = 10\n",
            "t",
        )
        .unwrap();
        let e = point_requests(&fast, 128, 1.0, S).unwrap_err().to_string();
        assert!(e.contains("phase 'phase 0' offers"), "{e}");
        let ts: PolicySpec = "ts:quantum=0.1".parse().unwrap();
        assert!(point_work(&ts, &wc, 16, 1.0, US).is_err());
        assert!(point_work(&"darc".parse().unwrap(), &wc, 16, 1.0, US).is_ok());
        assert!(slots(2, 16, 99_999_999_999).is_err());
        assert!(slots(2, 16, 4096).is_ok());
        assert!(slots(usize::MAX, usize::MAX, usize::MAX).is_err());
        let ts: PolicySpec = "ts:quantum=0.1".parse().unwrap();
        assert!(time_slices(&ts, &w, 5e7).is_err());
        assert!(time_slices(&"ts".parse().unwrap(), &w, 5e6).is_ok());
        assert_eq!(time_slices(&"darc".parse().unwrap(), &w, 1e8).unwrap(), 0.0);
        assert!(idle("park:99999999").is_err());
        assert!(idle("park:10").is_ok());
    }
}
