//! The executors whose workers pick their own requests and preempt them on
//! green threads: SYNERGY (`synergy`) and Tiny Quanta (`tq`). Both keep one
//! bounded MPMC queue of jobs per worker; what differs is who fills them and
//! when a request yields.
//!
//! - **SYNERGY** ([`LocalMode::Synergy`], docs/results.md, "SYNERGY"): the
//!   front end steers each request to its flow's worker queue
//!   ([`SynergyRules::home`]); no dispatcher decides. A free worker takes, in
//!   [`SynergyRules::order`], from its own queue, the global wait queue, or
//!   steals a batch ([`SynergyRules::victim`], [`SynergyRules::batch`]: the
//!   first runs, the rest joins its own queue). Every request starts short; a
//!   handler's `feedback_start()` arms its worker's timer ([`Feedback`]) with
//!   [`SynergyRules::quantum_ns`] of the worker's [`ShortAverage`]. The timer
//!   ([`LocalQueues::timer_pass`], on the dispatcher thread: not a worker)
//!   preempts an expired long request only if
//!   [`SynergyRules::preempt_on_expiry`] of its worker's queue says so, else
//!   renews its quantum, and runs the [`CongestionDetector`] on every pass.
//!   Where the run's threads outnumber its cores (`timer=auto`, or
//!   `timer=worker`) the worker checks its own quantum instead, at its
//!   request's preemption points, by the same rule
//!   ([`LocalQueues::expired_on_worker`]); the timer pass keeps only the
//!   detector.
//!   A preempted request's job goes to the one global wait queue (`wq=off`:
//!   its worker's own tail); whichever worker takes it resumes the fiber,
//!   re-armed with its own quantum.
//! - **Tiny Quanta** ([`LocalMode::Tq`]): the front end joins each request to
//!   the worker with the fewest queued + running requests (JSQ); a worker runs
//!   its request for a quantum read from the TSC at the request's own
//!   preemption points (a local yield: no other thread involved) and, if its
//!   own queue holds another request, puts it at its tail; else it resumes it
//!   at once for another quantum.
//!
//! A job is in at most one queue at a time (its token is unique while in
//! flight), and every queue holds as many jobs as the run has tokens, so no
//! push can fail; the policy's bound is enforced by the rules, as in the
//! simulator: at admission for a worker queue, and at a quantum's expiry for
//! the wait queue (a full one renews the quantum,
//! [`SynergyRules::preempt_on_expiry`]; concurrent preemptions may pass the
//! bound by at most one per worker). A failed push to the wait queue would
//! still be counted ([`LocalStats::wait_queue_full`]) and the job kept in its
//! worker's own queue. Which queue a free worker takes from is the rules' one
//! selection loop ([`SynergyRules::take`]) over these queues. Nothing here
//! allocates, locks or formats after construction; counters have one writer
//! each.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crossbeam_queue::ArrayQueue;
use crossbeam_utils::CachePadded;
use psp_core::policy::synergy::{Source, SynergyQueues};
use psp_core::policy::{CongestionDetector, LocalRules, ShortAverage, SynergyRules, TqRules};
use psp_core::{FlowId, WorkerId};

use crate::clock::Clock;
use crate::idle::Wakeup;
use crate::message::Job;
use crate::point::{Feedback, PreemptFlag};
use crate::sync::Counter;

/// Which executor, with what the workers need of its rules.
#[derive(Debug, Clone, Copy)]
pub(crate) enum LocalMode {
    /// SYNERGY with its rules.
    Synergy(SynergyRules),
    /// Tiny Quanta with its rules.
    Tq {
        /// JSQ and the yield rule.
        rules: TqRules,
        /// The time slice in [`crate::clock::ticks`].
        quantum_ticks: u64,
    },
}

impl LocalMode {
    /// The mode of `rules` (Tiny Quanta's quantum converted to clock ticks
    /// once, by a 10 ms calibration).
    pub(crate) fn new(rules: LocalRules) -> Self {
        match rules {
            LocalRules::Synergy(r) => LocalMode::Synergy(r),
            LocalRules::Tq(rules) => {
                let spinner =
                    crate::clock::Spinner::calibrate(std::time::Duration::from_millis(10));
                LocalMode::Tq {
                    rules,
                    quantum_ticks: spinner.ns_to_ticks(rules.quantum_ns()).max(1),
                }
            }
        }
    }
}

/// One worker's shared state (its own cache lines).
#[derive(Debug)]
struct Line {
    feedback: Feedback,
    /// A request runs (Tiny Quanta's JSQ counts it).
    running: CachePadded<AtomicBool>,
    /// Written by whoever checks the worker's quantum: the timer's thread
    /// (SYNERGY's `core` placement) or the worker (Tiny Quanta, SYNERGY's
    /// `worker` placement).
    preemptions: Counter,
    renewals: Counter,
    /// Written by the worker.
    wait_pushed: Counter,
    wait_taken: Counter,
    steals: Counter,
    /// Lateness at expiries: sum, count, worst (written by whoever checks
    /// this worker's quantum: the timer's thread, or the worker).
    late_sum_ns: Counter,
    late_count: Counter,
    late_max_ns: Counter,
}

/// The counters of a run of one of these executors, per worker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalStats {
    /// The executor (`synergy` or `tq`).
    pub executor: &'static str,
    /// Requests preempted (SYNERGY: expired quanta that preempted; Tiny
    /// Quanta: quanta that yielded to another request), by the worker
    /// running them.
    pub preemptions: Vec<u64>,
    /// Expired quanta that did not preempt (SYNERGY: renewed by conditional
    /// preemption; Tiny Quanta: nothing else queued, the request went on).
    pub preemptions_avoided: Vec<u64>,
    /// Requests each worker stole (SYNERGY).
    pub steals: Vec<u64>,
    /// Preempted requests each worker put on the global wait queue.
    pub wait_queue_passes: Vec<u64>,
    /// Times the wait queue became congested.
    pub congestion_episodes: u64,
    /// Pushes the wait queue refused (never expected: kept in the worker's
    /// own queue instead).
    pub wait_queue_full: u64,
    /// SYNERGY's timer: how late its passes handled an expired quantum
    /// (from the deadline to the pass that preempted or renewed), mean and
    /// worst, in ns (0 for Tiny Quanta: its workers time themselves).
    pub timer_late_mean_ns: u64,
    /// The worst of those.
    pub timer_late_max_ns: u64,
    /// Which thread checked SYNERGY's quanta: `core` (the timer's) or
    /// `worker` (each worker itself); empty for Tiny Quanta.
    pub timer: &'static str,
}

/// The executor's queues, timers and counters, shared by the front end
/// (admission), the workers (take, yield) and the timer (on the dispatcher
/// thread).
#[derive(Debug)]
pub struct LocalQueues {
    mode: LocalMode,
    queues: Box<[ArrayQueue<Job>]>,
    /// The policy's bound of a worker queue at admission.
    bound: usize,
    wait: ArrayQueue<Job>,
    lines: Box<[CachePadded<Line>]>,
    flags: Box<[Arc<PreemptFlag>]>,
    /// Per token: run time of its segments so far (written by the token's
    /// owner of the moment).
    served_ns: Box<[Counter]>,
    congested: CachePadded<AtomicBool>,
    episodes: Counter,
    wait_full: CachePadded<AtomicU64>,
    /// SYNERGY's quantum is checked by each worker at its request's
    /// preemption points, not by the timer's thread
    /// ([`psp_core::policy::synergy::TimerPlacement`]).
    worker_timer: bool,
    wakes: Box<[OnceLock<Arc<Wakeup>>]>,
}

impl LocalQueues {
    /// Queues under `rules` for `flags.len()` workers (one preemption flag each), `tokens`
    /// request tokens, and a policy bound of `bound` per worker queue.
    pub fn new(
        rules: LocalRules,
        flags: Vec<Arc<PreemptFlag>>,
        tokens: usize,
        bound: usize,
        clock: Clock,
    ) -> Self {
        let n = flags.len();
        let cap = tokens.max(1);
        Self {
            mode: LocalMode::new(rules),
            queues: (0..n).map(|_| ArrayQueue::new(cap)).collect(),
            bound: bound.max(1),
            wait: ArrayQueue::new(cap),
            lines: (0..n)
                .map(|_| {
                    CachePadded::new(Line {
                        feedback: Feedback::new(clock),
                        running: CachePadded::new(AtomicBool::new(false)),
                        preemptions: Counter::default(),
                        renewals: Counter::default(),
                        wait_pushed: Counter::default(),
                        wait_taken: Counter::default(),
                        steals: Counter::default(),
                        late_sum_ns: Counter::default(),
                        late_count: Counter::default(),
                        late_max_ns: Counter::default(),
                    })
                })
                .collect(),
            flags: flags.into_boxed_slice(),
            served_ns: (0..cap).map(|_| Counter::new()).collect(),
            congested: CachePadded::new(AtomicBool::new(false)),
            episodes: Counter::default(),
            wait_full: CachePadded::new(AtomicU64::new(0)),
            worker_timer: false,
            wakes: (0..n).map(|_| OnceLock::new()).collect(),
        }
    }

    /// SYNERGY's quanta checked by the workers themselves (`on`) or by the
    /// timer's thread; set before the queues are shared.
    pub fn with_worker_timer(self, on: bool) -> Self {
        Self {
            worker_timer: on && matches!(self.mode, LocalMode::Synergy(_)),
            ..self
        }
    }

    /// Whether each worker checks its own SYNERGY quantum.
    #[inline]
    pub(crate) fn worker_timer(&self) -> bool {
        self.worker_timer
    }

    /// The executor.
    pub(crate) fn mode(&self) -> LocalMode {
        self.mode
    }

    /// Number of workers.
    pub(crate) fn workers(&self) -> usize {
        self.queues.len()
    }

    /// Gives the executor the workers' wake-up handles (once, at start-up):
    /// admissions and wait-queue pushes then wake parked workers.
    pub(crate) fn set_wakeups(&self, wakes: &[Arc<Wakeup>]) {
        for (cell, w) in self.wakes.iter().zip(wakes) {
            let _ = cell.set(w.clone());
        }
    }

    /// Gives every worker's feedback cell the timer's wake-up handle (the
    /// dispatcher thread's, once, at start-up): arming a quantum wakes it.
    pub(crate) fn set_timer(&self, timer: &Arc<Wakeup>) {
        if self.worker_timer {
            // No other thread watches the quanta: arming wakes nobody.
            return;
        }
        for l in self.lines.iter() {
            l.feedback.set_timer(timer.clone());
        }
    }

    #[inline]
    fn wake(&self, w: usize) {
        if let Some(x) = self.wakes[w].get() {
            x.notify();
        }
    }

    /// Worker `w`'s feedback cell and timer.
    #[inline]
    pub fn feedback(&self, w: usize) -> &Feedback {
        &self.lines[w].feedback
    }

    /// Worker `w`'s preemption flag.
    #[inline]
    pub fn flag(&self, w: usize) -> &PreemptFlag {
        &self.flags[w]
    }

    /// Whether the wait queue is congested (the timer's last pass).
    #[inline]
    pub(crate) fn congested(&self) -> bool {
        self.congested.load(Ordering::Relaxed)
    }

    /// Admits `job` of `flow` (front end): to its flow's worker (SYNERGY) or
    /// the shortest one (JSQ); wakes the workers that may take it. The job
    /// back when that worker's queue holds the policy's bound.
    #[inline]
    pub fn admit(&self, flow: FlowId, job: Job) -> Result<WorkerId, Job> {
        let w = match self.mode {
            LocalMode::Synergy(r) => r.home(flow) as usize,
            LocalMode::Tq { rules, .. } => rules.join(self.workers(), |w| {
                self.queues[w].len() + usize::from(self.lines[w].running.load(Ordering::Relaxed))
            }),
        };
        if self.queues[w].len() >= self.bound {
            return Err(job);
        }
        // Never full: a queue has room for every token.
        self.queues[w].push(job)?;
        self.wake(w);
        if let LocalMode::Synergy(r) = self.mode {
            for o in 0..self.workers() {
                if o != w && self.victim(&r, o as WorkerId) == Some(w as WorkerId) {
                    self.wake(o);
                }
            }
        }
        Ok(w as WorkerId)
    }

    /// Whom `thief` would steal from now (the rules over these queues).
    #[inline]
    fn victim(&self, r: &SynergyRules, thief: WorkerId) -> Option<WorkerId> {
        let q = SharedQueues(self);
        r.victim(thief, |v| q.running_long(v), |v| q.len(v))
    }

    /// The next job for worker `me`: Tiny Quanta, its own queue's head;
    /// SYNERGY, by the rules' one selection loop ([`SynergyRules::take`]:
    /// its own queue, the wait queue, a steal).
    #[inline]
    pub fn take(&self, me: usize) -> Option<Job> {
        let LocalMode::Synergy(r) = self.mode else {
            return self.queues[me].pop();
        };
        let taken = r.take(&mut SharedQueues(self), me as WorkerId, self.congested())?;
        match taken.source {
            Source::Own => {}
            Source::Wait => {
                self.lines[me].wait_taken.add(1);
            }
            Source::Steal => {
                self.lines[me].steals.add(taken.stolen as u64);
            }
        }
        Some(taken.job)
    }

    /// Whether worker `me` has something to take: what it checks before it
    /// parks.
    #[inline]
    pub(crate) fn has_work_for(&self, me: usize) -> bool {
        if !self.queues[me].is_empty() {
            return true;
        }
        match self.mode {
            LocalMode::Synergy(r) => {
                !self.wait.is_empty() || self.victim(&r, me as WorkerId).is_some()
            }
            LocalMode::Tq { .. } => false,
        }
    }

    /// Whether worker `me`'s own queue holds a request.
    #[inline]
    pub fn own_queued(&self, me: usize) -> bool {
        !self.queues[me].is_empty()
    }

    /// Worker `me` runs a request (or not): JSQ's count.
    #[inline]
    pub fn set_running(&self, me: usize, running: bool) {
        self.lines[me].running.store(running, Ordering::Relaxed);
    }

    /// Adds a segment's run time to `token`'s; returns the total so far.
    #[inline]
    pub(crate) fn add_served(&self, token: u32, ns: u64) -> u64 {
        self.served_ns[token as usize].add(ns)
    }

    /// `token` finished: its run time is reset for the token's next request.
    #[inline]
    pub(crate) fn clear_served(&self, token: u32) {
        self.served_ns[token as usize].reset();
    }

    /// Worker `me` preempted the request of `job` (its fiber is parked under
    /// the token): to the wait queue (SYNERGY with it), else to `me`'s own
    /// tail.
    #[inline]
    pub fn requeue_preempted(&self, me: usize, job: Job) {
        let job = match self.mode {
            LocalMode::Synergy(r) if r.preempted_to_wait_queue() => match self.wait.push(job) {
                Ok(()) => {
                    self.lines[me].wait_pushed.add(1);
                    for o in 0..self.workers() {
                        if o != me {
                            self.wake(o);
                        }
                    }
                    return;
                }
                Err(job) => {
                    self.wait_full.fetch_add(1, Ordering::Relaxed);
                    job
                }
            },
            LocalMode::Tq { .. } => {
                self.lines[me].preemptions.add(1);
                job
            }
            LocalMode::Synergy(_) => job,
        };
        // Never full: a queue has room for every token.
        let pushed = self.queues[me].push(job);
        debug_assert!(pushed.is_ok(), "a worker queue has room for every token");
    }

    /// Tiny Quanta: worker `me`'s quantum expired with nothing else queued;
    /// its request goes on.
    #[inline]
    pub fn note_renewal(&self, me: usize) {
        self.lines[me].renewals.add(1);
    }

    /// One pass of SYNERGY's timer at `now` (on a thread that is no worker):
    /// the congestion detector over the wait queue's counts, then every armed
    /// worker whose quantum expired is preempted (its flag raised) if its own
    /// queue holds work, else its quantum is renewed. Does nothing for Tiny
    /// Quanta.
    #[inline]
    pub fn timer_pass(&self, now: u64, detector: &mut CongestionDetector) {
        let LocalMode::Synergy(r) = self.mode else {
            return;
        };
        if detector.period_ns() > 0 {
            let (mut produced, mut consumed) = (0, 0);
            for l in self.lines.iter() {
                produced += l.wait_pushed.get();
                consumed += l.wait_taken.get();
            }
            let was = detector.episodes();
            let congested = detector.pass(now, produced, consumed);
            self.congested.store(congested, Ordering::Relaxed);
            self.episodes.add(detector.episodes() - was);
        }
        if self.worker_timer {
            return;
        }
        for w in 0..self.lines.len() {
            if self.expiry(&r, w, now) {
                self.flags[w].raise();
            }
        }
    }

    /// Worker `me`'s armed quantum, if expired at `now`: conditional
    /// preemption's decision ([`SynergyRules::preempt_on_expiry`] over its
    /// queue and the wait queue), its lateness counted. Returns whether the
    /// request is to be preempted (its deadline claimed); else the quantum
    /// was renewed, or had not expired, or was disarmed meanwhile. Called by
    /// the one thread that checks `me`'s quantum: the timer's, or `me`.
    #[inline]
    fn expiry(&self, r: &SynergyRules, me: usize, now: u64) -> bool {
        let l = &self.lines[me];
        let d = l.feedback.deadline_ns();
        if d == 0 || now < d {
            return false;
        }
        let late = now - d;
        l.late_sum_ns.add(late);
        l.late_count.add(1);
        l.late_max_ns.raise_to(late);
        if r.preempt_on_expiry(self.queues[me].len(), self.wait.len(), self.bound) {
            if l.feedback.claim(d) {
                l.preemptions.add(1);
                return true;
            }
        } else if l
            .feedback
            .renew(d, now.saturating_add(l.feedback.quantum_ns()))
        {
            l.renewals.add(1);
        }
        false
    }

    /// Worker `me`'s running request yielded at its quantum's end (the
    /// worker checks its own quantum): whether it is preempted; if not, its
    /// quantum was renewed and it goes on.
    #[inline]
    pub(crate) fn expired_on_worker(&self, me: usize, now: u64) -> bool {
        match self.mode {
            LocalMode::Synergy(r) => self.expiry(&r, me, now),
            LocalMode::Tq { .. } => true,
        }
    }

    /// The earliest armed quantum end (SYNERGY), for a timer about to sleep.
    #[inline]
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        if self.worker_timer {
            return None;
        }
        self.lines
            .iter()
            .map(|l| l.feedback.deadline_ns())
            .filter(|&d| d != 0)
            .min()
    }

    /// Jobs waiting in every queue (the wait queue included).
    pub(crate) fn len(&self) -> usize {
        self.queues.iter().map(ArrayQueue::len).sum::<usize>() + self.wait.len()
    }

    /// The counters so far.
    pub fn stats(&self) -> LocalStats {
        let per = |f: fn(&Line) -> u64| self.lines.iter().map(|l| f(l)).collect();
        LocalStats {
            executor: match self.mode {
                LocalMode::Synergy(_) => "synergy",
                LocalMode::Tq { .. } => "tq",
            },
            preemptions: per(|l| l.preemptions.get()),
            preemptions_avoided: per(|l| l.renewals.get()),
            steals: per(|l| l.steals.get()),
            wait_queue_passes: per(|l| l.wait_pushed.get()),
            congestion_episodes: self.episodes.get(),
            wait_queue_full: self.wait_full.load(Ordering::Relaxed),
            timer_late_mean_ns: self.lines.iter().map(|l| l.late_sum_ns.get()).sum::<u64>()
                / self
                    .lines
                    .iter()
                    .map(|l| l.late_count.get())
                    .sum::<u64>()
                    .max(1),
            timer_late_max_ns: self
                .lines
                .iter()
                .map(|l| l.late_max_ns.get())
                .max()
                .unwrap_or(0),
            timer: match self.mode {
                LocalMode::Synergy(_) if self.worker_timer => "worker",
                LocalMode::Synergy(_) => "core",
                LocalMode::Tq { .. } => "",
            },
        }
    }
}

/// The runtime's queues as SYNERGY's rules see them: lock-free, shared by
/// every worker, so a length read may be stale by the time it is used (a
/// steal may find fewer jobs than its batch: it takes what is there).
struct SharedQueues<'a>(&'a LocalQueues);

impl SynergyQueues for SharedQueues<'_> {
    type Job = Job;

    #[inline]
    fn pop_own(&mut self, w: WorkerId) -> Option<Job> {
        self.0.queues[w as usize].pop()
    }

    #[inline]
    fn push_own(&mut self, w: WorkerId, job: Job) {
        // Never full: a queue has room for every token.
        let pushed = self.0.queues[w as usize].push(job);
        debug_assert!(pushed.is_ok(), "a worker queue has room for every token");
    }

    #[inline]
    fn pop_wait(&mut self) -> Option<Job> {
        self.0.wait.pop()
    }

    #[inline]
    fn len(&self, w: WorkerId) -> usize {
        self.0.queues[w as usize].len()
    }

    #[inline]
    fn running_long(&self, w: WorkerId) -> bool {
        self.0.lines[w as usize].feedback.deadline_ns() != 0
    }
}

/// A SYNERGY worker's short-request average (worker-local state).
pub(crate) fn short_average(rules: &SynergyRules) -> ShortAverage {
    ShortAverage::new(rules.config().quantum_ns)
}
