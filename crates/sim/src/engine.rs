//! The event loop. Events are completions, quantum ends, preemption signals and
//! context-switch ends, kept in time order on an agenda (the `events` module, at
//! most a few per worker); the next arrival is held aside and compared with the
//! agenda's earliest event, so arrivals never go through it. Ties are broken by
//! insertion order: runs are deterministic.
//!
//! After every event the engine drains the policy's actions (dispatches and
//! preemptions). Requests in flight live in a slab indexed by the request's token.
//!
//! A closed-loop source ([`psp_workload::ClosedLoop`]) hears when each of its
//! requests ends: the engine notes each completion and refusal (flow, when the
//! client learns it: the network's latency later) in a small buffer, and after
//! the event reports them to the source, which may replace the arrival held
//! aside with an earlier one. Open-loop sources never fill the buffer.
//!
//! With a system cost model ([`SystemCosts`]), the dispatcher has a clock of its
//! own that runs ahead of the event time while it has a backlog: each step it
//! takes starts when both it and the step's input are ready and lasts the
//! step's cost. Steps enter in event order, so this is the serial FIFO server
//! the model describes, without an event per step. The policy is called at the
//! dispatcher's time; a dispatched request starts when the dispatch is done.
//! With every cost zero the dispatcher's time is the event time: the ideal
//! system, bit for bit.

use std::collections::VecDeque;

use psp_core::classifier::{Classifier, ClassifierKind, RandomClassifier};
use psp_core::policy::DarcConfig;
use psp_core::policy::PolicyStats;
use psp_core::policy::darc::Darc;
use psp_core::policy::fcfs::{CFcfs, CFcfsConfig};
use psp_core::{
    Action, FlowId, Nanos, Policy, PolicyContext, PolicySpec, Request, TypeId, WorkerId,
};
use psp_metrics::reservation::ReservationLayout;
use psp_metrics::{ClosedLoopExtra, Extra, PointMeta, PointResult, Recorder};

use psp_metrics::series::{ReservationView, SeriesRecorder, TimeSeries};
use psp_workload::{ArrivalSource, Arrivals, Clients, ClosedLoop, Workload};

use crate::events::{Agenda, Event, EventKind};
use crate::preemption::PreemptionCost;
use crate::system::SystemCosts;

/// Ticks in a row with no other event pending after which a policy that still
/// holds queued requests stops getting ticks (they are then counted stranded).
const MAX_IDLE_TICKS: u32 = 1_000;

/// One simulated point's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// Application workers.
    pub workers: usize,
    /// Offered rate.
    pub rate_rps: f64,
    /// Length of the arrival period.
    pub duration_ns: Nanos,
    /// Fraction of the arrival period discarded as warm-up.
    pub warmup_fraction: f64,
    /// Random seed.
    pub seed: u64,
    /// Client flows the arrivals come on (steered to worker queues by hash in
    /// decentralized policies), 1..=[`psp_workload::MAX_FLOWS`].
    pub flows: u32,
    /// Bound of each queue of the policy.
    pub queue_capacity: usize,
    /// The system's costs (default: the ideal system).
    pub system: SystemCosts,
    /// How requests are classified: by their true type (`header`) or at random
    /// (the type the policy sees is drawn uniformly; latency is still recorded
    /// under the true type).
    pub classifier: ClassifierKind,
    /// Record a time series with windows of this length (per-type latency and
    /// the reservation per window).
    pub series_window_ns: Option<Nanos>,
    /// Per type (the type the policy sees; missing or `None`: unbounded),
    /// the longest a request may wait for its start: one whose turn comes
    /// later is dropped unrun (the runtime answers it OVERLOADED), counted
    /// in its type's drops and [`SimStats::expired`], and its worker is free
    /// at once; the policy hears of it by [`psp_core::Policy::on_dropped`].
    /// A preempted request resumes whatever its age. The runtime's
    /// `RuntimeConfig::max_wait`, `--max-wait`.
    pub max_wait_ns: Vec<Option<Nanos>>,
}

/// Why a point could not be simulated.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The policy cannot be built for this workload and machine.
    #[error(transparent)]
    Policy(#[from] psp_core::PolicyError),
    /// A parameter is out of range.
    #[error("{0}")]
    Config(String),
}

#[derive(Debug, Clone, Copy)]
struct InFlight {
    req: Request,
    /// The request's true type (the policy sees `req.type_id`, the classifier's).
    true_type: TypeId,
    service_ns: Nanos,
    remaining_ns: Nanos,
    /// Whether it has begun running (the simulated application's feedback
    /// happens when it begins).
    begun: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WorkerState {
    Idle,
    /// Running `token` since `since` with an optional quantum.
    Running {
        token: u32,
        since: Nanos,
        quantum: Option<Nanos>,
    },
    /// Switching away from a preempted `token`.
    Switching {
        token: u32,
    },
}

#[derive(Debug, Clone, Copy)]
struct Worker {
    state: WorkerState,
    /// Bumped whenever the worker's current segment ends: stale events are ignored.
    gen_: u32,
}

/// What a simulation produced.
#[derive(Debug, Clone)]
pub struct SimOutcome {
    /// Latency and slowdown of measured requests (arrived after warm-up).
    pub recorder: Recorder,
    /// Requests generated, warm-up included.
    pub generated: u64,
    /// Requests completed, warm-up included.
    pub completed: u64,
    /// Requests dropped at a full queue or receive ring, warm-up included.
    pub dropped: u64,
    /// Of those, requests dropped at the full receive ring (system cost model).
    pub ingress_dropped: u64,
    /// Of those, requests dropped unrun past their type's queueing bound
    /// ([`SimConfig::max_wait_ns`]).
    pub expired: u64,
    /// Requests still queued when no event was left (a policy bug if non-zero).
    pub stranded: u64,
    /// Requests generated after warm-up.
    pub measured_generated: u64,
    /// Simulated time of the last event.
    pub end_ns: Nanos,
    /// The policy's decision counters.
    pub policy_stats: PolicyStats,
    /// The final reservation, for reservation-based policies.
    pub reservation: Option<psp_core::Reservation>,
    /// Events processed (arrivals included).
    pub events: u64,
    /// The time series, when one was asked for.
    pub series: Option<TimeSeries>,
    /// The system costs it ran under (a policy's own under `own`).
    pub system: SystemCosts,
}

/// A dispatch observer: the policy (before the dispatch is applied), the worker
/// and the request.
pub type DispatchProbe<'p> = &'p mut dyn FnMut(&dyn Policy, WorkerId, &Request);

/// A policy a [`Simulator`] runs: any policy type, or `dyn Policy` itself.
pub trait SimPolicy: Policy {
    /// The policy as a [`DispatchProbe`] sees it.
    fn as_dyn(&self) -> &dyn Policy;
}

impl<P: Policy> SimPolicy for P {
    fn as_dyn(&self) -> &dyn Policy {
        self
    }
}

impl SimPolicy for dyn Policy + '_ {
    fn as_dyn(&self) -> &dyn Policy {
        self
    }
}

/// The discrete-event executor for one point, over a policy of type `P`: a
/// boxed one (`dyn Policy`, the default) or a concrete one, whose hooks the
/// event loop then calls directly (see [`simulate_point`]).
pub struct Simulator<'p, P: SimPolicy + ?Sized = dyn Policy> {
    policy: &'p mut P,
    agenda: Agenda,
    seq: u64,
    workers: Vec<Worker>,
    /// Per worker, requests handed to it while busy (token, quantum, when the
    /// dispatch is done), started in order as it frees:
    /// `Policy::local_queue_depth` of them at most.
    local: Vec<VecDeque<(u32, Option<Nanos>, Nanos)>>,
    local_depth: usize,
    slab: Vec<InFlight>,
    free_slots: Vec<u32>,
    recorder: Recorder,
    measure_from_ns: Nanos,
    next_id: u64,
    generated: u64,
    completed: u64,
    dropped: u64,
    measured_generated: u64,
    events: u64,
    now: Nanos,
    probe: Option<DispatchProbe<'p>>,
    costs: SystemCosts,
    /// The simulated preemption mechanism.
    preemption: PreemptionCost,
    /// The policy's tick period, if it asked for one.
    tick_ns: Option<Nanos>,
    /// The simulated application's feedback rule (`Execution::feedback_threshold_ns`).
    feedback_ns: Option<Nanos>,
    /// Workers pick from their own queues (`Execution::workers_pick_locally`).
    local_dispatch: bool,
    /// The policy pays the dispatcher's costs (centralized, non-zero costs).
    dispatcher_on: bool,
    /// When the dispatcher is next free (see the module doc).
    dispatcher_clock: Nanos,
    /// When each arrival in the receive ring is read by the dispatcher.
    ingress: VecDeque<Nanos>,
    ingress_dropped: u64,
    /// Per type the policy sees, the queueing bound (`SimConfig::max_wait_ns`).
    max_wait_ns: Vec<Option<Nanos>>,
    expired: u64,
    classifier: Option<RandomClassifier>,
    series: Option<SeriesRecorder>,
    /// Reservation updates the series has seen.
    series_updates: u64,
    /// Scratch for the series: (reserved, stealable) workers per type.
    series_view: Vec<(usize, usize)>,
    /// The arrival source is closed-loop: request ends go to `done`.
    closed_loop: bool,
    /// Requests that ended during the current event, for the closed-loop
    /// source: (flow, when the client learns it, refused). At most one per
    /// event; drained after each.
    done: Vec<(FlowId, Nanos, bool)>,
}

impl<'p, P: SimPolicy + ?Sized> Simulator<'p, P> {
    /// An executor for `policy` on `workers` workers, with one recorder slot per
    /// type name; requests arriving before `measure_from_ns` are not measured.
    pub fn new(
        policy: &'p mut P,
        workers: usize,
        type_names: &[String],
        measure_from_ns: Nanos,
    ) -> Self {
        let local_depth = policy.local_queue_depth();
        let execution = policy.execution();
        let feedback_ns = execution.feedback_threshold_ns();
        let local_dispatch = execution.workers_pick_locally();
        Self {
            feedback_ns,
            local_dispatch,
            policy,
            agenda: Agenda::with_capacity(4 * workers + 4),
            seq: 0,
            workers: vec![
                Worker {
                    state: WorkerState::Idle,
                    gen_: 0,
                };
                workers
            ],
            local_depth,
            local: (0..workers)
                .map(|_| VecDeque::with_capacity(local_depth))
                .collect(),
            slab: Vec::with_capacity(1024),
            free_slots: Vec::with_capacity(1024),
            recorder: Recorder::new(type_names.iter().cloned()),
            measure_from_ns,
            next_id: 0,
            generated: 0,
            completed: 0,
            dropped: 0,
            measured_generated: 0,
            events: 0,
            now: 0,
            probe: None,
            costs: SystemCosts::default(),
            preemption: PreemptionCost::default(),
            tick_ns: None,
            dispatcher_on: false,
            dispatcher_clock: 0,
            ingress: VecDeque::new(),
            ingress_dropped: 0,
            max_wait_ns: Vec::new(),
            expired: 0,
            classifier: None,
            series: None,
            series_updates: 0,
            series_view: Vec::new(),
            closed_loop: false,
            done: Vec::new(),
        }
    }

    /// Bounds each type's queueing delay ([`SimConfig::max_wait_ns`]).
    pub fn with_max_wait(mut self, max_wait_ns: &[Option<Nanos>]) -> Self {
        self.max_wait_ns = max_wait_ns.to_vec();
        self
    }

    /// Records a time series into `series` (windows, per-type latency, the
    /// reservation in force).
    pub fn with_series(mut self, series: SeriesRecorder) -> Self {
        self.series = Some(series);
        self.series_updates = u64::MAX; // report the first reservation at once
        self
    }

    /// Tells the series about a reservation change (or the first reservation).
    fn note_reservation(&mut self) {
        let Some(series) = self.series.as_mut() else {
            return;
        };
        let updates = self.policy.stats().reservation_updates;
        if updates == self.series_updates {
            return;
        }
        self.series_updates = updates;
        match self.policy.reservation() {
            Some(r) => {
                self.series_view.clear();
                self.series_view.extend(r.worker_counts());
                let text = r.to_string();
                series.close_windows_until(
                    self.now,
                    Some(ReservationView {
                        per_type: &self.series_view,
                        text: &text,
                    }),
                );
            }
            None => series.close_windows_until(self.now, None),
        }
    }

    /// Charges `cost` for each preemption (the mechanism the policy runs on).
    pub fn with_preemption(mut self, cost: PreemptionCost) -> Self {
        self.preemption = cost;
        self
    }

    /// Runs under `costs` (centralized policies pay the dispatcher's costs;
    /// every policy pays the network).
    pub fn with_system(mut self, costs: SystemCosts) -> Self {
        self.dispatcher_on =
            self.policy.execution().dispatcher_places_arrivals() && costs.has_dispatcher_cost();
        self.ingress = VecDeque::with_capacity(if self.dispatcher_on {
            costs.ingress_capacity
        } else {
            0
        });
        self.costs = costs;
        self
    }

    /// Classifies requests with `kind` for `types` types (the policy sees the
    /// classifier's type; latency is recorded under the true type).
    pub fn with_classifier(mut self, kind: ClassifierKind, types: usize) -> Self {
        self.classifier = match kind {
            ClassifierKind::Header => None,
            ClassifierKind::Random(seed) => Some(RandomClassifier::new(types as u16, seed)),
        };
        self
    }

    /// The dispatcher takes a step costing `cost_ns` now (or when it is free):
    /// the time the step is done. Without a dispatcher, now.
    #[inline]
    fn dispatcher_step(&mut self, cost_ns: Nanos) -> Nanos {
        if !self.dispatcher_on {
            return self.now;
        }
        self.dispatcher_clock = self.dispatcher_clock.max(self.now) + cost_ns;
        self.dispatcher_clock
    }

    /// Calls `probe` with the policy (before the dispatch is applied), the worker
    /// and the request of every dispatch: for invariant checks in tests.
    pub fn with_probe(mut self, probe: DispatchProbe<'p>) -> Self {
        self.probe = Some(probe);
        self
    }

    #[inline]
    fn push(&mut self, at: Nanos, worker: WorkerId, kind: EventKind) {
        self.seq += 1;
        let ev = Event {
            at,
            seq: self.seq,
            gen_: self.workers[worker as usize].gen_,
            worker,
            kind,
        };
        self.agenda.push(ev);
    }

    /// Runs `token` on `worker` from `at` (now, or when the dispatcher's
    /// dispatch is done) for one segment (to completion or quantum).
    #[inline]
    fn start_segment(
        &mut self,
        worker: WorkerId,
        token: u32,
        mut quantum: Option<Nanos>,
        at: Nanos,
    ) {
        let f = &mut self.slab[token as usize];
        let remaining = f.remaining_ns;
        if !f.begun {
            let bound = self
                .max_wait_ns
                .get(usize::from(f.req.type_id))
                .copied()
                .flatten();
            if bound.is_some_and(|b| at > f.req.arrival_ns.saturating_add(b)) {
                self.expire(worker, token, at);
                return;
            }
            let f = &mut self.slab[token as usize];
            f.begun = true;
            // The application recognises a long request as it begins and
            // calls feedback_start(), which arms the worker's timer.
            if self.feedback_ns.is_some_and(|t| f.service_ns >= t) {
                quantum = self.policy.on_feedback_start(worker, at);
            }
        }
        let w = &mut self.workers[worker as usize];
        w.gen_ = w.gen_.wrapping_add(1);
        w.state = WorkerState::Running {
            token,
            since: at,
            quantum,
        };
        match quantum {
            Some(q) if remaining > q => self.push(at + q, worker, EventKind::QuantumEnd),
            _ => self.push(at + remaining, worker, EventKind::Complete),
        }
    }

    /// Whether the receive ring has room for an arrival now (system cost model:
    /// arrivals wait there until the dispatcher reads them).
    #[inline]
    fn ingress_admits(&mut self) -> bool {
        while self.ingress.front().is_some_and(|&read| read <= self.now) {
            self.ingress.pop_front();
        }
        self.ingress.len() < self.costs.ingress_capacity
    }

    #[inline]
    fn arrive(&mut self, type_id: TypeId, service_ns: Nanos, flow: FlowId) {
        let token = match self.free_slots.pop() {
            Some(t) => t,
            None => {
                self.slab.push(InFlight {
                    req: Request {
                        id: 0,
                        token: 0,
                        type_id: 0,
                        flow: 0,
                        arrival_ns: 0,
                    },
                    true_type: 0,
                    service_ns: 0,
                    remaining_ns: 0,
                    begun: false,
                });
                (self.slab.len() - 1) as u32
            }
        };
        let seen_type = match self.classifier.as_mut() {
            Some(c) => c.classify(&[]),
            None => type_id,
        };
        let req = Request {
            id: self.next_id,
            token,
            type_id: seen_type,
            flow,
            arrival_ns: self.now,
        };
        self.next_id += 1;
        self.slab[token as usize] = InFlight {
            req,
            true_type: type_id,
            service_ns,
            remaining_ns: service_ns,
            begun: false,
        };
        self.generated += 1;
        let measured = self.now >= self.measure_from_ns;
        self.measured_generated += u64::from(measured);
        let admitted = if self.dispatcher_on {
            if self.ingress_admits() {
                // Workers that pick locally leave the dispatcher one step
                // per arrival: choose the worker queue and push to it.
                let cost = self.costs.arrival_ns
                    + if self.local_dispatch {
                        self.costs.dispatch_ns
                    } else {
                        0
                    };
                let at = self.dispatcher_step(cost);
                self.ingress.push_back(at - cost);
                self.policy.on_arrival(req, at).is_ok()
            } else {
                self.ingress_dropped += 1;
                false
            }
        } else {
            self.policy.on_arrival(req, self.now).is_ok()
        };
        if !admitted {
            self.dropped += 1;
            if measured {
                self.recorder.record_drop(type_id as usize);
            }
            self.free_slots.push(token);
            if self.closed_loop {
                self.done
                    .push((flow, self.now + self.costs.network_ns, true));
            }
        }
    }

    #[inline]
    fn complete(&mut self, worker: WorkerId, token: u32) {
        let f = self.slab[token as usize];
        let w = &mut self.workers[worker as usize];
        w.state = WorkerState::Idle;
        w.gen_ = w.gen_.wrapping_add(1);
        let latency = self.now - f.req.arrival_ns + self.costs.network_ns;
        if f.req.arrival_ns >= self.measure_from_ns {
            self.recorder
                .record(f.true_type as usize, latency, f.service_ns);
        }
        if let Some(series) = self.series.as_mut() {
            series.record(f.true_type as usize, self.now, latency, f.service_ns);
        }
        self.completed += 1;
        self.free_slots.push(token);
        if self.closed_loop {
            self.done
                .push((f.req.flow, self.now + self.costs.network_ns, false));
        }
        let at = self.dispatcher_step(self.costs.completion_ns);
        self.policy.on_completion(worker, &f.req, f.service_ns, at);
        self.start_local(worker);
    }

    /// `worker` took `token` at `at`, past its type's queueing bound: it is
    /// dropped unrun (answered OVERLOADED in the runtime) and the worker is
    /// free at once, as the runtime's worker that refuses an expired job.
    /// The policy hears of it by `on_dropped`, which learns no service time.
    fn expire(&mut self, worker: WorkerId, token: u32, at: Nanos) {
        let f = self.slab[token as usize];
        let w = &mut self.workers[worker as usize];
        w.state = WorkerState::Idle;
        w.gen_ = w.gen_.wrapping_add(1);
        self.dropped += 1;
        self.expired += 1;
        if f.req.arrival_ns >= self.measure_from_ns {
            self.recorder.record_drop(f.true_type as usize);
        }
        self.free_slots.push(token);
        if self.closed_loop {
            self.done
                .push((f.req.flow, at + self.costs.network_ns, true));
        }
        let at = if self.local_dispatch {
            at
        } else {
            self.dispatcher_step(self.costs.completion_ns).max(at)
        };
        self.policy.on_dropped(worker, &f.req, at);
        self.start_local(worker);
    }

    /// `worker` is free: it starts the head of its own queue, if any, without
    /// the dispatcher (once the dispatcher has handed it over).
    #[inline]
    fn start_local(&mut self, worker: WorkerId) {
        if self.local_depth == 0 {
            return;
        }
        if let Some((token, quantum, ready)) = self.local[worker as usize].pop_front() {
            self.start_segment(worker, token, quantum, ready.max(self.now));
        }
    }

    /// Stops the segment running on `worker` now; returns its token.
    #[inline]
    fn stop_segment(&mut self, worker: WorkerId) -> Option<u32> {
        let WorkerState::Running { token, since, .. } = self.workers[worker as usize].state else {
            return None;
        };
        let f = &mut self.slab[token as usize];
        f.remaining_ns -= self.now.saturating_sub(since).min(f.remaining_ns);
        Some(token)
    }

    fn begin_switch(&mut self, worker: WorkerId, token: u32, switch_ns: Nanos) {
        let w = &mut self.workers[worker as usize];
        w.gen_ = w.gen_.wrapping_add(1);
        w.state = WorkerState::Switching { token };
        self.push(self.now + switch_ns, worker, EventKind::SwitchDone);
    }

    fn handle(&mut self, ev: Event) {
        let worker = ev.worker;
        if self.workers[worker as usize].gen_ != ev.gen_ {
            return; // the segment this event belonged to already ended
        }
        match (ev.kind, self.workers[worker as usize].state) {
            (EventKind::Complete, WorkerState::Running { token, .. }) => {
                self.complete(worker, token)
            }
            (EventKind::QuantumEnd, WorkerState::Running { quantum, .. }) => {
                let token = self.stop_segment(worker).expect("running");
                let at = self.dispatcher_step(0);
                if self.policy.on_quantum_expired(worker, at) {
                    // The dispatcher orders the preemption; the worker's own
                    // timer fired, so only the switch is paid — unless the
                    // mechanism must carry the decision to the worker (a
                    // timer core's signal): the request runs on meanwhile.
                    self.dispatcher_step(self.costs.preempt_ns);
                    if self.preemption.never_lands {
                        // No preemption point: the request runs to its end
                        // and the policy sees a completion.
                        self.start_segment(worker, token, None, self.now);
                    } else if self.preemption.signal_ns > 0 {
                        self.start_segment(worker, token, None, self.now);
                        self.push(
                            self.now + self.preemption.signal_ns,
                            worker,
                            EventKind::PreemptSignal,
                        );
                    } else {
                        self.begin_switch(worker, token, self.preemption.switch_ns);
                    }
                } else {
                    self.start_segment(worker, token, quantum, self.now);
                }
            }
            (EventKind::PreemptSignal, WorkerState::Running { .. }) => {
                let token = self.stop_segment(worker).expect("running");
                if self.slab[token as usize].remaining_ns == 0 {
                    self.complete(worker, token);
                } else {
                    self.begin_switch(worker, token, self.preemption.switch_ns);
                }
            }
            (EventKind::SwitchDone, WorkerState::Switching { token }) => {
                let w = &mut self.workers[worker as usize];
                w.state = WorkerState::Idle;
                w.gen_ = w.gen_.wrapping_add(1);
                let req = self.slab[token as usize].req;
                // A local yield (workers pick their own next request) does
                // not go through the dispatcher.
                let cost = if self.local_dispatch {
                    0
                } else {
                    self.costs.completion_ns
                };
                let at = self.dispatcher_step(cost);
                self.policy.on_preempted(worker, req, at);
                self.start_local(worker);
            }
            (kind, state) => unreachable!("event {kind:?} on worker {worker} in state {state:?}"),
        }
    }

    #[inline]
    fn drain_actions(&mut self) {
        loop {
            let now = self.dispatcher_step(0);
            let Some(action) = self.policy.next_action(now) else {
                break;
            };
            match action {
                Action::Dispatch {
                    worker,
                    req,
                    quantum_ns,
                } => {
                    let idle = self.workers[worker as usize].state == WorkerState::Idle;
                    assert!(
                        idle || self.local[worker as usize].len() < self.local_depth,
                        "{} dispatched to busy worker {worker} beyond its local queue",
                        self.policy.name()
                    );
                    if let Some(probe) = self.probe.as_mut() {
                        probe(self.policy.as_dyn(), worker, &req);
                    }
                    let at = self.dispatcher_step(if self.local_dispatch {
                        0
                    } else {
                        self.costs.dispatch_ns
                    });
                    if idle {
                        self.start_segment(worker, req.token, quantum_ns, at);
                    } else {
                        self.local[worker as usize].push_back((req.token, quantum_ns, at));
                    }
                }
                Action::Preempt { worker } => {
                    let at = self.dispatcher_step(self.costs.preempt_ns);
                    if self.preemption.never_lands {
                        continue; // the running request completes instead
                    }
                    self.push(
                        at + self.preemption.signal_ns,
                        worker,
                        EventKind::PreemptSignal,
                    );
                }
            }
        }
    }

    /// Runs until `arrivals` is exhausted and every admitted request is done
    /// (a closed-loop source is told when each of its requests ends).
    pub fn run<A: ArrivalSource + ?Sized>(mut self, arrivals: &mut A) -> SimOutcome {
        self.closed_loop = arrivals.closed_loop();
        if self.closed_loop {
            // One end per event at most (a completion or a refusal), drained
            // after each: this never grows.
            self.done.reserve(4);
        }
        let mut next = arrivals.next_arrival();
        self.tick_ns = self.policy.tick_interval().filter(|&t| t > 0);
        if let Some(tick) = self.tick_ns {
            self.push(tick, 0, EventKind::Tick);
        }
        let (mut tick_due, mut idle_ticks) = (false, 0u32);
        loop {
            let arrival_first = match (&next, self.agenda.peek()) {
                (None, None) => break,
                (Some(a), Some(e)) => a.at_ns < e.at,
                (Some(_), None) => true,
                (None, Some(_)) => false,
            };
            self.events += 1;
            if arrival_first {
                let a = next.take().expect("checked");
                self.now = a.at_ns;
                self.arrive(a.type_id, a.service_ns, a.flow);
                next = arrivals.next_arrival();
            } else {
                let ev = self.agenda.pop().expect("checked");
                self.now = ev.at;
                if ev.kind == EventKind::Tick {
                    let at = self.dispatcher_step(0);
                    self.policy.on_tick(at);
                    tick_due = true;
                } else {
                    self.handle(ev);
                }
            }
            self.drain_actions();
            if !self.done.is_empty() {
                for (flow, at_ns, refused) in self.done.drain(..) {
                    arrivals.on_done(flow, at_ns, refused, &mut next);
                }
            }
            if tick_due {
                tick_due = false;
                // Ticks go on while anything else may happen: an arrival, an
                // event other than the spent tick, or queued requests the
                // policy may release on a later tick (for a bounded number of
                // ticks with nothing else going on).
                let others = self.agenda.len();
                idle_ticks = if others > 0 || next.is_some() {
                    0
                } else {
                    idle_ticks + 1
                };
                let go_on =
                    idle_ticks == 0 || (self.policy.queued() > 0 && idle_ticks <= MAX_IDLE_TICKS);
                if let Some(tick) = self.tick_ns.filter(|_| go_on) {
                    self.push(self.now + tick, 0, EventKind::Tick);
                }
            }
            if self.series.is_some() {
                self.note_reservation();
            }
        }
        SimOutcome {
            stranded: self.policy.queued() as u64,
            generated: self.generated,
            completed: self.completed,
            dropped: self.dropped,
            ingress_dropped: self.ingress_dropped,
            expired: self.expired,
            measured_generated: self.measured_generated,
            end_ns: self.now,
            policy_stats: self.policy.stats(),
            reservation: self.policy.reservation().cloned(),
            events: self.events,
            series: self.series.map(|s| s.finish(self.now)),
            recorder: self.recorder,
            system: self.costs,
        }
    }
}

/// Simulates one point: `spec` on `workload` under `cfg`, as the schema's point.
///
/// # Errors
/// A policy that cannot run on this workload or worker count, or a bad parameter.
pub fn simulate_point(
    workload: &Workload,
    spec: &PolicySpec,
    cfg: &SimConfig,
) -> Result<PointResult, SimError> {
    simulate(workload, spec, cfg).map(|(point, _)| point)
}

/// Runs one point: the outcome, the policy's name and the wall time. Its
/// requests come from `clients` when given (closed loop: `cfg.rate_rps` and
/// `cfg.flows` are not used), else open-loop at `cfg.rate_rps`.
fn simulate_outcome(
    workload: &Workload,
    spec: &PolicySpec,
    cfg: &SimConfig,
    clients: Option<&Clients>,
) -> Result<(SimOutcome, String, f64), SimError> {
    if clients.is_none() && !(cfg.rate_rps.is_finite() && cfg.rate_rps > 0.0) {
        return Err(SimError::Config(format!(
            "the offered rate must be positive, not {}",
            cfg.rate_rps
        )));
    }
    if cfg.duration_ns == 0 {
        return Err(SimError::Config("the duration must be positive".into()));
    }
    if !(0.0..1.0).contains(&cfg.warmup_fraction) {
        return Err(SimError::Config(format!(
            "warm-up must be in [0, 1), not {}",
            cfg.warmup_fraction
        )));
    }
    let ctx = PolicyContext {
        workers: cfg.workers,
        types: workload.type_infos(),
        queue_capacity: cfg.queue_capacity,
    };
    // Built for every policy: this checks the context and names the policy.
    let mut policy = spec.build(&ctx)?;
    let names: Vec<String> = workload.types.iter().map(|t| t.name.clone()).collect();
    let period_ns = workload.arrival_period_ns(cfg.duration_ns);
    let measure_from_ns = (period_ns as f64 * cfg.warmup_fraction) as Nanos;
    // One source type for both kinds: the event loop is compiled once per
    // policy type.
    let mut arrivals = match clients {
        None => Arrivals::new(
            workload,
            cfg.rate_rps,
            cfg.duration_ns,
            cfg.workers,
            cfg.seed,
        )
        .with_flows(cfg.flows),
        Some(c) => Arrivals::Closed(
            ClosedLoop::new(workload, c, cfg.duration_ns, cfg.seed)
                .map_err(|e| SimError::Config(e.to_string()))?,
        ),
    };
    let point = Point {
        spec,
        cfg,
        names: &names,
        measure_from_ns,
        period_ns,
    };
    // The policies `psp bench` and the figures run most run as their own
    // types, built as their registry entries build them: the event loop then
    // calls their hooks directly, inlined, instead of through the box.
    let (out, wall_s) = if let Some(&c) = spec.config_as::<DarcConfig>() {
        point.run(
            &mut Darc::new_dynamic(&ctx, c, spec.to_string()),
            &mut arrivals,
        )?
    } else if spec.config_as::<CFcfsConfig>().is_some() {
        point.run(&mut CFcfs::new(&ctx), &mut arrivals)?
    } else {
        point.run(&mut *policy, &mut arrivals)?
    };
    Ok((out, policy.name(), wall_s))
}

/// What one point's event loop is set up with, whatever the policy's type.
struct Point<'a> {
    spec: &'a PolicySpec,
    cfg: &'a SimConfig,
    names: &'a [String],
    measure_from_ns: Nanos,
    period_ns: Nanos,
}

impl Point<'_> {
    /// Runs the point over `policy`: the outcome and the wall time.
    fn run<P: SimPolicy + ?Sized>(
        &self,
        policy: &mut P,
        arrivals: &mut Arrivals,
    ) -> Result<(SimOutcome, f64), SimError> {
        let (spec, cfg, names) = (self.spec, self.cfg, self.names);
        let started = std::time::Instant::now();
        let mut sim = Simulator::new(policy, cfg.workers, names, self.measure_from_ns)
            .with_preemption(PreemptionCost::for_policy(spec))
            .with_system(cfg.system.for_policy(spec))
            .with_classifier(cfg.classifier, names.len())
            .with_max_wait(&cfg.max_wait_ns);
        if let Some(window) = cfg.series_window_ns {
            let window = psp_metrics::series::check_window(window, self.period_ns)
                .map_err(SimError::Config)?;
            sim = sim.with_series(SeriesRecorder::new(names.iter().cloned(), window));
        }
        let out = sim.run(arrivals);
        Ok((out, started.elapsed().as_secs_f64()))
    }
}

/// The simulator's own figures for one point (the point's `extra` object):
/// the schema's type itself, so there is one definition of its fields.
pub type SimStats = psp_metrics::SimExtra;

/// Simulates one point: the schema's point and the simulator's own figures.
///
/// # Errors
/// As [`simulate_point`].
pub fn simulate(
    workload: &Workload,
    spec: &PolicySpec,
    cfg: &SimConfig,
) -> Result<(PointResult, SimStats), SimError> {
    let (out, name, wall_s) = simulate_outcome(workload, spec, cfg, None)?;
    let stats = out.stats(wall_s, cfg);
    Ok((out.into_point(workload, &name, cfg, wall_s), stats))
}

/// Simulates one point and returns its time series too (`cfg.series_window_ns`
/// must be set for there to be one).
///
/// # Errors
/// As [`simulate_point`], or a series window out of range.
pub fn simulate_with_series(
    workload: &Workload,
    spec: &PolicySpec,
    cfg: &SimConfig,
) -> Result<(PointResult, Option<TimeSeries>), SimError> {
    let (mut out, name, wall_s) = simulate_outcome(workload, spec, cfg, None)?;
    let series = out.series.take();
    Ok((out.into_point(workload, &name, cfg, wall_s), series))
}

/// Simulates one point whose requests come from closed-loop `clients` during
/// `cfg.duration_ns` ([`psp_workload::ClosedLoop`]): the schema's point, with
/// its time series when `cfg.series_window_ns` asks for one. The point's
/// offered rate is the rate the clients sent at in the measured window, its
/// load the workers' busy fraction (the service time of the measured
/// completions over the window), and its `extra.clients` says who sent it. `cfg.rate_rps` and `cfg.flows` are
/// not used (each connection is a flow).
///
/// # Errors
/// As [`simulate_point`], or `clients` built for another workload.
pub fn simulate_clients(
    workload: &Workload,
    spec: &PolicySpec,
    cfg: &SimConfig,
    clients: &Clients,
) -> Result<(PointResult, Option<TimeSeries>), SimError> {
    let (mut out, name, wall_s) = simulate_outcome(workload, spec, cfg, Some(clients))?;
    let series = out.series.take();
    let measured_s =
        workload.arrival_period_ns(cfg.duration_ns) as f64 * (1.0 - cfg.warmup_fraction) / 1e9;
    let cfg = SimConfig {
        rate_rps: out.measured_generated as f64 / measured_s.max(1e-12),
        ..cfg.clone()
    };
    let mut stats = out.stats(wall_s, &cfg);
    stats.clients = Some(ClosedLoopExtra {
        connections: clients.connections().to_vec(),
        think_us: clients.think_ns() as f64 / 1e3,
    });
    let mut point = out.point_with(workload, &name, &cfg, stats);
    // The workload's mix is not what the clients send: the load is the
    // workers' busy fraction.
    point.load = point
        .types
        .iter()
        .map(|t| t.throughput_rps * t.mean_service_us / 1e6)
        .sum::<f64>()
        / cfg.workers as f64;
    Ok((point, series))
}

impl SimOutcome {
    /// The simulator's figures; `wall_s` is the simulation's wall time.
    pub fn stats(&self, wall_s: f64, cfg: &SimConfig) -> SimStats {
        SimStats {
            generated_total: self.generated,
            completed_total: self.completed,
            dropped_total: self.dropped,
            ingress_dropped_total: self.ingress_dropped,
            expired_total: self.expired,
            system: self.system.describe(),
            classifier: cfg.classifier.name().to_string(),
            stranded: self.stranded,
            preemptions: self.policy_stats.preemptions,
            steals: self.policy_stats.steals,
            preemptions_avoided: self.policy_stats.preemptions_avoided,
            wait_queue_passes: self.policy_stats.wait_queue_passes,
            congestion_episodes: self.policy_stats.congestion_episodes,
            warming_up: self.policy_stats.warming_up,
            reservation_updates: self.policy_stats.reservation_updates,
            reservation: self.reservation.as_ref().map(ReservationLayout::from),
            simulated_end_s: self.end_ns as f64 / 1e9,
            events: self.events,
            wall_s,
            sim_requests_per_s: self.generated as f64 / wall_s.max(1e-9),
            clients: None,
        }
    }

    /// The schema's point for this outcome; `wall_s` is the simulation's wall time.
    pub fn into_point(
        self,
        workload: &Workload,
        policy: &str,
        cfg: &SimConfig,
        wall_s: f64,
    ) -> PointResult {
        let stats = self.stats(wall_s, cfg);
        self.point_with(workload, policy, cfg, stats)
    }

    /// The schema's point for this outcome with the simulator's figures `stats`.
    fn point_with(
        self,
        workload: &Workload,
        policy: &str,
        cfg: &SimConfig,
        stats: SimStats,
    ) -> PointResult {
        let extra = Extra::Sim(Box::new(stats));
        let period_ns = workload.arrival_period_ns(cfg.duration_ns) as f64;
        let meta = PointMeta {
            mode: "sim",
            workload: workload.name.clone(),
            policy: policy.to_string(),
            workers: cfg.workers,
            load: cfg.rate_rps / workload.peak_rps(cfg.workers),
            offered_rps: cfg.rate_rps,
            duration_s: period_ns / 1e9,
            measured_s: period_ns * (1.0 - cfg.warmup_fraction) / 1e9,
            seed: cfg.seed,
        };
        PointResult::new(meta, &self.recorder, self.measured_generated, extra)
    }
}
