//! Policy names and parameters as users write them, e.g. `darc`,
//! `darc:delta=0.2,round=ceil`, `darc-static:2`, `ts:sq,quantum=5,cost=1`,
//! `ts-block:4`. Parsing validates once; [`PolicySpec::build`] makes the policy.
//!
//! Every numeric parameter has a range, checked here in one way (the `real`,
//! `count` and `micros` helpers with a [`ParamRange`]): NaN, infinities and
//! out-of-range values are errors that name the parameter and its range, never
//! silently capped. The ranges are listed in [`PARAM_RANGES`].

use std::fmt;
use std::str::FromStr;

use super::concord::Concord;
use super::darc::Darc;
use super::edf::Edf;
use super::fcfs::CFcfs;
use super::synergy::{Synergy, SynergyConfig};
use super::tq::{TinyQuanta, TqConfig};
use super::ts::TimeSharing;
use super::ts_block::TsBlock;
use super::ws::{PerWorkerFcfs, StealRule};
use super::{Policy, PolicyContext, PolicyError, PreemptionMechanism};
use crate::reservation::{ReservationConfig, Rounding};
use crate::workers::MAX_WORKERS;

/// DARC's parameters (profiling and reservation updates, docs/architecture.md "DARC as implemented").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DarcConfig {
    /// Grouping, spillway and rounding.
    pub reservation: ReservationConfig,
    /// Completions a profiling window needs before an update is considered.
    pub min_samples: u64,
    /// An update is considered when a request waited more than this many times its
    /// type's mean service time.
    pub delay_factor: f64,
    /// An update is also considered once the window holds this many times
    /// `min_samples` completions, whether or not a request was delayed: a type
    /// that becomes rare or stops arriving delays nobody, so without this bound
    /// its reservation would never be revisited (Perséphone Fig. 7). 0: only
    /// the delay trigger (the paper's text).
    pub stale_windows: u64,
    /// A reservation is replaced when some type's demand moved by more than this
    /// fraction.
    pub deviation: f64,
    /// Which of a group's typed queues is served first.
    pub order: GroupOrder,
    /// Where a window's occurrence ratios come from.
    pub ratios: RatioSource,
    /// `darc+`: a reservation that moves workers is applied only when the moving
    /// group's demand changed by more than this many workers (0: the paper's rule
    /// alone, [`DarcConfig::deviation`]).
    pub hysteresis: f64,
}

/// Which of a group's typed queues a worker of the group serves first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupOrder {
    /// The paper's Algorithm 1: by ascending profiled mean, i.e. a fixed order.
    Type,
    /// The oldest head among the group's queues (FCFS within a group).
    Oldest,
}

/// Where a profiling window takes each type's occurrence ratio from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RatioSource {
    /// Completions in the window (the paper and its reference code).
    Completions,
    /// Arrivals in the window, dropped ones included: what is offered, not what
    /// got served, so an overloaded type does not look smaller.
    Arrivals,
}

impl Default for DarcConfig {
    fn default() -> Self {
        Self {
            reservation: ReservationConfig::default(),
            min_samples: 50_000,
            delay_factor: 10.0,
            stale_windows: 2,
            deviation: 0.1,
            order: GroupOrder::Type,
            ratios: RatioSource::Completions,
            hysteresis: 0.0,
        }
    }
}

impl DarcConfig {
    /// `darc+`: the paper's DARC with the rules of docs/darc-variant.md.
    pub fn plus() -> Self {
        Self {
            reservation: ReservationConfig {
                protect_longest: 10.0,
                merge_below: 0.0,
                rounding: Rounding::Load,
                // A quarter worker above the load: measured on extreme-bimodal
                // (docs/darc-variant.md), 0 leaves 2 workers busy 93% at 80%.
                headroom: 0.25,
                ..ReservationConfig::default()
            },
            order: GroupOrder::Oldest,
            // Tried and measured neutral or worse (docs/darc-variant.md):
            // ratios from arrivals, hysteresis, merging tiny groups.
            ratios: RatioSource::Completions,
            hysteresis: 0.0,
            ..Self::default()
        }
    }
}

/// Shinjuku's queue structure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TsQueues {
    /// One FIFO.
    Single,
    /// One queue per type; the head with the highest waiting time / target wins.
    Multi,
}

/// Where a preempted request goes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requeue {
    /// Head of its queue (Shinjuku's choice for light-tailed distributions).
    Head,
    /// Tail of its queue (Shinjuku's choice for heavy-tailed or multimodal ones).
    Tail,
}

/// When an expired quantum preempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TsPreempt {
    /// Every expired quantum preempts.
    Always,
    /// Only when some request is waiting; otherwise the request runs on.
    IfWaiting,
}

/// Shinjuku-style time sharing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TsConfig {
    /// Single or multi queue.
    pub queues: TsQueues,
    /// Time slice.
    pub quantum_ns: u64,
    /// Worker time lost per preemption.
    pub cost_ns: u64,
    /// Where a preempted request goes back.
    pub requeue: Requeue,
    /// When a quantum expiry preempts.
    pub preempt: TsPreempt,
    /// Multi-queue target latency of a type, as a multiple of its mean service time.
    pub target_factor: f64,
    /// A named mechanism whose cost replaces `cost_ns` in the simulator.
    pub mechanism: Option<PreemptionMechanism>,
}

impl Default for TsConfig {
    fn default() -> Self {
        Self {
            queues: TsQueues::Multi,
            quantum_ns: 5_000,
            cost_ns: 1_000,
            requeue: Requeue::Tail,
            preempt: TsPreempt::Always,
            target_factor: 10.0,
            mechanism: None,
        }
    }
}

/// Which waiting request a worker takes in the preempt-on-block model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockPick {
    /// The head of the single FIFO, as in the paper's single-queue preemptive
    /// systems. A worker freed by a preemption may then take an older long
    /// request, which is preempted again at once: under load this cycles
    /// through every queued long request per blocked short one. The default.
    Fifo,
    /// The oldest short request if any (what the preemption was for), else the
    /// head: an idealisation that removes the cascade (`pick=short`).
    Short,
}

/// Single-queue preemption fired as soon as a short request is blocked (the
/// paper's "TS X us" model): the signal takes half the cost, the switch the other.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TsBlockConfig {
    /// Total preemption cost (propagation + switch).
    pub cost_ns: u64,
    /// Where the preempted request goes back.
    pub requeue: Requeue,
    /// What a freed worker takes.
    pub pick: BlockPick,
    /// A type is long when its mean exceeds this multiple of the shortest mean.
    pub long_factor: f64,
}

impl Default for TsBlockConfig {
    fn default() -> Self {
        Self {
            cost_ns: 0,
            requeue: Requeue::Tail,
            pick: BlockPick::Fifo,
            long_factor: 10.0,
        }
    }
}

/// Concord: JBSQ(k) dispatch with a fixed quantum.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConcordConfig {
    /// Requests outstanding per worker at most (the running one included).
    pub k: usize,
    /// Time slice; an expired one always preempts.
    pub quantum_ns: u64,
    /// Worker time lost per preemption, in the simulator (the runtime pays its
    /// real mechanism).
    pub cost_ns: u64,
    /// A named mechanism whose cost replaces `cost_ns` in the simulator.
    pub mechanism: Option<PreemptionMechanism>,
}

impl Default for ConcordConfig {
    fn default() -> Self {
        Self {
            k: 2,
            quantum_ns: 5_000,
            cost_ns: 1_000,
            mechanism: None,
        }
    }
}

/// A parsed policy with its parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PolicySpec {
    /// Per-worker queues, arrivals hashed to a worker.
    DFcfs,
    /// One central FIFO.
    CFcfs,
    /// Fixed priority: shortest type first, any worker.
    Fp,
    /// Earliest deadline first, deadline = arrival + `k` x type mean.
    Edf {
        /// Deadline factor.
        k: f64,
    },
    /// DARC with `reserved` workers fixed for the shortest group.
    DarcStatic {
        /// Workers reserved for short requests.
        reserved: usize,
        /// Grouping factor for what counts as "short".
        delta: f64,
    },
    /// Dynamic DARC.
    Darc(DarcConfig),
    /// Dynamic DARC with the `darc+` rules as defaults (docs/darc-variant.md).
    DarcPlus(DarcConfig),
    /// Shinjuku time sharing.
    Ts(TsConfig),
    /// Preempt as soon as a short request is blocked.
    TsBlock(TsBlockConfig),
    /// Concord's JBSQ(k) with a fixed quantum.
    Concord(ConcordConfig),
    /// Work stealing: per-worker queues fed by flow, idle workers steal.
    Ws {
        /// An idle worker steals only from a queue holding more than this.
        threshold: usize,
    },
    /// SYNERGY: feedback, conditional preemption, wait queue, stealing.
    Synergy(SynergyConfig),
    /// Tiny Quanta: JSQ plus per-worker processor sharing.
    Tq(TqConfig),
}

/// The valid values of a numeric policy parameter: `[lo, hi]`, or `(lo, hi]`
/// when `lo_open`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParamRange {
    /// The parameter as written (`delta`, `quantum`, `N`, ...).
    pub key: &'static str,
    /// Lower bound.
    pub lo: f64,
    /// Whether `lo` itself is excluded.
    pub lo_open: bool,
    /// Upper bound (included).
    pub hi: f64,
    /// Unit, for the message (`" us"` or empty).
    pub unit: &'static str,
}

impl ParamRange {
    const fn closed(key: &'static str, lo: f64, hi: f64) -> Self {
        Self {
            key,
            lo,
            lo_open: false,
            hi,
            unit: "",
        }
    }

    const fn positive(key: &'static str, hi: f64) -> Self {
        Self {
            key,
            lo: 0.0,
            lo_open: true,
            hi,
            unit: "",
        }
    }

    const fn us(self) -> Self {
        Self {
            unit: " us",
            ..self
        }
    }

    /// Whether `v` is in the range (NaN never is).
    pub fn contains(&self, v: f64) -> bool {
        (if self.lo_open {
            v > self.lo
        } else {
            v >= self.lo
        }) && v <= self.hi
    }
}

impl fmt::Display for ParamRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let open = if self.lo_open { '(' } else { '[' };
        write!(f, "{open}{}, {}]{}", self.lo, self.hi, self.unit)
    }
}

/// Largest service-time-like parameter (quantum, preemption cost), in µs: 1 s.
const MAX_US: f64 = 1e6;
/// Largest multiple of a mean service time (EDF's k, TS's target, ts-block's long,
/// DARC's delay).
const MAX_FACTOR: f64 = 1e6;

const EDF_K: ParamRange = ParamRange::positive("k", MAX_FACTOR);
const RESERVED: ParamRange = ParamRange::closed("N", 0.0, (MAX_WORKERS - 1) as f64);
const DELTA: ParamRange = ParamRange::closed("delta", 0.0, 1000.0);
const SPILLWAY: ParamRange = ParamRange::closed("spillway", 1.0, MAX_WORKERS as f64);
const SAMPLES: ParamRange = ParamRange::closed("samples", 1.0, 1e9);
const DELAY: ParamRange = ParamRange::closed("delay", 0.0, MAX_FACTOR);
const DEVIATION: ParamRange = ParamRange::closed("deviation", 0.0, 1000.0);
const STALE: ParamRange = ParamRange::closed("stale", 0.0, 1000.0);
const LONGEST: ParamRange = ParamRange::closed("longest", 0.0, MAX_FACTOR);
const MERGE: ParamRange = ParamRange::closed("merge", 0.0, MAX_WORKERS as f64);
const HYSTERESIS: ParamRange = ParamRange::closed("hysteresis", 0.0, MAX_WORKERS as f64);
const HEADROOM: ParamRange = ParamRange::closed("headroom", 0.0, MAX_WORKERS as f64);
/// A quantum below 0.1 µs would make the simulator step through time slices of
/// a few instructions.
const QUANTUM: ParamRange = ParamRange::closed("quantum", 0.1, MAX_US).us();
const TS_COST: ParamRange = ParamRange::closed("cost", 0.0, MAX_US).us();
const TARGET: ParamRange = ParamRange::positive("target", MAX_FACTOR);
const BLOCK_COST: ParamRange = ParamRange::closed("COST", 0.0, MAX_US).us();
const LONG: ParamRange = ParamRange::closed("long", 1.0, MAX_FACTOR);
/// JBSQ's bound: a worker's own queue is sized by it.
const JBSQ_K: ParamRange = ParamRange::closed("k", 1.0, 64.0);
/// Work stealing's threshold: a queue length (queues hold at most 2^20).
const STEAL_THRESHOLD: ParamRange = ParamRange::closed("threshold", 0.0, 1_048_576.0);

/// SYNERGY's factors (QUANTUM_FACTOR, CONGESTED_QUANTUM_FACTOR; 0 keeps
/// the factor when congested).
const QF: ParamRange = ParamRange::positive("qf", MAX_FACTOR);
const CQF: ParamRange = ParamRange::closed("cqf", 0.0, MAX_FACTOR);
/// THRESH_WQD (0: never congested).
const WQD: ParamRange = ParamRange::closed("wqd", 0.0, MAX_US).us();
/// SYNERGY's steal thresholds (queue lengths) and batch.
const STEAL_BUSY: ParamRange = ParamRange::closed("steal_busy", 1.0, 1_048_576.0);
const STEAL_MIN: ParamRange = ParamRange::closed("steal_min", 1.0, 1_048_576.0);
const BATCH: ParamRange = ParamRange::closed("batch", 1.0, 1024.0);
/// The simulated application's feedback threshold.
const FEEDBACK_LONG: ParamRange = ParamRange::closed("long", 0.0, MAX_US).us();

/// Every numeric policy parameter with its range, by policy (for documentation
/// and tests).
pub const PARAM_RANGES: &[(&str, ParamRange)] = &[
    ("edf", EDF_K),
    ("darc-static", RESERVED),
    ("darc-static", DELTA),
    ("darc", DELTA),
    ("darc", SPILLWAY),
    ("darc", SAMPLES),
    ("darc", DELAY),
    ("darc", DEVIATION),
    ("darc", STALE),
    ("darc", LONGEST),
    ("darc", MERGE),
    ("darc", HYSTERESIS),
    ("darc", HEADROOM),
    ("darc+", DELTA),
    ("darc+", SPILLWAY),
    ("darc+", SAMPLES),
    ("darc+", DELAY),
    ("darc+", DEVIATION),
    ("darc+", STALE),
    ("darc+", LONGEST),
    ("darc+", MERGE),
    ("darc+", HYSTERESIS),
    ("darc+", HEADROOM),
    ("ts", QUANTUM),
    ("ts", TS_COST),
    ("ts", TARGET),
    ("ts-block", BLOCK_COST),
    ("ts-block", LONG),
    ("concord", JBSQ_K),
    ("concord", QUANTUM),
    ("concord", TS_COST),
    ("ws", STEAL_THRESHOLD),
    ("synergy", QF),
    ("synergy", QUANTUM),
    ("synergy", WQD),
    ("synergy", CQF),
    ("synergy", STEAL_BUSY),
    ("synergy", STEAL_MIN),
    ("synergy", BATCH),
    ("synergy", FEEDBACK_LONG),
    ("tq", QUANTUM),
];

/// A real parameter in `range`.
fn real(policy: &str, range: &ParamRange, v: &str) -> Result<f64, PolicyError> {
    match v.parse::<f64>() {
        Ok(x) if range.contains(x) => Ok(x),
        _ => Err(out_of_range(policy, range, v, "")),
    }
}

/// An integer parameter in `range`.
fn count<T: TryFrom<u64>>(policy: &str, range: &ParamRange, v: &str) -> Result<T, PolicyError> {
    match v.parse::<u64>() {
        Ok(x) if range.contains(x as f64) => {
            T::try_from(x).map_err(|_| out_of_range(policy, range, v, "an integer "))
        }
        _ => Err(out_of_range(policy, range, v, "an integer ")),
    }
}

/// A duration parameter in µs (`range` in µs), as whole nanoseconds.
fn micros(policy: &str, range: &ParamRange, v: &str) -> Result<u64, PolicyError> {
    Ok((real(policy, range, v)? * 1e3).round() as u64)
}

fn out_of_range(policy: &str, range: &ParamRange, v: &str, what: &str) -> PolicyError {
    bad(
        policy,
        format!("{} must be {what}in {range}, not '{v}'", range.key),
    )
}

fn bad(policy: &str, msg: String) -> PolicyError {
    PolicyError::BadParameter {
        policy: policy.to_string(),
        msg,
    }
}

fn requeue(policy: &str, v: &str) -> Result<Requeue, PolicyError> {
    match v {
        "head" => Ok(Requeue::Head),
        "tail" => Ok(Requeue::Tail),
        _ => Err(bad(
            policy,
            format!("requeue must be head or tail, not '{v}'"),
        )),
    }
}

fn choice<T: Copy>(
    policy: &str,
    key: &str,
    v: &str,
    options: &[(&str, T)],
) -> Result<T, PolicyError> {
    options
        .iter()
        .find(|(name, _)| *name == v)
        .map(|&(_, x)| x)
        .ok_or_else(|| {
            let names: Vec<&str> = options.iter().map(|(n, _)| *n).collect();
            bad(
                policy,
                format!("{key} must be one of {}, not '{v}'", names.join(", ")),
            )
        })
}

fn switch(policy: &str, key: &str, v: &str) -> Result<bool, PolicyError> {
    choice(policy, key, v, &[("on", true), ("off", false)])
}

fn mechanism(policy: &str, v: &str) -> Result<PreemptionMechanism, PolicyError> {
    choice(policy, "mech", v, PreemptionMechanism::ALL)
}

/// SYNERGY's parameters, all keyed.
fn synergy_params(s: &str, keyed: &[(&str, &str)]) -> Result<SynergyConfig, PolicyError> {
    let mut c = SynergyConfig::default();
    for &(key, v) in keyed {
        match key {
            "qf" => c.quantum_factor = real(s, &QF, v)?,
            "quantum" => c.quantum_ns = micros(s, &QUANTUM, v)?,
            "wqd" => c.wqd_ns = micros(s, &WQD, v)?,
            "cqf" => c.congested_factor = real(s, &CQF, v)?,
            "ws" => c.steal = switch(s, key, v)?,
            "wq" => c.wait_queue = switch(s, key, v)?,
            "cp" => c.conditional = switch(s, key, v)?,
            "qa" => c.adaptive = switch(s, key, v)?,
            "steal_busy" => c.steal_busy_min = count(s, &STEAL_BUSY, v)?,
            "steal_min" => c.steal_min = count(s, &STEAL_MIN, v)?,
            "batch" => c.steal_batch = count(s, &BATCH, v)?,
            "long" => c.long_ns = micros(s, &FEEDBACK_LONG, v)?,
            "mech" => c.mechanism = mechanism(s, v)?,
            _ => return Err(bad(s, format!("unknown parameter '{key}'"))),
        }
    }
    Ok(c)
}

fn synergy_parts(c: &SynergyConfig, parts: &mut Vec<String>) {
    let d = SynergyConfig::default();
    let onoff = |b: bool| if b { "on" } else { "off" };
    if c.quantum_factor != d.quantum_factor {
        parts.push(format!("qf={}", c.quantum_factor));
    }
    if c.quantum_ns != d.quantum_ns {
        parts.push(format!("quantum={}", us(c.quantum_ns)));
    }
    if c.wqd_ns != d.wqd_ns {
        parts.push(format!("wqd={}", us(c.wqd_ns)));
    }
    if c.congested_factor != d.congested_factor {
        parts.push(format!("cqf={}", c.congested_factor));
    }
    for (key, v, dv) in [
        ("ws", c.steal, d.steal),
        ("wq", c.wait_queue, d.wait_queue),
        ("cp", c.conditional, d.conditional),
        ("qa", c.adaptive, d.adaptive),
    ] {
        if v != dv {
            parts.push(format!("{key}={}", onoff(v)));
        }
    }
    if c.steal_busy_min != d.steal_busy_min {
        parts.push(format!("steal_busy={}", c.steal_busy_min));
    }
    if c.steal_min != d.steal_min {
        parts.push(format!("steal_min={}", c.steal_min));
    }
    if c.steal_batch != d.steal_batch {
        parts.push(format!("batch={}", c.steal_batch));
    }
    if c.long_ns != d.long_ns {
        parts.push(format!("long={}", us(c.long_ns)));
    }
    if c.mechanism != d.mechanism {
        parts.push(format!("mech={}", c.mechanism.name()));
    }
}

/// DARC's keyed parameters over `c` (the defaults of `darc` or `darc+`).
fn darc_params(
    s: &str,
    mut c: DarcConfig,
    positional: &[&str],
    keyed: &[(&str, &str)],
) -> Result<DarcConfig, PolicyError> {
    if !positional.is_empty() {
        return Err(bad(s, "parameters are key=value".into()));
    }
    for &(key, v) in keyed {
        match key {
            "delta" => c.reservation.delta = real(s, &DELTA, v)?,
            "spillway" => c.reservation.spillway = count(s, &SPILLWAY, v)?,
            "round" => {
                c.reservation.rounding = choice(
                    s,
                    "round",
                    v,
                    &[
                        ("paper", Rounding::Paper),
                        ("ceil", Rounding::Ceil),
                        ("floor", Rounding::Floor),
                        ("load", Rounding::Load),
                    ],
                )?
            }
            "samples" => c.min_samples = count(s, &SAMPLES, v)?,
            "delay" => c.delay_factor = real(s, &DELAY, v)?,
            "deviation" => c.deviation = real(s, &DEVIATION, v)?,
            "stale" => c.stale_windows = count(s, &STALE, v)?,
            "order" => {
                c.order = choice(
                    s,
                    "order",
                    v,
                    &[("type", GroupOrder::Type), ("oldest", GroupOrder::Oldest)],
                )?
            }
            "ratios" => {
                c.ratios = choice(
                    s,
                    "ratios",
                    v,
                    &[
                        ("completions", RatioSource::Completions),
                        ("arrivals", RatioSource::Arrivals),
                    ],
                )?
            }
            "longest" => c.reservation.protect_longest = real(s, &LONGEST, v)?,
            "merge" => c.reservation.merge_below = real(s, &MERGE, v)?,
            "headroom" => c.reservation.headroom = real(s, &HEADROOM, v)?,
            "hysteresis" => c.hysteresis = real(s, &HYSTERESIS, v)?,
            _ => return Err(bad(s, format!("unknown parameter '{key}'"))),
        }
    }
    Ok(c)
}

impl FromStr for PolicySpec {
    type Err = PolicyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let (name, args) = match s.split_once(':') {
            Some((n, a)) => (
                n,
                a.split(',')
                    .map(str::trim)
                    .filter(|a| !a.is_empty())
                    .collect(),
            ),
            None => (s, Vec::new()),
        };
        let mut positional = Vec::new();
        let mut keyed = Vec::new();
        for a in &args {
            match a.split_once('=') {
                Some((k, v)) => keyed.push((k.trim(), v.trim())),
                None => positional.push(*a),
            }
        }
        let no_args = |spec: PolicySpec| {
            if args.is_empty() {
                Ok(spec)
            } else {
                Err(bad(s, "takes no parameters".into()))
            }
        };
        let unknown_key = |k: &str| bad(s, format!("unknown parameter '{k}'"));
        match name {
            "d-fcfs" => no_args(PolicySpec::DFcfs),
            "c-fcfs" => no_args(PolicySpec::CFcfs),
            "fp" | "sjf" => no_args(PolicySpec::Fp),
            "edf" => {
                let mut k: f64 = 10.0;
                if !positional.is_empty() {
                    return Err(bad(s, "expects edf or edf:k=FACTOR".into()));
                }
                for &(key, v) in &keyed {
                    match key {
                        "k" => k = real(s, &EDF_K, v)?,
                        _ => return Err(unknown_key(key)),
                    }
                }
                Ok(PolicySpec::Edf { k })
            }
            "darc-static" => {
                let [n] = positional[..] else {
                    return Err(bad(
                        s,
                        "expects darc-static:N (workers reserved for short requests)".into(),
                    ));
                };
                let reserved = count(s, &RESERVED, n)?;
                let mut delta = 0.2;
                for &(key, v) in &keyed {
                    match key {
                        "delta" => delta = real(s, &DELTA, v)?,
                        _ => return Err(unknown_key(key)),
                    }
                }
                Ok(PolicySpec::DarcStatic { reserved, delta })
            }
            "darc" => Ok(PolicySpec::Darc(darc_params(
                s,
                DarcConfig::default(),
                &positional,
                &keyed,
            )?)),
            "darc+" => Ok(PolicySpec::DarcPlus(darc_params(
                s,
                DarcConfig::plus(),
                &positional,
                &keyed,
            )?)),
            "ts" => {
                let mut c = TsConfig::default();
                for p in &positional {
                    match *p {
                        "sq" => c.queues = TsQueues::Single,
                        "mq" => c.queues = TsQueues::Multi,
                        _ => return Err(bad(s, format!("'{p}' is neither sq nor mq"))),
                    }
                }
                for &(key, v) in &keyed {
                    match key {
                        "quantum" => c.quantum_ns = micros(s, &QUANTUM, v)?,
                        "cost" => c.cost_ns = micros(s, &TS_COST, v)?,
                        "requeue" => c.requeue = requeue(s, v)?,
                        "preempt" => {
                            c.preempt = match v {
                                "always" => TsPreempt::Always,
                                "waiting" => TsPreempt::IfWaiting,
                                _ => {
                                    return Err(bad(
                                        s,
                                        format!("preempt must be always or waiting, not '{v}'"),
                                    ));
                                }
                            }
                        }
                        "target" => c.target_factor = real(s, &TARGET, v)?,
                        "mech" => c.mechanism = Some(mechanism(s, v)?),
                        _ => return Err(unknown_key(key)),
                    }
                }
                Ok(PolicySpec::Ts(c))
            }
            "ts-block" => {
                let mut c = TsBlockConfig::default();
                match positional[..] {
                    [cost] => c.cost_ns = micros(s, &BLOCK_COST, cost)?,
                    _ => {
                        return Err(bad(
                            s,
                            "expects ts-block:COST_US (total preemption cost)".into(),
                        ));
                    }
                }
                for &(key, v) in &keyed {
                    match key {
                        "requeue" => c.requeue = requeue(s, v)?,
                        "pick" => {
                            c.pick = match v {
                                "fifo" => BlockPick::Fifo,
                                "short" => BlockPick::Short,
                                _ => {
                                    return Err(bad(
                                        s,
                                        format!("pick must be fifo or short, not '{v}'"),
                                    ));
                                }
                            }
                        }
                        "long" => c.long_factor = real(s, &LONG, v)?,
                        _ => return Err(unknown_key(key)),
                    }
                }
                Ok(PolicySpec::TsBlock(c))
            }
            "concord" => {
                if !positional.is_empty() {
                    return Err(bad(s, "parameters are key=value".into()));
                }
                let mut c = ConcordConfig::default();
                for &(key, v) in &keyed {
                    match key {
                        "k" => c.k = count(s, &JBSQ_K, v)?,
                        "quantum" => c.quantum_ns = micros(s, &QUANTUM, v)?,
                        "cost" => c.cost_ns = micros(s, &TS_COST, v)?,
                        "mech" => c.mechanism = Some(mechanism(s, v)?),
                        _ => return Err(unknown_key(key)),
                    }
                }
                Ok(PolicySpec::Concord(c))
            }
            "ws" => {
                if !positional.is_empty() {
                    return Err(bad(s, "expects ws or ws:threshold=N".into()));
                }
                let mut threshold = 0;
                for &(key, v) in &keyed {
                    match key {
                        "threshold" => threshold = count(s, &STEAL_THRESHOLD, v)?,
                        _ => return Err(unknown_key(key)),
                    }
                }
                Ok(PolicySpec::Ws { threshold })
            }
            "synergy" => {
                if !positional.is_empty() {
                    return Err(bad(s, "parameters are key=value".into()));
                }
                Ok(PolicySpec::Synergy(synergy_params(s, &keyed)?))
            }
            "tq" => {
                if !positional.is_empty() {
                    return Err(bad(s, "parameters are key=value".into()));
                }
                let mut c = TqConfig::default();
                for &(key, v) in &keyed {
                    match key {
                        "quantum" => c.quantum_ns = micros(s, &QUANTUM, v)?,
                        "mech" => c.mechanism = mechanism(s, v)?,
                        _ => return Err(unknown_key(key)),
                    }
                }
                Ok(PolicySpec::Tq(c))
            }
            _ => Err(PolicyError::Unknown(s.to_string())),
        }
    }
}

/// The parameters of `c` that differ from `d`.
fn darc_parts(c: &DarcConfig, d: &DarcConfig, parts: &mut Vec<String>) {
    if c.reservation.delta != d.reservation.delta {
        parts.push(format!("delta={}", c.reservation.delta));
    }
    if c.reservation.spillway != d.reservation.spillway {
        parts.push(format!("spillway={}", c.reservation.spillway));
    }
    if c.reservation.rounding != d.reservation.rounding {
        parts.push(format!("round={}", c.reservation.rounding.name()));
    }
    if c.min_samples != d.min_samples {
        parts.push(format!("samples={}", c.min_samples));
    }
    if c.delay_factor != d.delay_factor {
        parts.push(format!("delay={}", c.delay_factor));
    }
    if c.deviation != d.deviation {
        parts.push(format!("deviation={}", c.deviation));
    }
    if c.stale_windows != d.stale_windows {
        parts.push(format!("stale={}", c.stale_windows));
    }
    if c.order != d.order {
        parts.push(
            match c.order {
                GroupOrder::Type => "order=type",
                GroupOrder::Oldest => "order=oldest",
            }
            .into(),
        );
    }
    if c.ratios != d.ratios {
        parts.push(
            match c.ratios {
                RatioSource::Completions => "ratios=completions",
                RatioSource::Arrivals => "ratios=arrivals",
            }
            .into(),
        );
    }
    if c.reservation.protect_longest != d.reservation.protect_longest {
        parts.push(format!("longest={}", c.reservation.protect_longest));
    }
    if c.reservation.merge_below != d.reservation.merge_below {
        parts.push(format!("merge={}", c.reservation.merge_below));
    }
    if c.reservation.headroom != d.reservation.headroom {
        parts.push(format!("headroom={}", c.reservation.headroom));
    }
    if c.hysteresis != d.hysteresis {
        parts.push(format!("hysteresis={}", c.hysteresis));
    }
}

fn us(ns: u64) -> String {
    let v = ns as f64 / 1e3;
    format!("{v}")
}

impl fmt::Display for PolicySpec {
    /// The canonical name: parameters at their defaults are left out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        let name = match self {
            PolicySpec::DFcfs => "d-fcfs",
            PolicySpec::CFcfs => "c-fcfs",
            PolicySpec::Fp => "fp",
            PolicySpec::Edf { k } => {
                if *k != 10.0 {
                    parts.push(format!("k={k}"));
                }
                "edf"
            }
            PolicySpec::DarcStatic { reserved, delta } => {
                parts.push(reserved.to_string());
                if *delta != 0.2 {
                    parts.push(format!("delta={delta}"));
                }
                "darc-static"
            }
            PolicySpec::Darc(c) => {
                darc_parts(c, &DarcConfig::default(), &mut parts);
                "darc"
            }
            PolicySpec::DarcPlus(c) => {
                darc_parts(c, &DarcConfig::plus(), &mut parts);
                "darc+"
            }
            PolicySpec::Ts(c) => {
                let d = TsConfig::default();
                if c.queues == TsQueues::Single {
                    parts.push("sq".into());
                }
                if c.quantum_ns != d.quantum_ns {
                    parts.push(format!("quantum={}", us(c.quantum_ns)));
                }
                if c.cost_ns != d.cost_ns {
                    parts.push(format!("cost={}", us(c.cost_ns)));
                }
                if c.requeue != d.requeue {
                    parts.push("requeue=head".into());
                }
                if c.preempt != d.preempt {
                    parts.push("preempt=waiting".into());
                }
                if c.target_factor != d.target_factor {
                    parts.push(format!("target={}", c.target_factor));
                }
                if let Some(m) = c.mechanism {
                    parts.push(format!("mech={}", m.name()));
                }
                "ts"
            }
            PolicySpec::TsBlock(c) => {
                let d = TsBlockConfig::default();
                parts.push(us(c.cost_ns));
                if c.requeue != d.requeue {
                    parts.push("requeue=head".into());
                }
                if c.pick != d.pick {
                    parts.push("pick=short".into());
                }
                if c.long_factor != d.long_factor {
                    parts.push(format!("long={}", c.long_factor));
                }
                "ts-block"
            }
            PolicySpec::Concord(c) => {
                let d = ConcordConfig::default();
                if c.k != d.k {
                    parts.push(format!("k={}", c.k));
                }
                if c.quantum_ns != d.quantum_ns {
                    parts.push(format!("quantum={}", us(c.quantum_ns)));
                }
                if c.cost_ns != d.cost_ns {
                    parts.push(format!("cost={}", us(c.cost_ns)));
                }
                if let Some(m) = c.mechanism {
                    parts.push(format!("mech={}", m.name()));
                }
                "concord"
            }
            PolicySpec::Ws { threshold } => {
                if *threshold != 0 {
                    parts.push(format!("threshold={threshold}"));
                }
                "ws"
            }
            PolicySpec::Synergy(c) => {
                synergy_parts(c, &mut parts);
                "synergy"
            }
            PolicySpec::Tq(c) => {
                let d = TqConfig::default();
                if c.quantum_ns != d.quantum_ns {
                    parts.push(format!("quantum={}", us(c.quantum_ns)));
                }
                if c.mechanism != d.mechanism {
                    parts.push(format!("mech={}", c.mechanism.name()));
                }
                "tq"
            }
        };
        if parts.is_empty() {
            f.write_str(name)
        } else {
            write!(f, "{name}:{}", parts.join(","))
        }
    }
}

/// The policy names [`PolicySpec`] parses.
pub const POLICY_NAMES: &[&str] = &[
    "d-fcfs",
    "c-fcfs",
    "fp",
    "sjf",
    "edf",
    "darc-static",
    "darc",
    "darc+",
    "ts",
    "ts-block",
    "concord",
    "ws",
    "synergy",
    "tq",
];

/// Splits a comma-separated list of policies whose parameters are themselves
/// comma-separated: a piece continues the previous policy when that policy has
/// parameters (`name:...`) and the piece does not begin with a policy name, e.g.
/// `ts:sq,quantum=5,darc` is `ts:sq,quantum=5` and `darc`; `c-fcfs,bogus` is two
/// policies (the second one unknown).
pub fn split_policy_list(list: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for piece in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let name = piece.split(':').next().unwrap_or(piece);
        match out.last_mut() {
            // Parameters only continue a policy written with `name:`.
            Some(prev) if !POLICY_NAMES.contains(&name) && prev.contains(':') => {
                prev.push(',');
                prev.push_str(piece);
            }
            _ => out.push(piece.to_string()),
        }
    }
    out
}

impl PolicySpec {
    /// The fixed time slice of a policy that runs requests in quanta (`ts`,
    /// `concord`, `tq`, and `synergy` with its dynamic quantum off): what an
    /// executor must be able to honour. `None` for the others.
    pub fn fixed_quantum_ns(&self) -> Option<u64> {
        match *self {
            PolicySpec::Ts(c) => Some(c.quantum_ns),
            PolicySpec::Concord(c) => Some(c.quantum_ns),
            PolicySpec::Tq(c) => Some(c.quantum_ns),
            PolicySpec::Synergy(c) if !c.adaptive => Some(c.quantum_ns),
            _ => None,
        }
    }

    /// The shortest time slice an executor may have to step through for this
    /// policy, when the shortest request type's mean service time is
    /// `shortest_mean_ns` (infinite: unknown): the fixed quantum, or for
    /// SYNERGY's dynamic quantum its floor, that mean times the smaller of its
    /// factors (a short average cannot fall below the shortest type), at least
    /// [`super::synergy::MIN_QUANTUM_NS`]. `None`: no time slices.
    pub fn shortest_slice_ns(&self, shortest_mean_ns: f64) -> Option<u64> {
        match *self {
            PolicySpec::Synergy(c) if c.adaptive => {
                let factor = if c.congested_factor > 0.0 {
                    c.quantum_factor.min(c.congested_factor)
                } else {
                    c.quantum_factor
                };
                let floor = super::synergy::MIN_QUANTUM_NS;
                Some(if shortest_mean_ns.is_finite() {
                    ((shortest_mean_ns * factor) as u64).max(floor)
                } else {
                    floor
                })
            }
            _ => self.fixed_quantum_ns(),
        }
    }

    /// The application-feedback threshold of a policy driven by it (SYNERGY's
    /// `long`): the synthetic application declares requests asking for at
    /// least this much service long. `None` for the others.
    pub fn feedback_threshold_ns(&self) -> Option<u64> {
        match *self {
            PolicySpec::Synergy(c) => Some(c.long_ns),
            _ => None,
        }
    }

    /// The preemption mechanism the simulator charges for this policy, from its
    /// parameters: `ts`'s `cost` is the worker's switch (its own timer fires, no
    /// signal); `ts-block`'s total cost is half signal, half switch. Zero for
    /// policies that never preempt. The runtime pays its real mechanism instead.
    pub fn preemption_cost(&self) -> super::PreemptionCost {
        match *self {
            PolicySpec::Ts(TsConfig {
                mechanism: Some(m), ..
            })
            | PolicySpec::Concord(ConcordConfig {
                mechanism: Some(m), ..
            }) => m.cost(),
            PolicySpec::Ts(c) => super::PreemptionCost {
                signal_ns: 0,
                switch_ns: c.cost_ns,
            },
            PolicySpec::TsBlock(c) => super::PreemptionCost {
                signal_ns: c.cost_ns / 2,
                switch_ns: c.cost_ns - c.cost_ns / 2,
            },
            PolicySpec::Concord(c) => super::PreemptionCost {
                signal_ns: 0,
                switch_ns: c.cost_ns,
            },
            PolicySpec::Synergy(c) => c.mechanism.cost(),
            PolicySpec::Tq(c) => c.mechanism.cost(),
            _ => super::PreemptionCost::default(),
        }
    }

    /// Builds the policy for `ctx`.
    ///
    /// # Errors
    /// When the context cannot host it: no or too many workers, a reservation that
    /// does not fit, or missing expected service times for a policy that needs them.
    pub fn build(&self, ctx: &PolicyContext) -> Result<Box<dyn Policy>, PolicyError> {
        let name = self.to_string();
        let ctx_err = |msg: String| PolicyError::BadContext {
            policy: name.clone(),
            msg,
        };
        if ctx.workers == 0 || ctx.workers > MAX_WORKERS {
            return Err(ctx_err(format!(
                "workers must be 1..={MAX_WORKERS}, not {}",
                ctx.workers
            )));
        }
        if ctx.types.is_empty() || ctx.types.len() >= usize::from(crate::UNKNOWN_TYPE) {
            return Err(ctx_err(format!(
                "needs 1..{} request types",
                crate::UNKNOWN_TYPE
            )));
        }
        if ctx.queue_capacity == 0 {
            return Err(ctx_err("queue capacity must be positive".into()));
        }
        Ok(match *self {
            PolicySpec::DFcfs => Box::new(PerWorkerFcfs::new(ctx, None, name)),
            PolicySpec::CFcfs => Box::new(CFcfs::new(ctx)),
            PolicySpec::Fp => Box::new(Darc::new_static(ctx, 0, 0.2, name)?),
            PolicySpec::Edf { k } => Box::new(Edf::new(ctx, k, name)?),
            PolicySpec::DarcStatic { reserved, delta } => {
                Box::new(Darc::new_static(ctx, reserved, delta, name)?)
            }
            PolicySpec::Darc(c) | PolicySpec::DarcPlus(c) => {
                if c.reservation.spillway > ctx.workers {
                    return Err(ctx_err(format!(
                        "{} spillway workers on {} workers",
                        c.reservation.spillway, ctx.workers
                    )));
                }
                Box::new(Darc::new_dynamic(ctx, c, name))
            }
            PolicySpec::Ts(c) => Box::new(TimeSharing::new(ctx, c, name)?),
            PolicySpec::TsBlock(c) => Box::new(TsBlock::new(ctx, c, name)?),
            PolicySpec::Concord(c) => Box::new(Concord::new(ctx, c, name)),
            PolicySpec::Ws { threshold } => {
                Box::new(PerWorkerFcfs::new(ctx, Some(StealRule { threshold }), name))
            }
            PolicySpec::Synergy(c) => Box::new(Synergy::new(ctx, c, name)),
            PolicySpec::Tq(c) => Box::new(TinyQuanta::new(ctx, c, name)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in [
            "d-fcfs",
            "c-fcfs",
            "fp",
            "edf",
            "edf:k=4",
            "darc-static:2",
            "darc",
            "darc:round=ceil",
            "darc:delta=0.5,spillway=2,samples=1000,delay=1,deviation=0.2,stale=3",
            "darc:order=oldest,ratios=arrivals,longest=10,merge=0.5,hysteresis=0.2",
            "darc+",
            "darc+:samples=1000,delay=1",
            "darc+:order=type,longest=0",
            "darc+:ratios=arrivals,merge=0.5,hysteresis=0.25",
            "darc:round=load,headroom=0.5",
            "darc+:round=paper",
            "darc+:headroom=0",
            "ts",
            "ts:sq",
            "ts:quantum=10,cost=0.5,requeue=head,preempt=waiting",
            "ts-block:4",
            "ts-block:0.5,pick=short",
            "concord:k=1,quantum=10",
            "ws",
            "ws:threshold=3",
            "ts:sq,mech=posted",
            "concord:mech=ci",
            "synergy",
            "synergy:qf=1",
            "synergy:wqd=10,cqf=5",
            "synergy:quantum=2,ws=off,wq=off,cp=off,qa=off",
            "synergy:steal_busy=2,steal_min=4,batch=8,long=20,mech=signal",
            "tq",
            "tq:quantum=5,mech=uintr",
        ] {
            let spec: PolicySpec = s.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(spec.to_string(), s);
        }
    }

    #[test]
    fn darc_plus_is_darc_with_other_defaults() {
        let plus: PolicySpec = "darc+".parse().unwrap();
        assert_eq!(plus, PolicySpec::DarcPlus(DarcConfig::plus()));
        let paper: PolicySpec = "darc".parse().unwrap();
        assert_eq!(paper, PolicySpec::Darc(DarcConfig::default()));
        assert_ne!(DarcConfig::plus(), DarcConfig::default());
        // Every darc+ rule can be turned off one by one; all off is the paper's DARC.
        let off: PolicySpec = "darc+:order=type,longest=0,round=paper,headroom=0"
            .parse()
            .unwrap();
        assert_eq!(off, PolicySpec::DarcPlus(DarcConfig::default()));
        assert_eq!(
            split_policy_list("darc,darc+:samples=10,delay=1,c-fcfs"),
            vec!["darc", "darc+:samples=10,delay=1", "c-fcfs"]
        );
    }

    #[test]
    fn policy_lists_split_on_policy_names_only() {
        assert_eq!(
            split_policy_list(
                "d-fcfs, ts:requeue=head,preempt=waiting,ts:sq,darc,ts-block:4,pick=fifo"
            ),
            vec![
                "d-fcfs",
                "ts:requeue=head,preempt=waiting",
                "ts:sq",
                "darc",
                "ts-block:4,pick=fifo"
            ]
        );
        // A stray parameter first is kept as its own (invalid) policy, to be reported.
        assert_eq!(split_policy_list("x=1,darc"), vec!["x=1", "darc"]);
        assert_eq!(split_policy_list("c-fcfs,bogus"), vec!["c-fcfs", "bogus"]);
    }

    #[test]
    fn bad_names_are_errors() {
        for s in [
            "nope",
            "darc-static",
            "darc-static:x",
            "darc:delta=-1",
            "darc:bogus=1",
            "darc:spillway=0",
            "darc:order=fifo",
            "darc+:ratios=x",
            "darc+:longest=yes",
            "darc+:longest=-1",
            "darc+:1",
            "ts:quantum=0",
            "ts:xq",
            "ts-block",
            "ts-block:-1",
            "c-fcfs:1",
            "edf:k=0",
            "edf:2",
        ] {
            assert!(s.parse::<PolicySpec>().is_err(), "{s} should not parse");
        }
    }

    /// The policy string setting `range.key` of `policy` to `v`.
    fn with_param(policy: &str, range: &ParamRange, v: &str) -> String {
        match (policy, range.key) {
            ("darc-static", "N") => format!("darc-static:{v}"),
            ("darc-static", key) => format!("darc-static:1,{key}={v}"),
            ("ts-block", "COST") => format!("ts-block:{v}"),
            ("ts-block", key) => format!("ts-block:1,{key}={v}"),
            (p, key) => format!("{p}:{key}={v}"),
        }
    }

    #[test]
    fn every_numeric_parameter_rejects_nan_infinities_and_out_of_range_values() {
        for (policy, range) in PARAM_RANGES {
            let below = if range.lo_open {
                range.lo
            } else {
                range.lo - 1.0
            };
            for v in [
                "nan".to_string(),
                "NaN".into(),
                "inf".into(),
                "-inf".into(),
                "1e300".into(),
                "-1e300".into(),
                format!("{below}"),
                format!("{}", range.hi * 1.5 + 1.0),
                "x".into(),
                String::new(),
            ] {
                if v.is_empty() && range.key.chars().all(|c| c.is_ascii_uppercase()) {
                    continue; // an empty positional parameter is a missing one
                }
                let s = with_param(policy, range, &v);
                match s.parse::<PolicySpec>() {
                    Err(PolicyError::BadParameter { msg, .. }) => {
                        assert!(
                            msg.contains(range.key) && msg.contains(&range.to_string()),
                            "{s}: '{msg}' names neither the parameter nor its range"
                        );
                    }
                    other => panic!("{s}: expected a range error, got {other:?}"),
                }
            }
            for v in [
                range.hi,
                if range.lo_open {
                    range.hi / 2.0
                } else {
                    range.lo
                },
            ] {
                let s = with_param(policy, range, &format!("{v}"));
                let spec: PolicySpec = s.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
                assert_eq!(spec.to_string().parse::<PolicySpec>(), Ok(spec), "{s}");
            }
        }
    }

    #[test]
    fn the_issue_cases_are_errors_not_caps() {
        for s in [
            "darc-static:1,delta=nan",
            "ts:quantum=1e300",
            "darc:delta=nan",
        ] {
            let e = s.parse::<PolicySpec>().expect_err(s).to_string();
            assert!(e.contains("must be in"), "{s}: {e}");
        }
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn value() -> impl Strategy<Value = String> {
            prop_oneof![
                any::<f64>().prop_map(|v| format!("{v}")),
                (-1e7f64..1e7).prop_map(|v| format!("{v}")),
                any::<u64>().prop_map(|v| v.to_string()),
                (0u64..200).prop_map(|v| v.to_string()),
                "[a-z0-9.:-]{0,6}",
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            /// Any value for any parameter is either rejected naming the
            /// parameter, or accepted within its range and round-trips.
            #[test]
            fn parameters_are_in_range_or_rejected(i in 0..PARAM_RANGES.len(), v in value()) {
                let (policy, range) = PARAM_RANGES[i];
                let s = with_param(policy, &range, &v);
                match s.parse::<PolicySpec>() {
                    Ok(spec) => {
                        let x: f64 = v.parse().expect("accepted values are numbers");
                        prop_assert!(range.contains(x), "{} accepted out of {}", s, range);
                        prop_assert_eq!(spec.to_string().parse::<PolicySpec>(), Ok(spec));
                    }
                    Err(PolicyError::BadParameter { msg, .. }) => {
                        prop_assert!(msg.contains(range.key), "{}: {}", s, msg);
                    }
                    Err(e) => prop_assert!(false, "{}: {}", s, e),
                }
            }
        }
    }
}
