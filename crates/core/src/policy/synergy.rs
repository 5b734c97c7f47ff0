//! SYNERGY (master's thesis, 2025): decentralized, feedback-driven scheduling
//! with conditional preemption of long requests (docs/results.md, "SYNERGY").
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

use super::param::{
    Count, MAX_FACTOR, MAX_QUEUE_LEN, MAX_US, MECH_DOC, Micros, ON_OFF, Param, ParamRange, Params,
    Pick, QUANTUM_US, Real,
};
use super::registry::{ModelledSystem, PolicyConfig, PolicyEntry, PreemptionModel};
use super::ws::flow_hash;
use super::{Action, Policy, PolicyContext, PolicyStats, PreemptionMechanism};
use super::{PolicyError, Shape};
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
    /// Which thread checks an armed quantum on real threads (the simulator's
    /// timer is exact whatever this says).
    pub timer: TimerPlacement,
}

/// Which thread checks armed quanta on real threads: the thesis's timer
/// core, or each worker at its running request's own preemption points.
///
/// The timer core works where it has a core: where the run's threads
/// outnumber their cores, the timer's thread waits for a core before it can
/// preempt, and an expired quantum waits with it (milliseconds on 2 shared
/// vCPUs). A worker that reads the clock at its request's points needs no
/// other thread; the rule it applies (conditional preemption, the same queue
/// lengths) is the timer's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerPlacement {
    /// The worker where the run's threads outnumber its cores, else the
    /// timer thread (the runtime decides at start-up).
    Auto,
    /// A thread that is no worker (the dispatcher's), as the thesis's timer core.
    Core,
    /// Each worker, at its running long request's preemption points.
    Worker,
}

impl TimerPlacement {
    /// Every placement, by its parameter name.
    pub const ALL: &'static [(&'static str, TimerPlacement)] = &[
        ("auto", TimerPlacement::Auto),
        ("core", TimerPlacement::Core),
        ("worker", TimerPlacement::Worker),
    ];

    /// Whether the worker checks its own quantum, given whether the run's
    /// threads outnumber its cores.
    pub fn on_worker(self, threads_outnumber_cores: bool) -> bool {
        match self {
            TimerPlacement::Auto => threads_outnumber_cores,
            TimerPlacement::Core => false,
            TimerPlacement::Worker => true,
        }
    }
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
            timer: TimerPlacement::Auto,
        }
    }
}

impl Params for SynergyConfig {
    const PARAMS: &'static [Param<Self>] = &[
        Param::keyed(
            "qf",
            "QUANTUM_FACTOR: a long request's quantum is its worker's short average times this",
            &Real::<Self> {
                range: ParamRange::positive(MAX_FACTOR),
                get: |c| c.quantum_factor,
                set: |c, v| c.quantum_factor = v,
            },
        ),
        Param::keyed(
            "quantum",
            "the fixed quantum (`qa=off`) and the short average's starting value",
            &Micros::<Self> {
                range: QUANTUM_US,
                get: |c| c.quantum_ns,
                set: |c, v| c.quantum_ns = v,
            },
        )
        .in_workload_time(),
        Param::keyed(
            "wqd",
            "THRESH_WQD: how often the wait queue is checked for congestion (0: never congested)",
            &Micros::<Self> {
                range: ParamRange::closed(0.0, MAX_US),
                get: |c| c.wqd_ns,
                set: |c, v| c.wqd_ns = v,
            },
        )
        .in_workload_time(),
        Param::keyed(
            "cqf",
            "CONGESTED_QUANTUM_FACTOR, while the wait queue is congested (0: `qf` unchanged)",
            &Real::<Self> {
                range: ParamRange::closed(0.0, MAX_FACTOR),
                get: |c| c.congested_factor,
                set: |c, v| c.congested_factor = v,
            },
        ),
        Param::keyed(
            "ws",
            "idle workers steal",
            &Pick::<Self, _> {
                options: ON_OFF,
                get: |c| Some(c.steal),
                set: |c, v| c.steal = v,
            },
        ),
        Param::keyed(
            "wq",
            "preempted requests go to the global wait queue (off: their worker's tail)",
            &Pick::<Self, _> {
                options: ON_OFF,
                get: |c| Some(c.wait_queue),
                set: |c, v| c.wait_queue = v,
            },
        ),
        Param::keyed(
            "cp",
            "conditional preemption: only when the worker has queued work",
            &Pick::<Self, _> {
                options: ON_OFF,
                get: |c| Some(c.conditional),
                set: |c, v| c.conditional = v,
            },
        ),
        Param::keyed(
            "qa",
            "dynamic quantum (off: the fixed `quantum`)",
            &Pick::<Self, _> {
                options: ON_OFF,
                get: |c| Some(c.adaptive),
                set: |c, v| c.adaptive = v,
            },
        ),
        Param::keyed(
            "steal_busy",
            "steal from a worker running a long request holding at least this many",
            &Count::<Self> {
                range: ParamRange::closed(1.0, MAX_QUEUE_LEN),
                get: |c| c.steal_busy_min as u64,
                set: |c, v| c.steal_busy_min = v as usize,
            },
        ),
        Param::keyed(
            "steal_min",
            "else steal from any other worker holding at least this many",
            &Count::<Self> {
                range: ParamRange::closed(1.0, MAX_QUEUE_LEN),
                get: |c| c.steal_min as u64,
                set: |c, v| c.steal_min = v as usize,
            },
        ),
        Param::keyed(
            "batch",
            "at most this many requests per steal (half the victim's queue)",
            &Count::<Self> {
                range: ParamRange::closed(1.0, 1024.0),
                get: |c| c.steal_batch as u64,
                set: |c, v| c.steal_batch = v as usize,
            },
        ),
        Param::keyed(
            "long",
            "the simulated application calls `feedback_start()` for requests of at least this service time",
            &Micros::<Self> {
                range: ParamRange::closed(0.0, MAX_US),
                get: |c| c.long_ns,
                set: |c, v| c.long_ns = v,
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
        Param::keyed(
            "timer",
            "which thread checks an armed quantum on real threads: `core` (a timer thread, the thesis's), `worker` (the worker, at its request's preemption points), `auto` (the worker where the threads outnumber the cores)",
            &Pick::<Self, _> {
                options: TimerPlacement::ALL,
                get: |c| Some(c.timer),
                set: |c, v| c.timer = v,
            },
        ),
    ];
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

/// The queues SYNERGY's rules select from, as an executor stores them (the
/// simulator's deques, the runtime's lock-free queues): the rules decide,
/// the queues only pop and push.
pub trait SynergyQueues {
    /// What a queue holds.
    type Job;
    /// Pops the head of worker `w`'s own queue.
    fn pop_own(&mut self, w: WorkerId) -> Option<Self::Job>;
    /// Pushes `job` at the tail of worker `w`'s own queue (a stolen request;
    /// there is always room).
    fn push_own(&mut self, w: WorkerId, job: Self::Job);
    /// Pops the head of the global wait queue.
    fn pop_wait(&mut self) -> Option<Self::Job>;
    /// Requests in worker `w`'s own queue.
    fn len(&self, w: WorkerId) -> usize;
    /// Whether worker `w` runs a long request (its timer is armed).
    fn running_long(&self, w: WorkerId) -> bool;
}

/// What [`SynergyRules::take`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taken<J> {
    /// The request to run.
    pub job: J,
    /// Where it came from.
    pub source: Source,
    /// Requests stolen with it, itself included (0 unless stolen).
    pub stolen: usize,
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
    /// worker's own queue length, the wait queue's length and the wait
    /// queue's bound: only when the worker has queued work (conditional
    /// preemption; always without it), and only when the wait queue has room
    /// for it. A full wait queue renews the quantum instead, so that overload
    /// fills the worker queues, where arrivals are refused, rather than
    /// preempted requests piling up without bound.
    #[inline]
    pub fn preempt_on_expiry(&self, own_queued: usize, wait_len: usize, wait_bound: usize) -> bool {
        let room = !self.cfg.wait_queue || wait_len < wait_bound;
        room && (!self.cfg.conditional || own_queued > 0)
    }

    /// Where a preempted request goes: the global wait queue (`true`), or
    /// the tail of its worker's own queue.
    #[inline]
    pub fn preempted_to_wait_queue(&self) -> bool {
        self.cfg.wait_queue
    }

    /// The next request for free worker `me`, looking in [`Self::order`]:
    /// its own queue's head, the wait queue's head, or a steal from
    /// [`Self::victim`] of [`Self::batch`] requests (the first runs, the rest
    /// join `me`'s own queue). The one selection loop: the simulator's
    /// [`Synergy`] and the runtime's executor both call it on their queues.
    #[inline]
    pub fn take<Q: SynergyQueues>(
        &self,
        queues: &mut Q,
        me: WorkerId,
        congested: bool,
    ) -> Option<Taken<Q::Job>> {
        for &source in self.order(congested) {
            let job = match source {
                Source::Own => queues.pop_own(me).map(|j| (j, 0)),
                Source::Wait => queues.pop_wait().map(|j| (j, 0)),
                Source::Steal => {
                    let Some(v) = self.victim(me, |v| queues.running_long(v), |v| queues.len(v))
                    else {
                        continue;
                    };
                    let n = self.batch(queues.len(v));
                    let Some(first) = queues.pop_own(v) else {
                        continue;
                    };
                    let mut stolen = 1;
                    while stolen < n {
                        let Some(j) = queues.pop_own(v) else { break };
                        queues.push_own(me, j);
                        stolen += 1;
                    }
                    Some((first, stolen))
                }
            };
            if let Some((job, stolen)) = job {
                return Some(Taken {
                    job,
                    source,
                    stolen,
                });
            }
        }
        None
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
/// stealing, congestion. Storage is sized at construction: each worker
/// queue admits `queue_capacity` new requests (plus a steal batch and a
/// request preempted back to it), the wait queue holds `queue_capacity`.
#[derive(Debug)]
pub struct Synergy {
    label: String,
    rules: SynergyRules,
    capacity: usize,
    queues: Vec<VecDeque<Job>>,
    /// Preempted requests (all long).
    wait: VecDeque<Job>,
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

/// The simulator's queues as the rules see them.
struct SimQueues<'a> {
    queues: &'a mut [VecDeque<Job>],
    wait: &'a mut VecDeque<Job>,
    long: WorkerSet,
}

impl SynergyQueues for SimQueues<'_> {
    type Job = Job;

    fn pop_own(&mut self, w: WorkerId) -> Option<Job> {
        self.queues[w as usize].pop_front()
    }

    fn push_own(&mut self, w: WorkerId, job: Job) {
        self.queues[w as usize].push_back(job);
    }

    fn pop_wait(&mut self) -> Option<Job> {
        self.wait.pop_front()
    }

    fn len(&self, w: WorkerId) -> usize {
        self.queues[w as usize].len()
    }

    fn running_long(&self, w: WorkerId) -> bool {
        self.long.contains(w)
    }
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
            wait: VecDeque::with_capacity(ctx.queue_capacity),
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

    /// The next request for free worker `w`, by the rules' one selection
    /// loop ([`SynergyRules::take`]).
    fn take(&mut self, w: WorkerId, now: Nanos) -> Option<Job> {
        let congested = self.detector.congested();
        let taken = self.rules.take(
            &mut SimQueues {
                queues: &mut self.queues,
                wait: &mut self.wait,
                long: self.long,
            },
            w,
            congested,
        )?;
        match taken.source {
            Source::Own => {}
            Source::Wait => {
                self.consumed += 1;
                if congested {
                    // The runtime's timer re-checks a congested wait queue on
                    // every pass (continuously); the simulator's ticks come
                    // every THRESH_WQD, so it re-checks when the consumer
                    // moves, the only moment the answer can change.
                    self.detector.pass(now, self.produced, self.consumed);
                }
            }
            Source::Steal => self.stats.steals += taken.stolen as u64,
        }
        Some(taken.job)
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

    fn on_dropped(&mut self, worker: WorkerId, _req: &Request, _now: Nanos) {
        // Nothing ran: the short average learns nothing.
        self.long.remove(worker);
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

    fn on_feedback_start(&mut self, worker: WorkerId, _now: Nanos) -> Option<Nanos> {
        self.long.insert(worker);
        Some(self.quantum(worker))
    }

    fn on_quantum_expired(&mut self, worker: WorkerId, _now: Nanos) -> bool {
        debug_assert!(self.long.contains(worker), "only long requests have quanta");
        let preempt = self.rules.preempt_on_expiry(
            self.queues[worker as usize].len(),
            self.wait.len(),
            self.capacity,
        );
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
        if self.rules.preempted_to_wait_queue() {
            self.wait.push_back((req, true));
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

    fn execution(&self) -> super::Execution {
        super::Execution::LocalPreemptive(super::LocalRules::Synergy(self.rules))
    }
}

impl PolicyConfig for SynergyConfig {
    fn build(&self, ctx: &PolicyContext, label: String) -> Result<Box<dyn Policy>, PolicyError> {
        Ok(Box::new(Synergy::new(ctx, *self, label)))
    }

    fn shape(&self) -> Shape {
        Shape::LocalPreemptive
    }

    fn preemption_model(&self) -> PreemptionModel {
        PreemptionModel::Mechanism(self.mechanism)
    }

    fn modelled_system(&self) -> ModelledSystem {
        ModelledSystem::Synergy
    }

    fn fixed_quantum_ns(&self) -> Option<u64> {
        (!self.adaptive).then_some(self.quantum_ns)
    }

    /// The dynamic quantum's floor: the shortest mean times the smaller of
    /// its factors (a short average cannot fall below the shortest type), at
    /// least [`MIN_QUANTUM_NS`].
    fn shortest_slice_ns(&self, shortest_mean_ns: f64) -> Option<u64> {
        if !self.adaptive {
            return self.fixed_quantum_ns();
        }
        let factor = if self.congested_factor > 0.0 {
            self.quantum_factor.min(self.congested_factor)
        } else {
            self.quantum_factor
        };
        Some(if shortest_mean_ns.is_finite() {
            ((shortest_mean_ns * factor) as u64).max(MIN_QUANTUM_NS)
        } else {
            MIN_QUANTUM_NS
        })
    }

    fn feedback_threshold_ns(&self) -> Option<u64> {
        Some(self.long_ns)
    }
}

/// `synergy` in the policy registry.
pub static SYNERGY: PolicyEntry = PolicyEntry {
    name: "synergy",
    example: "synergy",
    aliases: &[],
    defaults: || Box::new(SynergyConfig::default()),
};

#[cfg(test)]
mod tests {
    use super::super::testkit::{Driver, ctx};
    use super::*;
    use crate::policy::PolicySpec;

    fn rules(workers: usize, f: impl FnOnce(&mut SynergyConfig)) -> SynergyRules {
        let mut c = SynergyConfig::default();
        f(&mut c);
        SynergyRules::new(workers, c)
    }

    fn req(id: u64, flow: FlowId) -> Request {
        Request {
            id,
            token: id as u32,
            type_id: 0,
            flow,
            arrival_ns: 0,
        }
    }

    #[test]
    fn conditional_preemption_fires_only_with_queued_work() {
        let r = rules(4, |_| {});
        assert!(!r.preempt_on_expiry(0, 0, 8), "renewed on an empty queue");
        assert!(r.preempt_on_expiry(1, 0, 8));
        assert!(
            !r.preempt_on_expiry(1, 8, 8),
            "renewed: the wait queue is full"
        );
        let always = rules(4, |c| c.conditional = false);
        assert!(always.preempt_on_expiry(0, 0, 8));
        let own_tail = rules(4, |c| c.wait_queue = false);
        assert!(own_tail.preempt_on_expiry(1, 8, 8), "no wait queue to fill");
    }

    #[test]
    fn an_expired_quantum_on_a_worker_with_an_empty_queue_is_renewed() {
        let c = ctx(2, &[1.0]);
        let mut p = Synergy::new(&c, SynergyConfig::default(), "synergy".into());
        let r = p.rules;
        // One request on worker 0's flow: it runs, declares itself long.
        let flow = (0..u16::MAX).find(|&f| r.home(f) == 0).unwrap();
        p.on_arrival(req(0, flow), 0).unwrap();
        let Some(Action::Dispatch { worker: 0, .. }) = p.next_action(0) else {
            panic!("worker 0 takes its own request")
        };
        assert!(p.on_feedback_start(0, 0).is_some());
        for t in 1..100 {
            assert!(!p.on_quantum_expired(0, t * 1_000), "preempted alone");
        }
        assert_eq!(p.stats().preemptions, 0);
        assert_eq!(p.stats().preemptions_avoided, 99);
        // A request joins worker 0's queue: the next expiry preempts, and
        // the preempted request goes to the wait queue.
        p.on_arrival(req(1, flow), 100_000).unwrap();
        assert!(p.on_quantum_expired(0, 101_000));
        p.on_preempted(0, req(0, flow), 101_000);
        assert_eq!(p.stats().wait_queue_passes, 1);
        // Worker 0 takes its own queue first (the new request, short: no
        // quantum); worker 1 resumes the preempted one from the wait queue
        // with a quantum.
        let mut got = Vec::new();
        while let Some(Action::Dispatch {
            worker,
            req,
            quantum_ns,
        }) = p.next_action(101_000)
        {
            got.push((worker, req.id, quantum_ns.is_some()));
        }
        assert_eq!(got, vec![(0, 1, false), (1, 0, true)]);
    }

    #[test]
    fn short_requests_are_never_preempted() {
        // Both types below the feedback rule: no request is ever armed, so
        // none is preempted, even without conditional preemption.
        for seed in 0..10 {
            let spec: PolicySpec = "synergy:cp=off,long=100".parse().unwrap();
            let mut d = Driver::new(spec.build(&ctx(3, &[1.0, 50.0])).unwrap(), seed)
                .with_means(&[1.0, 50.0]);
            d.run(3_000, |_, _| {});
            assert!(d.completed > 1_000);
            assert_eq!(d.preempted, 0, "seed {seed}");
            assert_eq!(d.policy.stats().preemptions, 0);
        }
    }

    #[test]
    fn the_quantum_follows_the_short_average_and_congestion() {
        let r = rules(2, |c| c.congested_factor = 5.0);
        let mut avg = ShortAverage::new(5_000);
        assert_eq!(r.quantum_ns(avg.value_ns(), false), 10_000);
        avg.record(1_000);
        assert_eq!(avg.value_ns(), 3_000.0);
        assert_eq!(r.quantum_ns(avg.value_ns(), false), 6_000);
        assert_eq!(r.quantum_ns(avg.value_ns(), true), 15_000);
        assert_eq!(r.quantum_ns(1.0, false), MIN_QUANTUM_NS);
        let fixed = rules(2, |c| c.adaptive = false);
        assert_eq!(fixed.quantum_ns(123.0, false), 5_000);
        let keep = rules(2, |c| c.congested_factor = 0.0);
        assert_eq!(keep.quantum_ns(1_000.0, true), 2_000);
    }

    #[test]
    fn the_congestion_detector_turns_on_when_the_consumer_stalls_and_off_once_it_passes() {
        let mut d = CongestionDetector::new(10_000);
        // First check at t=0: nothing queued, mark = produced (3).
        assert!(!d.pass(0, 3, 0));
        // Before the period, a stall is not seen.
        assert!(!d.pass(5_000, 5, 0));
        // At the period: the consumer has not passed the 3 queued at the
        // previous check: congested.
        assert!(d.pass(10_000, 5, 2));
        assert_eq!(d.episodes(), 1);
        // While congested every pass checks against the same mark (3).
        assert!(d.pass(10_100, 9, 2));
        assert!(!d.pass(10_200, 9, 3), "passed the mark: clear");
        // The new mark is 9; the next check is a period later.
        assert!(!d.pass(15_000, 12, 3));
        assert!(d.pass(20_200, 12, 8));
        assert_eq!(d.episodes(), 2);
        assert!(!d.pass(20_300, 12, 9));
        // Off: never congested.
        let mut off = CongestionDetector::new(0);
        assert!(!off.pass(1_000_000, 1_000, 0));
    }

    #[test]
    fn selection_order_and_stealing_follow_the_code() {
        let r = rules(4, |_| {});
        assert_eq!(r.order(false), &[Source::Own, Source::Wait, Source::Steal]);
        assert_eq!(r.order(true), &[Source::Wait, Source::Own, Source::Steal]);
        let lens = [0usize, 1, 3, 2];
        let len = |v: WorkerId| lens[v as usize];
        // A worker running long with one queued comes first...
        assert_eq!(r.victim(0, |v| v == 1, len), Some(1));
        // ...otherwise the first other worker (after the thief) with two.
        assert_eq!(r.victim(0, |_| false, len), Some(2));
        assert_eq!(r.victim(2, |_| false, len), Some(3));
        assert_eq!(r.victim(0, |_| false, |_| 1), None);
        assert_eq!(rules(4, |c| c.steal = false).victim(0, |_| true, len), None);
        assert_eq!(r.batch(1), 1);
        assert_eq!(r.batch(5), 3);
        assert_eq!(r.batch(1_000), 32);
    }

    #[test]
    fn every_request_completes_once_under_random_events_and_every_ablation() {
        for cfg in [
            "synergy",
            "synergy:ws=off",
            "synergy:wq=off",
            "synergy:cp=off",
            "synergy:qa=off",
            "synergy:ws=off,wq=off,cp=off,qa=off",
            "synergy:wqd=1,cqf=5",
        ] {
            let spec: PolicySpec = cfg.parse().unwrap();
            let mut preempted = 0;
            for seed in 0..5 {
                let p = spec.build(&ctx(3, &[1.0, 50.0])).unwrap();
                let mut d = Driver::new(p, seed).with_means(&[1.0, 50.0]);
                d.run(3_000, |_, _| {});
                assert_eq!(
                    d.completed + d.dropped + d.in_flight(),
                    d.generated(),
                    "{cfg} seed {seed}"
                );
                // Only long requests (type 1, 50 µs ≥ the 10 µs rule) are
                // ever preempted.
                assert!(d.preempted_reqs.iter().all(|r| r.type_id == 1), "{cfg}");
                assert_eq!(d.preempted, d.policy.stats().preemptions, "{cfg}");
                preempted += d.preempted;
            }
            assert!(preempted > 0, "{cfg}: never preempted");
        }
    }
}
