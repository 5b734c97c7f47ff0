//! Preemption points: how a request running on a green thread
//! ([`crate::green`]) learns that it must yield. A handler sees them as its
//! [`Preemption`] (the [`RequestContext::preempt`](crate::RequestContext)
//! field); a worker sets the limits of each run segment ([`RunLimits`]: its
//! [`PreemptFlag`], a deadline, SYNERGY's [`Feedback`] cell); the fiber keeps
//! its point state on its own stack ([`FiberCx`]).
//!
//! A point yields when the worker's flag was raised by another thread
//! (Concord, Shinjuku: one padded `AtomicBool` per worker, read at every
//! point) or when the run's deadline passed (Tiny Quanta: the TSC, read at
//! every [`RunLimits::clock_every`]-th point). A [`NoPreempt`] guard defers
//! yields while code that must not be preempted runs. Off a fiber a point is
//! one branch.
//!
//! This module must not know handlers or stacks (the application interface
//! and the fibers build on it, not the other way round); a point must not
//! allocate, lock or read a thread-local.

use std::cell::Cell;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use corosensei::Yielder;
use crossbeam_utils::CachePadded;

use crate::clock::{self, Clock, Spinner};
use crate::idle::Wakeup;
use crate::sync;

/// Default [`RunLimits::clock_every`]: the deadline's clock is read at one
/// point in this many (the flag at every one).
pub(crate) const DEFAULT_CLOCK_EVERY: u32 = 16;

/// A worker's preemption request: raised by any thread (the dispatcher, a
/// timer), read by the request running on the worker at each of its
/// preemption points. One per worker, alone on its cache line.
///
/// The request that sees it raised yields and lowers it (one yield per
/// raise). A raise that finds no point (the request finished first) stays
/// up: the worker should [`clear`](PreemptFlag::clear) it before it starts or
/// resumes another request, unless the raise was meant for that one.
#[derive(Debug, Default)]
pub struct PreemptFlag {
    raised: CachePadded<AtomicBool>,
}

impl PreemptFlag {
    /// A lowered flag.
    pub const fn new() -> Self {
        Self {
            raised: CachePadded::new(AtomicBool::new(false)),
        }
    }

    /// Asks the request running on this flag's worker to yield at its next
    /// preemption point.
    #[inline]
    pub fn raise(&self) {
        self.raised.store(true, Ordering::Release);
    }

    /// Withdraws a request to yield.
    #[inline]
    pub fn clear(&self) {
        self.raised.store(false, Ordering::Relaxed);
    }

    /// Whether a request to yield is pending.
    #[inline]
    pub fn is_raised(&self) -> bool {
        self.raised.load(Ordering::Relaxed)
    }

    /// Lowers the flag; returns whether it was raised. Not an atomic swap
    /// (a locked instruction on the yield path): a raise landing between the
    /// load and the store is absorbed by the yield this one causes, which is
    /// what it asked for.
    #[inline]
    fn take(&self) -> bool {
        if self.raised.load(Ordering::Acquire) {
            self.raised.store(false, Ordering::Relaxed);
            true
        } else {
            false
        }
    }
}

/// A worker's application-feedback cell and SYNERGY timer: written by the
/// request running on the worker (`feedback_start()` arms it) and by the
/// worker between segments; read, renewed or claimed by the timer thread.
/// One per worker, alone on its cache lines. Its atomics are loom's under
/// `--cfg loom` (`tests/loom_cells.rs`).
#[derive(Debug)]
pub struct Feedback {
    /// The armed quantum's end on the run's clock (0: disarmed).
    deadline_ns: CachePadded<sync::AtomicU64>,
    /// The quantum `feedback_start()` arms with (set by the worker before
    /// each segment; the timer renews by it).
    quantum_ns: sync::AtomicU64,
    /// The running request declared itself long.
    long: sync::AtomicBool,
    clock: Clock,
    /// The timer's thread, woken when a request arms a quantum (it may be
    /// asleep until a later deadline); set once, at start-up.
    timer: std::sync::OnceLock<Arc<Wakeup>>,
}

impl Feedback {
    /// A disarmed cell on `clock`.
    pub fn new(clock: Clock) -> Self {
        Self {
            deadline_ns: CachePadded::new(sync::AtomicU64::new(0)),
            quantum_ns: sync::AtomicU64::new(0),
            long: sync::AtomicBool::new(false),
            clock,
            timer: std::sync::OnceLock::new(),
        }
    }

    /// The thread that runs the timer over this cell (once, before the
    /// worker starts): arming a quantum wakes it.
    pub fn set_timer(&self, timer: Arc<Wakeup>) {
        let _ = self.timer.set(timer);
    }

    /// The worker begins a segment with quantum `quantum_ns`: a resumed long
    /// request (`long`) is re-armed at once, a new one starts short.
    #[inline]
    pub fn begin(&self, long: bool, quantum_ns: u64) {
        self.quantum_ns.store(quantum_ns, Ordering::Relaxed);
        self.long.store(long, Ordering::Relaxed);
        let d = if long {
            self.clock.now_ns().saturating_add(quantum_ns).max(1)
        } else {
            0
        };
        self.deadline_ns.store(d, Ordering::Release);
        if long && let Some(t) = self.timer.get() {
            t.notify();
        }
    }

    /// The segment ended: disarms; returns whether the request was long.
    #[inline]
    pub fn end(&self) -> bool {
        self.deadline_ns.store(0, Ordering::Release);
        self.long.load(Ordering::Relaxed)
    }

    /// `feedback_start()`: the request is long; its quantum starts now.
    #[inline]
    pub fn start(&self) {
        self.long.store(true, Ordering::Relaxed);
        let d = self
            .clock
            .now_ns()
            .saturating_add(self.quantum_ns.load(Ordering::Relaxed))
            .max(1);
        self.deadline_ns.store(d, Ordering::Release);
        if let Some(t) = self.timer.get() {
            t.notify();
        }
    }

    /// `feedback_finished()`: disarms (the request stays long).
    #[inline]
    pub fn finished(&self) {
        self.deadline_ns.store(0, Ordering::Release);
    }

    /// Whether the running request declared itself long.
    #[inline]
    pub fn is_long(&self) -> bool {
        self.long.load(Ordering::Relaxed)
    }

    /// Whether an armed quantum has expired (read on the cell's clock).
    #[inline]
    pub fn expired(&self) -> bool {
        let d = self.deadline_ns();
        d != 0 && self.clock.now_ns() >= d
    }

    /// The armed deadline (0: disarmed): a worker "running long".
    #[inline]
    pub fn deadline_ns(&self) -> u64 {
        self.deadline_ns.load(Ordering::Acquire)
    }

    /// The quantum of the running segment.
    #[inline]
    pub fn quantum_ns(&self) -> u64 {
        self.quantum_ns.load(Ordering::Relaxed)
    }

    /// The timer takes the expired deadline `seen` to preempt: `false` when
    /// the worker disarmed or re-armed it meanwhile.
    #[inline]
    pub fn claim(&self, seen: u64) -> bool {
        self.deadline_ns
            .compare_exchange(seen, 0, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }

    /// The timer renews the expired deadline `seen` to `next` (conditional
    /// preemption): `false` when the worker disarmed or re-armed it meanwhile.
    #[inline]
    pub fn renew(&self, seen: u64, next: u64) -> bool {
        self.deadline_ns
            .compare_exchange(seen, next.max(1), Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }
}

/// The flag a suspended (or unwinding) fiber's points read: never raised.
static NEVER_RAISED: PreemptFlag = PreemptFlag::new();

/// How long one [`RequestFiber::resume`](crate::RequestFiber::resume) may run: the worker's
/// [`PreemptFlag`] and, optionally, a deadline in [`clock::ticks`].
#[derive(Debug, Clone, Copy)]
pub struct RunLimits<'a> {
    flag: &'a PreemptFlag,
    deadline_ticks: u64,
    clock_every: u32,
    feedback: Option<&'a Feedback>,
    /// The request yields (a [`Cause::Deadline`]) once `feedback`'s armed
    /// quantum has expired: its worker checks its own quantum.
    watch_feedback: bool,
}

impl<'a> RunLimits<'a> {
    /// Runs until done or until `flag` is raised (no deadline), reading the
    /// clock at one point in 16.
    pub fn new(flag: &'a PreemptFlag) -> Self {
        Self {
            flag,
            deadline_ticks: u64::MAX,
            clock_every: DEFAULT_CLOCK_EVERY,
            feedback: None,
            watch_feedback: false,
        }
    }

    /// Gives the request the resuming worker's application-feedback cell
    /// (SYNERGY): its `feedback_start()` arms that worker's timer, and a
    /// raised flag preempts it only once it declared itself long (a raise
    /// meant for an earlier long request never cuts a short one).
    pub fn with_feedback(self, feedback: &'a Feedback) -> Self {
        Self {
            feedback: Some(feedback),
            ..self
        }
    }

    /// As [`with_feedback`](Self::with_feedback), and the request also
    /// yields ([`Cause::Deadline`]) at the first point that reads the clock
    /// once the cell's armed quantum has expired: no timer thread needed.
    /// The worker then decides, preempting or renewing the quantum.
    pub fn with_feedback_timer(self, feedback: &'a Feedback) -> Self {
        Self {
            feedback: Some(feedback),
            watch_feedback: true,
            ..self
        }
    }

    /// Also yields at the first point (among those that read the clock) at or
    /// after `ticks` ([`clock::ticks`]).
    pub fn deadline_at(self, ticks: u64) -> Self {
        Self {
            deadline_ticks: ticks,
            ..self
        }
    }

    /// Also yields once `ns` have passed from now (a quantum; `spinner`
    /// converts to ticks).
    pub fn quantum_ns(self, ns: u64, spinner: &Spinner) -> Self {
        self.deadline_at(clock::ticks().saturating_add(spinner.ns_to_ticks(ns)))
    }

    /// Reads the clock at one preemption point in `points` (at least 1; 1:
    /// every point, one `rdtsc` each, ~22 ns in a VM, ~7 ns on bare metal).
    /// A deadline is then noticed within `points` points after it passed.
    pub fn clock_every(self, points: u32) -> Self {
        Self {
            clock_every: points.max(1),
            ..self
        }
    }

    /// The deadline, in [`clock::ticks`] (`u64::MAX`: none).
    pub fn deadline_ticks(&self) -> u64 {
        self.deadline_ticks
    }
}

/// Why a fiber yielded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// Its worker's [`PreemptFlag`] was raised.
    Flag,
    /// Its run's deadline passed.
    Deadline,
    /// The handler called [`Preemption::yield_now`].
    Voluntary,
}

/// What a resume passes into the fiber (as the coroutine's input).
#[derive(Clone, Copy)]
pub(crate) struct Run {
    /// The resuming worker's flag; valid while this resume runs.
    flag: *const PreemptFlag,
    deadline_ticks: u64,
    clock_every: u32,
    /// The resuming worker's feedback cell (null: none); valid while this
    /// resume runs.
    feedback: *const Feedback,
    watch_feedback: bool,
}

impl Run {
    pub(crate) fn of(limits: &RunLimits<'_>) -> Self {
        Self {
            flag: limits.flag,
            deadline_ticks: limits.deadline_ticks,
            clock_every: limits.clock_every,
            feedback: limits.feedback.map_or(std::ptr::null(), |f| f as *const _),
            watch_feedback: limits.watch_feedback,
        }
    }
}

/// A fiber's preemption state, on the fiber's own stack. Only the fiber's
/// code touches it (it is not `Sync`), on whichever thread runs the fiber.
pub(crate) struct FiberCx<'y> {
    yielder: &'y Yielder<Run, Cause>,
    /// The running worker's flag while running; [`NEVER_RAISED`] while
    /// suspended or unwinding.
    flag: Cell<*const PreemptFlag>,
    /// The running worker's feedback cell while running (null: none, and
    /// while suspended or unwinding).
    feedback: Cell<*const Feedback>,
    deadline_ticks: Cell<u64>,
    /// Yield once the feedback cell's armed quantum expired.
    watch_feedback: Cell<bool>,
    clock_every: Cell<u32>,
    /// Points left until the next clock read (>= 1 between points).
    countdown: Cell<u32>,
    /// Open [`NoPreempt`] guards.
    guards: Cell<u32>,
    /// A yield deferred by a guard.
    pending: Cell<Option<Cause>>,
    yields: Cell<u32>,
}

impl<'y> FiberCx<'y> {
    pub(crate) fn new(yielder: &'y Yielder<Run, Cause>, run: Run) -> Self {
        let cx = Self {
            yielder,
            flag: Cell::new(&NEVER_RAISED),
            feedback: Cell::new(std::ptr::null()),
            deadline_ticks: Cell::new(u64::MAX),
            watch_feedback: Cell::new(false),
            clock_every: Cell::new(DEFAULT_CLOCK_EVERY),
            countdown: Cell::new(DEFAULT_CLOCK_EVERY),
            guards: Cell::new(0),
            pending: Cell::new(None),
            yields: Cell::new(0),
        };
        cx.enter(run);
        cx
    }

    /// Takes a resume's limits.
    #[inline]
    fn enter(&self, run: Run) {
        self.flag.set(run.flag);
        self.feedback.set(run.feedback);
        self.deadline_ticks.set(run.deadline_ticks);
        self.watch_feedback.set(run.watch_feedback);
        self.clock_every.set(run.clock_every);
        self.countdown.set(run.clock_every);
    }

    #[inline]
    fn flag(&self) -> &PreemptFlag {
        // SAFETY: `flag` is `NEVER_RAISED` (static) or the flag of the
        // `RunLimits` that the running `resume` borrows: it is reset to
        // `NEVER_RAISED` before each suspension, and this code runs only
        // inside a `resume` (or the drop's unwinding, after that reset).
        unsafe { &*self.flag.get() }
    }

    #[inline]
    fn feedback(&self) -> Option<&Feedback> {
        // SAFETY: `feedback` is null or the cell of the `RunLimits` that the
        // running `resume` borrows: it is reset to null before each
        // suspension, and this code runs only inside a `resume` (or the
        // drop's unwinding, after that reset).
        unsafe { self.feedback.get().as_ref() }
    }

    /// The point's fast path: one counter, one relaxed load, one branch.
    #[inline]
    fn point(&self) {
        let left = self.countdown.get() - 1;
        self.countdown.set(left);
        if left == 0 || self.flag().is_raised() {
            // The decision out of line, the switch inline (`yield_for` is
            // always inlined): switching from inside an extra call level
            // cost `yield_now`'s round trip 22 ns instead of 6 here.
            if let Some(cause) = self.point_slow() {
                self.yield_for(cause);
            }
        }
    }

    /// Whether to yield, and why: a deferred yield, the flag, or (when the
    /// countdown ran out) the deadline.
    #[cold]
    #[inline(never)]
    fn point_slow(&self) -> Option<Cause> {
        let mut cause = self.pending.take();
        // With a feedback cell, only a request that declared itself long is
        // preempted by the flag: a raise that lands after the long request it
        // was meant for finished is dropped by the short one running now.
        if self.flag().take() && self.feedback().is_none_or(Feedback::is_long) {
            cause = cause.or(Some(Cause::Flag));
        }
        if self.countdown.get() == 0 {
            self.countdown.set(self.clock_every.get());
            if cause.is_none()
                && (clock::ticks() >= self.deadline_ticks.get()
                    || (self.watch_feedback.get()
                        && self.feedback().is_some_and(Feedback::expired)))
            {
                cause = Some(Cause::Deadline);
            }
        }
        cause
    }

    /// Yields now, or defers the yield to the end of the open guards (and
    /// never yields while unwinding: a dropped fiber's destructors run to
    /// the end).
    #[inline(always)]
    fn yield_for(&self, cause: Cause) {
        if self.guards.get() > 0 || std::thread::panicking() {
            // The first reason asked for is the one reported.
            if self.pending.get().is_none() {
                self.pending.set(Some(cause));
            }
            return;
        }
        self.flag.set(&NEVER_RAISED);
        self.feedback.set(std::ptr::null());
        self.watch_feedback.set(false);
        self.deadline_ticks.set(u64::MAX);
        let run = self.yielder.suspend(cause);
        self.yields.set(self.yields.get() + 1);
        self.enter(run);
    }
}

/// A request's preemption points ([`RequestContext::preempt`](crate::RequestContext::preempt)). Inert (every
/// call one branch, nothing else) unless the request runs on a
/// [`RequestFiber`](crate::RequestFiber). `Copy`, so a handler can pass it down to the loops that
/// need it; neither `Send` nor `Sync`.
#[derive(Clone, Copy)]
pub struct Preemption<'a> {
    cx: Option<&'a FiberCx<'a>>,
}

impl fmt::Debug for Preemption<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Preemption")
            .field("on_fiber", &self.is_active())
            .finish()
    }
}

impl Default for Preemption<'_> {
    fn default() -> Self {
        Self::none()
    }
}

impl<'a> Preemption<'a> {
    /// The points of a request not on a fiber: every call does nothing.
    pub const fn none() -> Self {
        Self { cx: None }
    }

    /// The points of the request running on the fiber whose state is `cx`.
    pub(crate) fn on_fiber(cx: &'a FiberCx<'a>) -> Self {
        Self { cx: Some(cx) }
    }

    /// Whether the request runs on a fiber (its points can yield).
    #[inline]
    pub fn is_active(self) -> bool {
        self.cx.is_some()
    }

    /// A preemption point: yields (suspends the request until a worker
    /// resumes it) if the worker's flag was raised or the run's deadline
    /// passed, unless a [`NoPreempt`] guard is open (then the next point after
    /// the last guard closes yields). Call it in long loops, where the request
    /// holds nothing tied to its thread (module docs). Cheap: a few
    /// instructions on a fiber, one branch off one.
    #[inline]
    pub fn point(self) {
        if let Some(cx) = self.cx {
            cx.point();
        }
    }

    /// Yields now (deferred like a preemption inside a [`NoPreempt`] guard),
    /// e.g. when a lock the request wants is taken. Does nothing off a fiber.
    #[inline]
    pub fn yield_now(self) {
        if let Some(cx) = self.cx {
            cx.yield_for(Cause::Voluntary);
        }
    }

    /// Defers this request's yields until the guard drops: hold it over code
    /// that must not be preempted (a held lock, a non-reentrant call, anything
    /// tied to the thread).
    #[inline]
    pub fn no_preempt(self) -> NoPreempt<'a> {
        if let Some(cx) = self.cx {
            cx.guards.set(cx.guards.get() + 1);
        }
        NoPreempt { cx: self.cx }
    }

    /// The application recognised a long request (SYNERGY's
    /// `feedback_start()`): marks it long and arms the running worker's
    /// timer. Does nothing off a fiber or without a feedback cell.
    #[inline]
    pub fn feedback_start(self) {
        if let Some(f) = self.cx.and_then(FiberCx::feedback) {
            f.start();
        }
    }

    /// The long part is over (`feedback_finished()`): disarms the running
    /// worker's timer (the request stays long). Does nothing off a fiber or
    /// without a feedback cell.
    #[inline]
    pub fn feedback_finished(self) {
        if let Some(f) = self.cx.and_then(FiberCx::feedback) {
            f.finished();
        }
    }

    /// Times this request yielded so far (0 off a fiber).
    #[inline]
    pub fn yields(self) -> u32 {
        self.cx.map_or(0, |cx| cx.yields.get())
    }
}

/// A section that must not be preempted ([`Preemption::no_preempt`]); yields
/// asked for inside it happen at the first preemption point after the last
/// guard drops.
#[must_use = "the section ends when the guard drops"]
pub struct NoPreempt<'a> {
    cx: Option<&'a FiberCx<'a>>,
}

impl fmt::Debug for NoPreempt<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NoPreempt").finish_non_exhaustive()
    }
}

impl Drop for NoPreempt<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Some(cx) = self.cx {
            let open = cx.guards.get() - 1;
            cx.guards.set(open);
            if open == 0 && cx.pending.get().is_some() {
                // The next point takes the slow path, which yields.
                cx.countdown.set(1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_off_a_fiber_do_nothing() {
        let p = Preemption::none();
        assert!(!p.is_active());
        let _g = p.no_preempt();
        p.point();
        p.yield_now();
        assert_eq!(p.yields(), 0);
    }

    #[test]
    fn a_flag_is_taken_once() {
        let f = PreemptFlag::new();
        assert!(!f.take());
        f.raise();
        assert!(f.is_raised());
        assert!(f.take());
        assert!(!f.is_raised());
        f.raise();
        f.clear();
        assert!(!f.take());
        assert!(std::mem::align_of::<PreemptFlag>() >= 64);
    }
}
