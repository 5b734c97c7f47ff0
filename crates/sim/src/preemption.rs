//! What one preemption costs in simulated time: the simulator's model of each
//! preemption mechanism (published measurements), and the cost a policy's own
//! parameters imply. The policies only name a mechanism (`mech=`) or give a
//! cost (`cost=`); the runtime ignores both and pays its real mechanism.

use psp_core::policy::PreemptionModel;
use psp_core::{Nanos, PolicySpec, PreemptionMechanism};

/// What one preemption costs in the simulator.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PreemptionCost {
    /// From a `Preempt` action to the interrupt reaching the worker (the
    /// request keeps running meanwhile). A quantum expiry needs no signal: the
    /// worker's own timer fires.
    pub signal_ns: Nanos,
    /// Worker time lost to the switch, after which the worker is free.
    pub switch_ns: Nanos,
    /// The handlers have no preemption points (`mech=none`): a preemption
    /// never lands and the request runs to completion.
    pub never_lands: bool,
}

impl PreemptionCost {
    /// The cost of `mechanism` ([`PreemptionMechanism::cost`], the
    /// published measurements).
    pub fn of_mechanism(mechanism: PreemptionMechanism) -> Self {
        match mechanism.cost() {
            Some(c) => Self {
                signal_ns: c.reach_ns,
                switch_ns: c.switch_ns,
                never_lands: false,
            },
            None => Self {
                never_lands: true,
                ..Self::default()
            },
        }
    }

    /// The cost the simulator charges `spec`'s preemptions: its named
    /// mechanism's; else `ts`'s and `concord`'s `cost` is the worker's switch
    /// (its own timer fires, no signal), `ts-block`'s total cost is half
    /// signal, half switch. Zero for policies that never preempt.
    pub fn for_policy(spec: &PolicySpec) -> Self {
        match spec.preemption_model() {
            PreemptionModel::None => Self::default(),
            PreemptionModel::Mechanism(m) => Self::of_mechanism(m),
            PreemptionModel::Switch(switch_ns) => Self {
                signal_ns: 0,
                switch_ns,
                never_lands: false,
            },
            PreemptionModel::SignalAndSwitch(total_ns) => Self {
                signal_ns: total_ns / 2,
                switch_ns: total_ns - total_ns / 2,
                never_lands: false,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(policy: &str) -> (Nanos, Nanos) {
        let c = PreemptionCost::for_policy(&policy.parse().unwrap());
        (c.signal_ns, c.switch_ns)
    }

    #[test]
    fn a_policy_costs_its_parameters_or_its_named_mechanism() {
        for (policy, signal_and_switch) in [
            ("c-fcfs", (0, 0)),
            ("darc", (0, 0)),
            ("ts", (0, 1_000)),
            ("ts:cost=0.5", (0, 500)),
            ("ts:cost=0.5,mech=signal", (2_962, 2_075)),
            ("concord", (0, 1_000)),
            ("concord:mech=posted", (149, 661)),
            // Half to reach the worker, half its switch.
            ("ts-block:4", (2_000, 2_000)),
            ("ts-block:0.003", (1, 2)),
            ("synergy", (0, 55)),
            ("synergy:mech=uintr", (842, 509)),
            ("tq", (0, 55)),
            ("tq:mech=free", (0, 0)),
        ] {
            assert_eq!(cost(policy), signal_and_switch, "{policy}");
        }
        for policy in ["synergy:mech=none", "darc-lend:mech=none"] {
            assert!(PreemptionCost::for_policy(&policy.parse().unwrap()).never_lands);
        }
        assert!(!PreemptionCost::for_policy(&"darc-lend".parse().unwrap()).never_lands);
    }
}
