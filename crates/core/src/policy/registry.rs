//! The policy registry: every policy the project knows, one entry each.
//!
//! A policy is one file that exports a [`PolicyEntry`]: its names, its
//! configuration at its defaults (whose [`Params`](super::param::Params) table
//! is the parameter list), and through the configuration ([`PolicyConfig`]) its
//! constructor, execution shape and what the executors price (preemption
//! model, modelled system, time slices). [`POLICIES`] lists the entries; parsing
//! and printing a [`PolicySpec`](super::PolicySpec), the unknown-policy error,
//! the parameter table of docs/guide/reference.md and the tests iterate it. Adding a policy is
//! its file plus one line here (see `crates/sim/examples/own_policy.rs` for a
//! worked example, which parses through a registry of its own).
//!
//! Nothing here runs a policy: it names and builds them.

use std::any::Any;
use std::fmt;

use super::param::Configure;
use super::{Policy, PolicyContext, PolicyError, PreemptionMechanism, Shape};

/// One policy as a file exports it.
#[derive(Debug)]
pub struct PolicyEntry {
    /// The canonical name (what `Display` writes).
    pub name: &'static str,
    /// A spec that runs as written (its required arguments filled, e.g.
    /// `darc-static:1`): what the tests iterate ([`examples_with`]), so a
    /// policy added to [`POLICIES`] is tested without a list to update.
    pub example: &'static str,
    /// Other names it parses under (`sjf` for `fp`).
    pub aliases: &'static [&'static str],
    /// The configuration at the policy's defaults.
    pub defaults: fn() -> Box<dyn PolicyConfig>,
}

impl PolicyEntry {
    /// Whether `name` names this policy.
    pub fn answers_to(&self, name: &str) -> bool {
        self.name == name || self.aliases.contains(&name)
    }
}

/// Every policy, in the order docs/guide/reference.md and the unknown-policy error list them.
pub static POLICIES: &[&PolicyEntry] = &[
    &super::ws::D_FCFS,
    &super::fcfs::C_FCFS,
    &super::darc::FP,
    &super::edf::EDF,
    &super::darc::DARC_STATIC,
    &super::darc::DARC,
    &super::darc::DARC_PLUS,
    &super::lend::DARC_LEND,
    &super::lend::DARC_FAIR,
    &super::ts::TS,
    &super::ts_block::TS_BLOCK,
    &super::concord::CONCORD,
    &super::ws::WS,
    &super::synergy::SYNERGY,
    &super::tq::TQ,
];

/// Every policy's [`PolicyEntry::example`], in [`POLICIES`]' order, each
/// with those of `params` (`(key, value)`) that its policy takes: e.g.
/// `[("samples", "20")]` gives DARC's variants a short profiling window and
/// leaves the other policies as they are. The list the tests run every
/// policy through.
pub fn examples_with(params: &[(&str, &str)]) -> Vec<String> {
    POLICIES
        .iter()
        .map(|e| {
            let keys: Vec<&str> = (e.defaults)()
                .describe(e.name)
                .iter()
                .map(|p| p.key)
                .collect();
            let mut spec = e.example.to_string();
            for (key, value) in params.iter().filter(|(k, _)| keys.contains(k)) {
                spec.push(if spec.contains(':') { ',' } else { ':' });
                spec.push_str(&format!("{key}={value}"));
            }
            spec
        })
        .collect()
}

/// The entry named `name` (canonical or alias) in `registry`.
pub fn lookup(registry: &[&'static PolicyEntry], name: &str) -> Option<&'static PolicyEntry> {
    registry.iter().copied().find(|e| e.answers_to(name))
}

/// A policy's configuration: its parameters ([`Configure`], from its
/// [`Params`](super::param::Params) table) and what a configured policy tells
/// its executors. Object-safe: [`PolicySpec`](super::PolicySpec) holds one
/// boxed.
pub trait PolicyConfig: Configure + ConfigValue + fmt::Debug + Send + Sync {
    /// Builds the policy for `ctx` (already checked for its worker count,
    /// types and queue capacity), labelled `label` (its canonical name).
    ///
    /// # Errors
    /// When the context cannot host this configuration.
    fn build(&self, ctx: &PolicyContext, label: String) -> Result<Box<dyn Policy>, PolicyError>;

    /// The execution shape it runs in (the built policy's
    /// [`Policy::execution`] agrees: a test checks every entry).
    fn shape(&self) -> Shape;

    /// How its preemptions reach a worker, as its parameters describe them.
    fn preemption_model(&self) -> PreemptionModel {
        PreemptionModel::None
    }

    /// The published system it reproduces.
    fn modelled_system(&self) -> ModelledSystem {
        ModelledSystem::Persephone
    }

    /// Its fixed time slice, for a policy that runs requests in quanta.
    fn fixed_quantum_ns(&self) -> Option<u64> {
        None
    }

    /// The shortest time slice an executor may have to step through when the
    /// shortest type's mean is `shortest_mean_ns` (infinite: unknown).
    fn shortest_slice_ns(&self, shortest_mean_ns: f64) -> Option<u64> {
        let _ = shortest_mean_ns;
        self.fixed_quantum_ns()
    }

    /// The application-feedback threshold of a policy driven by it.
    fn feedback_threshold_ns(&self) -> Option<u64> {
        None
    }
}

/// What [`PolicySpec`](super::PolicySpec) needs of a configuration to be a
/// value (cloned, compared): written once for every `Clone + PartialEq`
/// configuration.
pub trait ConfigValue: Any {
    /// A boxed copy.
    fn clone_config(&self) -> Box<dyn PolicyConfig>;
    /// Whether `other` is the same type with the same values.
    fn same_config(&self, other: &dyn PolicyConfig) -> bool;
    /// For downcasting to the concrete configuration.
    fn as_any(&self) -> &dyn Any;
}

impl<T: PolicyConfig + Clone + PartialEq> ConfigValue for T {
    fn clone_config(&self) -> Box<dyn PolicyConfig> {
        Box::new(self.clone())
    }

    fn same_config(&self, other: &dyn PolicyConfig) -> bool {
        other.as_any().downcast_ref::<T>() == Some(self)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// How a policy's preemptions reach a worker, as its parameters say
/// ([`PolicyConfig::preemption_model`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreemptionModel {
    /// The policy never preempts.
    None,
    /// A named mechanism, priced by the simulator from the mechanism's table.
    Mechanism(PreemptionMechanism),
    /// The worker's own switch costs this many ns (no signal to reach it).
    Switch(u64),
    /// This many ns in all, half to reach the worker (a signal), half to
    /// switch (`ts-block`'s `COST`).
    SignalAndSwitch(u64),
}

impl PreemptionModel {
    /// A named mechanism's model, else a switch of `cost_ns` (`ts`'s and
    /// `concord`'s `cost`).
    pub fn named_or_switch(mechanism: Option<PreemptionMechanism>, cost_ns: u64) -> Self {
        mechanism.map_or(Self::Switch(cost_ns), Self::Mechanism)
    }
}

/// The published system a policy reproduces ([`PolicyConfig::modelled_system`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelledSystem {
    /// Shinjuku (`ts`, `ts-block`).
    Shinjuku,
    /// SYNERGY's prototype (`d-fcfs`, `ws`, `synergy`).
    Synergy,
    /// Perséphone (the others).
    Persephone,
}

/// The configuration of a policy that takes no parameters (`c-fcfs`, `fp`,
/// `d-fcfs`): the policy's file implements [`PolicyConfig`] for its own
/// unit type, declared with this macro.
#[macro_export]
#[doc(hidden)]
macro_rules! no_params {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct $name;

        impl $crate::policy::param::Params for $name {
            const PARAMS: &'static [$crate::policy::param::Param<Self>] = &[];
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{PolicySpec, TypeInfo};

    #[test]
    fn every_example_parses_as_its_own_policy_and_takes_only_known_params() {
        for e in POLICIES {
            let spec: PolicySpec = e
                .example
                .parse()
                .unwrap_or_else(|err| panic!("{}: example {:?}: {err}", e.name, e.example));
            assert_eq!(spec.name(), e.name);
        }
        let with = examples_with(&[("samples", "20"), ("no-such-key", "1")]);
        assert_eq!(with.len(), POLICIES.len());
        assert!(with.contains(&"darc:samples=20".to_string()), "{with:?}");
        assert!(with.contains(&"darc-static:1".to_string()), "{with:?}");
        assert!(with.contains(&"c-fcfs".to_string()), "{with:?}");
        for spec in &with {
            assert!(spec.parse::<PolicySpec>().is_ok(), "{spec}");
        }
    }

    #[test]
    fn names_are_unique_across_the_registry() {
        let mut names: Vec<&str> = POLICIES
            .iter()
            .flat_map(|e| std::iter::once(e.name).chain(e.aliases.iter().copied()))
            .collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "a name is taken twice: {names:?}");
    }

    /// The shape an entry declares is the one its built policy runs in, at
    /// its defaults and where a parameter changes it.
    #[test]
    fn every_entry_declares_the_shape_its_policy_runs_in() {
        let ctx = PolicyContext {
            workers: 2,
            types: ["A", "B"]
                .iter()
                .zip([1_000.0, 100_000.0])
                .map(|(name, mean)| TypeInfo {
                    name: name.to_string(),
                    mean_service_ns: Some(mean),
                })
                .collect(),
            queue_capacity: 16,
        };
        let variants = ["darc-lend:mech=none", "darc-fair:mech=none", "ts:mech=none"];
        let specs = POLICIES
            .iter()
            .map(|e| match (e.defaults)().leading_key() {
                Some(_) => format!("{}:1", e.name),
                None => e.name.to_string(),
            })
            .chain(variants.iter().map(|v| v.to_string()));
        for s in specs {
            let spec: PolicySpec = s.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
            let built = spec.build(&ctx).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(spec.shape(), built.execution().shape(), "{s}");
        }
    }
}
