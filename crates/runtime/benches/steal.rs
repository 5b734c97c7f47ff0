//! Microbenchmarks of the decentralized executor's worker queues
//! ([`WorkerQueues`]: a crossbeam `ArrayQueue` per worker, filled by flow and
//! drained by their workers and thieves):
//!
//! - `steal/own/N` and `steal/steal/N`: one steer and one take on one thread,
//!   the job taken from the taker's own queue or stolen from another's (the
//!   thief reads every other queue's length to pick its victim: the cost grows
//!   with N workers);
//! - `steal/cross_thread_round_trip/{own,stolen}`: the front end steers a job
//!   and a worker on another thread takes it and hands it back (the same
//!   round trip as `ring/cross_thread_round_trip`, through the worker queues):
//!   a steal against a take from the worker's own queue is the steal's
//!   end-to-end cost, cache misses included.
#![allow(missing_docs)]

mod common;

use std::hint::{black_box, spin_loop};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use crossbeam_queue::ArrayQueue;
use psp_core::{FlowId, PerWorkerRules, StealRule, WorkerId};
use psp_runtime::{Job, WorkerQueues};

fn job(token: u32) -> Job {
    Job {
        token,
        type_id: 0,
        len: 16,
        count: 1,
        deadline_ns: psp_runtime::NO_DEADLINE,
    }
}

/// A flow whose requests `rules` steer to worker `w`.
fn flow_to(rules: &PerWorkerRules, w: WorkerId) -> FlowId {
    (0..=FlowId::MAX)
        .find(|&f| rules.home(f) == w)
        .expect("some flow hashes to every worker")
}

fn queues(workers: usize) -> (WorkerQueues, PerWorkerRules) {
    let rules = PerWorkerRules::new(workers, Some(StealRule { threshold: 0 }));
    (WorkerQueues::new(rules, 4096), rules)
}

fn same_thread(c: &mut Criterion) {
    let mut g = c.benchmark_group("steal");
    for workers in [2usize, 16] {
        let (q, rules) = queues(workers);
        let (home, thief) = (flow_to(&rules, 0), 1);
        let own = flow_to(&rules, thief);
        for (name, flow) in [("own", own), ("steal", home)] {
            let mut j = job(0);
            g.bench_with_input(BenchmarkId::new(name, workers), &flow, |b, &flow| {
                b.iter(|| {
                    j.token = j.token.wrapping_add(1);
                    if q.steer(black_box(flow), j).is_err() {
                        unreachable!("emptied every iteration");
                    }
                    match q.take(thief) {
                        Some(got) => black_box(got),
                        None => unreachable!("just steered"),
                    }
                })
            });
        }
    }
    g.finish();
}

use common::wait;

/// Pins the calling thread to the `i`-th core available, when there is one:
/// two unpinned threads the scheduler puts on one core wait out each other's
/// time slices (round trips of a millisecond instead of a microsecond).
fn pin(i: usize) {
    if let Some(c) = core_affinity::get_core_ids().and_then(|ids| ids.get(i).copied()) {
        core_affinity::set_for_current(c);
    }
}

fn cross_thread(c: &mut Criterion) {
    pin(0);
    let (q, rules) = queues(2);
    let q = Arc::new(q);
    let back = Arc::new(ArrayQueue::<Job>::new(4));
    let stop = Arc::new(AtomicBool::new(false));
    // Worker 1 takes (its own, or stolen from worker 0) and hands back.
    let worker = {
        let (q, back, stop) = (q.clone(), back.clone(), stop.clone());
        thread::spawn(move || {
            pin(1);
            let mut spins = 0;
            while !stop.load(Ordering::Acquire) {
                match q.take(1) {
                    Some((j, _)) => {
                        spins = 0;
                        let mut j = j;
                        while let Err(b) = back.push(j) {
                            j = b;
                            spin_loop();
                        }
                    }
                    None => wait(&mut spins),
                }
            }
        })
    };
    let mut g = c.benchmark_group("steal/cross_thread_round_trip");
    for (name, flow) in [("own", flow_to(&rules, 1)), ("stolen", flow_to(&rules, 0))] {
        let mut j = job(0);
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    j.token = j.token.wrapping_add(1);
                    if q.steer(flow, j).is_err() {
                        unreachable!("one job in flight at a time");
                    }
                    let mut spins = 0;
                    let got = loop {
                        match back.pop() {
                            Some(got) => break got,
                            None => wait(&mut spins),
                        }
                    };
                    debug_assert_eq!(got.token, j.token);
                    black_box(got);
                }
                start.elapsed()
            })
        });
    }
    g.finish();
    stop.store(true, Ordering::Release);
    worker.join().expect("worker thread panicked");
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
}

criterion_group! {
    name = benches;
    config = config();
    targets = same_thread, cross_thread
}
criterion_main!(benches);
