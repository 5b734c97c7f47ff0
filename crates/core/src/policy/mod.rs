//! Scheduling policies as pure state machines, and the hooks executors drive.
//!
//! An executor (simulator or runtime dispatcher) calls [`Policy::on_arrival`] when a
//! request arrives, [`Policy::on_completion`] when a worker finishes one, and then
//! drains [`Policy::next_action`] until it returns `None`. Preemptive policies also
//! receive [`Policy::on_quantum_expired`] and [`Policy::on_preempted`]; a policy
//! that asks for a tick ([`Policy::tick_interval`]) gets [`Policy::on_tick`] at
//! least that often. The policy tracks which workers it considers free; it never
//! sees service times except the measured ones handed to `on_completion`.
//!
//! A policy decides *what* happens (dispatch, preempt, re-queue); what carrying
//! it out costs belongs to the executor: the simulator models a mechanism
//! (`psp-sim`'s preemption costs, from the policy's parameters or the system
//! cost model), the runtime pays its real one.
//!
//! One file per policy family, each with its configuration and that
//! configuration's parameter table ([`param`]): [`fcfs`] (c-FCFS), [`edf`],
//! [`darc`] (DARC, DARC-static, FP), [`ts`] (Shinjuku time sharing), [`ts_block`]
//! (preempt as soon as a short request is blocked), [`concord`] (JBSQ(k) with a
//! fixed quantum), [`ws`] (per-worker queues fed by flow: d-FCFS, work stealing;
//! the per-worker rules the runtime's decentralized executor applies),
//! [`synergy`] (SYNERGY: feedback, conditional preemption, the wait queue),
//! [`tq`] (Tiny Quanta: JSQ plus per-worker processor sharing). [`spec`] names
//! the policies and parses them.

pub mod concord;
pub mod darc;
pub mod edf;
pub mod execution;
mod fair;
pub mod fcfs;
pub mod lend;
pub mod param;
pub mod registry;
pub mod spec;
pub mod synergy;
pub mod tq;
pub mod ts;
pub mod ts_block;
pub mod ws;

pub use concord::ConcordConfig;
pub use darc::{DarcConfig, DarcStaticConfig, GroupOrder, RatioSource};
pub use edf::EdfConfig;
pub use execution::{EXECUTIONS, Execution, LocalRules, Shape};
pub use lend::LendConfig;
pub use param::{Accepts, Form, ParamInfo, ParamRange};
pub use registry::{
    ConfigValue, ModelledSystem, POLICIES, PolicyConfig, PolicyEntry, PreemptionModel,
};
pub use spec::{PolicySpec, known_policies, parameters, split_policy_list};
pub use synergy::{CongestionDetector, ShortAverage, SynergyConfig, SynergyRules};
pub use tq::{TqConfig, TqRules};
pub use ts::{Requeue, TsConfig, TsPreempt, TsQueues};
pub use ts_block::{BlockPick, TsBlockConfig};
pub use ws::{PerWorkerRules, StealRule};

use crate::request::{Nanos, Request};
use crate::reservation::Reservation;
use crate::workers::{WorkerId, WorkerSet};

/// What a policy asks its executor to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Run `req` on the free worker `worker`. With a quantum, the executor calls
    /// [`Policy::on_quantum_expired`] each time the request has run that long.
    Dispatch {
        /// A worker the policy considered free.
        worker: WorkerId,
        /// The request to run.
        req: Request,
        /// Time slice, for preemptive policies.
        quantum_ns: Option<Nanos>,
    },
    /// Preempt whatever `worker` runs: the executor interrupts the worker (the
    /// request keeps running until the interrupt lands), the worker switches
    /// away, and the executor calls [`Policy::on_preempted`]. If the request
    /// completes before the interrupt lands, the preemption is void and the
    /// policy sees a completion instead.
    Preempt {
        /// The worker to interrupt.
        worker: WorkerId,
    },
}

/// How a preemption reaches a worker: a policy parameter (`mech=NAME`) naming
/// the mechanism the simulator charges ([`PreemptionMechanism::cost`] holds
/// each one's published cost, which a cost-aware policy also reads). The
/// runtime pays its real mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreemptionMechanism {
    /// Compiler-inserted checks of a flag or of the clock (Concord, Tiny
    /// Quanta, SYNERGY's default), with a user-level switch.
    CompilerInterrupt,
    /// POSIX signals.
    Signal,
    /// Intel user interrupts.
    UserInterrupt,
    /// Shinjuku's posted interrupts without VM exits.
    PostedInterrupt,
    /// Free and instant (the ideal preemptive system).
    Free,
    /// The handlers have no preemption points: a preemption never lands, and
    /// every request runs to completion whatever the policy asks.
    None,
}

/// What one preemption costs: the time until the interrupt reaches the
/// worker (the request runs on meanwhile) and the worker time lost to the
/// switch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MechanismCost {
    /// From the decision to the interrupt reaching the worker.
    pub reach_ns: Nanos,
    /// Worker time lost to the switch, after which the worker is free.
    pub switch_ns: Nanos,
}

impl MechanismCost {
    /// From the decision to a free worker: reach plus switch.
    pub fn total_ns(&self) -> Nanos {
        self.reach_ns + self.switch_ns
    }
}

impl PreemptionMechanism {
    /// Every mechanism, by its parameter name.
    pub const ALL: &'static [(&'static str, PreemptionMechanism)] = &[
        ("ci", PreemptionMechanism::CompilerInterrupt),
        ("signal", PreemptionMechanism::Signal),
        ("uintr", PreemptionMechanism::UserInterrupt),
        ("posted", PreemptionMechanism::PostedInterrupt),
        ("free", PreemptionMechanism::Free),
        ("none", PreemptionMechanism::None),
    ];

    /// What one preemption costs with this mechanism, from the measurements
    /// named on each arm; `None` when a preemption never lands (no
    /// preemption points).
    pub fn cost(self) -> Option<MechanismCost> {
        let (reach_ns, switch_ns) = match self {
            // The worker sees the flag at its next probe (no propagation
            // modelled) and switches at user level (Shinjuku's optimised
            // switch, ~109 cycles at 2 GHz).
            PreemptionMechanism::CompilerInterrupt => (0, 55),
            // SYNERGY's measured p50: send 746 + propagate 2,216 ns to reach
            // the worker, receive 1,434 + return 641 ns of worker time.
            PreemptionMechanism::Signal => (746 + 2_216, 1_434 + 641),
            // SYNERGY's measured p50: 171 + 671 ns to reach the worker, 464 +
            // 45 ns of worker time.
            PreemptionMechanism::UserInterrupt => (171 + 671, 464 + 45),
            // Shinjuku's posted interrupts without VM exits at 2 GHz: 298
            // cycles to send, 1,212 to receive, plus its user-level switch.
            PreemptionMechanism::PostedInterrupt => (149, 606 + 55),
            PreemptionMechanism::Free => (0, 0),
            PreemptionMechanism::None => return None,
        };
        Some(MechanismCost {
            reach_ns,
            switch_ns,
        })
    }
}

/// Counters a policy keeps about its own decisions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PolicyStats {
    /// Preemptions requested (quantum expiries that preempted, preempt actions).
    pub preemptions: u64,
    /// Reservation updates applied (DARC), the first reservation included.
    pub reservation_updates: u64,
    /// Reservation updates considered (DARC).
    pub updates_considered: u64,
    /// Requests an idle worker took from another worker's queue (decided by
    /// the policy in the simulator; counted by the workers in the runtime's
    /// decentralized executor).
    pub steals: u64,
    /// Expired quanta that did not preempt: the quantum was renewed
    /// (conditional preemption with nothing queued on the worker, or a full
    /// wait queue).
    pub preemptions_avoided: u64,
    /// Preempted requests that went through the global wait queue (SYNERGY).
    pub wait_queue_passes: u64,
    /// Times the wait queue became congested (SYNERGY's THRESH_WQD).
    pub congestion_episodes: u64,
    /// DARC: still in its warm-up, scheduling as c-FCFS because its first
    /// profiling window has not filled (no reservation made yet). At the end
    /// of a run, the run was too short for the window.
    pub warming_up: bool,
}

/// A scheduling policy: a state machine over arrivals, completions and time.
///
/// Implementations must not read a clock, spawn threads, do I/O, or allocate in
/// these hooks (storage is sized at construction).
pub trait Policy: Send {
    /// The policy's canonical name with its parameters (e.g. `darc-static:2`).
    fn name(&self) -> String;

    /// A request arrives. Hands it back when its queue is full (the executor counts
    /// the drop).
    fn on_arrival(&mut self, req: Request, now: Nanos) -> Result<(), Request>;

    /// `worker` completed `req` after `service_ns` of measured service; the worker
    /// is free again.
    fn on_completion(&mut self, worker: WorkerId, req: &Request, service_ns: Nanos, now: Nanos);

    /// `worker` took `req` and dropped it unrun: its turn came after its
    /// deadline (the executor's queueing bound), so it was answered
    /// OVERLOADED instead of served late; the worker is free again. No
    /// service was measured: a policy that learns from service times must
    /// not learn from this. The default is a completion of no service, right
    /// for every policy that ignores `service_ns`.
    fn on_dropped(&mut self, worker: WorkerId, req: &Request, now: Nanos) {
        self.on_completion(worker, req, 0, now);
    }

    /// The next dispatch or preemption, if any. Executors call it until `None`.
    fn next_action(&mut self, now: Nanos) -> Option<Action>;

    /// The request on `worker` used up its quantum and is not finished: whether
    /// to preempt it (`false`: it runs another quantum).
    fn on_quantum_expired(&mut self, worker: WorkerId, now: Nanos) -> bool {
        let _ = (worker, now);
        false
    }

    /// The request running on `worker` declared itself long
    /// (`feedback_start()`): the quantum to arm its timer with (`None`: no
    /// timer). Only policies with a feedback rule are called.
    fn on_feedback_start(&mut self, worker: WorkerId, now: Nanos) -> Option<Nanos> {
        let _ = (worker, now);
        None
    }

    /// How the policy must be executed: read once, before the executor is
    /// built (the default: one dispatcher, run to completion).
    fn execution(&self) -> Execution {
        Execution::Central
    }

    /// How many requests the policy may hand a busy worker beyond the one it
    /// runs (0, the default: dispatches go to free workers only). The executor
    /// keeps them in the worker's own FIFO, and a worker that frees starts its
    /// head without the dispatcher (Concord's JBSQ).
    fn local_queue_depth(&self) -> usize {
        0
    }

    /// How often the policy wants [`Policy::on_tick`]; `None` (the default):
    /// never. Read once, when the executor starts.
    fn tick_interval(&self) -> Option<Nanos> {
        None
    }

    /// Time passed: at least every [`Policy::tick_interval`], followed by a
    /// drain of [`Policy::next_action`] like any other hook.
    fn on_tick(&mut self, now: Nanos) {
        let _ = now;
    }

    /// `worker` was preempted (its switch is over) and hands `req` back, with its
    /// remaining work kept by the executor; the worker is free again.
    ///
    /// # Panics
    /// The default panics: only preemptive policies ever ask for preemption.
    fn on_preempted(&mut self, worker: WorkerId, req: Request, now: Nanos) {
        let _ = (worker, req, now);
        unreachable!("{} never preempts", self.name());
    }

    /// Requests waiting in the policy's queues.
    fn queued(&self) -> usize;

    /// Workers the policy considers free.
    fn idle_workers(&self) -> WorkerSet;

    /// Requests of type `t` waiting, for policies that queue by type (`None`
    /// for those that do not, e.g. c-FCFS's single FIFO).
    fn queued_by_type(&self, t: crate::TypeId) -> Option<usize> {
        let _ = t;
        None
    }

    /// The current reservation, for reservation-based policies.
    fn reservation(&self) -> Option<&Reservation> {
        None
    }

    /// Decision counters.
    fn stats(&self) -> PolicyStats {
        PolicyStats::default()
    }
}

/// What a policy is built for.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyContext {
    /// Number of workers (1..=[`crate::MAX_WORKERS`]).
    pub workers: usize,
    /// The request types, indexed by type id.
    pub types: Vec<TypeInfo>,
    /// Bound of each queue the policy keeps (typed, per-worker or central).
    pub queue_capacity: usize,
}

/// A request type as registered with the policy.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeInfo {
    /// Name, for reports.
    pub name: String,
    /// Expected mean service time, when known in advance. Policies that order or
    /// weigh types without profiling (FP, EDF, DARC-static, TS) need it; DARC learns
    /// its profile online and ignores it.
    pub mean_service_ns: Option<f64>,
}

/// Why a policy could not be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PolicyError {
    /// The name is not a policy.
    #[error("unknown policy '{0}' (known: {known})", known = spec::known_policies())]
    Unknown(String),
    /// A parameter is malformed or out of range.
    #[error("policy '{policy}': {msg}")]
    BadParameter {
        /// The policy as written.
        policy: String,
        /// What is wrong.
        msg: String,
    },
    /// The context cannot host the policy.
    #[error("policy '{policy}' cannot run here: {msg}")]
    BadContext {
        /// The policy name.
        policy: String,
        /// What is wrong.
        msg: String,
    },
}

/// The expected mean service time of every type, or an error naming the policy.
fn mean_hints(ctx: &PolicyContext, policy: &str) -> Result<Vec<f64>, PolicyError> {
    ctx.types
        .iter()
        .map(|t| match t.mean_service_ns {
            Some(m) if m.is_finite() && m > 0.0 => Ok(m),
            _ => Err(PolicyError::BadContext {
                policy: policy.to_string(),
                msg: format!("needs the expected mean service time of type '{}'", t.name),
            }),
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod testkit;
