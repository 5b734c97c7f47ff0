//! Decentralized scheduling: per-worker queues fed by flow (RSS-like
//! steering) and, for work stealing, idle workers taking requests from others'
//! queues (Shenango, ZygOS).
//!
//! - [`PerWorkerRules`]: the per-worker decisions, pure and `Copy`: which
//!   worker's queue a flow joins, and whom an idle worker steals from. The
//!   simulator drives them through the policies below; the runtime's
//!   decentralized executor applies the very same functions on its worker
//!   threads, with no dispatcher on the request path.
//! - [`PerWorkerFcfs`]: per-worker FIFOs in arrival order, d-FCFS without
//!   stealing and `ws` with it.
//!
//! Nothing here reads a clock or touches a thread.

use super::param::{Count, MAX_QUEUE_LEN, Param, ParamRange, Params};
use super::registry::{ModelledSystem, PolicyConfig, PolicyEntry};
use super::{Action, Policy, PolicyContext, PolicyStats};
use super::{PolicyError, Shape};
use crate::queue::TypedQueue;
use crate::request::{FlowId, Nanos, Request};
use crate::workers::{WorkerId, WorkerSet};

/// A 64-bit mix (splitmix64's finalizer): the stand-in for the NIC's RSS hash
/// of a flow's addresses and ports.
#[inline]
pub fn flow_hash(flow: u64) -> u64 {
    let mut z = flow.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// When an idle worker steals (`ws`'s parameters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StealRule {
    /// It steals only from a queue holding more than this many requests (0:
    /// from any non-empty queue).
    pub threshold: usize,
}

impl Params for StealRule {
    const PARAMS: &'static [Param<Self>] = &[Param::keyed(
        "threshold",
        "an idle worker steals only from a queue holding more than this many requests",
        &Count::<Self> {
            range: ParamRange::closed(0.0, MAX_QUEUE_LEN),
            get: |c| c.threshold as u64,
            set: |c, v| c.threshold = v as usize,
        },
    )];
}

/// The per-worker decisions of a decentralized policy: flows are steered to
/// worker queues by hash, as RSS does, and (with a [`StealRule`]) an idle
/// worker whose own queue is empty takes the head of the longest queue above
/// the rule's threshold (ties: the first one after the thief, in worker order),
/// one request at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerWorkerRules {
    workers: usize,
    steal: Option<StealRule>,
}

impl PerWorkerRules {
    /// Rules for `workers` (at least one) queues; `steal: None` never steals.
    pub fn new(workers: usize, steal: Option<StealRule>) -> Self {
        assert!(workers > 0, "per-worker queues need a worker");
        Self { workers, steal }
    }

    /// Number of worker queues.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// Whether idle workers steal.
    pub fn steals(&self) -> bool {
        self.steal.is_some()
    }

    /// The worker whose queue the requests of `flow` join.
    #[inline]
    pub fn home(&self, flow: FlowId) -> WorkerId {
        (flow_hash(u64::from(flow)) % self.workers as u64) as WorkerId
    }

    /// Whether an idle worker may steal from a queue of `len` requests.
    #[inline]
    pub fn stealable(&self, len: usize) -> bool {
        self.steal.is_some_and(|r| len > r.threshold)
    }

    /// Whom `thief` (its own queue empty) steals from, given each worker's
    /// queue length: the longest queue above the threshold, ties to the first
    /// after the thief; `None` when no queue qualifies or stealing is off.
    #[inline]
    pub fn victim(&self, thief: WorkerId, len: impl Fn(WorkerId) -> usize) -> Option<WorkerId> {
        self.steal?;
        let mut best: Option<(WorkerId, usize)> = None;
        for step in 1..self.workers {
            let v = ((thief as usize + step) % self.workers) as WorkerId;
            let l = len(v);
            if self.stealable(l) && best.is_none_or(|(_, b)| l > b) {
                best = Some((v, l));
            }
        }
        best.map(|(v, _)| v)
    }
}

/// One FIFO per worker fed by flow, each served by its worker in order:
/// d-FCFS without a [`StealRule`] (a request never moves: not work
/// conserving), work stealing (`ws`) with one: a free worker whose queue is
/// empty takes the head of [`PerWorkerRules::victim`]'s (nearly work
/// conserving: a request waits while a worker idles only below the rule's
/// threshold). No dispatcher on the request path.
#[derive(Debug)]
pub struct PerWorkerFcfs {
    rules: PerWorkerRules,
    queues: Vec<TypedQueue>,
    free: WorkerSet,
    /// Workers whose queue is non-empty.
    backlogged: WorkerSet,
    queued: usize,
    steals: u64,
    name: String,
}

impl PerWorkerFcfs {
    /// One queue of `ctx.queue_capacity` per worker; with `steal`, idle
    /// workers steal by it.
    pub fn new(ctx: &PolicyContext, steal: Option<StealRule>, name: String) -> Self {
        Self {
            rules: PerWorkerRules::new(ctx.workers, steal),
            queues: (0..ctx.workers)
                .map(|_| TypedQueue::new(ctx.queue_capacity, 0))
                .collect(),
            free: WorkerSet::range(0, ctx.workers),
            backlogged: WorkerSet::EMPTY,
            queued: 0,
            steals: 0,
            name,
        }
    }

    /// A free worker and the queue it takes from: its own first, else (with
    /// stealing) a victim's.
    #[inline]
    fn pick(&self) -> Option<(WorkerId, WorkerId)> {
        if let Some(w) = self.free.and(self.backlogged).first() {
            return Some((w, w));
        }
        if !self.rules.steals() {
            return None;
        }
        self.free.iter().find_map(|w| {
            self.rules
                .victim(w, |v| self.queues[v as usize].len())
                .map(|v| (w, v))
        })
    }
}

impl Policy for PerWorkerFcfs {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn execution(&self) -> super::Execution {
        super::Execution::WorkerQueues(self.rules)
    }

    #[inline]
    fn on_arrival(&mut self, req: Request, _now: Nanos) -> Result<(), Request> {
        let w = self.rules.home(req.flow);
        self.queues[w as usize].push(req)?;
        self.backlogged.insert(w);
        self.queued += 1;
        Ok(())
    }

    #[inline]
    fn on_completion(&mut self, worker: WorkerId, _req: &Request, _service_ns: Nanos, _now: Nanos) {
        self.free.insert(worker);
    }

    #[inline]
    fn next_action(&mut self, _now: Nanos) -> Option<Action> {
        if self.queued == 0 {
            return None;
        }
        let (worker, from) = self.pick()?;
        let q = &mut self.queues[from as usize];
        let req = q.pop()?;
        if q.is_empty() {
            self.backlogged.remove(from);
        }
        self.steals += u64::from(from != worker);
        self.free.remove(worker);
        self.queued -= 1;
        Some(Action::Dispatch {
            worker,
            req,
            quantum_ns: None,
        })
    }

    fn queued(&self) -> usize {
        self.queued
    }

    fn idle_workers(&self) -> WorkerSet {
        self.free
    }

    fn stats(&self) -> PolicyStats {
        PolicyStats {
            steals: self.steals,
            ..PolicyStats::default()
        }
    }
}

crate::no_params! {
    /// `d-fcfs`'s configuration: it takes no parameters.
    DFcfsConfig
}

impl PolicyConfig for DFcfsConfig {
    fn build(&self, ctx: &PolicyContext, label: String) -> Result<Box<dyn Policy>, PolicyError> {
        Ok(Box::new(PerWorkerFcfs::new(ctx, None, label)))
    }

    fn shape(&self) -> Shape {
        Shape::WorkerQueues
    }

    fn modelled_system(&self) -> ModelledSystem {
        ModelledSystem::Synergy
    }
}

/// `d-fcfs` in the policy registry.
pub static D_FCFS: PolicyEntry = PolicyEntry {
    name: "d-fcfs",
    example: "d-fcfs",
    aliases: &[],
    defaults: || Box::new(DFcfsConfig),
};

impl PolicyConfig for StealRule {
    fn build(&self, ctx: &PolicyContext, label: String) -> Result<Box<dyn Policy>, PolicyError> {
        Ok(Box::new(PerWorkerFcfs::new(ctx, Some(*self), label)))
    }

    fn shape(&self) -> Shape {
        Shape::WorkerQueues
    }

    fn modelled_system(&self) -> ModelledSystem {
        ModelledSystem::Synergy
    }
}

/// `ws` in the policy registry.
pub static WS: PolicyEntry = PolicyEntry {
    name: "ws",
    example: "ws",
    aliases: &[],
    defaults: || Box::new(StealRule::default()),
};

#[cfg(test)]
mod tests {
    use super::super::testkit::{Driver, ctx};
    use super::*;
    use crate::policy::PolicySpec;

    fn rules(workers: usize, threshold: usize) -> PerWorkerRules {
        PerWorkerRules::new(workers, Some(StealRule { threshold }))
    }

    #[test]
    fn the_longest_queue_above_the_threshold_is_robbed_ties_to_the_next_worker() {
        let lens = [0usize, 3, 5, 5];
        let len = |v: WorkerId| lens[v as usize];
        assert_eq!(rules(4, 0).victim(0, len), Some(2));
        // From worker 2, worker 3 is the first of the two longest after it.
        assert_eq!(rules(4, 0).victim(2, len), Some(3));
        assert_eq!(rules(4, 4).victim(0, len), Some(2));
        assert_eq!(rules(4, 5).victim(0, len), None);
        assert_eq!(rules(4, 0).victim(0, |_| 0), None);
        // Never itself, never without a rule.
        assert_eq!(rules(1, 0).victim(0, |_| 9), None);
        assert_eq!(PerWorkerRules::new(4, None).victim(0, len), None);
    }

    #[test]
    fn flows_hash_evenly_and_always_to_the_same_worker() {
        let r = rules(8, 0);
        let mut counts = [0u32; 8];
        for flow in 0..=u16::MAX {
            let w = r.home(flow);
            assert_eq!(w, r.home(flow));
            counts[w as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (7_400..9_000).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn ws_never_leaves_a_worker_idle_while_another_queue_holds_a_request() {
        for seed in 0..20 {
            let mut d = Driver::new(
                PolicySpec::new(&WS, StealRule { threshold: 0 })
                    .build(&ctx(3, &[1.0, 50.0]))
                    .unwrap(),
                seed,
            );
            d.run(3_000, |p, disp| {
                if disp.is_none() {
                    assert!(
                        p.queued() == 0 || p.idle_workers().is_empty(),
                        "idle worker while a request waits"
                    );
                }
            });
            assert!(d.completed > 0);
            assert!(d.policy.stats().steals > 0, "seed {seed}: never stole");
        }
    }

    #[test]
    fn ws_serves_each_worker_queue_in_order_and_steals_only_from_others() {
        let c = ctx(4, &[1.0, 20.0]);
        let r = rules(4, 0);
        for seed in 0..10 {
            let mut d = Driver::new(
                PolicySpec::new(&WS, StealRule { threshold: 0 })
                    .build(&c)
                    .unwrap(),
                seed,
            );
            d.run(3_000, |_, _| {});
            // Per home queue, requests start in arrival order, wherever they run.
            let mut last = [None::<u64>; 4];
            for (_, req) in &d.dispatched {
                let h = r.home(req.flow) as usize;
                assert!(last[h].is_none_or(|l| l < req.id), "queue {h} out of order");
                last[h] = Some(req.id);
            }
            let moved = d
                .dispatched
                .iter()
                .filter(|(w, req)| *w != r.home(req.flow))
                .count() as u64;
            assert_eq!(moved, d.policy.stats().steals, "a steal is a move");
        }
    }

    #[test]
    fn d_fcfs_never_moves_a_request_between_workers() {
        let rules = PerWorkerRules::new(4, None);
        for seed in 0..10 {
            let mut d = Driver::new(
                PolicySpec::new(&D_FCFS, DFcfsConfig)
                    .build(&ctx(4, &[1.0, 20.0]))
                    .unwrap(),
                seed,
            );
            d.run(3_000, |_, _| {});
            assert!(d.dispatched.len() > 100);
            for (w, r) in &d.dispatched {
                assert_eq!(*w, rules.home(r.flow), "request {} moved", r.id);
            }
            assert_eq!(d.policy.stats().steals, 0);
        }
    }

    #[test]
    fn a_threshold_leaves_short_queues_alone() {
        // With a threshold above the queue bound, ws is d-FCFS.
        let c = ctx(4, &[1.0, 20.0]);
        let mut d = Driver::new(
            PolicySpec::new(&WS, StealRule { threshold: 1_000 })
                .build(&c)
                .unwrap(),
            3,
        );
        d.run(3_000, |_, _| {});
        assert_eq!(d.policy.stats().steals, 0);
        let r = rules(4, 0);
        assert!(d.dispatched.iter().all(|(w, req)| *w == r.home(req.flow)));
    }
}
