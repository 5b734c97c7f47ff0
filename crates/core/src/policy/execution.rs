//! How a policy must be executed: the one decision an executor reads from a
//! policy ([`super::Policy::execution`]) before it builds anything.
//!
//! Four shapes cover every policy here. An executor (the simulator, the
//! runtime) builds exactly the one the policy names, with the rules it
//! carries; nothing else about the policy decides how requests flow. This
//! module only describes; it must not hold executor state.

use super::synergy::SynergyRules;
use super::tq::TqRules;
use super::ws::PerWorkerRules;
use crate::request::Nanos;

/// How a policy's requests are executed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Execution {
    /// One dispatcher sees every request and decides every dispatch; a
    /// request runs to completion on the worker it was given (c-FCFS, FP,
    /// EDF, DARC).
    Central,
    /// One dispatcher decides every dispatch and every preemption; requests
    /// run on green threads and a preempted one goes back to the policy,
    /// which may resume it on any worker (Shinjuku's time sharing,
    /// `ts-block`, Concord).
    CentralPreemptive,
    /// Requests go straight to per-worker queues by flow (as RSS steers
    /// them); workers take from their own queue and steal by the rules; no
    /// dispatcher decides and nothing is preempted (d-FCFS, work stealing).
    WorkerQueues(PerWorkerRules),
    /// Requests go to per-worker queues by the rules; each worker picks its
    /// next request itself and preempts it on a green thread by the rules
    /// (SYNERGY, Tiny Quanta).
    LocalPreemptive(LocalRules),
}

/// The rules of a [`Execution::LocalPreemptive`] policy: pure and `Copy`,
/// applied by the simulator's policy and by the runtime's workers alike.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LocalRules {
    /// SYNERGY: flow-steered queues, a wait queue, stealing, conditional
    /// preemption driven by application feedback.
    Synergy(SynergyRules),
    /// Tiny Quanta: JSQ placement, per-worker processor sharing.
    Tq(TqRules),
}

/// Every execution shape, by name, with what it means: for documentation
/// and reports.
pub const EXECUTIONS: &[(&str, &str)] = &[
    (
        "central",
        "one dispatcher decides every dispatch; requests run to completion",
    ),
    (
        "central-preemptive",
        "one dispatcher decides every dispatch and preemption; requests run on green threads",
    ),
    (
        "worker-queues",
        "requests go to per-worker queues by flow; workers take and steal; no preemption",
    ),
    (
        "local-preemptive",
        "requests go to per-worker queues; workers pick and preempt locally on green threads",
    ),
];

/// An execution shape without its rules: what a policy's registry entry
/// declares ([`super::PolicyConfig::shape`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// [`Execution::Central`].
    Central,
    /// [`Execution::CentralPreemptive`].
    CentralPreemptive,
    /// [`Execution::WorkerQueues`].
    WorkerQueues,
    /// [`Execution::LocalPreemptive`].
    LocalPreemptive,
}

impl Shape {
    /// The shape's name (one of [`EXECUTIONS`]).
    pub fn name(self) -> &'static str {
        EXECUTIONS[self as usize].0
    }
}

impl Execution {
    /// The shape, without its rules.
    pub fn shape(&self) -> Shape {
        match self {
            Execution::Central => Shape::Central,
            Execution::CentralPreemptive => Shape::CentralPreemptive,
            Execution::WorkerQueues(_) => Shape::WorkerQueues,
            Execution::LocalPreemptive(_) => Shape::LocalPreemptive,
        }
    }

    /// The shape's name (one of [`EXECUTIONS`]).
    pub fn name(&self) -> &'static str {
        self.shape().name()
    }

    /// Whether running requests may be preempted (they then run on green
    /// threads, and the application's handler must allow it).
    pub fn preempts(&self) -> bool {
        matches!(
            self,
            Execution::CentralPreemptive | Execution::LocalPreemptive(_)
        )
    }

    /// Whether one dispatcher places every arriving request (a central
    /// queue, typed queues, or Tiny Quanta's JSQ): the simulator's system
    /// cost model charges it per arrival and completion. Flow-steered
    /// queues (d-FCFS, work stealing, SYNERGY) pay no dispatcher.
    pub fn dispatcher_places_arrivals(&self) -> bool {
        match self {
            Execution::Central | Execution::CentralPreemptive => true,
            Execution::WorkerQueues(_) => false,
            Execution::LocalPreemptive(LocalRules::Synergy(_)) => false,
            Execution::LocalPreemptive(LocalRules::Tq(_)) => true,
        }
    }

    /// Whether workers pick their next request and yield without the
    /// dispatcher (Tiny Quanta): the simulator's cost model charges the
    /// dispatcher for arrivals and completions only.
    pub fn workers_pick_locally(&self) -> bool {
        matches!(self, Execution::LocalPreemptive(LocalRules::Tq(_)))
    }

    /// The application-feedback rule, for a policy driven by it (SYNERGY):
    /// a simulated request whose service time is at least this declares
    /// itself long when it begins. `None`: no feedback.
    pub fn feedback_threshold_ns(&self) -> Option<Nanos> {
        match self {
            Execution::LocalPreemptive(LocalRules::Synergy(r)) => Some(r.config().long_ns),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{PolicyContext, PolicySpec, TypeInfo};

    fn execution_of(name: &str) -> Execution {
        let ctx = PolicyContext {
            workers: 2,
            types: vec![
                TypeInfo {
                    name: "A".into(),
                    mean_service_ns: Some(1_000.0),
                },
                TypeInfo {
                    name: "B".into(),
                    mean_service_ns: Some(100_000.0),
                },
            ],
            queue_capacity: 16,
        };
        let spec: PolicySpec = name.parse().unwrap();
        spec.build(&ctx).unwrap().execution()
    }

    #[test]
    fn every_policy_names_one_execution_shape() {
        let expect = [
            ("c-fcfs", "central"),
            ("fp", "central"),
            ("edf", "central"),
            ("darc", "central"),
            ("darc-static:1", "central"),
            ("ts", "central-preemptive"),
            ("ts-block:1", "central-preemptive"),
            ("concord", "central-preemptive"),
            ("d-fcfs", "worker-queues"),
            ("ws", "worker-queues"),
            ("synergy", "local-preemptive"),
            ("tq", "local-preemptive"),
        ];
        for (policy, shape) in expect {
            let e = execution_of(policy);
            assert_eq!(e.name(), shape, "{policy}");
            assert_eq!(
                e.preempts(),
                shape.ends_with("preemptive"),
                "{policy}: preemption follows the shape"
            );
        }
        assert_eq!(
            execution_of("synergy").feedback_threshold_ns(),
            Some(crate::policy::SynergyConfig::default().long_ns)
        );
        assert_eq!(execution_of("ts").feedback_threshold_ns(), None);
        assert!(execution_of("tq").workers_pick_locally());
        assert!(!execution_of("synergy").dispatcher_places_arrivals());
    }
}
