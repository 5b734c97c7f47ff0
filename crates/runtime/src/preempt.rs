//! Dispatcher-driven preemption on green threads: what a worker needs to run
//! requests on fibers ([`GreenWorker`]), where a preempted request waits
//! ([`SuspendedFibers`]), and how the dispatcher watches quanta
//! ([`QuantumMonitor`]).
//!
//! The protocol, for a policy that preempts (`ts`, `ts-block`, `concord`):
//!
//! 1. A worker pops a job. If its token holds a suspended fiber, the worker
//!    resumes it (a request preempted on any worker); otherwise it loads a free
//!    [`RequestSlot`] (a handler instance made at start-up) and starts a fiber.
//! 2. Before running it lowers its [`PreemptFlag`] and publishes the start of
//!    the run segment on its [`SegmentClock`]; after, it publishes the end.
//! 3. The dispatcher, each pass, reads the segment clocks of busy workers: a
//!    segment past its quantum is the policy's `on_quantum_expired`; a `true`
//!    raises the worker's flag (once per segment). A policy's
//!    `Action::Preempt` raises it at once.
//! 4. The fiber yields at its next preemption point; the worker parks it under
//!    its token and reports `Done { preempted: true }` with the segment's run
//!    time; the dispatcher calls `on_preempted`, and the policy queues the
//!    request again under the same token. Its service time is the sum of its
//!    segments.
//!
//! A request that never reaches a point runs to completion, unpreempted. A
//! raise can land on the segment after the one it was meant for (the worker
//! finished and started its next job between the dispatcher's read and its
//! raise): that segment is then preempted early, which costs a switch but loses
//! nothing.
//!
//! Nothing here allocates or locks after start-up.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_queue::ArrayQueue;
use crossbeam_utils::CachePadded;
use psp_core::{WorkerId, WorkerSet};

use crate::green::{RequestFiber, RequestSlot, Served, StackPool};
use crate::point::PreemptFlag;
use crate::sync::UnsafeCell;

/// When the run segment on a worker's fiber began (the run's clock, in ns), or
/// nothing: written by the worker, read by the dispatcher.
#[derive(Debug, Default)]
pub(crate) struct SegmentClock {
    /// `start + 1`; 0 while no segment runs.
    start: CachePadded<AtomicU64>,
}

impl SegmentClock {
    /// No segment running.
    pub(crate) const fn new() -> Self {
        Self {
            start: CachePadded::new(AtomicU64::new(0)),
        }
    }

    /// A segment begins at `now_ns`.
    #[inline]
    pub(crate) fn begin(&self, now_ns: u64) {
        self.start
            .store(now_ns.saturating_add(1), Ordering::Release);
    }

    /// The segment ended.
    #[inline]
    pub(crate) fn end(&self) {
        self.start.store(0, Ordering::Release);
    }

    /// The running segment's start, if one runs.
    #[inline]
    pub(crate) fn running_since(&self) -> Option<u64> {
        match self.start.load(Ordering::Acquire) {
            0 => None,
            s => Some(s - 1),
        }
    }
}

/// Preempted requests' fibers, by token. The thread that owns a token (the
/// worker between the job ring's pop and the completion ring's push) is the only
/// one that touches its cell. Built with `--cfg loom`, the cells are loom's,
/// which `tests/loom_cells.rs` checks the hand-over with.
pub struct SuspendedFibers<T> {
    cells: Box<[UnsafeCell<Option<T>>]>,
}

// SAFETY: a cell is only reached through `put`/`take`, whose callers promise to
// own the token; ownership moves between threads through the job and
// completion rings (release/acquire), so no two threads touch a cell at once.
unsafe impl<T: Send> Sync for SuspendedFibers<T> {}

impl<T> SuspendedFibers<T> {
    /// Empty cells for `tokens` tokens.
    pub fn new(tokens: usize) -> Self {
        Self {
            cells: (0..tokens).map(|_| UnsafeCell::new(None)).collect(),
        }
    }

    /// Parks `fiber` under `token`.
    ///
    /// # Safety
    /// The calling thread owns `token`.
    #[inline]
    pub unsafe fn put(&self, token: u32, fiber: T) {
        self.cells[token as usize].with_mut(|cell| {
            // SAFETY: the caller owns the token, so no other thread reaches the cell.
            unsafe { *cell = Some(fiber) }
        });
    }

    /// Takes the fiber parked under `token`, if any.
    ///
    /// # Safety
    /// The calling thread owns `token`.
    #[inline]
    pub unsafe fn take(&self, token: u32) -> Option<T> {
        self.cells[token as usize].with_mut(|cell| {
            // SAFETY: the caller owns the token, so no other thread reaches the cell.
            unsafe { (*cell).take() }
        })
    }
}

/// The fiber of a request served by handler `H`.
pub(crate) type HandlerFiber<H> = RequestFiber<Served<H>>;

/// What a worker needs to serve requests on fibers.
pub(crate) struct GreenWorker<H> {
    /// Stacks, shared by every worker.
    pub(crate) pool: Arc<StackPool>,
    /// This worker's preemption flag (the dispatcher raises it).
    pub(crate) flag: Arc<PreemptFlag>,
    /// This worker's run segments (the dispatcher reads them).
    pub(crate) segment: Arc<SegmentClock>,
    /// Free request slots (a handler instance each), shared by every worker:
    /// a request preempted on one worker may finish on another.
    pub(crate) slots: Arc<ArrayQueue<RequestSlot<H>>>,
    /// Preempted requests, by token, shared by every worker.
    pub(crate) suspended: Arc<SuspendedFibers<HandlerFiber<H>>>,
}

/// The dispatcher's watch over the workers' quanta.
#[derive(Debug)]
pub(crate) struct QuantumMonitor {
    flags: Vec<Arc<PreemptFlag>>,
    segments: Vec<Arc<SegmentClock>>,
    /// Per worker: the quantum of the requests dispatched to it (0: none).
    quantum: Vec<u64>,
    /// Per worker: the segment start last seen, and when it is next checked.
    seen: Vec<(u64, u64)>,
    /// Per worker: its flag was raised for the segment last seen.
    raised: WorkerSet,
    /// Per worker: when its latest job was dispatched (its next segment
    /// starts no earlier).
    dispatched: Vec<u64>,
    /// Per worker: when the policy ordered the preemption of what it runs
    /// (`u64::MAX`: none pending).
    ordered_at: Vec<u64>,
    /// How long ordered preemptions took to land (boxed: the executor enum
    /// holding the monitor stays small).
    reclaims: Box<ReclaimTimes>,
}

/// How long a policy's ordered preemptions (`darc-lend`'s reclaims) took to
/// land: from the dispatcher raising the worker's flag to its seeing the
/// request yield, in log2 buckets of ns. An order whose request completed
/// first is void.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReclaimTimes {
    /// Preemptions the policy ordered.
    pub ordered: u64,
    /// Of those, the ones that landed (the request yielded).
    pub landed: u64,
    /// Of those, the ones whose request completed first.
    pub void: u64,
    /// Landed ones by time to land: bucket `b` holds times in
    /// `[2^(b-1), 2^b)` ns.
    buckets: [u64; 48],
}

impl Default for ReclaimTimes {
    fn default() -> Self {
        Self {
            ordered: 0,
            landed: 0,
            void: 0,
            buckets: [0; 48],
        }
    }
}

impl ReclaimTimes {
    fn record(&mut self, ns: u64) {
        self.landed += 1;
        let b = (u64::BITS - ns.leading_zeros()) as usize;
        self.buckets[b.min(self.buckets.len() - 1)] += 1;
    }

    /// The time within which a fraction `q` of the landed ones landed (the
    /// upper bound of its log2 bucket: within 2x), if any landed.
    pub fn quantile_ns(&self, q: f64) -> Option<u64> {
        let want = (q * self.landed as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        self.buckets.iter().enumerate().find_map(|(b, &n)| {
            seen += n;
            (self.landed > 0 && seen >= want).then(|| 1u64 << b)
        })
    }

    /// One line for a run's summary.
    pub fn line(&self) -> String {
        let us = |q| {
            self.quantile_ns(q)
                .map_or("-".into(), |ns| format!("{:.1}", ns as f64 / 1e3))
        };
        format!(
            "reclaims: {} ordered, {} landed (within {} us at p50, {} us at p99), {} void (the request ended first)",
            self.ordered,
            self.landed,
            us(0.5),
            us(0.99),
            self.void
        )
    }
}

impl QuantumMonitor {
    /// A monitor over each worker's flag and segment clock.
    pub(crate) fn new(flags: Vec<Arc<PreemptFlag>>, segments: Vec<Arc<SegmentClock>>) -> Self {
        let n = flags.len();
        Self {
            flags,
            segments,
            quantum: vec![0; n],
            seen: vec![(u64::MAX, u64::MAX); n],
            raised: WorkerSet::EMPTY,
            dispatched: vec![0; n],
            ordered_at: vec![u64::MAX; n],
            reclaims: Box::default(),
        }
    }

    /// The policy ordered `worker`'s request preempted at `now`
    /// (`Action::Preempt`): raises its flag and times the landing.
    #[inline]
    pub(crate) fn order(&mut self, worker: WorkerId, now: u64) {
        self.reclaims.ordered += 1;
        self.ordered_at[worker as usize] = now;
        self.raise(worker);
    }

    /// `worker` reported its request done at `now` (`preempted`: it
    /// yielded): closes a pending order's timing.
    #[inline]
    pub(crate) fn on_done(&mut self, worker: WorkerId, preempted: bool, now: u64) {
        let at = std::mem::replace(&mut self.ordered_at[worker as usize], u64::MAX);
        if at != u64::MAX {
            if preempted {
                self.reclaims.record(now.saturating_sub(at));
            } else {
                self.reclaims.void += 1;
            }
        }
    }

    /// How the ordered preemptions landed so far.
    pub(crate) fn reclaims(&self) -> &ReclaimTimes {
        &self.reclaims
    }

    /// A request is dispatched to `worker` at `now`, to run in slices of
    /// `quantum_ns`. `idle`: the worker holds no other job, so a raise still
    /// up on its flag was meant for a request that finished before it
    /// yielded (the worker lowers its flag when a segment ends, but a raise
    /// may land after that and before the dispatcher saw the completion): it
    /// is withdrawn, or the new request would yield at its first point.
    #[inline]
    pub(crate) fn on_dispatch(
        &mut self,
        worker: WorkerId,
        quantum_ns: Option<u64>,
        now: u64,
        idle: bool,
    ) {
        let i = worker as usize;
        self.quantum[i] = quantum_ns.unwrap_or(0);
        self.dispatched[i] = now;
        if idle {
            self.flags[i].clear();
            self.raised.remove(worker);
        }
    }

    /// Asks `worker`'s running request to yield (a policy's `Preempt`), and
    /// notes the segment it was raised for, so that its quantum end does not
    /// ask (and raise) again.
    #[inline]
    pub(crate) fn raise(&mut self, worker: WorkerId) {
        let i = worker as usize;
        if let Some(start) = self.segments[i].running_since() {
            self.note_segment(i, start);
        }
        self.flags[i].raise();
        self.raised.insert(worker);
    }

    /// The segment running on worker `i` began at `start`: a new one starts a
    /// new quantum, with no raise for it yet.
    #[inline]
    fn note_segment(&mut self, i: usize, start: u64) {
        if self.seen[i].0 != start {
            self.seen[i] = (start, start.saturating_add(self.quantum[i]));
            self.raised.remove(i as WorkerId);
        }
    }

    /// When the next check is due, for a dispatcher about to sleep: the
    /// earliest quantum end among the segments running on `busy` workers. A
    /// busy worker whose segment has not begun (its job was just dispatched)
    /// counts from the dispatch: its quantum cannot end earlier, and a
    /// dispatcher that slept past it would let the segment run on unchecked.
    pub(crate) fn next_check(&self, busy: WorkerSet) -> Option<u64> {
        busy.iter()
            .filter(|&w| self.quantum[w as usize] > 0 && !self.raised.contains(w))
            .map(|w| {
                let i = w as usize;
                match self.segments[i].running_since() {
                    Some(start) if self.seen[i].0 == start => self.seen[i].1,
                    Some(start) => start.saturating_add(self.quantum[i]),
                    None => self.dispatched[i].saturating_add(self.quantum[i]),
                }
            })
            .min()
    }

    /// For each worker of `busy` whose running segment used up its quantum,
    /// asks `expired` (the policy's `on_quantum_expired`): `true` raises the
    /// worker's flag, once per segment; `false` lets it run another quantum.
    #[inline]
    pub(crate) fn check(
        &mut self,
        busy: WorkerSet,
        now: u64,
        mut expired: impl FnMut(WorkerId) -> bool,
    ) {
        for w in busy.iter() {
            let i = w as usize;
            let q = self.quantum[i];
            if q == 0 {
                continue;
            }
            let Some(start) = self.segments[i].running_since() else {
                continue;
            };
            self.note_segment(i, start);
            if now < self.seen[i].1 || self.raised.contains(w) {
                continue;
            }
            if expired(w) {
                self.raise(w);
            } else {
                self.seen[i].1 = now.saturating_add(q);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_past_its_quantum_is_asked_about_once_and_raised() {
        let flags: Vec<_> = (0..2).map(|_| Arc::new(PreemptFlag::new())).collect();
        let segs: Vec<_> = (0..2).map(|_| Arc::new(SegmentClock::new())).collect();
        let mut m = QuantumMonitor::new(flags.clone(), segs.clone());
        m.on_dispatch(0, Some(5_000), 0, true);
        m.on_dispatch(1, Some(5_000), 0, true);
        let busy = WorkerSet::range(0, 2);
        segs[0].begin(1_000);
        segs[1].begin(2_000);
        let mut asked = Vec::new();
        m.check(busy, 5_999, |w| {
            asked.push(w);
            true
        });
        assert!(asked.is_empty(), "no quantum used up yet");
        // Worker 0's quantum ends at 6,000: asked, raised; worker 1 answered no.
        m.check(busy, 6_500, |w| {
            asked.push(w);
            true
        });
        assert_eq!(asked, vec![0]);
        assert!(flags[0].is_raised() && !flags[1].is_raised());
        m.check(busy, 7_100, |w| {
            asked.push(w);
            false
        });
        assert_eq!(
            asked,
            vec![0, 1],
            "worker 0 not asked twice for one segment"
        );
        assert!(!flags[1].is_raised());
        // Worker 1 runs on: asked again a quantum later.
        m.check(busy, 12_099, |w| {
            asked.push(w);
            true
        });
        assert_eq!(asked, vec![0, 1]);
        m.check(busy, 12_100, |w| {
            asked.push(w);
            true
        });
        assert_eq!(asked, vec![0, 1, 1]);
        // A new segment on worker 0 starts a new quantum.
        segs[0].end();
        segs[0].begin(20_000);
        m.check(busy, 24_999, |_| panic!("too early"));
        m.check(busy, 25_000, |w| {
            asked.push(w);
            true
        });
        assert_eq!(asked, vec![0, 1, 1, 0]);
    }

    #[test]
    fn a_preempt_action_counts_as_the_segments_raise() {
        let flags = vec![Arc::new(PreemptFlag::new())];
        let segs = vec![Arc::new(SegmentClock::new())];
        let mut m = QuantumMonitor::new(flags.clone(), segs.clone());
        m.on_dispatch(0, Some(1_000), 0, true);
        segs[0].begin(0);
        m.raise(0);
        assert!(flags[0].is_raised());
        // Its quantum ends: already raised for this segment, not asked again.
        m.check(WorkerSet::range(0, 1), 5_000, |_| panic!("asked twice"));
    }

    #[test]
    fn idle_workers_and_policies_without_quantum_are_left_alone() {
        let flags: Vec<_> = (0..1).map(|_| Arc::new(PreemptFlag::new())).collect();
        let segs: Vec<_> = (0..1).map(|_| Arc::new(SegmentClock::new())).collect();
        let mut m = QuantumMonitor::new(flags, segs.clone());
        m.check(WorkerSet::range(0, 1), 1 << 40, |_| panic!("no quantum"));
        m.on_dispatch(0, Some(1_000), 0, true);
        m.check(WorkerSet::range(0, 1), 1 << 40, |_| panic!("nothing runs"));
        segs[0].begin(0);
        let mut n = 0;
        m.check(WorkerSet::range(0, 1), 1 << 40, |_| {
            n += 1;
            true
        });
        assert_eq!(n, 1);
    }

    #[test]
    fn a_just_dispatched_job_is_watched_from_its_dispatch_and_a_stale_raise_withdrawn() {
        let flags = vec![Arc::new(PreemptFlag::new())];
        let segs = vec![Arc::new(SegmentClock::new())];
        let mut m = QuantumMonitor::new(flags.clone(), segs.clone());
        let busy = WorkerSet::range(0, 1);
        // A raise for a request that finished first, then a new job for the
        // idle worker: withdrawn.
        flags[0].raise();
        m.on_dispatch(0, Some(1_000), 7_000, true);
        assert!(!flags[0].is_raised());
        // Not begun yet: the dispatcher wakes a quantum after the dispatch.
        assert_eq!(m.next_check(busy), Some(8_000));
        // A raise for the new job before it begins stays up for it.
        m.raise(0);
        m.on_dispatch(0, Some(1_000), 7_500, false);
        assert!(flags[0].is_raised(), "a busy worker's raise is kept");
        // Raised: nothing to wake for until the segment is seen.
        assert_eq!(m.next_check(busy), None);
        segs[0].begin(9_000);
        m.check(busy, 9_000, |_| panic!("not expired"));
        assert_eq!(m.next_check(busy), Some(10_000));
    }
}

#[cfg(test)]
mod reclaim_tests {
    use super::ReclaimTimes;

    #[test]
    fn reclaim_quantiles_are_bucket_bounds_within_2x() {
        let mut r = ReclaimTimes::default();
        assert_eq!(r.quantile_ns(0.5), None);
        for ns in [900, 1_000, 1_100, 3_000_000] {
            r.record(ns);
        }
        assert_eq!(r.landed, 4);
        // 900, 1000: bucket 10 (512..1024); 1100: bucket 11; 3 ms: bucket 22.
        assert_eq!(r.quantile_ns(0.5), Some(1 << 10));
        assert_eq!(r.quantile_ns(0.75), Some(1 << 11));
        assert_eq!(r.quantile_ns(0.99), Some(1 << 22));
    }
}
