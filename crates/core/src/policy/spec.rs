//! Policy names and parameters as users write them, e.g. `darc`,
//! `darc:delta=0.2,round=ceil`, `darc-static:2`, `ts:sq,quantum=5,cost=1`,
//! `ts-block:4`. Parsing validates once; [`PolicySpec::build`] makes the policy.

use std::fmt;
use std::str::FromStr;

use super::darc::Darc;
use super::edf::Edf;
use super::fcfs::{CFcfs, DFcfs};
use super::ts::TimeSharing;
use super::ts_block::TsBlock;
use super::{Policy, PolicyContext, PolicyError};
use crate::reservation::{ReservationConfig, Rounding};
use crate::workers::MAX_WORKERS;

/// DARC's parameters (darc.md, "Profiling and reservation updates").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DarcConfig {
    /// Grouping, spillway and rounding.
    pub reservation: ReservationConfig,
    /// Completions a profiling window needs before an update is considered.
    pub min_samples: u64,
    /// An update is considered when a request waited more than this many times its
    /// type's mean service time.
    pub delay_factor: f64,
    /// A reservation is replaced when some type's demand moved by more than this
    /// fraction.
    pub deviation: f64,
}

impl Default for DarcConfig {
    fn default() -> Self {
        Self {
            reservation: ReservationConfig::default(),
            min_samples: 50_000,
            delay_factor: 10.0,
            deviation: 0.1,
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
        }
    }
}

/// Which waiting request a worker takes in the preempt-on-block model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockPick {
    /// The head of the single FIFO. A worker freed by a preemption may then take an
    /// older long request, which is preempted again at once: under load this
    /// cycles through every queued long request per blocked short one.
    Fifo,
    /// The oldest short request if any (what the preemption was for), else the head.
    /// The default.
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
            pick: BlockPick::Short,
            long_factor: 10.0,
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
    /// Shinjuku time sharing.
    Ts(TsConfig),
    /// Preempt as soon as a short request is blocked.
    TsBlock(TsBlockConfig),
}

fn us_to_ns(policy: &str, key: &str, v: &str) -> Result<u64, PolicyError> {
    let us: f64 = num(policy, key, v)?;
    if !(us.is_finite() && us >= 0.0) {
        return Err(bad(
            policy,
            format!("{key} must be a non-negative number of microseconds"),
        ));
    }
    Ok((us * 1e3).round() as u64)
}

fn num<T: FromStr>(policy: &str, key: &str, v: &str) -> Result<T, PolicyError> {
    v.parse()
        .map_err(|_| bad(policy, format!("{key}: cannot parse '{v}'")))
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
                for &(key, v) in &keyed {
                    match key {
                        "k" => k = num(s, key, v)?,
                        _ => return Err(unknown_key(key)),
                    }
                }
                if !positional.is_empty() || k.is_nan() || k <= 0.0 {
                    return Err(bad(s, "expects edf or edf:k=FACTOR with FACTOR > 0".into()));
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
                let reserved = num(s, "N", n)?;
                let mut delta = 0.2;
                for &(key, v) in &keyed {
                    match key {
                        "delta" => delta = num(s, key, v)?,
                        _ => return Err(unknown_key(key)),
                    }
                }
                Ok(PolicySpec::DarcStatic { reserved, delta })
            }
            "darc" => {
                let mut c = DarcConfig::default();
                if !positional.is_empty() {
                    return Err(bad(s, "parameters are key=value".into()));
                }
                for &(key, v) in &keyed {
                    match key {
                        "delta" => c.reservation.delta = num(s, key, v)?,
                        "spillway" => c.reservation.spillway = num(s, key, v)?,
                        "round" => {
                            c.reservation.rounding = match v {
                                "paper" => Rounding::Paper,
                                "ceil" => Rounding::Ceil,
                                "floor" => Rounding::Floor,
                                _ => {
                                    return Err(bad(
                                        s,
                                        format!("round must be paper, ceil or floor, not '{v}'"),
                                    ));
                                }
                            }
                        }
                        "samples" => c.min_samples = num(s, key, v)?,
                        "delay" => c.delay_factor = num(s, key, v)?,
                        "deviation" => c.deviation = num(s, key, v)?,
                        _ => return Err(unknown_key(key)),
                    }
                }
                if [c.reservation.delta, c.delay_factor, c.deviation]
                    .iter()
                    .any(|v| v.is_nan() || *v < 0.0)
                {
                    return Err(bad(
                        s,
                        "delta, delay and deviation must be non-negative".into(),
                    ));
                }
                if c.reservation.spillway == 0 {
                    return Err(bad(s, "needs at least one spillway worker".into()));
                }
                Ok(PolicySpec::Darc(c))
            }
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
                        "quantum" => c.quantum_ns = us_to_ns(s, key, v)?,
                        "cost" => c.cost_ns = us_to_ns(s, key, v)?,
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
                        "target" => c.target_factor = num(s, key, v)?,
                        _ => return Err(unknown_key(key)),
                    }
                }
                if c.quantum_ns == 0 || c.target_factor.is_nan() || c.target_factor <= 0.0 {
                    return Err(bad(s, "quantum and target must be positive".into()));
                }
                Ok(PolicySpec::Ts(c))
            }
            "ts-block" => {
                let mut c = TsBlockConfig::default();
                match positional[..] {
                    [cost] => c.cost_ns = us_to_ns(s, "COST", cost)?,
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
                        "long" => c.long_factor = num(s, key, v)?,
                        _ => return Err(unknown_key(key)),
                    }
                }
                if c.long_factor.is_nan() || c.long_factor < 1.0 {
                    return Err(bad(s, "long must be at least 1".into()));
                }
                Ok(PolicySpec::TsBlock(c))
            }
            _ => Err(PolicyError::Unknown(s.to_string())),
        }
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
                let d = DarcConfig::default();
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
                "darc"
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
                "ts"
            }
            PolicySpec::TsBlock(c) => {
                let d = TsBlockConfig::default();
                parts.push(us(c.cost_ns));
                if c.requeue != d.requeue {
                    parts.push("requeue=head".into());
                }
                if c.pick != d.pick {
                    parts.push("pick=fifo".into());
                }
                if c.long_factor != d.long_factor {
                    parts.push(format!("long={}", c.long_factor));
                }
                "ts-block"
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
    "ts",
    "ts-block",
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
    /// Whether the policy preempts running requests (its executor must be able
    /// to interrupt a worker).
    pub fn needs_preemption(&self) -> bool {
        matches!(self, PolicySpec::Ts(_) | PolicySpec::TsBlock(_))
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
            PolicySpec::DFcfs => Box::new(DFcfs::new(ctx)),
            PolicySpec::CFcfs => Box::new(CFcfs::new(ctx)),
            PolicySpec::Fp => Box::new(Darc::new_static(ctx, 0, 0.2, name)?),
            PolicySpec::Edf { k } => Box::new(Edf::new(ctx, k, name)?),
            PolicySpec::DarcStatic { reserved, delta } => {
                Box::new(Darc::new_static(ctx, reserved, delta, name)?)
            }
            PolicySpec::Darc(c) => {
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
            "darc:delta=0.5,spillway=2,samples=1000,delay=1,deviation=0.2",
            "ts",
            "ts:sq",
            "ts:quantum=10,cost=0.5,requeue=head,preempt=waiting",
            "ts-block:4",
            "ts-block:0.5,pick=fifo",
        ] {
            let spec: PolicySpec = s.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(spec.to_string(), s);
        }
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
            "ts:quantum=0",
            "ts:xq",
            "ts-block",
            "ts-block:-1",
            "c-fcfs:1",
            "edf:k=0",
        ] {
            assert!(s.parse::<PolicySpec>().is_err(), "{s} should not parse");
        }
    }
}
