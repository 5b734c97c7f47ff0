//! Policy names and parameters as users write them, e.g. `darc`,
//! `darc:delta=0.2,round=ceil`, `darc-static:2`, `ts:sq,quantum=5,cost=1`,
//! `ts-block:4`. Parsing validates once; [`PolicySpec::build`] makes the policy.
//!
//! The policies themselves are the registry's entries ([`super::registry`]):
//! this module parses a name against them, prints the canonical name, and
//! checks a context before an entry's constructor runs. [`parameters`] lists
//! every parameter with its range, default and doc, for docs/guide/reference.md and tests.

use std::fmt;
use std::str::FromStr;

use super::param::ParamInfo;
use super::registry::{POLICIES, PolicyConfig, PolicyEntry, lookup};
use super::{ModelledSystem, Policy, PolicyContext, PolicyError, PreemptionModel, Shape};
use crate::workers::MAX_WORKERS;

/// A parsed policy: a registry entry and its configuration.
#[derive(Debug)]
pub struct PolicySpec {
    entry: &'static PolicyEntry,
    config: Box<dyn PolicyConfig>,
}

impl Clone for PolicySpec {
    fn clone(&self) -> Self {
        Self {
            entry: self.entry,
            config: self.config.clone_config(),
        }
    }
}

impl PartialEq for PolicySpec {
    fn eq(&self, other: &Self) -> bool {
        self.entry.name == other.entry.name && self.config.same_config(other.config.as_ref())
    }
}

/// The known policies as the unknown-policy error and `--policy`'s help
/// list them (`darc-static:N`), from the registry.
pub fn known_policies() -> String {
    let known: Vec<String> = POLICIES
        .iter()
        .map(|e| match (e.defaults)().leading_key() {
            Some(key) => format!("{}:{key}", e.name),
            None => e.name.to_string(),
        })
        .collect();
    known.join(", ")
}

/// Every parameter of every policy, from the policies' tables, in the order of
/// the registry.
pub fn parameters() -> Vec<ParamInfo> {
    POLICIES
        .iter()
        .flat_map(|e| (e.defaults)().describe(e.name))
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
            Some(prev) if lookup(POLICIES, name).is_none() && prev.contains(':') => {
                prev.push(',');
                prev.push_str(piece);
            }
            _ => out.push(piece.to_string()),
        }
    }
    out
}

impl PolicySpec {
    /// `s` (`name` or `name:param,...`) parsed against `registry`, each
    /// parameter checked against its table: what [`FromStr`] does over
    /// [`POLICIES`], for a registry of one's own.
    ///
    /// # Errors
    /// An unknown name, or a parameter its table rejects.
    pub fn parse_in(registry: &[&'static PolicyEntry], s: &str) -> Result<Self, PolicyError> {
        Self::parse_scaled(registry, s, 1.0)
    }

    /// `s` parsed as [`FromStr`] does, for a workload that runs `time_scale`
    /// times slower than the one it stands for (a `-x1000` workload: 1000).
    /// The policy's time constants (quanta, SYNERGY's `long` and `wqd`)
    /// default to their values times `time_scale`, so the experiment keeps
    /// its proportions; those that `s` sets keep the value written, and
    /// preemption costs (the machine's) are never scaled.
    ///
    /// # Errors
    /// As [`FromStr`], and a scaled default out of its range.
    pub fn parse_for_time_scale(s: &str, time_scale: f64) -> Result<Self, PolicyError> {
        Self::parse_scaled(POLICIES, s, time_scale)
    }

    fn parse_scaled(
        registry: &[&'static PolicyEntry],
        s: &str,
        time_scale: f64,
    ) -> Result<Self, PolicyError> {
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
        let Some(entry) = lookup(registry, name) else {
            return Err(PolicyError::Unknown(s.to_string()));
        };
        let mut config = (entry.defaults)();
        if time_scale != 1.0 {
            config
                .scale_times(time_scale)
                .map_err(|msg| PolicyError::BadParameter {
                    policy: s.to_string(),
                    msg,
                })?;
        }
        if config.values().is_empty() && !args.is_empty() {
            return Err(PolicyError::BadParameter {
                policy: s.to_string(),
                msg: "takes no parameters".into(),
            });
        }
        config.read(s, &args)?;
        Ok(Self { entry, config })
    }

    /// `entry` with `config`.
    ///
    /// # Panics
    /// When `config` is not of the entry's configuration type.
    pub fn new(entry: &'static PolicyEntry, config: impl PolicyConfig) -> Self {
        assert_eq!(
            (entry.defaults)().as_any().type_id(),
            config.as_any().type_id(),
            "{} takes another configuration",
            entry.name
        );
        Self {
            entry,
            config: Box::new(config),
        }
    }

    /// The registry entry.
    pub fn entry(&self) -> &'static PolicyEntry {
        self.entry
    }

    /// The configuration.
    pub fn config(&self) -> &dyn PolicyConfig {
        self.config.as_ref()
    }

    /// The configuration as its concrete type, if it is a `C`.
    pub fn config_as<C: 'static>(&self) -> Option<&C> {
        self.config.as_any().downcast_ref()
    }

    /// The canonical name, without parameters.
    pub fn name(&self) -> &'static str {
        self.entry.name
    }

    /// How the policy's preemptions reach a worker, as its parameters
    /// describe them (a simulator prices the description: the ns live
    /// there, not here).
    pub fn preemption_model(&self) -> PreemptionModel {
        self.config.preemption_model()
    }

    /// The published system the policy reproduces (the simulator's `--system
    /// own` runs each policy on that system's cost preset).
    pub fn modelled_system(&self) -> ModelledSystem {
        self.config.modelled_system()
    }

    /// The fixed time slice of a policy that runs requests in quanta (`ts`,
    /// `concord`, `tq`, and `synergy` with its dynamic quantum off): what an
    /// executor must be able to honour. `None` for the others.
    pub fn fixed_quantum_ns(&self) -> Option<u64> {
        self.config.fixed_quantum_ns()
    }

    /// The shortest time slice an executor may have to step through for this
    /// policy, when the shortest request type's mean service time is
    /// `shortest_mean_ns` (infinite: unknown): the fixed quantum, or for
    /// SYNERGY's dynamic quantum its floor. `None`: no time slices.
    pub fn shortest_slice_ns(&self, shortest_mean_ns: f64) -> Option<u64> {
        self.config.shortest_slice_ns(shortest_mean_ns)
    }

    /// The application-feedback threshold of a policy driven by it (SYNERGY's
    /// `long`): the synthetic application declares requests asking for at
    /// least this much service long. `None` for the others.
    pub fn feedback_threshold_ns(&self) -> Option<u64> {
        self.config.feedback_threshold_ns()
    }

    /// The execution shape it runs in.
    pub fn shape(&self) -> Shape {
        self.config.shape()
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
        self.config.build(ctx, name)
    }
}

impl FromStr for PolicySpec {
    type Err = PolicyError;

    /// `name` or `name:param,...`, each parameter checked against its table.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse_in(POLICIES, s)
    }
}

impl fmt::Display for PolicySpec {
    /// The canonical name: parameters at their defaults are left out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let base = (self.entry.defaults)();
        let parts = self.config.written(&base.values());
        if parts.is_empty() {
            f.write_str(self.entry.name)
        } else {
            write!(f, "{}:{}", self.entry.name, parts.join(","))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::darc::{DARC, DARC_PLUS, DarcConfig};

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
        assert_eq!(plus, PolicySpec::new(&DARC_PLUS, DarcConfig::plus()));
        let paper: PolicySpec = "darc".parse().unwrap();
        assert_eq!(paper, PolicySpec::new(&DARC, DarcConfig::default()));
        assert_ne!(DarcConfig::plus(), DarcConfig::default());
        // Every darc+ rule can be turned off one by one; all off is the paper's DARC.
        let off: PolicySpec = "darc+:order=type,longest=0,round=paper,headroom=0"
            .parse()
            .unwrap();
        assert_eq!(off, PolicySpec::new(&DARC_PLUS, DarcConfig::default()));
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

    #[test]
    fn a_slowed_down_workload_scales_the_policies_time_constants_but_not_costs_or_what_is_written()
    {
        let at = |s: &str, k: f64| PolicySpec::parse_for_time_scale(s, k).unwrap().to_string();
        // Quanta and SYNERGY's thresholds follow the workload's time scale ...
        assert_eq!(at("ts", 1000.0), "ts:quantum=5000");
        assert_eq!(at("concord", 100.0), "concord:quantum=500");
        assert_eq!(at("tq", 1000.0), "tq:quantum=2000");
        assert_eq!(at("synergy", 1000.0), "synergy:quantum=5000,long=10000");
        assert_eq!(
            at("synergy:wqd=2", 10.0),
            "synergy:quantum=50,wqd=2,long=100"
        );
        // ... what the user wrote stays, and so does a mechanism's cost.
        assert_eq!(at("ts:quantum=7,cost=2", 1000.0), "ts:quantum=7,cost=2");
        // (The canonical name omits what equals the unscaled default.)
        assert_eq!(at("synergy:long=10", 1000.0), "synergy:quantum=5000");
        assert_eq!(
            at("synergy:long=20", 1000.0),
            "synergy:quantum=5000,long=20"
        );
        // A policy without time constants, or no scaling, is unchanged.
        assert_eq!(at("darc", 1000.0), "darc");
        assert_eq!(at("ts", 1.0), "ts");
        // A scaled default past its range is an error naming it.
        let e = PolicySpec::parse_for_time_scale("ts", 1e6)
            .unwrap_err()
            .to_string();
        assert!(e.contains("quantum") && e.contains("time scale"), "{e}");
    }
}
