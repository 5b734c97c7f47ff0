//! Tiny Quanta (ASPLOS'24): a dispatcher joins each arriving request to the
//! shortest worker queue (JSQ, counting the running request), and each worker
//! shares itself among its requests in tiny quanta (2 µs by default): a
//! compiler-inserted probe reads the clock and yields locally once the quantum
//! is spent, and the request goes to the tail of its worker's own queue
//! (processor sharing per worker). A yield with nothing else queued returns
//! to the same request at once, so it is not counted as a preemption.
//!
//! The worker's picks and yields are local: only arrivals (and the queue
//! lengths the dispatcher reads) go through the dispatcher
//! ([`super::Execution::workers_pick_locally`]). The placement and yield
//! rules are [`TqRules`], which the runtime's workers apply too.

use std::collections::VecDeque;

use super::param::{MECH_DOC, Micros, Param, Params, Pick, QUANTUM_US};
use super::registry::{PolicyConfig, PolicyEntry, PreemptionModel};
use super::{
    Action, Execution, LocalRules, Policy, PolicyContext, PolicyStats, PreemptionMechanism,
};
use super::{PolicyError, Shape};
use crate::request::{Nanos, Request};
use crate::workers::{WorkerId, WorkerSet};

/// Tiny Quanta's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TqConfig {
    /// The time slice.
    pub quantum_ns: Nanos,
    /// How a yield happens (a local probe: no signal, a user-level switch).
    pub mechanism: PreemptionMechanism,
}

impl Default for TqConfig {
    fn default() -> Self {
        Self {
            quantum_ns: 2_000,
            mechanism: PreemptionMechanism::CompilerInterrupt,
        }
    }
}

impl Params for TqConfig {
    const PARAMS: &'static [Param<Self>] = &[
        Param::keyed(
            "quantum",
            "time slice, after which a request yields to its worker's next one",
            &Micros::<Self> {
                range: QUANTUM_US,
                get: |c| c.quantum_ns,
                set: |c, v| c.quantum_ns = v,
            },
        )
        .in_workload_time(),
        Param::keyed(
            "mech",
            MECH_DOC,
            &Pick::<Self, _> {
                options: PreemptionMechanism::ALL,
                get: |c| Some(c.mechanism),
                set: |c, v| c.mechanism = v,
            },
        ),
    ];
}

/// Tiny Quanta's decisions, pure and `Copy`: shared by the simulator's
/// [`TinyQuanta`] and the runtime's workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TqRules {
    quantum_ns: Nanos,
}

impl TqRules {
    /// The rules with this time slice.
    pub fn new(quantum_ns: Nanos) -> Self {
        Self { quantum_ns }
    }

    /// The time slice.
    pub fn quantum_ns(&self) -> Nanos {
        self.quantum_ns
    }

    /// JSQ: the worker (of `workers`, at least one) with the fewest queued
    /// plus running requests by `load`, the lowest index among equals.
    #[inline]
    pub fn join(&self, workers: usize, load: impl Fn(usize) -> usize) -> usize {
        (0..workers).min_by_key(|&w| (load(w), w)).unwrap_or(0)
    }

    /// Whether a request whose quantum expired yields: only to another
    /// request of its worker's own queue (processor sharing); alone, it goes
    /// on for another quantum.
    #[inline]
    pub fn yields_on_expiry(&self, own_queued: bool) -> bool {
        own_queued
    }
}

/// JSQ dispatch plus per-worker processor sharing.
#[derive(Debug)]
pub struct TinyQuanta {
    label: String,
    cfg: TqConfig,
    capacity: usize,
    queues: Vec<VecDeque<Request>>,
    free: WorkerSet,
    /// Free workers with a non-empty queue.
    ready: WorkerSet,
    queued: usize,
    stats: PolicyStats,
}

impl TinyQuanta {
    /// Tiny Quanta over `ctx`: a queue of `ctx.queue_capacity` per worker
    /// (plus the slot of its running request, which may yield back).
    pub fn new(ctx: &PolicyContext, cfg: TqConfig, label: String) -> Self {
        Self {
            label,
            cfg,
            capacity: ctx.queue_capacity,
            queues: (0..ctx.workers)
                .map(|_| VecDeque::with_capacity(ctx.queue_capacity + 1))
                .collect(),
            free: WorkerSet::range(0, ctx.workers),
            ready: WorkerSet::EMPTY,
            queued: 0,
            stats: PolicyStats::default(),
        }
    }

    fn rules(&self) -> TqRules {
        TqRules::new(self.cfg.quantum_ns)
    }

    /// A worker's load as JSQ counts it: queued plus running.
    fn load(&self, w: usize) -> usize {
        self.queues[w].len() + usize::from(!self.free.contains(w as WorkerId))
    }
}

impl Policy for TinyQuanta {
    fn name(&self) -> String {
        self.label.clone()
    }

    fn on_arrival(&mut self, req: Request, _now: Nanos) -> Result<(), Request> {
        let w = self.rules().join(self.queues.len(), |w| self.load(w));
        if self.queues[w].len() >= self.capacity {
            return Err(req);
        }
        self.queues[w].push_back(req);
        self.queued += 1;
        if self.free.contains(w as WorkerId) {
            self.ready.insert(w as WorkerId);
        }
        Ok(())
    }

    fn on_completion(&mut self, worker: WorkerId, _req: &Request, _service_ns: Nanos, _now: Nanos) {
        self.free.insert(worker);
        if !self.queues[worker as usize].is_empty() {
            self.ready.insert(worker);
        }
    }

    fn next_action(&mut self, _now: Nanos) -> Option<Action> {
        let w = self.ready.first()?;
        let req = self.queues[w as usize].pop_front()?;
        self.ready.remove(w);
        self.free.remove(w);
        self.queued -= 1;
        Some(Action::Dispatch {
            worker: w,
            req,
            quantum_ns: Some(self.cfg.quantum_ns),
        })
    }

    fn on_quantum_expired(&mut self, worker: WorkerId, _now: Nanos) -> bool {
        let yields = self
            .rules()
            .yields_on_expiry(!self.queues[worker as usize].is_empty());
        self.stats.preemptions += u64::from(yields);
        self.stats.preemptions_avoided += u64::from(!yields);
        yields
    }

    fn on_preempted(&mut self, worker: WorkerId, req: Request, _now: Nanos) {
        self.queues[worker as usize].push_back(req);
        self.queued += 1;
        self.free.insert(worker);
        self.ready.insert(worker);
    }

    fn execution(&self) -> Execution {
        Execution::LocalPreemptive(LocalRules::Tq(self.rules()))
    }

    fn queued(&self) -> usize {
        self.queued
    }

    fn idle_workers(&self) -> WorkerSet {
        self.free
    }

    fn stats(&self) -> PolicyStats {
        self.stats
    }
}
impl PolicyConfig for TqConfig {
    fn build(&self, ctx: &PolicyContext, label: String) -> Result<Box<dyn Policy>, PolicyError> {
        Ok(Box::new(TinyQuanta::new(ctx, *self, label)))
    }

    fn shape(&self) -> Shape {
        Shape::LocalPreemptive
    }

    fn preemption_model(&self) -> PreemptionModel {
        PreemptionModel::Mechanism(self.mechanism)
    }

    fn fixed_quantum_ns(&self) -> Option<u64> {
        Some(self.quantum_ns)
    }
}

/// `tq` (Tiny Quanta) in the policy registry.
pub static TQ: PolicyEntry = PolicyEntry {
    name: "tq",
    example: "tq",
    aliases: &[],
    defaults: || Box::new(TqConfig::default()),
};
