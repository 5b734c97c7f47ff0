//! The dispatcher: drives the shared policy core (the same objects the simulator
//! drives), hands jobs to workers over their rings and takes completions back.
//!
//! There is one dispatch loop, [`dispatch_loop`], and front ends plug into it
//! through the [`FrontEnd`] trait: the in-process generator
//! ([`crate::generator::Generator`]) and the network server (crate `psp-net`)
//! differ only in where requests come from and how an idle dispatcher waits.
//! [`DispatchCore`] is what the loop and every front end share: the policy,
//! the rings, the request slab and the run's executor; what is observed of
//! the run (counters, recorder, reservation log, series, statistics lines,
//! snapshots) is its [`Observer`]'s.
//!
//! One pass reads the clock once, lets the front end admit what is due or
//! received (a bounded batch), drains every completion ring, drains the policy's
//! decisions, lets the observer log reservation changes and print statistics,
//! checks for a failed thread and for the end (input over and everything
//! answered, or the drain deadline), and lets the front end idle if nothing
//! happened. What admitting, completing and watching time mean is the run's
//! one executor (an [`Executor`], built by [`crate::executor::plan`]): with a
//! decentralized one (`worker-queues`, `local-preemptive`) the policy is not
//! driven on the request path: the executor steers each admitted request
//! straight to a worker queue and the workers take, steal and preempt by the
//! policy's rules; the core still records every completion. Nothing on this
//! path allocates or locks; request state lives in a slab sized at start-up.
//! Only the dispatcher thread touches the core. When a front end asks for
//! live metrics ([`DispatchCore::publish_snapshots`]), the end of a pass also
//! publishes a [`Snapshot`](crate::snapshot::Snapshot) every
//! [`PUBLISH_INTERVAL`](crate::snapshot::PUBLISH_INTERVAL), in place, without
//! a lock or an allocation.

use std::sync::Arc;
use std::time::Duration;

use psp_core::{Action, Policy, TypeId, WorkerSet};
use rtrb::{Consumer, Producer};

use crate::clock::Clock;
use crate::control::RunControl;
use crate::executor::{CentralExec, CoreExecutor, Executor, Wakes};
use crate::idle::Wakeup;
use crate::message::{Done, Job, RequestCounts, Slot};
use crate::observer::{DispatcherReport, Load, Observer, StatsConfig, WorkerView};
use crate::pool::SlotToken;
use crate::snapshot::SnapshotPublisher;
use crate::worker::JobIo;
use crate::worker::ServeInline;

/// Requests admitted per pass at most, so completions are never starved.
pub(crate) const ARRIVAL_BATCH: usize = 64;

/// What the core needs besides its executor: built once at start-up.
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
    /// Whether workers may park when idle: then every dispatch pays the wake-up
    /// protocol (a SeqCst fence and a flag check); workers that only spin or
    /// yield never need it.
    pub workers_park: bool,
    /// Per type (by classified type id), the longest a request may wait
    /// between its arrival and its start ([`NO_DEADLINE`](crate::NO_DEADLINE): unbounded); empty:
    /// no type is bounded ([`crate::RuntimeConfig::max_wait`]).
    pub max_wait_ns: Vec<u64>,
}

/// The policy, rings, slab and executor every front end shares, and the
/// observer of what they do.
pub struct DispatchCore {
    policy: Box<dyn Policy>,
    /// The dispatcher's side of the run's one executor.
    executor: CoreExecutor,
    jobs: Vec<Producer<Job>>,
    done: Vec<Consumer<Done>>,
    wakes: Wakes,
    control: Arc<RunControl>,
    /// The request slab, its free tokens, and how many are in flight.
    slots: Vec<Slot>,
    free: Vec<u32>,
    in_flight: usize,
    /// Requests in flight at most ([`Executor::admission_bound`]).
    admit_limit: usize,
    /// Jobs handed to each worker and not completed yet (at most one with the
    /// runtime's policies).
    outstanding: Vec<u32>,
    /// Workers with `outstanding > 0`: the only completion rings worth a look.
    busy: WorkerSet,
    /// The type of the job each worker holds (central shapes only: a
    /// decentralized executor's workers take their jobs themselves), for the
    /// live snapshots.
    running: Vec<Option<TypeId>>,
    /// Requests preempted on each worker and handed back, since the start.
    preemptions: Vec<u64>,
    /// Every worker: with a decentralized executor, every completion ring is
    /// worth a look while requests are in flight.
    all_workers: WorkerSet,
    /// Per type, the queueing bound ([`CoreParts::max_wait_ns`]).
    max_wait_ns: Vec<u64>,
    /// The executor's [`Executor::decentralized`], read once: it is asked on
    /// every admission and completion.
    decentralized: bool,
    /// The policy's tick period ([`Policy::tick_interval`]) and when the next
    /// tick is due.
    tick_ns: Option<u64>,
    next_tick: u64,
    observer: Observer,
    /// Worker 0 when it runs on this thread ([`crate::InlineWorker`]): a job
    /// the policy gives it is served the moment it is dispatched.
    inline: Option<Box<dyn ServeInline + Send>>,
}

impl DispatchCore {
    /// A core for a central executor (the policy decides every dispatch and
    /// workers run each job to completion): what a test or a benchmark
    /// drives with loopback workers. Its front end sets the statistics' time
    /// zero with [`set_base`](Self::set_base) before the first request.
    pub fn new(parts: CoreParts) -> Self {
        Self::with_executor(parts, CoreExecutor::Central(CentralExec))
    }

    /// A core driving `executor` (the run's one, from
    /// [`crate::executor::plan`]).
    pub(crate) fn with_executor(parts: CoreParts, executor: CoreExecutor) -> Self {
        let n_workers = parts.jobs.len();
        Self {
            tick_ns: parts.policy.tick_interval().filter(|&t| t > 0),
            next_tick: 0,
            admit_limit: executor.admission_bound(),
            decentralized: executor.decentralized(),
            executor,
            all_workers: WorkerSet::range(0, n_workers),
            max_wait_ns: parts.max_wait_ns,
            policy: parts.policy,
            jobs: parts.jobs,
            done: parts.done,
            wakes: Wakes::new(parts.workers, parts.workers_park),
            control: parts.control,
            observer: Observer::new(parts.type_names, n_workers, parts.stats),
            slots: vec![Slot::BLANK; parts.max_in_flight],
            free: (0..parts.max_in_flight as u32).rev().collect(),
            in_flight: 0,
            outstanding: vec![0; n_workers],
            busy: WorkerSet::EMPTY,
            running: vec![None; n_workers],
            preemptions: vec![0; n_workers],
            inline: None,
        }
    }

    /// Puts worker 0 on this thread: from now on each job the policy gives
    /// it is served at once, inside [`dispatch`](Self::dispatch).
    pub(crate) fn serve_worker_0_inline(&mut self, worker: Box<dyn ServeInline + Send>) {
        self.inline = Some(worker);
    }

    /// Sends the answers worker 0 holds when it runs on this thread
    /// ([`JobIo::hold_answers`](crate::JobIo::hold_answers)): the loop
    /// calls it once a pass, and a front end before it reads into free
    /// packets (a held answer is in its request's packet, free once its
    /// job completed).
    #[inline]
    pub fn flush_inline(&mut self) {
        if let Some(w) = self.inline.as_mut() {
            w.flush();
        }
    }

    /// Records a time series with windows of `window_ns` from the statistics'
    /// time zero: per window, each type's latency percentiles and the
    /// reservation in force (as the simulator's `--series` does). Each
    /// completion then costs two histogram updates; a window's close
    /// allocates, once per window.
    pub fn record_series(&mut self, window_ns: u64) {
        self.observer.record_series(window_ns);
    }

    /// Sets each type's declared mean service time (`None`: not declared),
    /// in type order, before the first request: live statistics show the load
    /// they imply beside the measured utilization, and the dispatcher warns
    /// (once per type, on stderr) when a type's measured mean is off by more
    /// than [`SERVICE_OFF_FACTOR`](crate::SERVICE_OFF_FACTOR).
    pub fn set_declared_service(&mut self, means_ns: &[Option<f64>]) {
        self.observer.set_declared_service(means_ns);
    }

    /// Turns off the warning about declared service times that are off: for
    /// a front end whose clients take no load computed from them (TCP's
    /// redis-benchmark, memcaslap), where the declared times only seed the
    /// policy's profile and the warning's remedies (`psp profile`, `psp load
    /// --server-profile`) do not apply. Call after
    /// [`set_declared_service`](Self::set_declared_service).
    pub fn silence_service_warnings(&mut self) {
        self.observer.silence_declared_warnings();
    }

    /// Rebases the statistics clock (before the first request).
    pub fn set_base(&mut self, base_ns: u64) {
        self.observer.set_base(base_ns);
    }

    /// The policy (read-only: statistics, reservation, queue lengths).
    pub fn policy(&self) -> &dyn Policy {
        &*self.policy
    }

    /// The request types' names.
    pub fn type_names(&self) -> &[String] {
        self.observer.type_names()
    }

    /// Requests queued or running.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// The outcome counters so far.
    pub fn counts(&self) -> &RequestCounts {
        self.observer.counts()
    }

    /// Requests waiting for a worker: in the policy's queues, or in the
    /// worker queues of a decentralized executor.
    pub fn queued(&self) -> usize {
        self.executor.queued(&*self.policy)
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
        !self.decentralized && self.policy.queued() > 0
    }

    /// Whether the run's executor is decentralized (workers take their jobs
    /// themselves: `worker-queues`, `local-preemptive`).
    #[inline]
    pub fn decentralized(&self) -> bool {
        self.decentralized
    }

    /// Whether each job runs to completion on one worker thread (the
    /// `central` and `worker-queues` executors): then a job may carry
    /// several requests ([`Slot::count`]), run one after the other. A
    /// preemptive executor runs a job as its own request on a fiber.
    #[inline]
    pub fn runs_jobs_to_completion(&self) -> bool {
        matches!(
            self.executor,
            CoreExecutor::Central(_) | CoreExecutor::WorkerQueues(_)
        )
    }

    /// The mean service time (ns) of the requests of `type_id` completed so
    /// far, if any completed.
    #[inline]
    pub fn mean_service_ns(&self, type_id: TypeId) -> Option<u64> {
        self.observer.mean_service_ns(type_id)
    }

    /// Whether a completion waits in some worker's ring.
    pub fn has_completions(&self) -> bool {
        self.busy.iter().any(|w| !self.done[w as usize].is_empty())
    }

    /// Takes a free slot; `None` when every slot is in flight.
    #[inline]
    pub fn take_token(&mut self) -> Option<SlotToken> {
        // SAFETY: the free slots hold each slot at most once, and a slot
        // leaves them only here, to come back through `put_token` or through
        // its job's completion (after the worker consumed its token): no
        // other token for it exists meanwhile.
        self.free.pop().map(|t| unsafe { SlotToken::from_raw(t) })
    }

    /// Returns a slot taken with [`take_token`](Self::take_token) and not admitted
    /// (or refused by [`admit`](Self::admit)).
    #[inline]
    pub fn put_token(&mut self, token: SlotToken) {
        self.free.push(token.into_raw());
    }

    /// Counts a request that arrived when every slot was in flight: it is shed
    /// (the front end answers it OVERLOADED, or cannot).
    #[inline]
    pub fn shed_without_slot(&mut self, true_type: TypeId, measured: bool) {
        self.observer.arrived(true_type, measured, 1);
        self.observer.shed(true_type, measured, 1);
    }

    /// Counts the arrival of the request in `slot` (held in `token`, taken by the
    /// caller) and hands it to the executor, which keeps the token. `Err`:
    /// the queue is full, the request is counted shed and the token comes
    /// back; the caller answers the request OVERLOADED (or sheds it
    /// unanswered) and puts the token back.
    #[inline]
    pub fn admit(&mut self, token: SlotToken, mut slot: Slot, now: u64) -> Result<(), SlotToken> {
        self.observer
            .arrived(slot.true_type, slot.measured, slot.count);
        slot.req.token = token.index();
        if let Some(&bound) = self.max_wait_ns.get(slot.req.type_id as usize) {
            slot.deadline_ns = slot
                .deadline_ns
                .min(slot.scheduled_ns.saturating_add(bound));
        }
        self.slots[token.index() as usize] = slot;
        // A preemptive executor admits no more than its fiber slots.
        let taken = self.in_flight < self.admit_limit
            && self
                .executor
                .admit(&mut *self.policy, &slot, now, &self.wakes);
        if !taken {
            self.observer
                .shed(slot.true_type, slot.measured, slot.count);
            return Err(token);
        }
        if self.decentralized {
            // Any worker may complete a job from now on.
            self.busy = self.all_workers;
        }
        self.in_flight += 1;
        self.observer.admitted(slot.count);
        // The core holds the slot now (its job carries the index).
        let _ = token.into_raw();
        Ok(())
    }

    /// Drains every completion ring into the executor, the policy and the
    /// observer (latency from the slot's scheduled time to the handler's
    /// return, both on the run's one clock). Returns whether there was any.
    #[inline]
    pub fn complete(&mut self, now: u64) -> bool {
        let mut worked = false;
        let decentralized = self.decentralized;
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
                        self.running[w as usize] = None;
                    }
                }
                let slot = &self.slots[d.token as usize];
                let Some(service_ns) =
                    self.executor
                        .on_done(&mut *self.policy, w, &d, &slot.req, now)
                else {
                    // Preempted: still in flight under its token, queued
                    // again.
                    self.preemptions[w as usize] += 1;
                    continue;
                };
                self.in_flight -= 1;
                self.free.push(d.token);
                if d.expired {
                    // Answered OVERLOADED unrun: a shed, not a completion.
                    self.observer.expired(slot);
                    if !decentralized {
                        self.policy.on_dropped(w, &slot.req, now);
                    }
                    continue;
                }
                self.observer.completed(slot, &d, service_ns);
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
    /// When the policy dispatches to a worker that holds a job already, or
    /// orders a preemption the executor cannot make (a policy bug; the run
    /// then ends with an error).
    #[inline]
    pub fn dispatch(&mut self, now: u64) -> WorkerSet {
        let mut dispatched = WorkerSet::EMPTY;
        // With worker 0 on this thread, its job runs as soon as it is
        // dispatched, so worker 0 is free again for the policy's next
        // decision: what the policy places on it (under DARC, the shortest
        // types) runs where it was read, with no hand-off, and the worker
        // threads get a job only when worker 0 is not the policy's choice.
        // Serving stops for this call past `INLINE_PASS_NS`: later jobs
        // then wait in worker 0's ring (its next pass serves them) or go
        // to the other workers, and the input is read again.
        let (start, mut now) = (now, now);
        while let Some(action) = self.policy.next_action(now) {
            match action {
                Action::Dispatch {
                    worker,
                    req,
                    quantum_ns,
                } => {
                    self.executor
                        .on_dispatch(worker, quantum_ns, now, &self.outstanding);
                    let job = self.slots[req.token as usize].job();
                    // Policies dispatch only to workers they consider free, so the
                    // worker's ring always has room.
                    if self.jobs[worker as usize].push(job).is_err() {
                        panic!(
                            "job ring of worker {worker} full: the policy dispatched to a busy worker"
                        );
                    }
                    self.wakes.notify(worker as usize);
                    self.outstanding[worker as usize] += 1;
                    self.running[worker as usize] = Some(self.slots[req.token as usize].true_type);
                    self.busy.insert(worker);
                    dispatched.insert(worker);
                    if worker == 0
                        && now.saturating_sub(start) < INLINE_PASS_NS
                        && let Some(w) = self.inline.as_mut()
                        && let Some(finished) = w.serve_pending()
                    {
                        now = now.max(finished);
                        self.complete(now);
                    }
                }
                Action::Preempt { worker } => self.executor.order_preemption(worker, now),
            }
        }
        dispatched
    }

    /// How long an idle dispatcher may wait at `now`: at most `max`, and no
    /// later than the executor's next deadline (the earliest quantum end of a
    /// running request, or SYNERGY's next timer deadline), which it must
    /// handle on time. Every front end bounds its wait by it.
    #[inline]
    pub fn idle_bound(&self, now: u64, max: Duration) -> Duration {
        self.executor.next_deadline(self.busy).map_or(max, |end| {
            max.min(Duration::from_nanos(end.saturating_sub(now)))
        })
    }

    /// Whether a deadline the executor must handle falls before `now +
    /// bound`: what an idle front end checks after raising its parked flag,
    /// so that a quantum armed after it computed its bound
    /// ([`idle_bound`](Self::idle_bound)) and before the flag went up (whose
    /// arming found no sleeper to wake) does not wait for the end of the
    /// planned sleep.
    #[inline]
    pub fn deadline_within(&self, now: u64, bound: Duration) -> bool {
        self.idle_bound(now, bound) < bound
    }

    /// Completions, then the policy's decisions: what a front end calls between
    /// two requests of a batch so a worker that finished meanwhile gets its next
    /// job at once. Returns whether anything happened.
    #[inline]
    pub fn feed_workers(&mut self, now: u64) -> bool {
        let done = self.complete(now);
        !self.dispatch(now).is_empty() | done
    }

    /// Worker 0's jobs that wait in its ring when it runs on this thread
    /// (dispatched past a call's budget), one after another, each
    /// completed (and the next dispatched) at once, until none waits or
    /// [`INLINE_PASS_NS`] passed since `now`. Returns whether it served any.
    fn serve_inline_backlog(&mut self, now: u64) -> bool {
        let mut served = false;
        while let Some(finished) = self.inline.as_mut().and_then(|w| w.serve_pending()) {
            served = true;
            self.feed_workers(finished.max(now));
            if finished.saturating_sub(now) >= INLINE_PASS_NS {
                break;
            }
        }
        served
    }

    /// Time's hooks, once per pass of the loop: the policy's tick when due,
    /// and the executor's watch (quanta, timers). Their decisions follow in
    /// the pass's [`feed_workers`](Self::feed_workers).
    #[inline]
    pub(crate) fn watch_time(&mut self, now: u64) {
        if let Some(tick) = self.tick_ns
            && now >= self.next_tick
        {
            self.policy.on_tick(now);
            self.next_tick = now.saturating_add(tick);
        }
        self.executor.watch(&mut *self.policy, self.busy, now);
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
        self.in_flight = 0;
        self.observer.stranded()
    }

    /// What the observer reports of the core's state.
    fn load(&self) -> Load {
        Load {
            queued: self.queued(),
            in_flight: self.in_flight,
        }
    }

    /// Publishes live snapshots into `publisher` from now on, every
    /// [`PUBLISH_INTERVAL`](crate::PUBLISH_INTERVAL) (the first at the next
    /// end of a pass). Called by a front end before the first request; the
    /// recorder keeps what the snapshots' digests need from then on
    /// (allocated now, once).
    ///
    /// # Panics
    /// When `publisher` was made for another number of request types or
    /// workers.
    pub fn publish_snapshots(&mut self, publisher: SnapshotPublisher, now: u64) {
        assert_eq!(
            publisher.workers(),
            self.jobs.len(),
            "a snapshot channel for another number of workers"
        );
        self.observer.publish_snapshots(publisher, now);
    }

    /// Whether a snapshot is due (never without a publisher).
    #[inline]
    pub fn snapshot_due(&self, now: u64) -> bool {
        self.observer.snapshot_due(now)
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
        let load = self.load();
        let workers = WorkerView {
            running: (!self.decentralized).then_some(&self.running[..]),
            preemptions: &self.preemptions,
        };
        self.observer
            .publish_snapshot(now, finished, &*self.policy, load, workers, fill_front);
    }

    /// End-of-pass bookkeeping: the observer logs reservation changes and
    /// prints the live statistics when due.
    pub(crate) fn observe(&mut self, now: u64, worked: bool) {
        let load = self.load();
        self.observer.end_of_pass(now, worked, &*self.policy, load);
    }

    /// The final counters and records.
    pub(crate) fn finish(self) -> DispatcherReport {
        let reclaims = self.executor.reclaims();
        self.observer.finish(&*self.policy, reclaims)
    }
}

/// Where requests come from and how an idle dispatcher waits for them: the part
/// of the dispatcher that differs between the in-process generator and a
/// network datapath. The loop around it is the dispatcher's one loop, which
/// [`start`](crate::start) runs.
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
    /// every [`PUBLISH_INTERVAL`](crate::PUBLISH_INTERVAL): it must not block or allocate. By default it
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
pub(crate) enum LoopEnd {
    /// Input over, everything admitted answered or stranded at the deadline.
    Drained,
    /// A worker panicked: the run is void.
    WorkerFailed,
}

/// How long one pass serves worker 0's jobs at most when it runs on the
/// dispatcher's thread (a job started is finished: one longer than this
/// holds the input for its own time).
pub const INLINE_PASS_NS: u64 = 50_000;

/// The dispatch loop every front end runs in: until the input ends and every
/// admitted request is answered, or the drain deadline passes (the rest is then
/// stranded and never answered), or a worker fails.
///
/// With worker 0 on this thread (`inline`), each pass serves the jobs the
/// policy gives it, one after another, each completed (and the next
/// dispatched) at once, until none waits or the pass has spent
/// [`INLINE_PASS_NS`]: the input is read again at least that often.
pub(crate) fn dispatch_loop<F: FrontEnd>(
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

        // Worker 0's jobs, when it runs on this thread.
        // (Those dispatched past a budget wait in its ring.)
        worked |= core.serve_inline_backlog(now);
        core.flush_inline();

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
    core.flush_inline();
    // The final counts (stranded included) for a reader still looking.
    core.publish_snapshot(clock.now_ns(), true, |out| front.fill_snapshot(out));
    (front.finish(core.finish()), end)
}
