//! `darc-cp`: DARC's reservations plus SYNERGY-style conditional preemption,
//! a combination neither system has.
//!
//! DARC (non-preemptive) lets short requests steal idle workers of longer
//! groups, but a burst of short requests that finds every such worker busy
//! with a long request waits for a whole long service time. Here a request
//! of a longer group that DARC dispatches onto a worker a shorter group may
//! use (the longer groups' workers are stealable by shorter ones) runs with a
//! quantum; when it expires the request is preempted only if a request of a
//! shorter group that may use that worker is waiting (else the quantum
//! renews, as SYNERGY's conditional preemption). The preempted request goes
//! back to the head of its typed queue. Requests on workers no shorter group
//! may use, and every request of the shortest group, are never preempted.
//! Before DARC's first reservation (its c-FCFS warm-up) nothing is armed.
//!
//! The reservation, profiling and dispatch are DARC's own ([`Darc`]); this
//! wrapper only arms quanta and decides expiries.

use super::darc::Darc;
use super::{Action, Policy, PolicyStats, PreemptionMechanism};
use crate::request::{Nanos, Request, TypeId, UNKNOWN_TYPE};
use crate::reservation::Reservation;
use crate::workers::{WorkerId, WorkerSet};

/// `darc-cp`'s own parameters (DARC's are DARC's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DarcCpConfig {
    /// A preemptible request's quantum.
    pub quantum_ns: Nanos,
    /// How preemption reaches a worker (the simulator charges its cost).
    pub mechanism: PreemptionMechanism,
}

impl Default for DarcCpConfig {
    fn default() -> Self {
        Self {
            quantum_ns: 5_000,
            mechanism: PreemptionMechanism::CompilerInterrupt,
        }
    }
}

/// DARC with conditional preemption of longer groups' requests on workers
/// shorter groups may use.
#[derive(Debug)]
pub struct DarcCp {
    inner: Darc,
    cfg: DarcCpConfig,
    label: String,
    /// The type each worker runs (armed or not).
    running: Vec<Option<TypeId>>,
    preemptions: u64,
    avoided: u64,
}

impl DarcCp {
    /// `darc` with conditional preemption.
    pub fn new(inner: Darc, workers: usize, cfg: DarcCpConfig, label: String) -> Self {
        Self {
            inner,
            cfg,
            label,
            running: vec![None; workers],
            preemptions: 0,
            avoided: 0,
        }
    }

    /// Whether a request of a group shorter than `t`'s may run on `w`.
    fn shorter_may_use(r: &Reservation, t: TypeId, w: WorkerId) -> bool {
        let g = r.group_of[t as usize];
        r.groups[..g as usize]
            .iter()
            .any(|grp| grp.reserved.or(grp.stealable).contains(w))
    }

    /// Whether a request of a group shorter than `t`'s that may run on `w`
    /// is waiting.
    fn shorter_waiting(&self, r: &Reservation, t: TypeId, w: WorkerId) -> bool {
        let g = r.group_of[t as usize];
        r.order.iter().any(|&s| {
            r.group_of[s as usize] < g
                && r.allowed(s).contains(w)
                && self.inner.queued_by_type(s).is_some_and(|n| n > 0)
        })
    }
}

impl Policy for DarcCp {
    fn name(&self) -> String {
        self.label.clone()
    }

    fn on_arrival(&mut self, req: Request, now: Nanos) -> Result<(), Request> {
        self.inner.on_arrival(req, now)
    }

    fn on_completion(&mut self, worker: WorkerId, req: &Request, service_ns: Nanos, now: Nanos) {
        self.running[worker as usize] = None;
        self.inner.on_completion(worker, req, service_ns, now);
    }

    fn next_action(&mut self, now: Nanos) -> Option<Action> {
        let action = self.inner.next_action(now)?;
        let Action::Dispatch { worker, req, .. } = action else {
            return Some(action);
        };
        self.running[worker as usize] = Some(req.type_id);
        let armed = req.type_id != UNKNOWN_TYPE
            && self
                .inner
                .reservation()
                .is_some_and(|r| Self::shorter_may_use(r, req.type_id, worker));
        Some(Action::Dispatch {
            worker,
            req,
            quantum_ns: armed.then_some(self.cfg.quantum_ns),
        })
    }

    fn on_quantum_expired(&mut self, worker: WorkerId, _now: Nanos) -> bool {
        let t = self.running[worker as usize].expect("an armed worker runs a request");
        let preempt = self
            .inner
            .reservation()
            .is_some_and(|r| self.shorter_waiting(r, t, worker));
        if preempt {
            self.preemptions += 1;
        } else {
            self.avoided += 1;
        }
        preempt
    }

    fn on_preempted(&mut self, worker: WorkerId, req: Request, _now: Nanos) {
        self.running[worker as usize] = None;
        self.inner.requeue_preempted(worker, req);
    }

    fn queued(&self) -> usize {
        self.inner.queued()
    }

    fn idle_workers(&self) -> WorkerSet {
        self.inner.idle_workers()
    }

    fn queued_by_type(&self, t: TypeId) -> Option<usize> {
        self.inner.queued_by_type(t)
    }

    fn reservation(&self) -> Option<&Reservation> {
        self.inner.reservation()
    }

    fn stats(&self) -> PolicyStats {
        PolicyStats {
            preemptions: self.preemptions,
            preemptions_avoided: self.avoided,
            ..self.inner.stats()
        }
    }
}
