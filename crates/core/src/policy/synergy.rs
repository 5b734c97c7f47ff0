//! SYNERGY (master's thesis, 2025): decentralized, feedback-driven scheduling
//! with conditional preemption of long requests (../shared/spec/synergy.md).
//!
//! - Requests join their flow's worker queue (RSS-like steering); there is no
//!   dispatcher on the request path.
//! - Every request starts short and runs to completion unless the application
//!   calls `feedback_start()` ([`Policy::on_feedback_start`]): the request is
//!   long from then on and its worker's timer is armed with a quantum of the
//!   worker's short-request average × QUANTUM_FACTOR ([`SynergyRules::quantum_ns`]).
//! - A timer core checks armed workers. An expired quantum preempts only if
//!   the worker has queued work, else it is renewed
//!   ([`SynergyRules::preempt_on_expiry`]). Short requests are never preempted.
//! - A preempted request goes to the global wait queue; any worker resumes it.
//! - A free worker takes from its own queue, then the wait queue, then steals
//!   ([`SynergyRules::order`], [`SynergyRules::victim`], [`SynergyRules::batch`]);
//!   while the wait queue is congested ([`CongestionDetector`]) the wait queue
//!   comes first and quanta use CONGESTED_QUANTUM_FACTOR.
//!
//! The decision rules are pure and `Copy` ([`SynergyRules`], [`ShortAverage`],
//! [`CongestionDetector`]): the simulator drives them through [`Synergy`], the
//! runtime's executor applies the very same functions on its worker and timer
//! threads. Each mechanism can be switched off for the thesis's ablation.
//!
//! Nothing here reads a clock or touches a thread.

use std::collections::VecDeque;

use super::ws::flow_hash;
use super::{Action, Policy, PolicyContext, PolicyStats, PreemptionMechanism};
use crate::request::{FlowId, Nanos, Request};
use crate::workers::{WorkerId, WorkerSet};

/// The shortest quantum SYNERGY arms: an average of a few tens of
/// nanoseconds times a small factor would otherwise make the timer fire on
/// every probe.
pub const MIN_QUANTUM_NS: Nanos = 100;

/// SYNERGY's parameters. Defaults are the thesis's main experiments
/// (QUANTUM_FACTOR 2, THRESH_WQD 0) with every mechanism on; the public code's
/// default build is `qf=1` (its Makefile's factor never reaches the timer).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SynergyConfig {
    /// QUANTUM_FACTOR: a long request's quantum is the worker's short-request
    /// average times this.
    pub quantum_factor: f64,
    /// The fixed quantum when the dynamic quantum is off, and the short
    /// average's starting value (the code's QUANTUM, 5 µs).
    pub quantum_ns: Nanos,
    /// THRESH_WQD: how often the wait queue is checked for congestion; 0:
    /// never congested (long requests best effort).
    pub wqd_ns: Nanos,
    /// CONGESTED_QUANTUM_FACTOR while the wait queue is congested; 0 keeps the
    /// factor unchanged.
    pub congested_factor: f64,
    /// Idle workers steal.
    pub steal: bool,
    /// Preempted requests go to the global wait queue (off: to the tail of
    /// their worker's own queue).
    pub wait_queue: bool,
    /// Conditional preemption (off: every expired quantum preempts).
    pub conditional: bool,
    /// Dynamic quantum (off: the fixed `quantum_ns`).
    pub adaptive: bool,
    /// Steal from a worker running a long request holding at least this many.
    pub steal_busy_min: usize,
    /// Steal from any other worker holding at least this many.
    pub steal_min: usize,
    /// At most this many requests per steal (half the victim's queue,
    /// rounded up, up to this).
    pub steal_batch: usize,
    /// The simulated application's feedback rule: a request whose service
    /// time is at least this calls `feedback_start()` when it begins (the
    /// thesis's synthetic app: 10 µs). Real applications decide themselves.
    pub long_ns: Nanos,
    /// How preemption reaches a worker (the simulator charges its cost).
    pub mechanism: PreemptionMechanism,
}

impl Default for SynergyConfig {
    fn default() -> Self {
        Self {
            quantum_factor: 2.0,
            quantum_ns: 5_000,
            wqd_ns: 0,
            congested_factor: 10.0,
            steal: true,
            wait_queue: true,
            conditional: true,
            adaptive: true,
            steal_busy_min: 1,
            steal_min: 2,
            steal_batch: 32,
            long_ns: 10_000,
            mechanism: PreemptionMechanism::CompilerInterrupt,
        }
    }
}

/// Where a free worker looks for its next request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Its own queue (the software queue and its NIC queue).
    Own,
    /// The global wait queue of preempted requests.
    Wait,
    /// Another worker's queue.
    Steal,
}

/// SYNERGY's per-worker decisions, pure and `Copy`: shared by the
/// simulator's [`Synergy`] and the runtime's executor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SynergyRules {
    workers: usize,
    cfg: SynergyConfig,
}

impl SynergyRules {
    /// Rules for `workers` (at least one) workers.
    pub fn new(workers: usize, cfg: SynergyConfig) -> Self {
        assert!(workers > 0, "SYNERGY needs a worker");
        Self { workers, cfg }
    }

    /// The parameters.
    pub fn config(&self) -> &SynergyConfig {
        &self.cfg
    }

    /// Number of workers.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// The worker whose queue the requests of `flow` join (the same hash as
    /// [`super::PerWorkerRules::home`]).
    #[inline]
    pub fn home(&self, flow: FlowId) -> WorkerId {
        (flow_hash(u64::from(flow)) % self.workers as u64) as WorkerId
    }

    /// The quantum a long request is armed with on a worker whose short
    /// average is `short_avg_ns`: the average × QUANTUM_FACTOR (the fixed
    /// quantum without the dynamic quantum), × CONGESTED_QUANTUM_FACTOR
    /// instead while the wait queue is congested; at least [`MIN_QUANTUM_NS`].
    #[inline]
    pub fn quantum_ns(&self, short_avg_ns: f64, congested: bool) -> Nanos {
        let (base, factor) = if self.cfg.adaptive {
            (short_avg_ns, self.cfg.quantum_factor)
        } else {
            (self.cfg.quantum_ns as f64, 1.0)
        };
        let factor = if congested && self.cfg.congested_factor > 0.0 {
            self.cfg.congested_factor
        } else {
            factor
        };
        ((base * factor) as Nanos).max(MIN_QUANTUM_NS)
    }

    /// Whether a long request whose quantum expired is preempted, given its
    /// worker's own queue length: only when the worker has queued work
    /// (conditional preemption); always without it.
    #[inline]
    pub fn preempt_on_expiry(&self, own_queued: usize) -> bool {
        !self.cfg.conditional || own_queued > 0
    }

    /// Where a free worker looks, in order (the sources switched off are
    /// left out): its own queue, the wait queue, stealing; the wait queue
    /// first while it is congested.
    #[inline]
    pub fn order(&self, congested: bool) -> &'static [Source] {
        match (self.cfg.wait_queue, self.cfg.steal, congested) {
            (true, true, false) => &[Source::Own, Source::Wait, Source::Steal],
            (true, true, true) => &[Source::Wait, Source::Own, Source::Steal],
            (true, false, false) => &[Source::Own, Source::Wait],
            (true, false, true) => &[Source::Wait, Source::Own],
            (false, true, _) => &[Source::Own, Source::Steal],
            (false, false, _) => &[Source::Own],
        }
    }

    /// Whom `thief` steals from: first a worker running a long request whose
    /// queue holds at least the busy threshold, then any other worker (in
    /// order after the thief) holding at least the other threshold; `None`
    /// when none qualifies or stealing is off.
    #[inline]
    pub fn victim(
        &self,
        thief: WorkerId,
        running_long: impl Fn(WorkerId) -> bool,
        len: impl Fn(WorkerId) -> usize,
    ) -> Option<WorkerId> {
        if !self.cfg.steal {
            return None;
        }
        let others = (1..self.workers).map(|s| ((thief as usize + s) % self.workers) as WorkerId);
        others
            .clone()
            .find(|&v| running_long(v) && len(v) >= self.cfg.steal_busy_min.max(1))
            .or_else(|| {
                others
                    .into_iter()
                    .find(|&v| len(v) >= self.cfg.steal_min.max(1))
            })
    }

    /// How many requests a steal takes from a queue of `victim_len`: half,
    /// rounded up, at most the batch (at least one).
    #[inline]
    pub fn batch(&self, victim_len: usize) -> usize {
        victim_len.div_ceil(2).min(self.cfg.steal_batch).max(1)
    }
}

/// A worker's moving average of its short requests' service times (the
/// code's `avg = (avg + sample) / 2`, starting at the fixed quantum).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShortAverage {
    avg_ns: f64,
}

impl ShortAverage {
    /// Starts at `initial_ns`.
    pub fn new(initial_ns: Nanos) -> Self {
        Self {
            avg_ns: initial_ns as f64,
        }
    }

    /// A short request took `sample_ns`.
    #[inline]
    pub fn record(&mut self, sample_ns: Nanos) {
        self.avg_ns = (self.avg_ns + sample_ns as f64) / 2.0;
    }

    /// The average.
    #[inline]
    pub fn value_ns(&self) -> f64 {
        self.avg_ns
    }
}

/// THRESH_WQD's congestion detector over the wait queue's producer and
/// consumer counts, called on every pass of the timer core: every `wqd_ns`
/// it checks whether the consumer has moved past everything that was queued
/// at the previous check; if not, the queue is congested, and then every pass
/// checks again (against the same mark) so that the state clears as soon as
/// the consumer passes it. `wqd_ns == 0`: never congested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CongestionDetector {
    wqd_ns: Nanos,
    next_check: Nanos,
    /// Produced count at the last check that found no congestion.
    mark: u64,
    congested: bool,
    episodes: u64,
}

impl CongestionDetector {
    /// A detector checking every `wqd_ns` (0: off).
    pub fn new(wqd_ns: Nanos) -> Self {
        Self {
            wqd_ns,
            next_check: 0,
            mark: 0,
            congested: false,
            episodes: 0,
        }
    }

    /// One timer pass at `now`, with `produced` requests ever pushed to the
    /// wait queue and `consumed` ever taken from it: whether it is congested.
    #[inline]
    pub fn pass(&mut self, now: Nanos, produced: u64, consumed: u64) -> bool {
        if self.wqd_ns == 0 || (now < self.next_check && !self.congested) {
            return self.congested;
        }
        self.next_check = now + self.wqd_ns;
        let was = self.congested;
        self.congested = consumed < self.mark;
        if !self.congested {
            self.mark = produced;
        }
        self.episodes += u64::from(self.congested && !was);
        self.congested
    }

    /// Whether the last pass found the wait queue congested.
    #[inline]
    pub fn congested(&self) -> bool {
        self.congested
    }

    /// Times it went from not congested to congested.
    pub fn episodes(&self) -> u64 {
        self.episodes
    }

    /// The check period (0: off).
    pub fn period_ns(&self) -> Nanos {
        self.wqd_ns
    }
}

/// A queued request and whether it already declared itself long.
type Job = (Request, bool);

/// SYNERGY as the simulator runs it: per-worker queues fed by flow, the
/// global wait queue, feedback-armed timers with conditional preemption,
/// stealing, congestion. Storage is sized at construction; only the
/// ablation without the wait queue (preempted requests back to their own
/// worker's tail) may grow a worker's queue past it.
#[derive(Debug)]
pub struct Synergy {
    label: String,
    rules: SynergyRules,
    capacity: usize,
    queues: Vec<VecDeque<Job>>,
    wait: VecDeque<Request>,
    free: WorkerSet,
    /// Workers running a long request (timer armed).
    long: WorkerSet,
    averages: Vec<ShortAverage>,
    detector: CongestionDetector,
    /// Requests ever pushed to / taken from the wait queue.
    produced: u64,
    consumed: u64,
    queued: usize,
    stats: PolicyStats,
}

impl Synergy {
    /// SYNERGY over `ctx`.
    pub fn new(ctx: &PolicyContext, cfg: SynergyConfig, label: String) -> Self {
        let per_worker = ctx.queue_capacity + cfg.steal_batch;
        Self {
            label,
            rules: SynergyRules::new(ctx.workers, cfg),
            capacity: ctx.queue_capacity,
            queues: (0..ctx.workers)
                .map(|_| VecDeque::with_capacity(per_worker))
                .collect(),
            wait: VecDeque::with_capacity(ctx.workers * (ctx.queue_capacity + 1)),
            free: WorkerSet::range(0, ctx.workers),
            long: WorkerSet::EMPTY,
            averages: vec![ShortAverage::new(cfg.quantum_ns); ctx.workers],
            detector: CongestionDetector::new(if cfg.wait_queue { cfg.wqd_ns } else { 0 }),
            produced: 0,
            consumed: 0,
            queued: 0,
            stats: PolicyStats::default(),
        }
    }

    /// The next request for free worker `w`, by the selection order.
    fn take(&mut self, w: WorkerId, now: Nanos) -> Option<Job> {
        let wi = w as usize;
        for source in self.rules.order(self.detector.congested()) {
            match source {
                Source::Own => {
                    if let Some(job) = self.queues[wi].pop_front() {
                        return Some(job);
                    }
                }
                Source::Wait => {
                    if let Some(req) = self.wait.pop_front() {
                        self.consumed += 1;
                        if self.detector.congested() {
                            // The timer core's passes while congested.
                            self.detector.pass(now, self.produced, self.consumed);
                        }
                        return Some((req, true));
                    }
                }
                Source::Steal => {
                    let queues = &self.queues;
                    let long = self.long;
                    let v =
                        self.rules
                            .victim(w, |v| long.contains(v), |v| queues[v as usize].len())?;
                    let n = self.rules.batch(self.queues[v as usize].len());
                    let first = self.queues[v as usize].pop_front()?;
                    for _ in 1..n {
                        let job = self.queues[v as usize].pop_front().expect("batch ≤ len");
                        self.queues[wi].push_back(job);
                    }
                    self.stats.steals += n as u64;
                    return Some(first);
                }
            }
        }
        None
    }

    fn quantum(&self, w: WorkerId) -> Nanos {
        self.rules.quantum_ns(
            self.averages[w as usize].value_ns(),
            self.detector.congested(),
        )
    }
}

impl Policy for Synergy {
    fn name(&self) -> String {
        self.label.clone()
    }

    fn centralized(&self) -> bool {
        false
    }

    fn on_arrival(&mut self, req: Request, _now: Nanos) -> Result<(), Request> {
        let q = &mut self.queues[self.rules.home(req.flow) as usize];
        if q.len() >= self.capacity {
            return Err(req);
        }
        q.push_back((req, false));
        self.queued += 1;
        Ok(())
    }

    fn on_completion(&mut self, worker: WorkerId, _req: &Request, service_ns: Nanos, _now: Nanos) {
        if self.long.contains(worker) {
            self.long.remove(worker);
        } else {
            self.averages[worker as usize].record(service_ns);
        }
        self.free.insert(worker);
    }

    fn next_action(&mut self, now: Nanos) -> Option<Action> {
        if self.queued == 0 {
            return None;
        }
        for w in self.free.iter() {
            if let Some((req, long)) = self.take(w, now) {
                self.free.remove(w);
                self.queued -= 1;
                let quantum_ns = long.then(|| {
                    self.long.insert(w);
                    self.quantum(w)
                });
                return Some(Action::Dispatch {
                    worker: w,
                    req,
                    quantum_ns,
                });
            }
        }
        None
    }

    fn feedback_threshold_ns(&self) -> Option<Nanos> {
        Some(self.rules.config().long_ns)
    }

    fn on_feedback_start(&mut self, worker: WorkerId, _now: Nanos) -> Option<Nanos> {
        self.long.insert(worker);
        Some(self.quantum(worker))
    }

    fn on_quantum_expired(&mut self, worker: WorkerId, _now: Nanos) -> bool {
        debug_assert!(self.long.contains(worker), "only long requests have quanta");
        let preempt = self
            .rules
            .preempt_on_expiry(self.queues[worker as usize].len());
        if preempt {
            self.stats.preemptions += 1;
        } else {
            self.stats.preemptions_avoided += 1;
        }
        preempt
    }

    fn on_preempted(&mut self, worker: WorkerId, req: Request, _now: Nanos) {
        self.long.remove(worker);
        self.free.insert(worker);
        self.queued += 1;
        if self.rules.config().wait_queue {
            self.wait.push_back(req);
            self.produced += 1;
        } else {
            self.queues[worker as usize].push_back((req, true));
        }
    }

    fn tick_interval(&self) -> Option<Nanos> {
        Some(self.detector.period_ns()).filter(|&p| p > 0)
    }

    fn on_tick(&mut self, now: Nanos) {
        self.detector.pass(now, self.produced, self.consumed);
    }

    fn queued(&self) -> usize {
        self.queued
    }

    fn idle_workers(&self) -> WorkerSet {
        self.free
    }

    fn stats(&self) -> PolicyStats {
        PolicyStats {
            wait_queue_passes: self.produced,
            congestion_episodes: self.detector.episodes(),
            ..self.stats
        }
    }

    fn synergy_rules(&self) -> Option<SynergyRules> {
        Some(self.rules)
    }
}
