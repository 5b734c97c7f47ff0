//! Loom models of the wake-up protocol in `src/idle.rs`: built with `--cfg loom`,
//! the real [`Wakeup`] and [`Idler`] run on loom's atomics, fences, park/unpark
//! and eventfd stand-in, and loom runs the interleavings (and the values each
//! load may read under the C11 memory model) of the small scenarios below. A
//! lost wake-up leaves the sleeper parked with no one left to wake it: loom
//! reports that as a deadlock, so these tests fail on one.
//!
//! Each ring is modelled by its published count (an atomic stored with release
//! and loaded with acquire, as rtrb does). A timed park is a park under loom; a
//! "timer" thread that ends the sleeper's park (or poll) once, at any point,
//! stands for the timeout firing (to the sleeper, an early return), so the loops
//! are also checked to tolerate those.
//!
//! Two broken protocols show that the checks can fail: loom must find the lost
//! wake-up in each (`loom_catches_lost_wake_ups`).
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p psp-runtime --test loom_idle`
//! (docs/verification.md).
#![cfg(loom)]

use std::process::Command;
// std's Arc, not loom's: its reference counts are not under test, and each of
// loom's clones and drops would add a scheduling point.
use std::sync::Arc;
use std::time::Duration;

use loom::model::Builder;
use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
use loom::thread;
use psp_runtime::idle::{IdleStrategy, Idler, Wakeup};

/// Park on the first empty pass (no spinning: loom explores spin loops badly,
/// and a spin only delays the park the protocol is about).
const PARK_AT_ONCE: IdleStrategy = IdleStrategy::SpinPark {
    spin_us: 0,
    park_us: 1_000,
};

const MAX_PARK: Duration = Duration::from_millis(1);

/// How many times loom may preempt a runnable thread in one execution: every
/// execution within the bound is checked. Unbounded, the models with three
/// threads besides the main one do not finish in ten minutes; bugs of this kind
/// need few preemptions (the broken models below are found with at most one,
/// and the real code less a fence with none: weak memory needs no preemption).
/// `LOOM_MAX_PREEMPTIONS` overrides it for a deeper run.
#[derive(Clone, Copy)]
enum Preemptions {
    All,
    AtMost(usize),
}

/// Checks the executions of `sleeper` (within `preemptions`), run on its own
/// thread: it spawns the threads that wake it, runs its loop and returns their
/// handles, which the model's main thread joins. (Loom's `join` is built on
/// park/unpark, so a stray unpark, which the protocol allows, would break a
/// join in the sleeper.)
fn check<F>(preemptions: Preemptions, sleeper: F)
where
    F: Fn() -> Vec<thread::JoinHandle<()>> + Copy + Send + Sync + 'static,
{
    let mut builder = Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = match preemptions {
            Preemptions::All => None,
            Preemptions::AtMost(n) => Some(n),
        };
    }
    builder.check(move || {
        let others = thread::spawn(sleeper).join().unwrap();
        for t in others {
            t.join().unwrap();
        }
    });
}

/// A thread that unparks `t` once: the timeout of a timed park, firing at any
/// point of the run.
fn timer(t: thread::Thread) -> thread::JoinHandle<()> {
    thread::spawn(move || t.unpark())
}

/// A worker's loop (`worker.rs`): pop a job or, on an empty pass, idle through
/// the [`Idler`] with `has_work` = "the ring is not empty, or stop is raised";
/// leave once stop is raised and the ring is empty. The dispatcher pushes `jobs`
/// jobs, notifying after each, then raises stop and notifies (`runtime.rs`'s
/// shutdown). The worker must serve every job and leave.
fn worker_model(jobs: u64, with_timer: bool, preemptions: Preemptions) {
    check(preemptions, move || {
        let me = Arc::new(Wakeup::for_current());
        let pushed = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let mut others = vec![{
            let (me, pushed, stop) = (me.clone(), pushed.clone(), stop.clone());
            thread::spawn(move || {
                for i in 1..=jobs {
                    pushed.store(i, Ordering::Release);
                    me.notify();
                }
                stop.store(true, Ordering::Release);
                me.notify();
            })
        }];
        others.extend(with_timer.then(|| timer(thread::current())));

        let mut idler = Idler::new(PARK_AT_ONCE);
        let mut popped = 0;
        loop {
            if pushed.load(Ordering::Acquire) > popped {
                popped += 1;
                idler.reset();
                continue;
            }
            if stop.load(Ordering::Acquire) && pushed.load(Ordering::Acquire) == popped {
                break;
            }
            idler.idle(&me, MAX_PARK, || {
                pushed.load(Ordering::Acquire) > popped || stop.load(Ordering::Acquire)
            });
        }
        assert_eq!(popped, jobs, "the worker left with jobs in its ring");
        others
    });
}

#[test]
fn worker_parks_and_is_woken_for_its_job_and_for_stop() {
    worker_model(1, false, Preemptions::All);
}

#[test]
fn worker_parks_and_is_woken_for_each_of_two_jobs_and_for_stop() {
    worker_model(2, false, Preemptions::AtMost(4));
}

#[test]
fn worker_tolerates_a_park_timeout_at_any_point() {
    worker_model(1, true, Preemptions::AtMost(4));
}

/// The dispatcher's park (`dispatcher.rs`: `me.park(until_next, has_work)` with
/// `has_work` = "a completion ring is not empty"): two workers each push one
/// completion and notify the dispatcher, which must see both.
#[test]
fn dispatcher_is_woken_by_each_of_two_workers() {
    check(Preemptions::AtMost(4), || {
        let me = Arc::new(Wakeup::for_current());
        let done = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let others = (0..2)
            .map(|w| {
                let (me, done) = (me.clone(), done.clone());
                thread::spawn(move || {
                    done[w].store(1, Ordering::Release);
                    me.notify();
                })
            })
            .collect();

        let mut seen = [0u64; 2];
        let pending = |seen: &[u64; 2]| (0..2).any(|w| done[w].load(Ordering::Acquire) > seen[w]);
        while seen != [1, 1] {
            if pending(&seen) {
                for (w, s) in seen.iter_mut().enumerate() {
                    *s = done[w].load(Ordering::Acquire);
                }
            } else {
                me.park(MAX_PARK, || pending(&seen));
            }
        }
        others
    });
}

/// The network dispatcher (`net/src/server.rs`): its handle has an eventfd, it
/// waits in a poll on it (modelled by `Wakeup::wait_event`) and then clears it,
/// through the idler while jobs are in flight and through `park_with` when none
/// are. A worker pushes `jobs` completions, notifying after each (which signals
/// the eventfd when the dispatcher is parked). The timer ends one poll as its
/// timeout (or a datagram) would (`Wakeup::end_poll`).
fn net_dispatcher_model(jobs: u64, with_timer: bool, preemptions: Preemptions) {
    check(preemptions, move || {
        let me = Arc::new(Wakeup::with_event_fd(thread::current()).unwrap());
        let done = Arc::new(AtomicU64::new(0));
        let mut others = vec![{
            let (me, done) = (me.clone(), done.clone());
            thread::spawn(move || {
                for i in 1..=jobs {
                    done.store(i, Ordering::Release);
                    me.notify();
                }
            })
        }];
        others.extend(with_timer.then(|| {
            let me = me.clone();
            thread::spawn(move || me.end_poll())
        }));

        let mut idler = Idler::new(PARK_AT_ONCE);
        let mut seen = 0;
        let wait = |_max: Duration| {
            me.wait_event();
            me.clear_event();
        };
        while seen < jobs {
            let now = done.load(Ordering::Acquire);
            if now > seen {
                seen = now;
                idler.reset();
                continue;
            }
            let has_work = || done.load(Ordering::Acquire) > seen;
            // Before the first completion, through the idler (a job in flight);
            // after it, a plain park.
            if seen == 0 {
                idler.idle_with(&me, MAX_PARK, has_work, wait);
            } else {
                me.park_with(has_work, || wait(MAX_PARK));
            }
        }
        others
    });
}

#[test]
fn net_dispatcher_is_woken_through_the_event_fd() {
    net_dispatcher_model(2, false, Preemptions::All);
}

#[test]
fn net_dispatcher_tolerates_a_poll_timeout_at_any_point() {
    net_dispatcher_model(1, true, Preemptions::All);
}

/// Environment variable naming the broken model `loom_catches_lost_wake_ups`
/// runs in a child process.
const BROKEN: &str = "PSP_LOOM_BROKEN_MODEL";

/// The checks can fail: loom must report each broken protocol below as a
/// deadlock (the sleeper parked with nobody left to wake it). Loom aborts the
/// process on a deadlock, so each runs in a child process of this test binary.
#[test]
fn loom_catches_lost_wake_ups() {
    if let Ok(which) = std::env::var(BROKEN) {
        match which.as_str() {
            "stale-check" => stale_check_before_the_flag(),
            "unfenced" => sleeper_without_its_fence(),
            other => panic!("no broken model '{other}'"),
        }
        return;
    }
    for which in ["stale-check", "unfenced"] {
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "loom_catches_lost_wake_ups", "--nocapture"])
            .env(BROKEN, which)
            .env_remove("LOOM_MAX_PREEMPTIONS")
            .env("RUST_BACKTRACE", "0")
            .output()
            .unwrap();
        let output = String::from_utf8_lossy(&out.stderr) + String::from_utf8_lossy(&out.stdout);
        assert!(
            !out.status.success() && output.contains("deadlock"),
            "loom did not find the lost wake-up of '{which}' ({}):\n{output}",
            out.status
        );
    }
}

/// A caller that checks for work *before* raising the flag (the `has_work` it
/// passes to the real `park_with` is stale): a notify between the check and the
/// flag finds the flag down, and the sleeper parks with work in its ring.
fn stale_check_before_the_flag() {
    check(Preemptions::All, || {
        let me = Arc::new(Wakeup::for_current());
        let pushed = Arc::new(AtomicU64::new(0));
        let producer = {
            let (me, pushed) = (me.clone(), pushed.clone());
            thread::spawn(move || {
                pushed.store(1, Ordering::Release);
                me.notify();
            })
        };
        while pushed.load(Ordering::Acquire) == 0 {
            me.park_with(|| false, thread::park);
        }
        vec![producer]
    });
}

/// The protocol of `idle.rs` with the sleeper's fence removed (a copy: the real
/// code keeps its fences). Without it the flag's store may not yet be visible
/// when the waker loads the flag, while the sleeper's check misses the work
/// (store buffering): both sides skip, and the sleeper parks for good.
fn sleeper_without_its_fence() {
    struct Unfenced {
        parked: AtomicBool,
        thread: thread::Thread,
    }
    check(Preemptions::All, || {
        let me = Arc::new(Unfenced {
            parked: AtomicBool::new(false),
            thread: thread::current(),
        });
        let pushed = Arc::new(AtomicU64::new(0));
        let producer = {
            let (me, pushed) = (me.clone(), pushed.clone());
            thread::spawn(move || {
                pushed.store(1, Ordering::Release);
                // `notify`, intact.
                fence(Ordering::SeqCst);
                if me.parked.load(Ordering::Relaxed) {
                    me.thread.unpark();
                }
            })
        };
        while pushed.load(Ordering::Acquire) == 0 {
            // `park_with`, less its fence.
            me.parked.store(true, Ordering::Relaxed);
            if pushed.load(Ordering::Acquire) == 0 {
                thread::park();
            }
            me.parked.store(false, Ordering::Relaxed);
        }
        vec![producer]
    });
}
