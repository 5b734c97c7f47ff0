//! Policy names and parameters as users write them, e.g. `darc`,
//! `darc:delta=0.2,round=ceil`, `darc-static:2`, `ts:sq,quantum=5,cost=1`,
//! `ts-block:4`. Parsing validates once; [`PolicySpec::build`] makes the policy.
//!
//! Each policy's parameters live in one table beside the policy ([`super::param`]):
//! this module only names the policies ([`POLICY_NAMES`]), reaches each one's
//! configuration, and builds it. [`parameters`] lists every parameter with its
//! range, default and doc, for the README and tests.

use std::fmt;
use std::mem::discriminant;
use std::str::FromStr;

use super::PreemptionMechanism;
use super::concord::{Concord, ConcordConfig};
use super::darc::{Darc, DarcConfig, DarcStaticConfig};
use super::edf::{Edf, EdfConfig};
use super::fcfs::CFcfs;
use super::lend::LendConfig;
use super::param::{Configure, ParamInfo};
use super::synergy::{Synergy, SynergyConfig};
use super::tq::{TinyQuanta, TqConfig};
use super::ts::{TimeSharing, TsConfig};
use super::ts_block::{TsBlock, TsBlockConfig};
use super::ws::{PerWorkerFcfs, StealRule};
use super::{Policy, PolicyContext, PolicyError};
use crate::workers::MAX_WORKERS;

/// A parsed policy with its parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PolicySpec {
    /// Per-worker queues, arrivals hashed to a worker.
    DFcfs,
    /// One central FIFO.
    CFcfs,
    /// Fixed priority: shortest type first, any worker.
    Fp,
    /// Earliest deadline first.
    Edf(EdfConfig),
    /// DARC with workers fixed for the shortest group.
    DarcStatic(DarcStaticConfig),
    /// Dynamic DARC.
    Darc(DarcConfig),
    /// Dynamic DARC with the `darc+` rules as defaults (docs/darc-variant.md).
    DarcPlus(DarcConfig),
    /// `darc+` lending reserved workers to longer types and reclaiming them
    /// by preemption where the mechanism's cost allows.
    DarcLend(LendConfig),
    /// `darc-lend` that owes a starving type its fair share of the workers:
    /// `psp serve`'s default.
    DarcFair(LendConfig),
    /// Shinjuku time sharing.
    Ts(TsConfig),
    /// Preempt as soon as a short request is blocked.
    TsBlock(TsBlockConfig),
    /// Concord's JBSQ(k) with a fixed quantum.
    Concord(ConcordConfig),
    /// Work stealing: per-worker queues fed by flow, idle workers steal.
    Ws(StealRule),
    /// SYNERGY: feedback, conditional preemption, wait queue, stealing.
    Synergy(SynergyConfig),
    /// Tiny Quanta: JSQ plus per-worker processor sharing.
    Tq(TqConfig),
}

/// A policy name and the policy at its defaults.
type Named = (&'static str, fn() -> PolicySpec);

/// Every policy name. A policy's first name is its canonical one (`sjf` is
/// another name of `fp`).
const POLICIES: [Named; 16] = [
    ("d-fcfs", || PolicySpec::DFcfs),
    ("c-fcfs", || PolicySpec::CFcfs),
    ("fp", || PolicySpec::Fp),
    ("sjf", || PolicySpec::Fp),
    ("edf", || PolicySpec::Edf(EdfConfig::default())),
    ("darc-static", || {
        PolicySpec::DarcStatic(DarcStaticConfig::default())
    }),
    ("darc", || PolicySpec::Darc(DarcConfig::default())),
    ("darc+", || PolicySpec::DarcPlus(DarcConfig::plus())),
    ("darc-lend", || PolicySpec::DarcLend(LendConfig::default())),
    ("darc-fair", || PolicySpec::DarcFair(LendConfig::fair())),
    ("ts", || PolicySpec::Ts(TsConfig::default())),
    ("ts-block", || PolicySpec::TsBlock(TsBlockConfig::default())),
    ("concord", || PolicySpec::Concord(ConcordConfig::default())),
    ("ws", || PolicySpec::Ws(StealRule::default())),
    ("synergy", || PolicySpec::Synergy(SynergyConfig::default())),
    ("tq", || PolicySpec::Tq(TqConfig::default())),
];

/// The names of `policies`, in order (so that [`POLICY_NAMES`] is a constant).
const fn names<const N: usize>(policies: [Named; N]) -> [&'static str; N] {
    let mut out = [""; N];
    let mut i = 0;
    while i < N {
        out[i] = policies[i].0;
        i += 1;
    }
    out
}

/// The policy names [`PolicySpec`] parses.
pub const POLICY_NAMES: &[&str] = &names(POLICIES);

/// The policies under their canonical names.
fn canonical() -> impl Iterator<Item = (&'static str, PolicySpec)> {
    POLICIES
        .iter()
        .map(|&(name, make)| (name, make()))
        .filter(|(name, spec)| spec.name() == *name)
}

/// The known policies as the unknown-policy error lists them (`darc-static:N`).
pub(crate) fn known_policies() -> String {
    let known: Vec<String> = canonical()
        .map(
            |(name, mut spec)| match spec.config().and_then(|c| c.leading_key()) {
                Some(key) => format!("{name}:{key}"),
                None => name.to_string(),
            },
        )
        .collect();
    known.join(", ")
}

/// Every parameter of every policy, from the policies' tables, in the order of
/// their canonical names.
pub fn parameters() -> Vec<ParamInfo> {
    canonical()
        .flat_map(|(name, mut spec)| spec.config().map(|c| c.describe(name)).unwrap_or_default())
        .collect()
}

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

/// How a policy's preemptions reach a worker, as its parameters say
/// ([`PolicySpec::preemption_model`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreemptionModel {
    /// The policy never preempts.
    None,
    /// A named mechanism.
    Mechanism(PreemptionMechanism),
    /// The worker's own timer fires (no signal); the switch costs this (ns).
    Switch(u64),
    /// A preemption costs this in all (ns), half to reach the worker, half
    /// to switch (`ts-block`).
    SignalAndSwitch(u64),
}

/// The published system a policy reproduces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelledSystem {
    /// Shinjuku (`ts`, `ts-block`).
    Shinjuku,
    /// SYNERGY, and the decentralized policies it is measured against.
    Synergy,
    /// Perséphone (the others).
    Persephone,
}

impl PolicySpec {
    /// Its canonical name, and the policy at its defaults.
    fn entry(&self) -> Named {
        *POLICIES
            .iter()
            .find(|(_, make)| discriminant(&make()) == discriminant(self))
            .expect("every policy is named")
    }

    /// The canonical name, without parameters.
    fn name(&self) -> &'static str {
        self.entry().0
    }

    /// The configuration its parameters read and write (`None`: it takes none).
    fn config(&mut self) -> Option<&mut dyn Configure> {
        match self {
            PolicySpec::DFcfs | PolicySpec::CFcfs | PolicySpec::Fp => None,
            PolicySpec::Edf(c) => Some(c),
            PolicySpec::DarcStatic(c) => Some(c),
            PolicySpec::Darc(c) | PolicySpec::DarcPlus(c) => Some(c),
            PolicySpec::DarcLend(c) | PolicySpec::DarcFair(c) => Some(c),
            PolicySpec::Ts(c) => Some(c),
            PolicySpec::TsBlock(c) => Some(c),
            PolicySpec::Concord(c) => Some(c),
            PolicySpec::Ws(c) => Some(c),
            PolicySpec::Synergy(c) => Some(c),
            PolicySpec::Tq(c) => Some(c),
        }
    }

    /// How the policy's preemptions reach a worker, as its parameters
    /// describe them (a simulator prices the description: the ns live
    /// there, not here).
    pub fn preemption_model(&self) -> PreemptionModel {
        let named_or_switch = |m: Option<PreemptionMechanism>, cost_ns| {
            m.map_or(PreemptionModel::Switch(cost_ns), PreemptionModel::Mechanism)
        };
        match *self {
            PolicySpec::Ts(c) => named_or_switch(c.mechanism, c.cost_ns),
            PolicySpec::Concord(c) => named_or_switch(c.mechanism, c.cost_ns),
            PolicySpec::TsBlock(c) => PreemptionModel::SignalAndSwitch(c.cost_ns),
            PolicySpec::Synergy(c) => PreemptionModel::Mechanism(c.mechanism),
            PolicySpec::Tq(c) => PreemptionModel::Mechanism(c.mechanism),
            PolicySpec::DarcLend(c) | PolicySpec::DarcFair(c) => {
                PreemptionModel::Mechanism(c.mechanism)
            }
            _ => PreemptionModel::None,
        }
    }

    /// The published system the policy reproduces (the simulator's `--system
    /// own` runs each policy on that system's cost preset).
    pub fn modelled_system(&self) -> ModelledSystem {
        match self {
            PolicySpec::Ts(_) | PolicySpec::TsBlock(_) => ModelledSystem::Shinjuku,
            PolicySpec::DFcfs | PolicySpec::Ws(_) | PolicySpec::Synergy(_) => {
                ModelledSystem::Synergy
            }
            _ => ModelledSystem::Persephone,
        }
    }

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
            PolicySpec::Fp => Box::new(Darc::new_static(ctx, DarcStaticConfig::default(), name)?),
            PolicySpec::Edf(c) => Box::new(Edf::new(ctx, c, name)?),
            PolicySpec::DarcStatic(c) => Box::new(Darc::new_static(ctx, c, name)?),
            PolicySpec::Darc(c) | PolicySpec::DarcPlus(c) => {
                if c.reservation.spillway > ctx.workers {
                    return Err(ctx_err(format!(
                        "{} spillway workers on {} workers",
                        c.reservation.spillway, ctx.workers
                    )));
                }
                Box::new(Darc::new_dynamic(ctx, c, name))
            }
            PolicySpec::DarcLend(c) | PolicySpec::DarcFair(c) => {
                Box::new(Darc::new_lending(ctx, c, name))
            }
            PolicySpec::Ts(c) => Box::new(TimeSharing::new(ctx, c, name)?),
            PolicySpec::TsBlock(c) => Box::new(TsBlock::new(ctx, c, name)?),
            PolicySpec::Concord(c) => Box::new(Concord::new(ctx, c, name)),
            PolicySpec::Ws(rule) => Box::new(PerWorkerFcfs::new(ctx, Some(rule), name)),
            PolicySpec::Synergy(c) => Box::new(Synergy::new(ctx, c, name)),
            PolicySpec::Tq(c) => Box::new(TinyQuanta::new(ctx, c, name)),
        })
    }
}

impl FromStr for PolicySpec {
    type Err = PolicyError;

    /// `name` or `name:param,...`, each parameter checked against its table.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let (name, args) = match s.split_once(':') {
            Some((name, args)) => (
                name,
                args.split(',')
                    .map(str::trim)
                    .filter(|a| !a.is_empty())
                    .collect(),
            ),
            None => (s, Vec::new()),
        };
        let Some(&(_, make)) = POLICIES.iter().find(|(n, _)| *n == name) else {
            return Err(PolicyError::Unknown(s.to_string()));
        };
        let mut spec = make();
        match spec.config() {
            Some(c) => c.read(s, &args)?,
            None if !args.is_empty() => {
                return Err(PolicyError::BadParameter {
                    policy: s.to_string(),
                    msg: "takes no parameters".into(),
                });
            }
            None => {}
        }
        Ok(spec)
    }
}

impl fmt::Display for PolicySpec {
    /// The canonical name: parameters at their defaults are left out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (name, make) = self.entry();
        let (mut spec, mut base) = (*self, make());
        let parts = match (spec.config(), base.config()) {
            (Some(c), Some(b)) => c.written(b),
            _ => Vec::new(),
        };
        if parts.is_empty() {
            f.write_str(name)
        } else {
            write!(f, "{name}:{}", parts.join(","))
        }
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
            "darc-lend",
            "darc-lend:mech=uintr,budget=10,gain=1,keep=1,samples=20",
            "darc-lend:mech=none",
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
        // Other spellings of the same policies.
        for (s, canonical) in [
            ("sjf", "fp"),
            ("ts:mq,requeue=tail", "ts"),
            (" darc: delta = 0.5 ", "darc:delta=0.5"),
            ("ts:quantum=1,quantum=2", "ts:quantum=2"),
            ("c-fcfs:", "c-fcfs"),
            ("darc-static:delta=0.5,2", "darc-static:2,delta=0.5"),
            ("ts-block:pick=short,4", "ts-block:4,pick=short"),
        ] {
            assert_eq!(s.parse::<PolicySpec>().unwrap().to_string(), canonical);
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
    fn bad_names_are_one_line_errors_naming_what_is_wrong() {
        for (s, says) in [
            (
                "nope",
                "unknown policy 'nope' (known: d-fcfs, c-fcfs, fp, edf, darc-static:N,",
            ),
            ("darc-static", "expects darc-static:N (workers reserved"),
            ("darc-static:1,2", "expects darc-static:N"),
            ("darc-static:x", "N must be an integer in [0, 127], not 'x'"),
            ("darc:delta=-1", "delta must be in [0, 1000], not '-1'"),
            (
                "darc:bogus=1",
                "unknown parameter 'bogus' (known: delta, spillway, round,",
            ),
            ("darc:spillway=0", "spillway must be an integer in [1, 128]"),
            (
                "darc:order=fifo",
                "order must be type or oldest, not 'fifo'",
            ),
            (
                "darc:round=up",
                "round must be one of paper, ceil, floor, load, not 'up'",
            ),
            ("darc+:ratios=x", "ratios must be completions or arrivals"),
            ("darc+:longest=yes", "longest must be in [0, 1000000]"),
            ("darc+:longest=-1", "longest"),
            ("darc+:1", "'1' is not key=value"),
            (
                "ts:quantum=0",
                "quantum must be in [0.1, 1000000] us, not '0'",
            ),
            (
                "ts:xq",
                "'xq' is neither key=value nor a value of queues (mq or sq)",
            ),
            ("ts:queues=sq", "unknown parameter 'queues'"),
            (
                "ts-block",
                "expects ts-block:COST (the simulated total preemption cost",
            ),
            ("ts-block:-1", "COST must be in [0, 1000000] us, not '-1'"),
            ("c-fcfs:1", "takes no parameters"),
            ("edf:k=0", "k must be in (0, 1000000], not '0'"),
            ("edf:2", "'2' is not key=value"),
            ("synergy:ws=maybe", "ws must be on or off, not 'maybe'"),
            (
                "tq:mech=irq",
                "mech must be one of ci, signal, uintr, posted, free, none, not 'irq'",
            ),
        ] {
            let e = s.parse::<PolicySpec>().expect_err(s).to_string();
            assert!(e.contains(says), "{s}: '{e}' lacks '{says}'");
            assert!(!e.contains('\n'), "{s}: '{e}'");
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
}
