//! The decentralized executor: requests steered by flow to per-worker queues,
//! idle workers stealing. No request is lost or run twice, under stress on the
//! queues alone and end to end; d-FCFS never moves a request, ws does.
//!
//! Few threads and the parking idle strategy end to end (never more spinning
//! threads than cores for long).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use psp_core::{PerWorkerRules, StealRule};
use psp_runtime::{Job, RunReport, WorkerQueues};
use psp_workload::{PoissonArrivals, Workload};

use crate::common;

/// One producer steers `jobs` jobs over `flows` flows into small queues
/// (pushes often find them full and retry); `thieves` workers take and steal
/// until every job is taken. Each token must be taken exactly once.
fn hammer(workers: usize, flows: u16, jobs: u32, threshold: usize) -> Vec<u64> {
    let q = Arc::new(WorkerQueues::new(
        PerWorkerRules::new(workers, Some(StealRule { threshold })),
        8,
    ));
    let seen: Arc<Vec<AtomicU8>> = Arc::new((0..jobs).map(|_| AtomicU8::new(0)).collect());
    let taken = Arc::new(AtomicU64::new(0));
    let stolen: Vec<u64> = std::thread::scope(|s| {
        let consumers: Vec<_> = (0..workers)
            .map(|me| {
                let (q, seen, taken) = (q.clone(), seen.clone(), taken.clone());
                s.spawn(move || {
                    let mut stolen = 0;
                    while taken.load(Ordering::Acquire) < u64::from(jobs) {
                        match q.take(me as u16) {
                            Some((job, steal)) => {
                                let before =
                                    seen[job.token as usize].fetch_add(1, Ordering::AcqRel);
                                assert_eq!(before, 0, "job {} taken twice", job.token);
                                stolen += u64::from(steal);
                                taken.fetch_add(1, Ordering::AcqRel);
                            }
                            None => std::thread::yield_now(),
                        }
                    }
                    stolen
                })
            })
            .collect();
        for token in 0..jobs {
            let mut job = Job {
                token,
                type_id: 0,
                len: 0,
                count: 1,
                deadline_ns: psp_runtime::NO_DEADLINE,
            };
            let flow = (token.wrapping_mul(2_654_435_761) % u32::from(flows)) as u16;
            while let Err(back) = q.steer(flow, job) {
                job = back;
                std::thread::yield_now();
            }
        }
        consumers.into_iter().map(|c| c.join().unwrap()).collect()
    });
    assert!(q.is_empty());
    assert!(
        seen.iter().all(|s| s.load(Ordering::Relaxed) == 1),
        "a job was lost"
    );
    stolen
}

#[test]
fn under_stress_every_job_is_taken_exactly_once_and_idle_workers_steal() {
    // One flow: every job goes to one queue, the other workers live on steals.
    let stolen = hammer(3, 1, 200_000, 0);
    assert!(stolen.iter().sum::<u64>() > 0, "{stolen:?}");
    // Many flows, a threshold.
    hammer(4, 512, 200_000, 2);
}

fn run(policy: &str, flows: u32, load: f64, cap: usize) -> RunReport {
    let w = Workload::fixed("mix", &[("short", 20.0, 0.9), ("long", 500.0, 0.1)]);
    let arrivals = PoissonArrivals::new(&w, load * w.peak_rps(2), 300_000_000, 7).with_flows(flows);
    common::run_spin(&w, policy, arrivals, cap, None)
}

fn assert_conserved(r: &RunReport, what: &str) {
    let d = &r.dispatcher.counts;
    assert!(d.arrived > 100, "{what}");
    assert_eq!(d.stranded, 0, "{what}");
    assert_eq!(d.arrived, d.completed + d.shed, "{what}");
    assert_eq!(d.admitted, d.completed, "{what}");
    assert_eq!(d.handler_errors, 0, "{what}");
    assert_eq!(
        r.served_per_worker.iter().sum::<u64>(),
        d.completed,
        "{what}: each completion answered once"
    );
}

#[test]
fn ws_steals_from_a_hot_queue_and_d_fcfs_never_moves_a_request() {
    // One flow: every request is steered to the same worker.
    for (load, cap) in [(0.5, 4096), (3.0, 8)] {
        let ws = run("ws", 1, load, cap);
        assert_conserved(&ws, &format!("ws at {load}"));
        let steals: u64 = ws.steals_per_worker.iter().sum();
        assert!(steals > 0, "ws at {load}: no steal");
        assert!(
            ws.served_per_worker.iter().all(|&s| s > 0),
            "ws at {load}: a worker served nothing: {:?}",
            ws.served_per_worker
        );

        let d = run("d-fcfs", 1, load, cap);
        assert_conserved(&d, &format!("d-fcfs at {load}"));
        assert_eq!(d.steals_per_worker.iter().sum::<u64>(), 0);
        assert!(
            d.served_per_worker.contains(&0),
            "d-fcfs at {load}: one flow reached both workers: {:?}",
            d.served_per_worker
        );
        if load > 1.0 {
            assert!(ws.dispatcher.counts.shed > 0 && d.dispatcher.counts.shed > 0);
        }
    }
    // Many flows: both workers get their own requests.
    let d = run("d-fcfs", 512, 0.5, 4096);
    assert_conserved(&d, "d-fcfs on 512 flows");
    assert!(d.served_per_worker.iter().all(|&s| s > 0));
}
