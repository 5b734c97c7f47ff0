//! Green threads: a request fiber yields at a preemption point when its
//! worker's flag is raised or its deadline passed, resumes (on any thread) to
//! the same result however often it was preempted, defers yields inside a
//! `NoPreempt` guard, and gives its stack back to the pool when it finishes,
//! panics or is dropped suspended; an exhausted pool refuses, and hands the
//! work back.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use psp_runtime::clock::ticks;
use psp_runtime::handler::synthetic;
use psp_runtime::{
    Cause, Handler, HandlerError, PreemptFlag, Preemption, RequestContext, RequestFiber,
    RequestSlot, Resumed, RunLimits, Served, SpinHandler, Spinner, StackPool, StackPoolConfig,
};
use psp_runtime::{Refusal, Refused, StackPoolStats};

fn pool(preallocate: usize, max_stacks: usize) -> Arc<StackPool> {
    StackPool::new(StackPoolConfig {
        preallocate,
        max_stacks,
        ..StackPoolConfig::default()
    })
    .expect("a valid pool")
}

fn stats(p: &StackPool) -> StackPoolStats {
    p.stats()
}

/// One step of the checksum (a multiply-rotate mix).
fn mix(h: u64, i: u64) -> u64 {
    (h ^ i).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29)
}

/// The checksum of `0..n`, with a preemption point after every step.
fn checksum(n: u64, p: Preemption<'_>) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325;
    for i in 0..n {
        h = mix(h, i);
        p.point();
    }
    h
}

/// A fiber computing [`checksum`] over `n` steps.
fn checksum_fiber(pool: &Arc<StackPool>, n: u64) -> RequestFiber<u64> {
    // SAFETY: the closure holds nothing tied to its thread.
    unsafe { RequestFiber::new(pool, move |p| checksum(n, p)) }.expect("a stack")
}

/// Resumes `fiber` until it finishes, calling `before` ahead of every resume;
/// returns the result and the yields.
fn drive<R: Send + 'static>(
    mut fiber: RequestFiber<R>,
    limits: impl Fn() -> RunLimitsOwned,
    mut before: impl FnMut(&PreemptFlag),
) -> (R, u32) {
    let flag = PreemptFlag::new();
    let mut yields = 0;
    loop {
        before(&flag);
        let l = limits();
        let run = l.apply(RunLimits::new(&flag));
        match fiber.resume(&run) {
            Resumed::Finished(r) => {
                assert!(fiber.is_finished());
                return (r, yields);
            }
            Resumed::Yielded(_) => {
                yields += 1;
                assert_eq!(fiber.yields(), yields);
            }
        }
    }
}

/// The non-flag part of a `RunLimits`, built before the flag is borrowed.
#[derive(Clone, Copy)]
struct RunLimitsOwned {
    deadline: u64,
    clock_every: u32,
}

impl RunLimitsOwned {
    fn none() -> Self {
        Self {
            deadline: u64::MAX,
            clock_every: 16,
        }
    }

    fn apply(self, r: RunLimits<'_>) -> RunLimits<'_> {
        r.deadline_at(self.deadline).clock_every(self.clock_every)
    }
}

#[test]
fn a_raised_flag_yields_at_the_next_point_and_the_fiber_resumes_to_completion() {
    let pool = pool(1, 4);
    let flag = PreemptFlag::new();
    let steps = Arc::new(AtomicU32::new(0));
    let seen = steps.clone();
    // SAFETY: the closure holds nothing tied to its thread.
    let mut fiber = unsafe {
        RequestFiber::new(&pool, move |p| {
            for _ in 0..100 {
                seen.fetch_add(1, Ordering::Relaxed);
                p.point();
            }
            "done"
        })
    }
    .unwrap();
    assert!(!fiber.started());
    flag.raise();
    match fiber.resume(&RunLimits::new(&flag)) {
        Resumed::Yielded(Cause::Flag) => {}
        other => panic!("expected a yield on the flag, got {other:?}"),
    }
    // It stopped at the first point, and took the flag down.
    assert_eq!(steps.load(Ordering::Relaxed), 1);
    assert!(!flag.is_raised());
    assert_eq!(stats(&pool).in_use, 1);
    match fiber.resume(&RunLimits::new(&flag)) {
        Resumed::Finished(r) => assert_eq!(r, "done"),
        other => panic!("expected the end, got {other:?}"),
    }
    assert_eq!(steps.load(Ordering::Relaxed), 100);
    assert_eq!(stats(&pool).in_use, 0);
}

#[test]
fn a_handler_without_points_completes_and_leaves_a_raise_up() {
    let pool = pool(1, 2);
    let flag = PreemptFlag::new();
    flag.raise();
    // SAFETY: the closure holds nothing tied to its thread.
    let mut fiber =
        unsafe { RequestFiber::new(&pool, |_| checksum(1_000, Preemption::none())) }.unwrap();
    match fiber.resume(&RunLimits::new(&flag).deadline_at(0).clock_every(1)) {
        Resumed::Finished(h) => assert_eq!(h, checksum(1_000, Preemption::none())),
        other => panic!("{other:?}"),
    }
    assert_eq!(fiber.yields(), 0);
    // No point took it: it is the worker's to clear before its next request.
    assert!(flag.is_raised());
}

#[test]
fn a_suspended_fiber_resumes_on_another_thread() {
    let pool = pool(1, 4);
    // SAFETY: the closure holds nothing tied to its thread across the
    // point (it asks for the thread's id afresh after it).
    let mut fiber = unsafe {
        RequestFiber::new(&pool, |p| {
            let before = thread::current().id();
            p.yield_now();
            (before, thread::current().id(), p.yields())
        })
    }
    .unwrap();
    let flag = PreemptFlag::new();
    let Resumed::Yielded(Cause::Voluntary) = fiber.resume(&RunLimits::new(&flag)) else {
        panic!("expected a voluntary yield");
    };
    let main = thread::current().id();
    let (started, finished, yields) = thread::spawn(move || {
        let mut fiber = fiber;
        let flag = PreemptFlag::new();
        match fiber.resume(&RunLimits::new(&flag)) {
            Resumed::Finished(r) => r,
            other => panic!("{other:?}"),
        }
    })
    .join()
    .unwrap();
    assert_eq!(started, main);
    assert_ne!(finished, main);
    assert_eq!(yields, 1);
    assert_eq!(stats(&pool).in_use, 0);
}

#[test]
fn a_checksum_is_the_same_whether_preempted_never_once_or_at_every_point() {
    const N: u64 = 10_000;
    let expected = checksum(N, Preemption::none());
    let pool = pool(1, 4);

    let (never, y0) = drive(checksum_fiber(&pool, N), RunLimitsOwned::none, |_| {});
    assert_eq!((never, y0), (expected, 0));

    let mut first = true;
    let (once, y1) = drive(checksum_fiber(&pool, N), RunLimitsOwned::none, |f| {
        if std::mem::take(&mut first) {
            f.raise();
        }
    });
    assert_eq!((once, y1), (expected, 1));

    // The flag raised before every resume: a yield at every point.
    let (flagged, yf) = drive(checksum_fiber(&pool, N), RunLimitsOwned::none, |f| {
        f.raise()
    });
    assert_eq!((flagged, yf), (expected, N as u32));

    // A deadline already passed, the clock read at every point: the same.
    let past = || RunLimitsOwned {
        deadline: 0,
        clock_every: 1,
    };
    let (timed, yd) = drive(checksum_fiber(&pool, N), past, |_| {});
    assert_eq!((timed, yd), (expected, N as u32));

    // Read every 7th point: a yield every 7 points.
    let sparse = || RunLimitsOwned {
        deadline: 0,
        clock_every: 7,
    };
    let (timed, ys) = drive(checksum_fiber(&pool, N), sparse, |_| {});
    assert_eq!((timed, ys), (expected, (N / 7) as u32));

    let s = stats(&pool);
    assert_eq!((s.mapped, s.in_use, s.taken), (1, 0, 5));
}

#[test]
fn a_guard_defers_the_yield_to_the_first_point_after_it() {
    let pool = pool(1, 4);
    let flag = Arc::new(PreemptFlag::new());
    let step = Arc::new(AtomicU32::new(0));
    let (f2, s2) = (flag.clone(), step.clone());
    // SAFETY: the closure holds nothing tied to its thread.
    let mut fiber = unsafe {
        RequestFiber::new(&pool, move |p| {
            let outer = p.no_preempt();
            f2.raise();
            p.point(); // deferred
            s2.store(1, Ordering::Relaxed);
            {
                let _inner = p.no_preempt();
                p.point(); // deferred
                p.yield_now(); // deferred too
                s2.store(2, Ordering::Relaxed);
            }
            p.point(); // still inside `outer`
            s2.store(3, Ordering::Relaxed);
            drop(outer);
            s2.store(4, Ordering::Relaxed);
            p.point(); // yields here
            s2.store(5, Ordering::Relaxed);
            p.point(); // nothing pending any more
            p.yields()
        })
    }
    .unwrap();
    match fiber.resume(&RunLimits::new(&flag)) {
        Resumed::Yielded(Cause::Flag) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(step.load(Ordering::Relaxed), 4);
    match fiber.resume(&RunLimits::new(&flag)) {
        Resumed::Finished(yields) => assert_eq!(yields, 1),
        other => panic!("{other:?}"),
    }
    assert_eq!(step.load(Ordering::Relaxed), 5);
}

#[test]
fn a_passed_deadline_yields_and_a_new_quantum_lets_the_request_go_on() {
    let pool = pool(1, 4);
    let spinner = Spinner::calibrate(Duration::from_millis(20));
    let done = Arc::new(AtomicBool::new(false));
    let d2 = done.clone();
    // SAFETY: the closure holds nothing tied to its thread.
    let mut fiber = unsafe {
        RequestFiber::new(&pool, move |p| {
            // Spin, with points, until told to stop.
            while !d2.load(Ordering::Relaxed) {
                p.point();
            }
            p.yields()
        })
    }
    .unwrap();
    let flag = PreemptFlag::new();
    let limits = RunLimits::new(&flag)
        .quantum_ns(200_000, &spinner)
        .clock_every(4);
    let deadline = limits.deadline_ticks();
    match fiber.resume(&limits) {
        Resumed::Yielded(Cause::Deadline) => {}
        other => panic!("{other:?}"),
    }
    assert!(ticks() >= deadline, "yielded before its deadline");
    done.store(true, Ordering::Relaxed);
    match fiber.resume(&RunLimits::new(&flag).quantum_ns(1_000_000_000, &spinner)) {
        Resumed::Finished(yields) => assert_eq!(yields, 1),
        other => panic!("{other:?}"),
    }
}

#[test]
fn stacks_are_reused_and_a_dropped_suspended_fiber_unwinds_and_returns_its_stack() {
    let pool = pool(1, 8);
    let flag = PreemptFlag::new();
    for i in 0..100 {
        let mut f = checksum_fiber(&pool, i);
        assert!(matches!(
            f.resume(&RunLimits::new(&flag)),
            Resumed::Finished(_)
        ));
    }
    let s = stats(&pool);
    assert_eq!((s.mapped, s.grown, s.taken, s.in_use), (1, 0, 100, 0));

    // Three suspended at once: two more stacks are mapped.
    struct SetOnDrop(Arc<AtomicUsize>);
    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
    let dropped = Arc::new(AtomicUsize::new(0));
    let mut suspended: Vec<_> = (0..3)
        .map(|_| {
            let d = dropped.clone();
            // SAFETY: the closure holds nothing tied to its thread.
            let mut f = unsafe {
                RequestFiber::new(&pool, move |p| {
                    let _on_stack = SetOnDrop(d);
                    p.yield_now();
                    unreachable!("never resumed");
                })
            }
            .unwrap();
            match f.resume(&RunLimits::new(&flag)) {
                Resumed::Yielded(_) => f,
                other => panic!("{other:?}"),
            }
        })
        .collect();
    let s = stats(&pool);
    assert_eq!((s.mapped, s.grown, s.in_use, s.free), (3, 2, 3, 0));

    // Dropping one (on another thread) runs its destructors and frees its
    // stack, which the next fiber reuses.
    let one = suspended.pop().unwrap();
    thread::spawn(move || drop(one)).join().unwrap();
    assert_eq!(dropped.load(Ordering::Relaxed), 1);
    assert_eq!((stats(&pool).in_use, stats(&pool).free), (2, 1));
    let f = checksum_fiber(&pool, 10);
    assert_eq!(stats(&pool).mapped, 3);
    drop(f); // never started: nothing to unwind
    drop(suspended);
    assert_eq!(dropped.load(Ordering::Relaxed), 3);
    let s = stats(&pool);
    assert_eq!((s.mapped, s.in_use, s.free), (3, 0, 3));
}

#[test]
fn an_exhausted_pool_refuses_and_hands_the_work_back() {
    let pool = pool(0, 2);
    let flag = PreemptFlag::new();
    let suspend = |pool: &Arc<StackPool>| {
        // SAFETY: the closure holds nothing tied to its thread.
        let mut f = unsafe { RequestFiber::new(pool, |p| p.yield_now()) }.unwrap();
        match f.resume(&RunLimits::new(&flag)) {
            Resumed::Yielded(_) => f,
            other => panic!("{other:?}"),
        }
    };
    let mut a = suspend(&pool);
    let _b = suspend(&pool);
    // SAFETY: the closure holds nothing tied to its thread.
    let refused = unsafe { RequestFiber::new(&pool, |_| 42) };
    let Err(Refused {
        work,
        reason: Refusal::Exhausted,
    }) = refused
    else {
        panic!("expected a refusal");
    };
    assert_eq!(work(Preemption::none()), 42, "the work comes back");
    let s = stats(&pool);
    assert_eq!((s.mapped, s.refused, s.in_use), (2, 1, 2));
    // Once one finishes, starts succeed again.
    assert!(matches!(
        a.resume(&RunLimits::new(&flag)),
        Resumed::Finished(())
    ));
    let mut f = checksum_fiber(&pool, 3);
    assert!(matches!(
        f.resume(&RunLimits::new(&flag)),
        Resumed::Finished(_)
    ));
}

#[test]
fn a_panic_in_a_fiber_reaches_the_resumer_and_the_stack_goes_back() {
    let pool = pool(1, 2);
    // SAFETY: the closure holds nothing tied to its thread.
    let mut f = unsafe {
        RequestFiber::new(&pool, |p| {
            p.yield_now();
            if p.yields() == 1 {
                panic!("handler bug");
            }
        })
    }
    .unwrap();
    let flag = PreemptFlag::new();
    let Resumed::Yielded(_) = f.resume(&RunLimits::new(&flag)) else {
        panic!("expected a yield");
    };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        f.resume(&RunLimits::new(&flag))
    }));
    let msg = r.expect_err("the panic propagates");
    assert_eq!(msg.downcast_ref::<&str>(), Some(&"handler bug"));
    // The stack is back although the fiber is not dropped; it is finished.
    assert_eq!(stats(&pool).in_use, 0);
    assert!(f.is_finished());
}

/// Serves one request of `slot` to completion, raising the flag before every
/// resume when `preempt`; returns the slot, the outcome and the yields.
fn serve_all<H: Handler + 'static>(
    pool: &Arc<StackPool>,
    slot: RequestSlot<H>,
    preempt: bool,
) -> (Served<H>, u32) {
    // SAFETY: the handlers of these tests hold nothing tied to their thread.
    let fiber = unsafe { RequestFiber::serve(pool, slot) }.expect("a stack");
    drive(fiber, RunLimitsOwned::none, |f| {
        if preempt {
            f.raise();
        }
    })
}

#[test]
fn the_spin_handler_answers_the_same_on_a_fiber_preempted_or_not() {
    let spinner = Spinner::calibrate(Duration::from_millis(20));
    let handler = SpinHandler::new(spinner).with_point_interval(10_000);
    let body = synthetic::encode(0, 100_000);
    let mut direct = Vec::new();
    let mut plain = handler;
    plain
        .handle(&mut RequestContext::new(0, &body, &mut direct, 0))
        .unwrap();
    assert_eq!(direct, 100_000u64.to_le_bytes());

    let pool = pool(1, 2);
    let mut slot = RequestSlot::new(handler, 64, 64);
    for preempt in [false, true] {
        slot.load(0, 3, &body);
        let t0 = std::time::Instant::now();
        let (served, yields) = serve_all(&pool, slot, preempt);
        assert!(t0.elapsed() >= Duration::from_micros(95));
        assert_eq!(served.outcome, Ok(()));
        assert_eq!(served.slot.response, direct);
        // A point every 10 us of 100 us: 9 of them.
        assert_eq!(yields, if preempt { 9 } else { 0 });
        slot = served.slot;
    }
    // A refused body is refused on a fiber too.
    slot.load(0, 0, b"short");
    let (served, _) = serve_all(&pool, slot, false);
    assert!(matches!(served.outcome, Err(HandlerError::BadBody(_))));
}

#[test]
fn stress_threads_pass_suspended_fibers_around() {
    const THREADS: usize = 4;
    const FIBERS: u64 = 64;
    const STEPS: u64 = 3_000;
    let pool = pool(8, 128);
    let (done_tx, done_rx) = mpsc::channel::<(u64, u64)>();
    let yields = Arc::new(AtomicUsize::new(0));
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..THREADS)
        .map(|_| mpsc::channel::<Option<(u64, RequestFiber<u64>)>>())
        .unzip();
    let handles: Vec<_> = rxs
        .into_iter()
        .enumerate()
        .map(|(me, rx)| {
            let next = txs[(me + 1) % THREADS].clone();
            let done = done_tx.clone();
            let yields = yields.clone();
            thread::spawn(move || {
                let flag = PreemptFlag::new();
                let mut resumes = 0u32;
                while let Ok(Some((id, mut fiber))) = rx.recv() {
                    resumes += 1;
                    // Yield every 1 to 31 points, by deadline (reading the
                    // clock at each) or by flag.
                    let every = (resumes % 31) + 1;
                    let limits = RunLimits::new(&flag).deadline_at(0).clock_every(every);
                    if resumes & 3 == 0 {
                        flag.raise();
                    }
                    match fiber.resume(&limits) {
                        Resumed::Finished(h) => done.send((id, h)).unwrap(),
                        Resumed::Yielded(_) => {
                            yields.fetch_add(1, Ordering::Relaxed);
                            next.send(Some((id, fiber))).unwrap();
                        }
                    }
                    flag.clear();
                }
            })
        })
        .collect();
    for id in 0..FIBERS {
        let f = checksum_fiber(&pool, STEPS + id);
        txs[(id as usize) % THREADS].send(Some((id, f))).unwrap();
    }
    drop(done_tx);
    let mut seen = vec![false; FIBERS as usize];
    for _ in 0..FIBERS {
        let (id, h) = done_rx.recv_timeout(Duration::from_secs(60)).unwrap();
        assert_eq!(h, checksum(STEPS + id, Preemption::none()), "fiber {id}");
        assert!(!std::mem::replace(&mut seen[id as usize], true));
    }
    for tx in &txs {
        tx.send(None).unwrap();
    }
    for h in handles {
        h.join().unwrap();
    }
    // Each fiber yielded at least once every 32 points (by deadline).
    let total = yields.load(Ordering::Relaxed);
    assert!(total as u64 >= FIBERS * STEPS / 32, "{total} yields");
    let s = stats(&pool);
    assert_eq!((s.in_use, s.taken, s.refused), (0, FIBERS, 0));
    assert!(s.mapped <= 128);
}
