//! Microbenchmarks of the SPSC ring (rtrb) between the dispatcher and a worker,
//! carrying the runtime's [`Job`] (one cache line): a push and a pop on one thread, and a
//! request/response round trip to a second thread that echoes every job back as
//! a [`Done`] over the completion ring.
#![allow(missing_docs)]

mod common;

use std::hint::{black_box, spin_loop};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use psp_runtime::{Done, Job};
use rtrb::{Consumer, Producer, RingBuffer};

/// Slots per ring, as the runtime allocates them.
const RING_CAPACITY: usize = 4;

fn job(token: u32) -> Job {
    Job {
        token,
        type_id: 0,
        len: 16,
        count: 1,
        deadline_ns: psp_runtime::NO_DEADLINE,
    }
}

fn same_thread(c: &mut Criterion) {
    let (mut tx, mut rx) = RingBuffer::<Job>::new(RING_CAPACITY);
    let mut j = job(0);
    c.bench_function("ring/same_thread_push_pop", |b| {
        b.iter(|| {
            j.token = j.token.wrapping_add(1);
            if tx.push(black_box(j)).is_err() {
                unreachable!("ring emptied every iteration");
            }
            match rx.pop() {
                Ok(got) => black_box(got),
                Err(_) => unreachable!("just pushed"),
            }
        })
    });
}

use common::wait;

/// The worker side of the round trip: echoes every job back until `stop`.
fn echo(mut jobs: Consumer<Job>, mut done: Producer<Done>, stop: Arc<AtomicBool>) -> u64 {
    let mut echoed = 0u64;
    let mut spins = 0;
    loop {
        match jobs.pop() {
            Ok(j) => {
                spins = 0;
                let mut d = Done {
                    token: j.token,
                    ok: true,
                    refused: false,
                    sent: true,
                    preempted: false,
                    no_fiber: false,
                    failed_in_job: (0, 0),
                    expired: false,
                    service_ns: 0,
                    finished_ns: 0,
                };
                while let Err(rtrb::PushError::Full(back)) = done.push(d) {
                    d = back;
                    spin_loop();
                }
                echoed += 1;
            }
            Err(_) => {
                if stop.load(Ordering::Acquire) {
                    return echoed;
                }
                wait(&mut spins);
            }
        }
    }
}

fn cross_thread(c: &mut Criterion) {
    let (mut job_tx, job_rx) = RingBuffer::<Job>::new(RING_CAPACITY);
    let (done_tx, mut done_rx) = RingBuffer::<Done>::new(RING_CAPACITY);
    let stop = Arc::new(AtomicBool::new(false));
    let echo_thread = {
        let stop = Arc::clone(&stop);
        thread::spawn(move || echo(job_rx, done_tx, stop))
    };
    let mut j = job(0);
    c.bench_function("ring/cross_thread_round_trip", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                j.token = j.token.wrapping_add(1);
                if job_tx.push(j).is_err() {
                    unreachable!("one job in flight at a time");
                }
                let mut spins = 0;
                let d = loop {
                    match done_rx.pop() {
                        Ok(d) => break d,
                        Err(_) => wait(&mut spins),
                    }
                };
                debug_assert_eq!(d.token, j.token);
                black_box(d);
            }
            start.elapsed()
        })
    });
    stop.store(true, Ordering::Release);
    let echoed = echo_thread.join().expect("echo thread panicked");
    black_box(echoed);
}

fn config() -> Criterion {
    // Short default windows: these are nanosecond-scale operations.
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
