//! Live snapshots: what the dispatcher publishes matches its counters, per type
//! and outcome, with the reservation in force and the front end's part; and
//! publishing allocates nothing once the channel exists (a counting allocator
//! watches the publishing thread).
//!
//! One thread plays dispatcher and workers over the runtime's own
//! `DispatchCore` (the workers replaced by a loopback), so nothing here depends
//! on timing.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;

use psp_core::{PolicyContext, PolicySpec, Request, TypeInfo};
use psp_metrics::DIGEST_BOUNDS_NS;
use psp_runtime::idle::Wakeup;
use psp_runtime::{CoreParts, DispatchCore, Slot};
use psp_runtime::{Done, Job};
use psp_runtime::{PUBLISH_INTERVAL, RunControl, snapshot_channel};
use rtrb::{Consumer, Producer, RingBuffer};

/// Counts the allocations of the threads that ask for it.
struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded to the system allocator unchanged; the
// bookkeeping touches only thread-local cells (const-initialized, so reading
// them never allocates).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

fn note() {
    let _ = COUNTING.try_with(|c| {
        if c.get() {
            let _ = ALLOCATIONS.try_with(|a| a.set(a.get() + 1));
        }
    });
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Allocations `f` made on this thread.
fn allocations_in(f: impl FnOnce()) -> u64 {
    ALLOCATIONS.with(|a| a.set(0));
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCATIONS.with(Cell::get)
}

const WORKERS: usize = 2;

/// How a loopback worker ends a job.
#[derive(Clone, Copy)]
enum Outcome {
    Ok,
    HandlerError,
    BadBody,
    Unsent,
}

struct Loopback {
    core: DispatchCore,
    jobs_rx: Vec<Consumer<Job>>,
    done_tx: Vec<Producer<Done>>,
    next_id: u64,
    now: u64,
}

impl Loopback {
    fn new(spec: &str) -> Self {
        let spec: PolicySpec = spec.parse().expect("policy spec");
        let ctx = PolicyContext {
            workers: WORKERS,
            types: ["short", "long"]
                .iter()
                .zip([1_000.0, 100_000.0])
                .map(|(n, m)| TypeInfo {
                    name: n.to_string(),
                    mean_service_ns: Some(m),
                })
                .collect(),
            queue_capacity: 64,
        };
        let policy = spec.build(&ctx).expect("policy builds");
        let (mut jobs_tx, mut jobs_rx, mut done_tx, mut done_rx) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..WORKERS {
            let (p, c) = RingBuffer::<Job>::new(4);
            jobs_tx.push(p);
            jobs_rx.push(c);
            let (p, c) = RingBuffer::<Done>::new(4);
            done_tx.push(p);
            done_rx.push(c);
        }
        let core = DispatchCore::new(CoreParts {
            policy,
            jobs: jobs_tx,
            done: done_rx,
            workers: (0..WORKERS)
                .map(|_| Arc::new(Wakeup::for_current()))
                .collect(),
            control: Arc::new(RunControl::new(WORKERS)),
            type_names: ctx.types.iter().map(|t| t.name.clone()).collect(),
            max_in_flight: 256,
            stats: None,
            workers_park: false,
            max_wait_ns: Vec::new(),
        });
        Self {
            core,
            jobs_rx,
            done_tx,
            next_id: 0,
            now: 0,
        }
    }

    /// Admits one request of type `t`, 10 µs after the previous one.
    fn arrive(&mut self, t: u16) -> bool {
        self.now += 10_000;
        self.next_id += 1;
        let token = self.core.take_token().expect("a free slot");
        let slot = Slot {
            req: Request {
                id: self.next_id,
                token: token.index(),
                type_id: t,
                flow: 0,
                arrival_ns: self.now,
            },
            true_type: t,
            scheduled_ns: self.now,
            measured: true,
            len: 0,
            count: 1,
            deadline_ns: psp_runtime::NO_DEADLINE,
        };
        match self.core.admit(token, slot, self.now) {
            Ok(()) => true,
            Err(token) => {
                self.core.put_token(token);
                false
            }
        }
    }

    /// Dispatches, then finishes every job handed out with `outcome` after
    /// `service_ns`, and takes the completions back.
    fn serve(&mut self, outcome: Outcome, service_ns: u64) {
        let dispatched = self.core.dispatch(self.now);
        for w in dispatched.iter() {
            while let Ok(job) = self.jobs_rx[w as usize].pop() {
                let d = Done {
                    token: job.token,
                    ok: matches!(outcome, Outcome::Ok | Outcome::Unsent),
                    refused: matches!(outcome, Outcome::BadBody),
                    sent: !matches!(outcome, Outcome::Unsent),
                    preempted: false,
                    no_fiber: false,
                    failed_in_job: (0, 0),
                    expired: false,
                    service_ns,
                    finished_ns: self.now + service_ns,
                };
                assert!(self.done_tx[w as usize].push(d).is_ok());
            }
        }
        self.core.complete(self.now + service_ns);
    }

    fn one(&mut self, t: u16, outcome: Outcome, service_ns: u64) {
        assert!(self.arrive(t));
        self.serve(outcome, service_ns);
    }
}

#[test]
fn a_snapshot_holds_every_counter_by_type_and_outcome() {
    let mut lb = Loopback::new("darc:samples=10");
    let (publisher, mut reader) = snapshot_channel(2, WORKERS, 3);
    assert_eq!(reader.latest().seq, 0, "nothing published yet");
    lb.core.publish_snapshots(publisher, 0);
    assert!(lb.core.snapshot_due(0), "the first snapshot is due at once");

    for _ in 0..20 {
        lb.one(0, Outcome::Ok, 2_000);
    }
    lb.one(0, Outcome::HandlerError, 2_000);
    lb.one(0, Outcome::BadBody, 2_000);
    lb.one(0, Outcome::Unsent, 2_000);
    for _ in 0..5 {
        lb.one(1, Outcome::Ok, 3_000_000);
    }
    // Three requests left queued or running.
    for _ in 0..3 {
        assert!(lb.arrive(1));
    }
    lb.core.dispatch(lb.now);

    let now = lb.now;
    lb.core
        .publish_snapshot(now, false, |front| front.copy_from_slice(&[7, 8, 9]));
    assert!(!lb.core.snapshot_due(now + 1));
    assert!(
        lb.core
            .snapshot_due(now + PUBLISH_INTERVAL.as_nanos() as u64)
    );
    let s = reader.latest();
    assert_eq!(s.seq, 1);
    assert!(!s.finished);
    assert_eq!(s.front, [7, 8, 9]);
    assert_eq!(s.counts, *lb.core.counts());
    assert_eq!(s.counts.arrived, 31);
    assert_eq!(s.in_flight, 3);
    let (short, long) = (&s.types[0], &s.types[1]);
    assert_eq!(
        (
            short.arrived,
            short.ok,
            short.handler_errors,
            short.bad_bodies,
            short.unsent
        ),
        (23, 20, 1, 1, 1)
    );
    assert_eq!((short.completed(), short.in_flight()), (23, 0));
    assert_eq!((long.arrived, long.ok, long.in_flight()), (8, 5, 3));
    // Latency and service samples are the ok answers only.
    assert_eq!(short.latency.count, 20);
    assert_eq!(short.latency.sum_ns, 20 * 2_000);
    assert_eq!(short.service.count, 20);
    assert_eq!(short.service.quantiles_ns[0], 2_000);
    assert_eq!(long.service.count, 5);
    let le_5ms = DIGEST_BOUNDS_NS
        .iter()
        .position(|&b| b == 5_000_000)
        .unwrap();
    assert_eq!(long.latency.buckets[le_5ms], 5, "3 ms lands in (2.5, 5] ms");
    // Quantiles are read for one type per snapshot, in turn: the first
    // snapshot read the short type's.
    assert_eq!(long.service.quantiles_ns, [0; 3]);
    // DARC left its warm-up after 10 samples: a reservation per type.
    assert!(s.has_reservation);
    assert!(s.reservation_updates >= 1);
    let r = lb.core.policy().reservation().expect("a reservation");
    for (t, ts) in s.types.iter().enumerate() {
        assert_eq!(
            ts.reserved_workers,
            Some(r.group(t as u16).reserved.len() as u32)
        );
        assert_eq!(
            ts.queued,
            lb.core.policy().queued_by_type(t as u16).map(|q| q as u64)
        );
    }
    // One or two running (the reservation decides), the rest queued.
    assert_eq!(s.queued, lb.core.policy().queued() as u64);
    assert!((1..=2).contains(&s.queued), "{}", s.queued);
    // Each worker: what it runs (a long request, or nothing), the group the
    // reservation reserves it for, and none preempted.
    assert!(s.running_known);
    assert_eq!(s.workers.len(), WORKERS);
    let running = s.workers.iter().filter(|w| w.running.is_some()).count() as u64;
    assert_eq!(running, s.in_flight - s.queued);
    for (w, ws) in s.workers.iter().enumerate() {
        assert!(matches!(ws.running, None | Some(1)), "{ws:?}");
        let g = r.groups.iter().position(|g| g.reserved.contains(w as _));
        assert_eq!(ws.reserved_group, g.map(|g| g as u16), "worker {w}: {r}");
        assert_eq!(ws.spillway, r.spillway.contains(w as _));
        let stealing = ws.running.is_some() && g.is_some_and(|g| g > r.group_of[1] as usize);
        assert_eq!(
            ws.loan == psp_runtime::Loan::Stealing,
            stealing,
            "{ws:?} {r}"
        );
        assert_eq!(ws.preemptions, 0);
    }
    assert_eq!(s.preemptions(), 0);
    for (t, ts) in s.types.iter().enumerate() {
        assert_eq!(ts.group, Some(r.group_of[t]));
    }

    lb.core.publish_snapshot(now, false, |_| {});
    let s = reader.latest();
    assert_eq!(s.seq, 2);
    let q = s.types[1].service.quantiles_ns;
    assert!(q.iter().all(|&v| v.abs_diff(3_000_000) < 3_000), "{q:?}");
    assert_eq!(s.types[0].service.quantiles_ns[0], 2_000, "kept");

    // At the drain deadline, what is left is stranded, by type.
    lb.core.abandon_in_flight(now);
    lb.core.publish_snapshot(now, true, |_| {});
    let s = reader.latest();
    assert_eq!((s.seq, s.finished), (3, true));
    assert_eq!(s.types[1].stranded, 3);
    assert_eq!(s.types[1].in_flight(), 0);
    assert_eq!(s.counts.stranded, 3);
}

#[test]
fn publishing_allocates_nothing() {
    for spec in ["c-fcfs", "darc:samples=10"] {
        let mut lb = Loopback::new(spec);
        let (publisher, mut reader) = snapshot_channel(2, WORKERS, 4);
        lb.core.publish_snapshots(publisher, 0);
        let mut published = 0;
        let allocations = allocations_in(|| {
            for i in 0..200u64 {
                lb.one((i % 2) as u16, Outcome::Ok, 1_000 + i * 997);
                if i % 10 == 0 {
                    let now = lb.now;
                    lb.core.publish_snapshot(now, false, |f| f.fill(i));
                    published += 1;
                    assert_eq!(reader.latest().seq, published);
                }
            }
        });
        assert_eq!(allocations, 0, "{spec}: publishing allocated");
        assert_eq!(reader.latest().front, [190; 4]);
    }
}

#[test]
fn the_counting_allocator_sees_allocations() {
    // The test above can fail: a boxed value counts.
    let n = allocations_in(|| {
        std::hint::black_box(Box::new(1u64));
    });
    assert!(n >= 1);
}
