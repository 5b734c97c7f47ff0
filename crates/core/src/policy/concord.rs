//! Concord (SOSP'23): the dispatcher keeps up to `k` requests outstanding at each
//! worker (JBSQ(k): join the bounded shortest queue — the running request plus
//! `k - 1` waiting in the worker's own queue), so a worker that finishes starts
//! its next request without a round trip to the dispatcher. Every request runs
//! with a fixed quantum (5 µs by default); an expired quantum always preempts,
//! and the preempted request goes to the tail of the dispatcher's queue.
//!
//! The worker-local queues belong to the executor ([`Policy::local_queue_depth`]):
//! a dispatch to a busy worker waits there, and a worker that frees starts its
//! local head itself. This policy mirrors their lengths to pick the shortest.

use super::param::{
    COST_US, Count, MECH_OVER_COST_DOC, Micros, Param, ParamRange, Params, Pick, QUANTUM_US,
};
use super::registry::{PolicyConfig, PolicyEntry, PreemptionModel};
use super::{Action, Policy, PolicyContext, PolicyStats, PreemptionMechanism};
use super::{PolicyError, Shape};
use crate::queue::TypedQueue;
use crate::request::{Nanos, Request};
use crate::workers::{WorkerId, WorkerSet};

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

impl Params for ConcordConfig {
    const PARAMS: &'static [Param<Self>] = &[
        Param::keyed(
            "k",
            "JBSQ's bound: requests outstanding per worker, the running one included",
            // A worker's own queue is sized by it.
            &Count::<Self> {
                range: ParamRange::closed(1.0, 64.0),
                get: |c| c.k as u64,
                set: |c, v| c.k = v as usize,
            },
        ),
        Param::keyed(
            "quantum",
            "time slice; an expired one always preempts",
            &Micros::<Self> {
                range: QUANTUM_US,
                get: |c| c.quantum_ns,
                set: |c, v| c.quantum_ns = v,
            },
        )
        .in_workload_time(),
        Param::keyed(
            "cost",
            "the simulated worker time lost per preemption",
            &Micros::<Self> {
                range: COST_US,
                get: |c| c.cost_ns,
                set: |c, v| c.cost_ns = v,
            },
        ),
        Param::keyed(
            "mech",
            MECH_OVER_COST_DOC,
            &Pick::<Self, _> {
                options: PreemptionMechanism::ALL,
                get: |c| c.mechanism,
                set: |c, v| c.mechanism = Some(v),
            },
        ),
    ];
}

/// Concord's JBSQ(k) dispatcher with a fixed quantum.
#[derive(Debug)]
pub struct Concord {
    label: String,
    cfg: ConcordConfig,
    /// The dispatcher's FIFO; headroom for every request handed out, which may
    /// all come back preempted.
    central: TypedQueue,
    /// Requests handed to each worker and not finished or preempted yet.
    outstanding: Vec<usize>,
    /// Workers with nothing outstanding.
    idle: WorkerSet,
    stats: PolicyStats,
}

impl Concord {
    /// Concord over `ctx`.
    pub fn new(ctx: &PolicyContext, cfg: ConcordConfig, label: String) -> Self {
        Self {
            label,
            cfg,
            central: TypedQueue::new(ctx.queue_capacity, ctx.workers * cfg.k),
            outstanding: vec![0; ctx.workers],
            idle: WorkerSet::range(0, ctx.workers),
            stats: PolicyStats::default(),
        }
    }

    fn release(&mut self, worker: WorkerId) {
        let o = &mut self.outstanding[worker as usize];
        *o -= 1;
        if *o == 0 {
            self.idle.insert(worker);
        }
    }
}

impl Policy for Concord {
    fn name(&self) -> String {
        self.label.clone()
    }

    fn execution(&self) -> super::Execution {
        super::Execution::CentralPreemptive
    }

    fn on_arrival(&mut self, req: Request, _now: Nanos) -> Result<(), Request> {
        self.central.push(req)
    }

    fn on_completion(&mut self, worker: WorkerId, _req: &Request, _service_ns: Nanos, _now: Nanos) {
        self.release(worker);
    }

    fn next_action(&mut self, _now: Nanos) -> Option<Action> {
        if self.central.is_empty() {
            return None;
        }
        // JBSQ: the worker with the fewest outstanding requests below k (lowest
        // index on ties).
        let (worker, &n) = self
            .outstanding
            .iter()
            .enumerate()
            .min_by_key(|&(w, &n)| (n, w))?;
        if n >= self.cfg.k {
            return None;
        }
        let req = self.central.pop()?;
        self.outstanding[worker] += 1;
        self.idle.remove(worker as WorkerId);
        Some(Action::Dispatch {
            worker: worker as WorkerId,
            req,
            quantum_ns: Some(self.cfg.quantum_ns),
        })
    }

    fn on_quantum_expired(&mut self, _worker: WorkerId, _now: Nanos) -> bool {
        self.stats.preemptions += 1;
        true
    }

    fn on_preempted(&mut self, worker: WorkerId, req: Request, _now: Nanos) {
        self.central.requeue_back(req);
        self.release(worker);
    }

    fn local_queue_depth(&self) -> usize {
        self.cfg.k - 1
    }

    fn queued(&self) -> usize {
        self.central.len()
    }

    fn idle_workers(&self) -> WorkerSet {
        self.idle
    }

    fn stats(&self) -> PolicyStats {
        self.stats
    }
}

impl PolicyConfig for ConcordConfig {
    fn build(&self, ctx: &PolicyContext, label: String) -> Result<Box<dyn Policy>, PolicyError> {
        Ok(Box::new(Concord::new(ctx, *self, label)))
    }

    fn shape(&self) -> Shape {
        Shape::CentralPreemptive
    }

    fn preemption_model(&self) -> PreemptionModel {
        PreemptionModel::named_or_switch(self.mechanism, self.cost_ns)
    }

    fn fixed_quantum_ns(&self) -> Option<u64> {
        Some(self.quantum_ns)
    }
}

/// `concord` in the policy registry.
pub static CONCORD: PolicyEntry = PolicyEntry {
    name: "concord",
    example: "concord",
    aliases: &[],
    defaults: || Box::new(ConcordConfig::default()),
};

#[cfg(test)]
mod tests {
    use super::super::testkit::{Driver, ctx};
    use super::*;
    use crate::policy::PolicySpec;

    fn req(id: u64) -> Request {
        Request {
            id,
            token: 0,
            type_id: 0,
            flow: 0,
            arrival_ns: id,
        }
    }

    #[test]
    fn jbsq_fills_every_worker_to_k_shortest_first() {
        let spec: PolicySpec = "concord:k=2".parse().unwrap();
        let mut p = spec.build(&ctx(2, &[1.0])).unwrap();
        for id in 0..5 {
            p.on_arrival(req(id), 0).unwrap();
        }
        let mut to = Vec::new();
        while let Some(Action::Dispatch { worker, req, .. }) = p.next_action(0) {
            to.push((worker, req.id));
        }
        // Round robin by shortest queue, two each, the fifth waits centrally.
        assert_eq!(to, vec![(0, 0), (1, 1), (0, 2), (1, 3)]);
        assert_eq!(p.queued(), 1);
        // Worker 1 finishes one: it gets the next.
        p.on_completion(1, &req(1), 1_000, 5);
        assert!(matches!(
            p.next_action(5),
            Some(Action::Dispatch { worker: 1, .. })
        ));
        assert!(p.idle_workers().is_empty());
    }

    #[test]
    fn a_preempted_request_goes_to_the_tail() {
        let spec: PolicySpec = "concord:k=1".parse().unwrap();
        let mut p = spec.build(&ctx(1, &[1.0])).unwrap();
        p.on_arrival(req(0), 0).unwrap();
        p.on_arrival(req(1), 0).unwrap();
        assert!(matches!(p.next_action(0), Some(Action::Dispatch { .. })));
        assert_eq!(p.next_action(0), None, "k=1: one outstanding");
        assert!(p.on_quantum_expired(0, 5_000));
        p.on_preempted(0, req(0), 6_000);
        let Some(Action::Dispatch { req: next, .. }) = p.next_action(6_000) else {
            panic!("no dispatch");
        };
        assert_eq!(next.id, 1, "the waiting request before the preempted one");
    }

    #[test]
    fn conserves_requests_under_random_events() {
        for s in ["concord", "concord:k=1", "concord:k=3,quantum=2"] {
            let spec: PolicySpec = s.parse().unwrap();
            let means = [1.0, 100.0];
            for seed in 0..10 {
                let mut d = Driver::new(spec.build(&ctx(3, &means)).unwrap(), seed)
                    .with_means(&means)
                    // With and without a switch cost.
                    .with_switch_ns(seed % 2 * 1_000);
                d.run(3_000, |_, _| {});
                assert!(d.preempted > 0, "{s}: no preemption exercised");
                assert_eq!(
                    d.generated(),
                    d.completed + d.dropped + d.in_flight(),
                    "{s}"
                );
            }
        }
    }
}
