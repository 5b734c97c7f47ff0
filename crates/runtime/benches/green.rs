//! Microbenchmarks of the green-thread layer (request fibers, stacks, points):
//!
//! - `switch`: one suspend + resume round trip: corosensei's own, a
//!   `RequestFiber` yielding voluntarily, and one preempted by its flag
//!   (raise, point, slow path, suspend, resume).
//! - `start`: starting a request and running it to completion: on a pooled
//!   stack, on a freshly mapped one (no pool), and a whole `serve` of a 0 ns
//!   spin request through a `RequestSlot` against a direct handler call.
//! - `points`: a loop of work units (four dependent multiply-rotate steps
//!   each) with a preemption point every 1, 10 or 100 units, on a fiber (never
//!   yielding: the flag stays down, no deadline), against the same loop with
//!   no point; and points off a fiber (one branch each).
//!
//! Not criterion (printed first, under `cargo bench` only): the preemption
//! latency, from another thread raising the flag to the worker's fiber having
//! yielded, and the deadline overshoot, from a quantum's end to the yield, as
//! distributions.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use criterion::{BenchmarkId, Criterion, criterion_group};
use psp_runtime::clock::ticks;
use psp_runtime::handler::synthetic;
use psp_runtime::{
    Cause, Handler, PreemptFlag, Preemption, RequestContext, RequestFiber, RequestSlot, Resumed,
    RunLimits, SpinHandler, Spinner, StackPool, StackPoolConfig,
};

const STACK: usize = 64 * 1024;
/// Work units per `points` iteration.
const UNITS: u64 = 10_000;

fn pool() -> Arc<StackPool> {
    StackPool::new(StackPoolConfig {
        stack_bytes: STACK,
        preallocate: 4,
        max_stacks: 16,
        prefault: true,
    })
    .unwrap()
}

/// One work unit: four dependent multiply-rotate steps (~10 ns).
#[inline(always)]
fn unit(mut h: u64, i: u64) -> u64 {
    for k in 0..4 {
        h = (h ^ i ^ k)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29);
    }
    h
}

/// `UNITS` work units with a point every `every` units (0: none).
#[inline(always)]
fn work(p: Preemption<'_>, every: u64, seed: u64) -> u64 {
    let mut h = seed;
    if every == 0 {
        for i in 0..UNITS {
            h = unit(h, i);
        }
    } else {
        let mut next = every;
        for i in 0..UNITS {
            h = unit(h, i);
            next -= 1;
            if next == 0 {
                next = every;
                p.point();
            }
        }
    }
    h
}

/// Resumes a fiber that yields at every resume.
#[inline]
fn step<R: Send + 'static>(fiber: &mut RequestFiber<R>, limits: &RunLimits<'_>) {
    match fiber.resume(limits) {
        Resumed::Yielded(_) => {}
        Resumed::Finished(_) => unreachable!("the fiber loops"),
    }
}

fn switch(c: &mut Criterion) {
    let mut g = c.benchmark_group("switch");
    let mut co = Coroutine::with_stack(
        DefaultStack::new(STACK).unwrap(),
        |y: &Yielder<(), ()>, ()| {
            loop {
                y.suspend(());
            }
        },
    );
    g.bench_function("corosensei_round_trip", |b| {
        b.iter(|| black_box(co.resume(())))
    });

    let pool = pool();
    let flag = PreemptFlag::new();
    let limits = RunLimits::new(&flag);
    // SAFETY: the closure holds nothing tied to its thread.
    let mut fiber = unsafe {
        RequestFiber::new(&pool, |p| {
            while !black_box(false) {
                p.yield_now();
            }
        })
    }
    .unwrap();
    g.bench_function("fiber_yield_now_round_trip", |b| {
        b.iter(|| step(&mut fiber, &limits))
    });

    // SAFETY: the closure holds nothing tied to its thread.
    let mut fiber = unsafe {
        RequestFiber::new(&pool, |p| {
            while !black_box(false) {
                p.point();
            }
        })
    }
    .unwrap();
    g.bench_function("fiber_flag_preemption_round_trip", |b| {
        b.iter(|| {
            flag.raise();
            step(&mut fiber, &limits)
        })
    });
    g.finish();
}

fn start(c: &mut Criterion) {
    let mut g = c.benchmark_group("start");
    let pool = pool();
    let flag = PreemptFlag::new();
    let limits = RunLimits::new(&flag);
    g.bench_function("pooled_stack", |b| {
        b.iter(|| {
            // SAFETY: the closure holds nothing tied to its thread.
            let mut f = unsafe { RequestFiber::new(&pool, |_| black_box(1u64)) }.unwrap();
            match f.resume(&limits) {
                Resumed::Finished(r) => r,
                Resumed::Yielded(..) => unreachable!(),
            }
        })
    });
    g.bench_function("fresh_stack", |b| {
        b.iter(|| {
            let stack = DefaultStack::new(STACK).unwrap();
            let mut co = Coroutine::with_stack(stack, |_: &Yielder<(), ()>, ()| black_box(1u64));
            match co.resume(()) {
                CoroutineResult::Return(r) => r,
                CoroutineResult::Yield(()) => unreachable!(),
            }
        })
    });

    let spinner = Spinner::calibrate(Duration::from_millis(20));
    let body = synthetic::encode(0, 0);
    let mut handler = SpinHandler::new(spinner);
    let mut response = Vec::with_capacity(64);
    g.bench_function("spin_0ns_direct_call", |b| {
        b.iter(|| {
            response.clear();
            handler
                .handle(&mut RequestContext::new(0, &body, &mut response, 0))
                .unwrap();
        })
    });
    let mut slot = Some(RequestSlot::new(handler, 64, 64));
    g.bench_function("spin_0ns_served_on_pooled_fiber", |b| {
        b.iter(|| {
            let mut s = slot.take().unwrap();
            s.load(0, 0, &body);
            // SAFETY: the spin handler holds nothing tied to its thread.
            let mut f = unsafe { RequestFiber::serve(&pool, s) }.unwrap();
            match f.resume(&limits) {
                Resumed::Finished(served) => slot = Some(served.slot),
                Resumed::Yielded(..) => unreachable!(),
            }
        })
    });
    g.finish();
}

fn points(c: &mut Criterion) {
    let mut g = c.benchmark_group("points");
    g.throughput(criterion::Throughput::Elements(UNITS));
    let pool = pool();
    let flag = PreemptFlag::new();
    let limits = RunLimits::new(&flag);
    for every in [0u64, 1, 10, 100] {
        // A fiber running the loop once per resume, then yielding.
        // SAFETY: the closure holds nothing tied to its thread.
        let mut fiber = unsafe {
            RequestFiber::new(&pool, move |p| {
                let mut seed = 1;
                while !black_box(false) {
                    seed = black_box(work(p, black_box(every), seed));
                    p.yield_now();
                }
            })
        }
        .unwrap();
        let name = if every == 0 {
            "none".to_string()
        } else {
            format!("every_{every}")
        };
        g.bench_with_input(BenchmarkId::new("on_fiber", &name), &every, |b, _| {
            b.iter(|| step(&mut fiber, &limits))
        });
    }
    g.bench_function(BenchmarkId::new("off_fiber", "every_1"), |b| {
        b.iter(|| black_box(work(Preemption::none(), black_box(1), 1)))
    });
    g.bench_function(BenchmarkId::new("off_fiber", "none"), |b| {
        b.iter(|| black_box(work(Preemption::none(), black_box(0), 1)))
    });
    // The deadline's clock read at every point (rdtsc per unit).
    let clocked = RunLimits::new(&flag).clock_every(1);
    // SAFETY: the closure holds nothing tied to its thread.
    let mut fiber = unsafe {
        RequestFiber::new(&pool, move |p| {
            let mut seed = 1;
            while !black_box(false) {
                seed = black_box(work(p, black_box(1), seed));
                p.yield_now();
            }
        })
    }
    .unwrap();
    g.bench_function(BenchmarkId::new("on_fiber", "every_1_clock_every_1"), |b| {
        b.iter(|| step(&mut fiber, &clocked))
    });
    g.finish();
}

/// Percentiles of `v` (sorted in place), in ns.
fn summary(v: &mut [u64], spinner: &Spinner) -> String {
    v.sort_unstable();
    let at = |q: f64| spinner.ticks_to_ns(v[((v.len() - 1) as f64 * q) as usize]);
    format!(
        "n={} p50={} p90={} p99={} p99.9={} max={} (ns)",
        v.len(),
        at(0.5),
        at(0.9),
        at(0.99),
        at(0.999),
        at(1.0)
    )
}

/// From another thread raising the flag to the fiber having yielded, with a
/// point every work unit (~10 ns) or every 10 units.
fn flag_latency(spinner: &Spinner, every: u64, samples: usize) -> String {
    let pool = pool();
    let flag = Arc::new(PreemptFlag::new());
    let raised_at = Arc::new(AtomicU64::new(0));
    let acked = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let raiser = {
        let (flag, raised_at, acked, stop) =
            (flag.clone(), raised_at.clone(), acked.clone(), stop.clone());
        let spinner = *spinner;
        thread::spawn(move || {
            let mut round = 0u64;
            let mut x = 0x2545_f491_4f6c_dd1du64;
            while !stop.load(Ordering::Relaxed) {
                // A pseudo-random pause of 5-50 us, then raise.
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                spinner.spin_ns(5_000 + x % 45_000);
                raised_at.store(ticks(), Ordering::Relaxed);
                flag.raise();
                round += 1;
                while acked.load(Ordering::Acquire) < round && !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            }
        })
    };
    // SAFETY: the closure holds nothing tied to its thread.
    let mut fiber = unsafe {
        RequestFiber::new(&pool, move |p| {
            let mut h = 1;
            while !black_box(false) {
                h = black_box(work(p, every, h));
            }
        })
    }
    .unwrap();
    let mut lat = Vec::with_capacity(samples);
    let limits = RunLimits::new(&flag);
    while lat.len() < samples {
        match fiber.resume(&limits) {
            Resumed::Yielded(Cause::Flag) => {
                let now = ticks();
                // The flag's acquire (in the point) orders the store before it.
                lat.push(now.saturating_sub(raised_at.load(Ordering::Relaxed)));
                acked.fetch_add(1, Ordering::Release);
            }
            other => unreachable!("{other:?}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    raiser.join().unwrap();
    summary(&mut lat, spinner)
}

/// From a quantum's end to the fiber having yielded, reading the clock at one
/// point in `clock_every` (a point per ~10 ns unit).
fn deadline_overshoot(spinner: &Spinner, clock_every: u32, samples: usize) -> String {
    let pool = pool();
    let flag = PreemptFlag::new();
    // SAFETY: the closure holds nothing tied to its thread.
    let mut fiber = unsafe {
        RequestFiber::new(&pool, move |p| {
            let mut h = 1;
            while !black_box(false) {
                h = black_box(work(p, 1, h));
            }
        })
    }
    .unwrap();
    let mut over = Vec::with_capacity(samples);
    while over.len() < samples {
        let limits = RunLimits::new(&flag)
            .quantum_ns(5_000, spinner)
            .clock_every(clock_every);
        match fiber.resume(&limits) {
            Resumed::Yielded(Cause::Deadline) => {
                over.push(ticks().saturating_sub(limits.deadline_ticks()));
            }
            other => unreachable!("{other:?}"),
        }
    }
    summary(&mut over, spinner)
}

fn latency_report() {
    let spinner = Spinner::calibrate(Duration::from_millis(50));
    println!("green: preemption latency, flag raised on another thread -> fiber yielded");
    for every in [1, 10] {
        println!(
            "  point every {every:>2} unit(s): {}",
            flag_latency(&spinner, every, 20_000)
        );
    }
    println!("green: deadline overshoot, 5 us quantum, point every unit (~10 ns)");
    for clock_every in [1, 16, 64] {
        println!(
            "  clock read every {clock_every:>2} point(s): {}",
            deadline_overshoot(&spinner, clock_every, 20_000)
        );
    }
}

criterion_group!(benches, switch, start, points);

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs each
    // benchmark once, without the distributions. A name filter (an argument
    // that is neither an option nor a number) skips them unless it names
    // them ("latency").
    let args: Vec<String> = std::env::args().skip(1).collect();
    let filter = args
        .iter()
        .find(|a| !a.starts_with('-') && a.parse::<f64>().is_err());
    if args.iter().any(|a| a == "--bench") && filter.is_none_or(|f| f.contains("latency")) {
        latency_report();
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
