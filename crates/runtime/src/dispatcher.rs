//! The dispatcher: drives the shared policy core (the same objects the simulator
//! drives), hands jobs to workers over their rings and takes completions back.
//!
//! There is one dispatch loop, [`dispatch_loop`], and front ends plug into it
//! through the [`FrontEnd`] trait: the in-process generator
//! ([`crate::generator::Generator`]) and the network server (crate `psp-net`)
//! differ only in where requests come from and how an idle dispatcher waits.
//! [`DispatchCore`] is what the loop and every front end share: the policy, the
//! rings, the request slab, the recorder, the per-type counters, the bounded
//! reservation log and the live statistics.
//!
//! One pass reads the clock once, lets the front end admit what is due or
//! received (a bounded batch), drains every completion ring, drains the policy's
//! decisions, logs reservation changes, checks for a failed thread and for the
//! end (input over and everything answered, or the drain deadline), and lets the
//! front end idle if nothing happened. What admitting, completing and watching
//! time mean is the run's one executor ([`CoreExecutor`], built by
//! [`crate::executor::plan`]): with a decentralized one (`worker-queues`,
//! `local-preemptive`) the policy is not driven on the request path: the core
//! steers each admitted request straight to a worker queue and the workers
//! take, steal and preempt by the policy's rules; the core still records every
//! completion. Nothing on this path allocates or locks;
//! request state lives in a slab sized at start-up. Only the dispatcher thread
//! touches the core. When a front end asks for live metrics
//! ([`DispatchCore::publish_snapshots`]), the end of a pass also publishes a
//! [`Snapshot`](crate::snapshot::Snapshot) every
//! [`crate::snapshot::PUBLISH_INTERVAL`], in place, without
//! a lock or an allocation.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use psp_core::{Action, Policy, Request, TypeId, WorkerSet};
use psp_metrics::series::{ReservationView, SeriesRecorder, TimeSeries};
use psp_metrics::{Digest, Recorder};
use rtrb::{Consumer, Producer};

use crate::clock::Clock;
use crate::control::RunControl;
use crate::executor::CoreExecutor;
use crate::idle::Wakeup;
use crate::snapshot::{PUBLISH_INTERVAL, SnapshotPublisher};
use crate::worker::{Done, Job, JobIo};
use crate::worker_queues::WorkerQueues;

/// Requests admitted per pass at most, so completions are never starved.
pub const ARRIVAL_BATCH: usize = 64;
/// Reservation changes kept in the log (the most recent): a long-running server
/// must not grow with uptime. The log's total count is kept apart.
pub const RESERVATION_LOG_CAPACITY: usize = 1024;

/// A request's state while it is queued or running.
#[derive(Debug, Clone, Copy)]
pub struct Slot {
    /// The request as the policy sees it.
    pub req: Request,
    /// The type the request really is (differs from `req.type_id` under a
    /// misclassifying classifier); counters and latency are kept under it.
    pub true_type: TypeId,
    /// When the request was due (generator) or received (network), on the run's
    /// one clock: latency starts here.
    pub scheduled_ns: u64,
    /// Whether its outcome is measured (false during the warm-up).
    pub measured: bool,
    /// Body length (the body is in the front end's pool, under the token).
    pub len: u16,
}

impl Slot {
    /// The job that hands this request to a worker.
    #[inline]
    pub fn job(&self) -> Job {
        Job {
            token: self.req.token,
            type_id: self.req.type_id,
            len: self.len,
        }
    }

    /// An empty slot.
    pub const BLANK: Slot = Slot {
        req: Request {
            id: 0,
            token: 0,
            type_id: 0,
            flow: 0,
            arrival_ns: 0,
        },
        true_type: 0,
        scheduled_ns: 0,
        measured: false,
        len: 0,
    };
}

/// Periodic live statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatsConfig {
    /// Time between two lines.
    pub interval: Duration,
    /// JSON lines instead of human lines.
    pub json: bool,
}

/// A reservation change observed at run time.
#[derive(Debug, Clone, PartialEq)]
pub struct ReservationEvent {
    /// Seconds since the dispatcher started.
    pub at_s: f64,
    /// The new reservation (cloned only when an update is applied: rare).
    pub reservation: psp_core::Reservation,
}

/// What became of the valid requests the dispatcher saw. Every one ends in
/// exactly one outcome: `arrived = shed + completed + stranded` once the run is
/// over (`admitted = completed + stranded`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestCounts {
    /// Valid requests offered to the dispatcher (generated, or received and
    /// parsed as a request of a registered type), warm-up included.
    pub arrived: u64,
    /// Refused before running: no free slot or a full queue (the network front
    /// end answers them OVERLOADED or, past its reply budget, sheds them
    /// unanswered).
    pub shed: u64,
    /// Taken by the policy (queued, then run).
    pub admitted: u64,
    /// Run and answered: the handler returned, with success or an error.
    pub completed: u64,
    /// Of `completed`, those whose handler failed (answered HANDLER_ERROR).
    pub handler_errors: u64,
    /// Of `handler_errors`, those that never started: a preemptive run had
    /// no request slot or fiber stack free for them (every slot held by a
    /// started, unfinished request).
    pub no_fiber: u64,
    /// Of `completed`, those whose body the application refused (answered
    /// BAD_REQUEST).
    pub bad_bodies: u64,
    /// Of `completed`, those whose answer could not be sent (the OS refused
    /// it): the client sees no answer.
    pub unsent: u64,
    /// Admitted but neither run nor answered by the drain deadline; never
    /// answered afterwards.
    pub stranded: u64,
}

/// Counters and records of a finished run.
#[derive(Debug, Clone)]
pub struct DispatcherReport {
    /// Measured (after warm-up) latency and slowdown, and measured sheds.
    pub recorder: Recorder,
    /// Outcomes of every request, warm-up included.
    pub counts: RequestCounts,
    /// Requests that arrived after the warm-up (the measured ones).
    pub measured_arrived: u64,
    /// The most recent reservation changes, in order (at most
    /// [`RESERVATION_LOG_CAPACITY`]).
    pub reservation_log: Vec<ReservationEvent>,
    /// The policy's counters (`reservation_updates` counts every change,
    /// including those the bounded log no longer holds).
    pub policy_stats: psp_core::policy::PolicyStats,
    /// The final reservation, if any.
    pub reservation: Option<psp_core::Reservation>,
    /// Per-window latency and reservation, when a front end asked for one
    /// ([`DispatchCore::record_series`]).
    pub series: Option<TimeSeries>,
    /// Requests completed, by type, warm-up included.
    pub completed_by_type: Vec<u64>,
    /// Their service times summed (handler time: what the workers were
    /// busy with), by type.
    pub service_ns_by_type: Vec<u64>,
    /// Requests refused, by type, warm-up included: with `completed_by_type`,
    /// the same counts as `/metrics`' `psp_requests`.
    pub shed_by_type: Vec<u64>,
    /// How the policy's ordered preemptions landed (central preemptive
    /// runs only).
    pub reclaims: Option<crate::preempt::ReclaimTimes>,
}

/// What the core needs besides its rings: built once at start-up.
pub struct CoreParts {
    /// The scheduling policy.
    pub policy: Box<dyn Policy>,
    /// One job producer per worker.
    pub jobs: Vec<Producer<Job>>,
    /// One completion consumer per worker.
    pub done: Vec<Consumer<Done>>,
    /// The workers' wake-up handles.
    pub workers: Vec<Arc<Wakeup>>,
    /// The run's shared flags and the workers' response gates.
    pub control: Arc<RunControl>,
    /// Names of the types (the recorder's rows).
    pub type_names: Vec<String>,
    /// Slab size: requests that can be queued or running at once.
    pub max_in_flight: usize,
    /// Periodic statistics on stderr.
    pub stats: Option<StatsConfig>,
    /// The dispatcher's side of the run's executor ([`crate::executor::plan`]).
    pub executor: CoreExecutor,
    /// Whether workers may park when idle: then every dispatch pays the wake-up
    /// protocol (a SeqCst fence and a flag check); workers that only spin or
    /// yield never need it.
    pub workers_park: bool,
}

/// Per-type counters of the live statistics and snapshots. Unlike
/// [`RequestCounts`], the outcomes of completed requests are disjoint: an error
/// answer that could not be sent counts as `unsent` only.
#[derive(Debug, Clone, Copy, Default)]
struct TypeCounts {
    arrived: u64,
    completed: u64,
    shed: u64,
    ok: u64,
    handler_errors: u64,
    bad_bodies: u64,
    unsent: u64,
    stranded: u64,
    /// Service time of the completed ones, summed.
    service_ns: u64,
}

/// The policy, rings, slab, recorder and counters every front end shares.
pub struct DispatchCore {
    policy: Box<dyn Policy>,
    jobs: Vec<Producer<Job>>,
    done: Vec<Consumer<Done>>,
    workers: Vec<Arc<Wakeup>>,
    control: Arc<RunControl>,
    workers_park: bool,
    type_names: Vec<String>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    in_flight: usize,
    /// Jobs handed to each worker and not completed yet (at most one with the
    /// runtime's policies).
    outstanding: Vec<u32>,
    /// Workers with `outstanding > 0`: the only completion rings worth a look.
    busy: WorkerSet,
    recorder: Recorder,
    counts: RequestCounts,
    measured_arrived: u64,
    by_type: Vec<TypeCounts>,
    last_updates: u64,
    reservation_log: VecDeque<ReservationEvent>,
    stats: Option<StatsConfig>,
    next_stats: Option<u64>,
    /// Time zero of the statistics and the reservation log.
    base: u64,
    /// Where live snapshots go, when a front end asked for them.
    publisher: Option<SnapshotPublisher>,
    /// Each type's latest latency and service-time digests (the buffer a
    /// snapshot is written into holds an older one), and the type whose
    /// quantiles the next snapshot reads.
    digests: Vec<(Digest, Digest)>,
    next_quantiles: usize,
    /// The policy's tick period ([`Policy::tick_interval`]) and when the next
    /// tick is due.
    tick_ns: Option<u64>,
    next_tick: u64,
    /// The dispatcher's side of the run's one executor.
    executor: CoreExecutor,
    /// Requests in flight at most ([`CoreExecutor::admission_bound`]).
    admit_limit: usize,
    /// Every worker: with a decentralized executor, every completion ring is
    /// worth a look while requests are in flight.
    all_workers: WorkerSet,
    /// The time series (`psp run --series`), its view of the reservation in
    /// force, and the time (since `base`) of the last pass, where it ends.
    series: Option<SeriesRecorder>,
    series_view: Vec<(usize, usize)>,
    series_end_ns: u64,
    /// Each type's declared mean service time (ns; 0: none), when a front end
    /// set them: live statistics then show the load they imply, and a type
    /// whose measured mean is off by more than [`SERVICE_OFF_FACTOR`] is
    /// warned about once.
    declared_ns: Vec<f64>,
    warned: Vec<bool>,
    next_service_check: u64,
    /// At the previous statistics line: when, the service time completed by
    /// then, and the declared service time of what had completed.
    last_stats: (u64, u64, f64),
}

/// How far a type's measured mean service time may be from its declared one
/// (either way) before the dispatcher warns: beyond it, a load computed from
/// the declared times is not the load the workers carry.
pub const SERVICE_OFF_FACTOR: f64 = 1.5;
/// Completions of a type before its measured mean is compared.
pub const SERVICE_CHECK_MIN: u64 = 100;

/// The one rule every front end warns by: a type's measured mean service time
/// over its declared one, when it has [`SERVICE_CHECK_MIN`] completions and the
/// ratio is more than [`SERVICE_OFF_FACTOR`] off either way; `None` otherwise
/// (also without a positive declared mean). Both means in the same unit.
pub fn service_off(measured_mean: f64, declared_mean: f64, completed: u64) -> Option<f64> {
    if completed < SERVICE_CHECK_MIN || declared_mean.is_nan() || declared_mean <= 0.0 {
        return None;
    }
    let ratio = measured_mean / declared_mean;
    (!(1.0 / SERVICE_OFF_FACTOR..=SERVICE_OFF_FACTOR).contains(&ratio)).then_some(ratio)
}

impl DispatcherReport {
    /// Over a run of `wall_ns` on `workers`: the measured utilization (the
    /// service time of every completed request over workers x wall time), and
    /// the utilization the declared mean service times (ns, in type order)
    /// imply for the same completions (`None` when no type declares one).
    pub fn utilization(
        &self,
        workers: usize,
        wall_ns: f64,
        declared_ns: &[Option<f64>],
    ) -> (f64, Option<f64>) {
        let capacity_ns = (workers as f64 * wall_ns).max(1.0);
        let busy_ns: u64 = self.service_ns_by_type.iter().sum();
        let declared = declared_ns.iter().any(Option::is_some).then(|| {
            self.completed_by_type
                .iter()
                .zip(declared_ns)
                .map(|(&n, m)| n as f64 * m.unwrap_or(0.0))
                .sum::<f64>()
                / capacity_ns
        });
        (busy_ns as f64 / capacity_ns, declared)
    }
}
/// How often the measured means are compared with the declared ones.
const SERVICE_CHECK_EVERY_NS: u64 = 1_000_000_000;

impl DispatchCore {
    /// A core; its front end sets the statistics' time zero with
    /// [`set_base`](Self::set_base) before the first request.
    pub fn new(parts: CoreParts) -> Self {
        let n = parts.type_names.len();
        let n_workers = parts.jobs.len();
        Self {
            tick_ns: parts.policy.tick_interval().filter(|&t| t > 0),
            next_tick: 0,
            admit_limit: parts.executor.admission_bound(),
            executor: parts.executor,
            all_workers: WorkerSet::range(0, n_workers),
            policy: parts.policy,
            jobs: parts.jobs,
            done: parts.done,
            workers: parts.workers,
            control: parts.control,
            workers_park: parts.workers_park,
            recorder: Recorder::new(parts.type_names.iter().cloned()),
            type_names: parts.type_names,
            slots: vec![Slot::BLANK; parts.max_in_flight],
            free: (0..parts.max_in_flight as u32).rev().collect(),
            in_flight: 0,
            outstanding: vec![0; n_workers],
            busy: WorkerSet::EMPTY,
            counts: RequestCounts::default(),
            measured_arrived: 0,
            by_type: vec![TypeCounts::default(); n],
            last_updates: 0,
            reservation_log: VecDeque::with_capacity(RESERVATION_LOG_CAPACITY),
            next_stats: None,
            stats: parts.stats,
            base: 0,
            publisher: None,
            digests: Vec::new(),
            next_quantiles: 0,
            series: None,
            series_view: Vec::new(),
            series_end_ns: 0,
            declared_ns: Vec::new(),
            warned: Vec::new(),
            next_service_check: 0,
            last_stats: (0, 0, 0.0),
        }
    }

    /// Records a time series with windows of `window_ns` from the statistics'
    /// time zero: per window, each type's latency percentiles and the
    /// reservation in force (as the simulator's `--series` does). Each
    /// completion then costs two histogram updates; a window's close
    /// allocates, once per window.
    pub fn record_series(&mut self, window_ns: u64) {
        self.series = Some(SeriesRecorder::new(
            self.type_names.iter().cloned(),
            window_ns.max(1),
        ));
    }

    /// Sets each type's declared mean service time (`None`: not declared),
    /// in type order, before the first request: live statistics show the load
    /// they imply beside the measured utilization, and the dispatcher warns
    /// (once per type, on stderr) when a type's measured mean is off by more
    /// than [`SERVICE_OFF_FACTOR`].
    pub fn set_declared_service(&mut self, means_ns: &[Option<f64>]) {
        self.declared_ns = means_ns
            .iter()
            .map(|m| m.filter(|v| v.is_finite() && *v > 0.0).unwrap_or(0.0))
            .collect();
        self.warned = vec![false; means_ns.len()];
    }

    /// Rebases the statistics clock (before the first request).
    pub fn set_base(&mut self, base_ns: u64) {
        self.base = base_ns;
        self.last_stats = (base_ns, 0, 0.0);
        self.next_service_check = base_ns.saturating_add(SERVICE_CHECK_EVERY_NS);
        self.next_stats = self
            .stats
            .map(|s| base_ns.saturating_add(s.interval.as_nanos() as u64));
    }

    /// The policy (read-only: statistics, reservation, queue lengths).
    pub fn policy(&self) -> &dyn Policy {
        &*self.policy
    }

    /// The request types' names.
    pub fn type_names(&self) -> &[String] {
        &self.type_names
    }

    /// Requests queued or running.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// The outcome counters so far.
    pub fn counts(&self) -> &RequestCounts {
        &self.counts
    }

    /// Requests waiting for a worker: in the policy's queues, or in the
    /// worker queues of the decentralized executor.
    pub fn queued(&self) -> usize {
        match &self.executor {
            CoreExecutor::WorkerQueues(q) => q.len(),
            CoreExecutor::LocalPreemptive { queues, .. } => queues.len(),
            CoreExecutor::Central | CoreExecutor::CentralPreemptive { .. } => self.policy.queued(),
        }
    }

    /// Whether requests wait for a worker.
    pub fn has_queued(&self) -> bool {
        self.queued() > 0
    }

    /// Whether an idle dispatcher should wake for a completion: only when
    /// the completion may let it dispatch (a central executor whose policy
    /// holds requests). Decentralized workers go on by themselves, and every
    /// completion carries its worker's own timestamp, so collecting it on the
    /// next pass costs no latency; waking for it would take a vCPU from a
    /// worker (on a machine without a spare core: docs/results.md, "Every
    /// policy behind psp serve").
    #[inline]
    pub fn completion_is_urgent(&self) -> bool {
        !self.executor.decentralized() && self.policy.queued() > 0
    }

    /// Whether the run's executor is decentralized (workers take their jobs
    /// themselves: `worker-queues`, `local-preemptive`).
    #[inline]
    pub fn decentralized(&self) -> bool {
        self.executor.decentralized()
    }

    /// Whether a completion waits in some worker's ring.
    pub fn has_completions(&self) -> bool {
        self.busy.iter().any(|w| !self.done[w as usize].is_empty())
    }

    /// Takes a free slot; `None` when every slot is in flight.
    #[inline]
    pub fn take_token(&mut self) -> Option<u32> {
        self.free.pop()
    }

    /// Returns a slot taken with [`take_token`](Self::take_token) and not admitted
    /// (or refused by [`admit`](Self::admit)).
    #[inline]
    pub fn put_token(&mut self, token: u32) {
        self.free.push(token);
    }

    #[inline]
    fn note_arrival(&mut self, true_type: TypeId, measured: bool) {
        self.counts.arrived += 1;
        self.measured_arrived += u64::from(measured);
        self.by_type[true_type as usize].arrived += 1;
    }

    #[inline]
    fn note_shed(&mut self, true_type: TypeId, measured: bool) {
        self.counts.shed += 1;
        self.by_type[true_type as usize].shed += 1;
        if measured {
            self.recorder.record_drop(true_type as usize);
        }
    }

    /// Counts a request that arrived when every slot was in flight: it is shed
    /// (the front end answers it OVERLOADED, or cannot).
    #[inline]
    pub fn shed_without_slot(&mut self, true_type: TypeId, measured: bool) {
        self.note_arrival(true_type, measured);
        self.note_shed(true_type, measured);
    }

    /// Counts the arrival of the request in `slot` (held in `token`, taken by the
    /// caller) and hands it to the policy. `false`: the policy's queue is full,
    /// the request is counted shed; the caller still holds the token, answers
    /// the request OVERLOADED (or sheds it unanswered) and puts the token back.
    #[inline]
    pub fn admit(&mut self, token: u32, mut slot: Slot, now: u64) -> bool {
        self.note_arrival(slot.true_type, slot.measured);
        slot.req.token = token;
        self.slots[token as usize] = slot;
        // A preemptive executor admits no more than its fiber slots.
        let taken = self.in_flight < self.admit_limit
            && match &mut self.executor {
                CoreExecutor::Central => self.policy.on_arrival(slot.req, now).is_ok(),
                CoreExecutor::CentralPreemptive { served_ns, .. } => {
                    served_ns[token as usize] = 0;
                    self.policy.on_arrival(slot.req, now).is_ok()
                }
                CoreExecutor::WorkerQueues(q) => {
                    let steered = steer(q, &slot, &self.workers, self.workers_park);
                    if steered {
                        // Any worker may complete a job from now on.
                        self.busy = self.all_workers;
                    }
                    steered
                }
                CoreExecutor::LocalPreemptive { queues, .. } => {
                    let steered = queues.admit(slot.req.flow, slot.job()).is_ok();
                    if steered {
                        // Any worker may complete a job from now on.
                        self.busy = self.all_workers;
                    }
                    steered
                }
            };
        if taken {
            self.in_flight += 1;
            self.counts.admitted += 1;
            true
        } else {
            self.note_shed(slot.true_type, slot.measured);
            false
        }
    }

    /// Drains every completion ring into the policy and the recorder (latency
    /// from the slot's scheduled time to the handler's return, both on the run's
    /// one clock). Returns whether there was any.
    #[inline]
    pub fn complete(&mut self, now: u64) -> bool {
        let mut worked = false;
        let decentralized = self.executor.decentralized();
        // Only workers holding a job can complete one: with mostly idle workers
        // this skips most rings (each look is a cache line another core writes).
        for w in self.busy.iter() {
            let ring = &mut self.done[w as usize];
            while let Ok(d) = ring.pop() {
                worked = true;
                // The decentralized executor hands no job to a worker: every
                // ring stays in view while requests are in flight.
                if !decentralized {
                    self.outstanding[w as usize] -= 1;
                    if self.outstanding[w as usize] == 0 {
                        self.busy.remove(w);
                    }
                }
                // Run time of the request's earlier segments (preemptive).
                let mut none = 0;
                let before_ns = match &mut self.executor {
                    CoreExecutor::CentralPreemptive {
                        served_ns, quanta, ..
                    } => {
                        quanta.on_done(w, d.preempted, now);
                        &mut served_ns[d.token as usize]
                    }
                    _ => &mut none,
                };
                if d.preempted {
                    // Still in flight under its token; the policy queues it
                    // again.
                    *before_ns += d.service_ns;
                    let req = self.slots[d.token as usize].req;
                    self.policy.on_preempted(w, req, now);
                    continue;
                }
                let service_ns = d.service_ns + *before_ns;
                let slot = &self.slots[d.token as usize];
                let t = slot.true_type as usize;
                let tc = &mut self.by_type[t];
                tc.completed += 1;
                tc.service_ns += service_ns;
                tc.ok += u64::from(d.ok && d.sent);
                tc.handler_errors += u64::from(!d.ok && !d.refused && d.sent);
                tc.bad_bodies += u64::from(d.refused && d.sent);
                tc.unsent += u64::from(!d.sent);
                self.counts.completed += 1;
                self.counts.handler_errors += u64::from(!d.ok && !d.refused);
                self.counts.no_fiber += u64::from(d.no_fiber);
                self.counts.bad_bodies += u64::from(d.refused);
                self.counts.unsent += u64::from(!d.sent);
                self.in_flight -= 1;
                // A failed handler or an answer that never left is an error
                // outcome, not a latency sample.
                match (slot.measured, d.ok && d.sent) {
                    (false, _) => {}
                    (true, true) => {
                        let latency = d.finished_ns.saturating_sub(slot.scheduled_ns);
                        self.recorder.record(t, latency, service_ns);
                    }
                    (true, false) => self.recorder.record_error(t),
                }
                // The series is a timeline: the warm-up belongs to it.
                if let Some(series) = self.series.as_mut()
                    && d.ok
                    && d.sent
                {
                    series.record(
                        t,
                        d.finished_ns.saturating_sub(self.base),
                        d.finished_ns.saturating_sub(slot.scheduled_ns),
                        service_ns,
                    );
                }
                self.free.push(d.token);
                if !decentralized {
                    self.policy.on_completion(w, &slot.req, service_ns, now);
                }
            }
        }
        if self.in_flight == 0 && decentralized {
            self.busy = WorkerSet::EMPTY;
        }
        worked
    }

    /// Drains the policy's decisions onto the workers' rings. Returns the workers
    /// it handed a job to (empty: nothing dispatched).
    ///
    /// # Panics
    /// When the policy dispatches to a worker that holds a job already (a
    /// policy bug; the run then ends with an error).
    #[inline]
    pub fn dispatch(&mut self, now: u64) -> WorkerSet {
        let mut dispatched = WorkerSet::EMPTY;
        while let Some(action) = self.policy.next_action(now) {
            match action {
                Action::Dispatch {
                    worker,
                    req,
                    quantum_ns,
                } => {
                    if let CoreExecutor::CentralPreemptive { quanta, .. } = &mut self.executor {
                        let idle = self.outstanding[worker as usize] == 0;
                        quanta.on_dispatch(worker, quantum_ns, now, idle);
                    }
                    let job = self.slots[req.token as usize].job();
                    // Policies dispatch only to workers they consider free, so the
                    // worker's ring always has room.
                    if self.jobs[worker as usize].push(job).is_err() {
                        panic!(
                            "job ring of worker {worker} full: the policy dispatched to a busy worker"
                        );
                    }
                    if self.workers_park {
                        self.workers[worker as usize].notify();
                    }
                    self.outstanding[worker as usize] += 1;
                    self.busy.insert(worker);
                    dispatched.insert(worker);
                }
                Action::Preempt { worker } => match &mut self.executor {
                    CoreExecutor::CentralPreemptive { quanta, .. } => quanta.order(worker, now),
                    _ => panic!("policy preempted in an executor that does not preempt"),
                },
            }
        }
        dispatched
    }

    /// How long an idle dispatcher may wait at `now`: at most `max`, and no
    /// later than the earliest quantum end of a running request (preemptive
    /// policies) or SYNERGY's next timer deadline, which it must handle on
    /// time. Every front end bounds its wait by it.
    #[inline]
    pub fn idle_bound(&self, now: u64, max: Duration) -> Duration {
        self.next_quantum_end().map_or(max, |end| {
            max.min(Duration::from_nanos(end.saturating_sub(now)))
        })
    }

    /// When the dispatcher must look at the workers again even if nothing
    /// arrives or completes: the earliest quantum end of a running request
    /// (preemptive policies), so that an idle dispatcher wakes for it.
    #[inline]
    fn next_quantum_end(&self) -> Option<u64> {
        match &self.executor {
            CoreExecutor::LocalPreemptive { queues, .. } => queues.next_deadline(),
            CoreExecutor::CentralPreemptive { quanta, .. } => quanta.next_check(self.busy),
            CoreExecutor::Central | CoreExecutor::WorkerQueues(_) => None,
        }
    }

    /// Completions, then the policy's decisions: what a front end calls between
    /// two requests of a batch so a worker that finished meanwhile gets its next
    /// job at once. Returns whether anything happened.
    #[inline]
    pub fn feed_workers(&mut self, now: u64) -> bool {
        let done = self.complete(now);
        !self.dispatch(now).is_empty() | done
    }

    /// Time's hooks, once per pass of the loop: the policy's tick when due,
    /// and the quantum of each running request (preemptive policies). Their
    /// decisions follow in the pass's [`feed_workers`](Self::feed_workers).
    #[inline]
    pub fn watch_time(&mut self, now: u64) {
        if let Some(tick) = self.tick_ns
            && now >= self.next_tick
        {
            self.policy.on_tick(now);
            self.next_tick = now.saturating_add(tick);
        }
        match &mut self.executor {
            CoreExecutor::LocalPreemptive {
                queues, detector, ..
            } => queues.timer_pass(now, detector),
            CoreExecutor::CentralPreemptive { quanta, .. } => {
                let policy = &mut self.policy;
                quanta.check(self.busy, now, |w| policy.on_quantum_expired(w, now));
            }
            CoreExecutor::Central | CoreExecutor::WorkerQueues(_) => {}
        }
    }

    /// The drain deadline passed: closes the response gate of every worker
    /// holding a job, takes the completions that made it, and counts everything
    /// still queued or running as stranded (never answered). Returns that count.
    #[cold]
    pub fn abandon_in_flight(&mut self, now: u64) -> u64 {
        for w in self.busy.iter() {
            self.control.close(w as usize);
        }
        self.complete(now);
        let stranded = self.in_flight as u64;
        self.counts.stranded += stranded;
        self.in_flight = 0;
        // Per type, what was admitted and neither finished nor stranded before.
        for c in &mut self.by_type {
            c.stranded = c.arrived - c.shed - c.completed;
        }
        stranded
    }

    /// Publishes live snapshots into `publisher` from now on, every
    /// [`PUBLISH_INTERVAL`] (the first at the next end of a pass). Called by a
    /// front end before the first request; the recorder keeps what the
    /// snapshots' digests need from then on (allocated now, once).
    ///
    /// # Panics
    /// When `publisher` was made for another number of request types.
    pub fn publish_snapshots(&mut self, mut publisher: SnapshotPublisher, now: u64) {
        assert_eq!(
            publisher.types(),
            self.type_names.len(),
            "a snapshot channel for another number of request types"
        );
        self.recorder.track_live_digests();
        self.digests = vec![Default::default(); self.type_names.len()];
        publisher.next_ns = now;
        self.publisher = Some(publisher);
    }

    /// Whether a snapshot is due (never without a publisher).
    #[inline]
    pub fn snapshot_due(&self, now: u64) -> bool {
        matches!(&self.publisher, Some(p) if now >= p.next_ns)
    }

    /// Overwrites the publisher's back buffer with the current state and
    /// publishes it (`finished`: the loop has ended); `fill_front` writes the
    /// front end's own counters. Nothing is allocated or locked: every field is
    /// written in place. Everything is current except the quantiles: reading
    /// them scans two histograms (about 20 µs), so each snapshot refreshes one
    /// type's, in turn (the last one every type's). Does nothing without a
    /// publisher.
    #[cold]
    pub fn publish_snapshot(
        &mut self,
        now: u64,
        finished: bool,
        fill_front: impl FnOnce(&mut [u64]),
    ) {
        let queued = self.queued() as u64;
        let Some(p) = &mut self.publisher else {
            return;
        };
        p.seq += 1;
        p.next_ns = now.saturating_add(PUBLISH_INTERVAL.as_nanos() as u64);
        let seq = p.seq;
        let fresh = self.next_quantiles;
        self.next_quantiles = (fresh + 1) % self.digests.len().max(1);
        let policy = &*self.policy;
        let reservation = policy.reservation();
        let s = p.buffer();
        s.seq = seq;
        s.uptime_ns = now.saturating_sub(self.base);
        s.finished = finished;
        s.counts = self.counts;
        s.queued = queued;
        s.in_flight = self.in_flight as u64;
        s.reservation_updates = policy.stats().reservation_updates;
        s.has_reservation = reservation.is_some();
        for (i, (((out, c), rec), (latency, service))) in s
            .types
            .iter_mut()
            .zip(&self.by_type)
            .zip(self.recorder.types())
            .zip(&mut self.digests)
            .enumerate()
        {
            let t = i as TypeId;
            out.arrived = c.arrived;
            out.ok = c.ok;
            out.handler_errors = c.handler_errors;
            out.bad_bodies = c.bad_bodies;
            out.unsent = c.unsent;
            out.shed = c.shed;
            out.stranded = c.stranded;
            out.busy_ns = c.service_ns;
            out.queued = policy.queued_by_type(t).map(|q| q as u64);
            out.reserved_workers = reservation.map(|r| r.group(t).reserved.len() as u32);
            let quantiles = finished || i == fresh;
            rec.latency_digest(latency, quantiles);
            rec.service_digest(service, quantiles);
            out.latency = *latency;
            out.service = *service;
        }
        fill_front(&mut s.front);
        p.publish();
    }

    /// End-of-pass bookkeeping: logs reservation changes (only passes that did
    /// work can change it) and prints the live statistics when due.
    pub fn observe(&mut self, now: u64, worked: bool) {
        if self.series.is_some() {
            self.series_end_ns = now.saturating_sub(self.base);
        }
        if worked {
            let updates = self.policy.stats().reservation_updates;
            if updates != self.last_updates {
                self.last_updates = updates;
                self.log_reservation(now, updates);
            }
        }
        if let (Some(cfg), Some(at)) = (self.stats, self.next_stats)
            && now >= at
        {
            self.next_stats = Some(at.saturating_add(cfg.interval.as_nanos() as u64));
            self.print_stats(now, cfg);
        }
        if now >= self.next_service_check && !self.declared_ns.is_empty() {
            self.next_service_check = now.saturating_add(SERVICE_CHECK_EVERY_NS);
            self.check_service();
        }
    }

    /// Warns, once per type, of a measured mean service time off from the
    /// declared one by more than [`SERVICE_OFF_FACTOR`].
    #[cold]
    fn check_service(&mut self) {
        for (i, c) in self.by_type.iter().enumerate() {
            let declared = self.declared_ns.get(i).copied().unwrap_or(0.0);
            let measured = c.service_ns as f64 / c.completed.max(1) as f64;
            let Some(ratio) = service_off(measured, declared, c.completed) else {
                continue;
            };
            if self.warned[i] {
                continue;
            }
            self.warned[i] = true;
            eprintln!(
                "warning: {}'s measured mean service time is {:.2} us, {ratio:.2}x the {:.2} us the workload declares (more than {SERVICE_OFF_FACTOR}x off): a load computed from the declared times (--load) is not the load the workers carry, and the measured utilization in the statistics and the summary is; measure the real times with `psp profile` and use the workload file it writes",
                self.type_names[i],
                measured / 1e3,
                declared / 1e3,
            );
        }
    }

    /// Since the previous statistics line (and makes this one the previous):
    /// the workers' measured utilization, and the utilization the declared
    /// service times of the same completions imply (`None` without them).
    fn interval_utilization(&mut self, now: u64) -> (f64, Option<f64>) {
        let busy: u64 = self.by_type.iter().map(|c| c.service_ns).sum();
        let declared: f64 = self
            .by_type
            .iter()
            .zip(&self.declared_ns)
            .map(|(c, d)| c.completed as f64 * d)
            .sum();
        let (at, last_busy, last_declared) = self.last_stats;
        self.last_stats = (now, busy, declared);
        let capacity = (now.saturating_sub(at) as f64 * self.jobs.len() as f64).max(1.0);
        let measured = busy.saturating_sub(last_busy) as f64 / capacity;
        let declared =
            (!self.declared_ns.is_empty()).then(|| (declared - last_declared).max(0.0) / capacity);
        (measured, declared)
    }

    #[cold]
    fn log_reservation(&mut self, now: u64, updates: u64) {
        let Some(r) = self.policy.reservation() else {
            return;
        };
        let at_s = now.saturating_sub(self.base) as f64 / 1e9;
        if let Some(series) = self.series.as_mut() {
            self.series_view.clear();
            self.series_view.extend(r.worker_counts());
            series.close_windows_until(
                now.saturating_sub(self.base),
                Some(ReservationView {
                    per_type: &self.series_view,
                    text: &r.to_string(),
                }),
            );
        }
        // Updates are rare: reporting each one is not hot-path work.
        match self.stats {
            Some(StatsConfig { json: true, .. }) => eprintln!(
                "{{\"event\":\"reservation_update\",\"t_s\":{at_s:.3},\"reservation\":\"{r}\"}}"
            ),
            Some(_) => eprintln!("[{at_s:7.3}s] reservation update #{updates}: {r}"),
            None => {}
        }
        if self.reservation_log.len() == RESERVATION_LOG_CAPACITY {
            self.reservation_log.pop_front();
        }
        self.reservation_log.push_back(ReservationEvent {
            at_s,
            reservation: r.clone(),
        });
    }

    #[cold]
    fn print_stats(&mut self, now: u64, cfg: StatsConfig) {
        let t = now.saturating_sub(self.base) as f64 / 1e9;
        let (util, declared) = self.interval_utilization(now);
        let res = self
            .policy
            .reservation()
            .map(|r| r.to_string())
            .unwrap_or_else(|| "none (c-FCFS warm-up or not DARC)".into());
        let c = &self.counts;
        let (queued, in_flight, updates) = (self.queued(), self.in_flight, self.last_updates);
        let mut per_type = String::new();
        for (i, name) in self.type_names.iter().enumerate() {
            let q = self.policy.queued_by_type(i as TypeId);
            let TypeCounts {
                arrived,
                completed,
                shed,
                ..
            } = self.by_type[i];
            if cfg.json {
                let q = q.map_or("null".to_string(), |q| q.to_string());
                let sep = if i > 0 { "," } else { "" };
                per_type.push_str(&format!(
                    "{sep}{{\"name\":\"{name}\",\"arrived\":{arrived},\"completed\":{completed},\"shed\":{shed},\"queued\":{q}}}"
                ));
            } else {
                let q = q.map_or(String::new(), |q| format!(" queued {q}"));
                per_type.push_str(&format!(" | {name} {arrived}/{completed}/{shed}{q}"));
            }
        }
        if cfg.json {
            let declared = declared.map_or("null".to_string(), |d| format!("{d:.4}"));
            eprintln!(
                "{{\"t_s\":{t:.3},\"arrived\":{},\"completed\":{},\"shed\":{},\"queued\":{queued},\"in_flight\":{in_flight},\"reservation_updates\":{updates},\"utilization\":{util:.4},\"declared_utilization\":{declared},\"types\":[{per_type}],\"reservation\":\"{res}\"}}",
                c.arrived, c.completed, c.shed
            );
        } else {
            let declared = declared.map_or(String::new(), |d| {
                format!(" (declared service times: {:.1}%)", d * 100.0)
            });
            eprintln!(
                "[{t:7.3}s] arrived/completed/shed {}/{}/{} queued {queued} in flight {in_flight} updates {updates} utilization {:.1}%{declared}{per_type} || {res}",
                c.arrived,
                c.completed,
                c.shed,
                util * 100.0
            );
        }
    }

    /// The final counters and records.
    pub fn finish(self) -> DispatcherReport {
        DispatcherReport {
            recorder: self.recorder,
            counts: self.counts,
            measured_arrived: self.measured_arrived,
            reservation_log: self.reservation_log.into(),
            policy_stats: self.policy.stats(),
            reservation: self.policy.reservation().cloned(),
            series: self.series.map(|s| s.finish(self.series_end_ns)),
            completed_by_type: self.by_type.iter().map(|c| c.completed).collect(),
            service_ns_by_type: self.by_type.iter().map(|c| c.service_ns).collect(),
            shed_by_type: self.by_type.iter().map(|c| c.shed).collect(),
            reclaims: match &self.executor {
                CoreExecutor::CentralPreemptive { quanta, .. } => Some(quanta.reclaims().clone()),
                _ => None,
            },
        }
    }
}

/// The decentralized executor's admission of the request in `slot`: its job
/// goes to its flow's worker queue; with parking workers, that worker is
/// woken, and so are the others when they may steal it (one parked meanwhile
/// would not look before its timeout). `false`: the queue is full.
#[inline]
fn steer(queues: &WorkerQueues, slot: &Slot, workers: &[Arc<Wakeup>], park: bool) -> bool {
    let Ok(home) = queues.steer(slot.req.flow, slot.job()) else {
        return false;
    };
    if park {
        workers[home as usize].notify();
        if queues.stealable(home) {
            for (w, wake) in workers.iter().enumerate() {
                if w != home as usize {
                    wake.notify();
                }
            }
        }
    }
    true
}

/// Where requests come from and how an idle dispatcher waits for them: the part
/// of the dispatcher that differs between the in-process generator and a
/// network datapath. The loop around it is [`dispatch_loop`].
pub trait FrontEnd {
    /// What the run reports (the core's report plus the front end's own).
    type Report: Send;
    /// Where a worker reads a request's body and sends its answer. A request
    /// resumed on another worker is answered through that worker's I/O: what
    /// the answer needs (the body, the peer) stays under the request's token
    /// until its completion, so any worker's I/O can send it.
    type Io: JobIo + 'static;

    /// The I/O of worker `worker`, asked once per worker, in worker order,
    /// before the run starts.
    fn worker_io(&mut self, worker: usize) -> Self::Io;

    /// Whether the front end waits in `poll(2)`: workers then signal the
    /// dispatcher through an eventfd instead of unparking it.
    fn waits_on_event_fd(&self) -> bool {
        false
    }

    /// Before the first pass: sets the core's time zero (`now` is on the run's
    /// one clock).
    fn begin(&mut self, core: &mut DispatchCore, now: u64);

    /// Admits what is due or received (a bounded batch; it may call
    /// [`DispatchCore::feed_workers`] between requests). Called on every pass
    /// until [`input_ended`](Self::input_ended). Returns whether it did anything.
    fn poll(&mut self, core: &mut DispatchCore, now: u64) -> bool;

    /// Whether no more requests will come (schedule over, or asked to stop): the
    /// loop then drains what was admitted, for at most the drain timeout.
    fn input_ended(&self) -> bool;

    /// After every pass: `worked` says whether the pass did anything; if not,
    /// wait (at most about a millisecond, or until the front end's next event)
    /// for input or a completion, according to the idle strategy.
    fn idle(&mut self, core: &DispatchCore, me: &Wakeup, now: u64, worked: bool);

    /// The run's report from the core's.
    fn finish(self, core: DispatcherReport) -> Self::Report;

    /// Writes the front end's own counters into `out`, its part of a live
    /// snapshot (as many as it asked for when it made the snapshot channel; see
    /// [`DispatchCore::publish_snapshots`]). Called on the dispatcher thread
    /// every [`PUBLISH_INTERVAL`]: it must not block or allocate. By default it
    /// writes nothing.
    fn fill_snapshot(&self, out: &mut [u64]) {
        let _ = out;
    }
}

/// A front end whose workers' I/O is wrapped by `wrap` (to observe answers,
/// or inject faults into them); everything else is `inner`'s.
pub struct WrappedIo<F, W> {
    /// The front end.
    pub inner: F,
    /// Makes worker `i`'s I/O from `inner`'s.
    pub wrap: W,
}

impl<F, W, IO> FrontEnd for WrappedIo<F, W>
where
    F: FrontEnd,
    W: FnMut(usize, F::Io) -> IO,
    IO: JobIo + 'static,
{
    type Report = F::Report;
    type Io = IO;

    fn worker_io(&mut self, worker: usize) -> IO {
        let io = self.inner.worker_io(worker);
        (self.wrap)(worker, io)
    }
    fn waits_on_event_fd(&self) -> bool {
        self.inner.waits_on_event_fd()
    }
    fn begin(&mut self, core: &mut DispatchCore, now: u64) {
        self.inner.begin(core, now);
    }
    fn poll(&mut self, core: &mut DispatchCore, now: u64) -> bool {
        self.inner.poll(core, now)
    }
    fn input_ended(&self) -> bool {
        self.inner.input_ended()
    }
    fn idle(&mut self, core: &DispatchCore, me: &Wakeup, now: u64, worked: bool) {
        self.inner.idle(core, me, now, worked);
    }
    fn finish(self, core: DispatcherReport) -> Self::Report {
        self.inner.finish(core)
    }
    fn fill_snapshot(&self, out: &mut [u64]) {
        self.inner.fill_snapshot(out);
    }
}

/// How [`dispatch_loop`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopEnd {
    /// Input over, everything admitted answered or stranded at the deadline.
    Drained,
    /// A worker panicked: the run is void.
    WorkerFailed,
}

/// The dispatch loop every front end runs in: until the input ends and every
/// admitted request is answered, or the drain deadline passes (the rest is then
/// stranded and never answered), or a worker fails.
pub fn dispatch_loop<F: FrontEnd>(
    mut front: F,
    mut core: DispatchCore,
    me: &Wakeup,
    clock: Clock,
    drain_timeout: Duration,
) -> (F::Report, LoopEnd) {
    let control = core.control.clone();
    front.begin(&mut core, clock.now_ns());
    let mut drain_deadline: Option<u64> = None;
    let end = loop {
        let now = clock.now_ns();
        let mut worked = false;

        // 1. Input: what is due or received.
        if drain_deadline.is_none() {
            worked |= front.poll(&mut core, now);
        }

        // 2.-3. Completions, time (ticks, quanta) and the policy's decisions.
        core.watch_time(now);
        worked |= core.feed_workers(now);

        // 4. Reservation log, live statistics and snapshots.
        core.observe(now, worked);
        if core.snapshot_due(now) {
            core.publish_snapshot(now, false, |out| front.fill_snapshot(out));
        }

        // 5. The end: a failed worker, or input over and everything answered
        // (or the drain deadline passed).
        if control.failed() {
            core.abandon_in_flight(now);
            break LoopEnd::WorkerFailed;
        }
        if drain_deadline.is_none() && front.input_ended() {
            drain_deadline = Some(now.saturating_add(drain_timeout.as_nanos() as u64));
        }
        if let Some(deadline) = drain_deadline {
            if core.in_flight() == 0 {
                break LoopEnd::Drained;
            }
            if now >= deadline {
                core.abandon_in_flight(now);
                break LoopEnd::Drained;
            }
        }
        front.idle(&core, me, now, worked);
    };
    // The final counts (stranded included) for a reader still looking.
    core.publish_snapshot(clock.now_ns(), true, |out| front.fill_snapshot(out));
    (front.finish(core.finish()), end)
}
