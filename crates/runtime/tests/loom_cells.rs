//! Loom models of the executors' hand-written concurrent cells: SYNERGY's
//! feedback cell ([`Feedback`]: the worker arms and disarms it, the timer
//! claims or renews an expired quantum), the single-writer [`Counter`] (the
//! executors' statistics and a token's run time so far) and the hand-over of
//! a preempted request's fiber ([`SuspendedFibers`]). Built with `--cfg loom`,
//! these types run on loom's atomics and `UnsafeCell` (`src/sync.rs`), and
//! loom runs every interleaving of the small scenarios below and every value
//! each load may read under the C11 memory model.
//!
//! A ring that hands a token from one thread to another (the job and
//! completion rings, the executors' queues) is modelled by a slot stored with
//! release and loaded with acquire, as rtrb and crossbeam's `ArrayQueue` do.
//!
//! Broken copies of each cell show that the checks can fail: loom must find
//! each one's bug (`loom_catches_broken_cells`).
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p psp-runtime --test loom_cells`
//! (docs/verification.md).
#![cfg(loom)]

use std::process::Command;
// std's Arc, not loom's: its reference counts are not under test.
use std::sync::Arc;

use loom::sync::atomic::{AtomicU64, Ordering};
use loom::thread;
use psp_runtime::Clock;
use psp_runtime::Counter;
use psp_runtime::Feedback;
use psp_runtime::SuspendedFibers;

/// The first segment's quantum (a deadline below [`SECOND`] is one of the
/// first segment's: the model's clock starts at 0 and runs for well under a
/// second).
const FIRST_NS: u64 = 1_000_000;
/// The second segment's quantum: its deadlines are at least this.
const SECOND: u64 = 1 << 50;

fn second(d: u64) -> bool {
    d >= SECOND
}

/// The timer reads a worker's deadline while the worker ends one segment and
/// arms the next: a deadline it sees comes with the state the worker wrote
/// before arming it (the segment's quantum, which a renewal extends by, and
/// the request being long), never a stale one (release/acquire on the
/// deadline).
#[test]
fn feedback_timer_sees_the_quantum_of_the_deadline_it_reads() {
    loom::model(|| {
        let fb = Arc::new(Feedback::new(Clock::new()));
        fb.begin(false, FIRST_NS);
        let worker = {
            let fb = fb.clone();
            thread::spawn(move || {
                fb.start(); // feedback_start(): long, armed
                assert!(fb.end(), "the request declared itself long");
                fb.begin(false, SECOND); // the next request starts short
                fb.start();
            })
        };
        // The timer: one pass.
        let d = fb.deadline_ns();
        if second(d) {
            assert_eq!(fb.quantum_ns(), SECOND, "a stale quantum");
            assert!(fb.is_long(), "armed, yet not long");
        }
        worker.join().unwrap();
    });
}

/// A claim and a renewal of the same expired deadline racing (two timer
/// decisions on one quantum): exactly one of them wins.
#[test]
fn feedback_claim_and_renew_of_one_deadline_exactly_one_wins() {
    loom::model(|| {
        let fb = Arc::new(Feedback::new(Clock::new()));
        fb.begin(false, FIRST_NS);
        fb.start();
        let d = fb.deadline_ns();
        let renewer = {
            let fb = fb.clone();
            thread::spawn(move || fb.renew(d, d + 1))
        };
        let claimed = fb.claim(d);
        let renewed = renewer.join().unwrap();
        assert!(claimed != renewed, "claimed {claimed}, renewed {renewed}");
        assert_eq!(fb.deadline_ns(), if claimed { 0 } else { d + 1 });
    });
}

/// A writer adds while a reader reads: every read is one of the counter's
/// values, never lower than an earlier read, and the end total is exact.
#[test]
fn counter_reads_never_go_backwards() {
    loom::model(|| {
        let c = Arc::new(Counter::new());
        let writer = {
            let c = c.clone();
            thread::spawn(move || {
                for i in 1..=3 {
                    assert_eq!(c.add(1), i);
                }
            })
        };
        let mut last = 0;
        for _ in 0..3 {
            let now = c.get();
            assert!((last..=3).contains(&now), "read {now} after {last}");
            last = now;
        }
        writer.join().unwrap();
        assert_eq!(c.get(), 3);
    });
}

/// Passes a token from one thread to another: a slot stored with release and
/// loaded with acquire (`ordered`), or both relaxed (a broken hand-over).
struct HandOver {
    slot: AtomicU64,
    ordered: bool,
}

impl HandOver {
    fn new(ordered: bool) -> Self {
        Self {
            slot: AtomicU64::new(0),
            ordered,
        }
    }

    fn give(&self, round: u64) {
        let o = if self.ordered {
            Ordering::Release
        } else {
            Ordering::Relaxed
        };
        self.slot.store(round, o);
    }

    fn wait_for(&self, round: u64) {
        let o = if self.ordered {
            Ordering::Acquire
        } else {
            Ordering::Relaxed
        };
        while self.slot.load(o) != round {
            thread::yield_now();
        }
    }
}

/// A token's run time (`LocalQueues::add_served`) follows the token: worker A
/// adds its segment, hands the token over, worker B adds its own and gets the
/// sum, while the timer thread reads along.
fn counter_follows_its_token(ordered: bool) {
    loom::model(move || {
        let c = Arc::new(Counter::new());
        let hand = Arc::new(HandOver::new(ordered));
        let b = {
            let (c, hand) = (c.clone(), hand.clone());
            thread::spawn(move || {
                hand.wait_for(1);
                assert_eq!(c.add(7), 12, "the first segment's time was lost");
            })
        };
        assert_eq!(c.add(5), 5);
        hand.give(1);
        b.join().unwrap();
        assert_eq!(c.get(), 12);
    });
}

#[test]
fn counter_follows_its_token_through_a_release_acquire_hand_over() {
    counter_follows_its_token(true);
}

/// A preempted request's fiber is parked under its token on one worker and
/// taken on another after the token's hand-over, then parked again and taken
/// back on the first: each parking is taken exactly once, whole. Under loom
/// the cells are loom's `UnsafeCell`, which reports any access that the
/// hand-overs do not order after the previous one.
fn fiber_changes_workers(ordered: bool) {
    loom::model(move || {
        let fibers = Arc::new(SuspendedFibers::<Box<u64>>::new(2));
        let hand = Arc::new(HandOver::new(ordered));
        let b = {
            let (fibers, hand) = (fibers.clone(), hand.clone());
            thread::spawn(move || {
                hand.wait_for(1);
                // SAFETY: the hand-over gave this thread token 1.
                let f = unsafe { fibers.take(1) };
                assert_eq!(f.as_deref(), Some(&42), "the parked fiber, whole");
                // SAFETY: as above.
                assert!(unsafe { fibers.take(1) }.is_none(), "taken twice");
                // Preempted again: parked, the token handed back.
                // SAFETY: as above, until `give(2)`.
                unsafe { fibers.put(1, Box::new(43)) };
                hand.give(2);
            })
        };
        // SAFETY: this thread owns token 1 until `give(1)`.
        unsafe { fibers.put(1, Box::new(42)) };
        hand.give(1);
        hand.wait_for(2);
        // SAFETY: the hand-over gave token 1 back.
        assert_eq!(unsafe { fibers.take(1) }.as_deref(), Some(&43));
        // SAFETY: as above.
        assert!(unsafe { fibers.take(1) }.is_none(), "taken twice");
        b.join().unwrap();
    });
}

#[test]
fn suspended_fiber_handed_over_is_taken_exactly_once() {
    fiber_changes_workers(true);
}

const BROKEN: &str = "PSP_LOOM_BROKEN_CELL";

/// The checks can fail: loom must find the bug of each broken cell below (a
/// failed assertion or a data race: either panics the model). Each runs in a
/// child process of this test binary, as `loom_idle.rs`'s do.
#[test]
fn loom_catches_broken_cells() {
    if let Ok(which) = std::env::var(BROKEN) {
        match which.as_str() {
            "claim-by-store" => claim_by_store(),
            "relaxed-arming" => relaxed_arming(),
            "two-writers" => two_writers(),
            "relaxed-counter-hand-over" => counter_follows_its_token(false),
            "relaxed-fiber-hand-over" => fiber_changes_workers(false),
            other => panic!("no broken cell '{other}'"),
        }
        return;
    }
    for (which, symptom) in [
        ("claim-by-store", "claimed true, renewed true"),
        ("relaxed-arming", "a stale quantum"),
        ("two-writers", "lost an update"),
        (
            "relaxed-counter-hand-over",
            "the first segment's time was lost",
        ),
        ("relaxed-fiber-hand-over", "Causality violation"),
    ] {
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "loom_catches_broken_cells", "--nocapture"])
            .env(BROKEN, which)
            .env("RUST_BACKTRACE", "0")
            .output()
            .unwrap();
        let output = String::from_utf8_lossy(&out.stderr) + String::from_utf8_lossy(&out.stdout);
        assert!(
            !out.status.success() && output.contains(symptom),
            "loom did not find the bug of '{which}' ({}):\n{output}",
            out.status
        );
    }
}

/// A claim as a load, a compare and a store instead of a compare-exchange (a
/// copy over a loom atomic), racing with a renewal of the same deadline: both
/// may win, and the preempted request keeps a renewed quantum.
fn claim_by_store() {
    loom::model(|| {
        let deadline = Arc::new(AtomicU64::new(FIRST_NS));
        let renewer = {
            let deadline = deadline.clone();
            thread::spawn(move || {
                deadline
                    .compare_exchange(FIRST_NS, FIRST_NS + 1, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            })
        };
        let claimed = deadline.load(Ordering::Acquire) == FIRST_NS && {
            deadline.store(0, Ordering::Release);
            true
        };
        let renewed = renewer.join().unwrap();
        assert!(claimed != renewed, "claimed {claimed}, renewed {renewed}");
    });
}

/// The worker's arming with a relaxed store of the deadline (a copy): the
/// timer may see the new deadline with the old segment's quantum.
fn relaxed_arming() {
    loom::model(|| {
        let quantum = Arc::new(AtomicU64::new(FIRST_NS));
        let deadline = Arc::new(AtomicU64::new(0));
        let worker = {
            let (quantum, deadline) = (quantum.clone(), deadline.clone());
            thread::spawn(move || {
                quantum.store(SECOND, Ordering::Relaxed); // begin(false, SECOND)
                deadline.store(SECOND, Ordering::Relaxed); // start(), relaxed
            })
        };
        if second(deadline.load(Ordering::Relaxed)) {
            assert_eq!(quantum.load(Ordering::Relaxed), SECOND, "a stale quantum");
        }
        worker.join().unwrap();
    });
}

/// Two threads writing one [`Counter`] at once (its contract allows one):
/// an add between the other's load and store is lost.
fn two_writers() {
    loom::model(|| {
        let c = Arc::new(Counter::new());
        let other = {
            let c = c.clone();
            thread::spawn(move || {
                c.add(1);
            })
        };
        c.add(1);
        other.join().unwrap();
        assert_eq!(c.get(), 2, "lost an update");
    });
}
