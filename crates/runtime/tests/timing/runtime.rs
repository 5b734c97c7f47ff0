//! The real runtime on this machine: conservation, the reservation invariant
//! (a debug assertion in the dispatcher, on in test builds), live profiling,
//! reservation updates following a workload change, and shutdown.
//!
//! Few workers and the parking idle strategy: never more spinning threads than
//! cores. Service times are tens of microseconds or more, so that a thread
//! wake-up (tens of microseconds on a VM) does not dominate.

use std::sync::OnceLock;
use std::time::Duration;

use psp_core::{HeaderClassifier, PolicySpec, Reservation, WorkerSet};
use psp_runtime::handler::synthetic;
use psp_runtime::{RunReport, RuntimeConfig, SpinHandler, Spinner, SyntheticEncoder};
use psp_workload::{
    Arrival, ArrivalSource, PhasedArrivals, PoissonArrivals, TraceArrivals, Workload,
};

fn spinner() -> Spinner {
    static S: OnceLock<Spinner> = OnceLock::new();
    *S.get_or_init(|| Spinner::calibrate(Duration::from_millis(20)))
}

fn run(
    workload: &Workload,
    policy: &str,
    cfg: RuntimeConfig,
    arrivals: Box<dyn ArrivalSource + Send>,
) -> RunReport {
    let _turn = crate::common::one_at_a_time();
    let spec: PolicySpec = policy.parse().unwrap();
    let classifier = HeaderClassifier {
        offset: synthetic::TYPE_OFFSET,
        types: workload.types.len() as u16,
    };
    let s = spinner();
    psp_runtime::run(
        &cfg,
        &spec,
        workload.type_infos(),
        arrivals,
        Box::new(SyntheticEncoder),
        Box::new(classifier),
        0,
        move |_| SpinHandler::new(s),
    )
    .unwrap_or_else(|e| panic!("{policy}: {e}"))
}

fn poisson(
    w: &Workload,
    workers: usize,
    load: f64,
    ms: u64,
    seed: u64,
) -> Box<dyn ArrivalSource + Send> {
    Box::new(PoissonArrivals::new(
        w,
        load * w.peak_rps(workers),
        ms * 1_000_000,
        seed,
    ))
}

fn cfg(workers: usize, queue_capacity: usize) -> RuntimeConfig {
    RuntimeConfig {
        workers,
        queue_capacity,
        drain_timeout: Duration::from_secs(20),
        ..Default::default()
    }
}

#[test]
fn every_request_is_completed_or_shed_under_load_and_overload() {
    let w = Workload::fixed("mix", &[("short", 50.0, 0.9), ("long", 500.0, 0.1)]);
    for policy in [
        "c-fcfs",
        "d-fcfs",
        "fp",
        "edf",
        "darc-static:1",
        "darc:samples=200,delay=1",
    ] {
        for (load, cap) in [(0.4, 4096), (3.0, 8)] {
            let r = run(&w, policy, cfg(2, cap), poisson(&w, 2, load, 150, 7));
            let d = &r.dispatcher.counts;
            assert!(d.arrived > 100, "{policy}");
            assert_eq!(d.stranded, 0, "{policy} at {load}");
            assert_eq!(
                d.arrived,
                d.completed + d.shed,
                "{policy} at {load}: arrived = completed + shed"
            );
            assert_eq!(d.admitted, d.completed, "{policy} at {load}");
            assert_eq!(
                r.served_per_worker.iter().sum::<u64>(),
                d.completed,
                "{policy}: workers' count"
            );
            assert_eq!(d.handler_errors, 0);
            let d = &r.dispatcher;
            if load > 1.0 {
                assert!(d.counts.shed > 0, "{policy}: overload shed nothing");
                assert!(
                    d.recorder.dropped() > 0,
                    "{policy}: sheds not recorded per type"
                );
            }
        }
    }
}

#[test]
fn darc_keeps_its_reservation_at_run_time() {
    // The dispatcher debug-asserts every dispatch against the reservation in
    // force; a violation panics the dispatcher and fails the run.
    let w = Workload::fixed(
        "three",
        &[("a", 20.0, 0.7), ("b", 200.0, 0.25), ("c", 2000.0, 0.05)],
    );
    let r = run(
        &w,
        "darc:samples=300,delay=1",
        cfg(2, 4096),
        poisson(&w, 2, 0.7, 600, 3),
    );
    let d = &r.dispatcher;
    assert!(
        d.policy_stats.reservation_updates >= 1,
        "never left the c-FCFS warm-up"
    );
    assert_eq!(d.counts.arrived, d.counts.completed + d.counts.shed);
}

/// Arrivals whose type sequence follows the ratios exactly (deficit round robin)
/// and whose services are the types' means x `scale`: a profiling window then
/// measures the mix without sampling noise.
fn exact_mix(w: &Workload, rate: f64, n: usize, scale: f64) -> Box<dyn ArrivalSource + Send> {
    let mut credit = vec![0.0; w.types.len()];
    let mut t = 0.0f64;
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let arrivals = (0..n)
        .map(|_| {
            for (c, ty) in credit.iter_mut().zip(&w.types) {
                *c += ty.ratio;
            }
            let (i, _) = credit
                .iter()
                .enumerate()
                .fold((0, f64::MIN), |b, (i, &c)| if c > b.1 { (i, c) } else { b });
            credit[i] -= 1.0;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            t += -(1.0 - u).ln() / rate * 1e9;
            Arrival {
                flow: 0,
                at_ns: t as u64,
                type_id: i as u16,
                service_ns: (w.types[i].service.mean_us() * scale * 1e3) as u64,
            }
        })
        .collect();
    Box::new(TraceArrivals::new(arrivals))
}

fn first_reservation(name: &str, samples: usize, shortest_us: f64) -> Reservation {
    let w = Workload::resolve(name).unwrap();
    let workers = 14;
    // Low load (~0.4 busy workers on average): measured service times are not
    // inflated by 14 threads sharing this machine's 2 cores.
    // Scale so the shortest request takes >= `shortest_us`: OS noise on a VM adds
    // a roughly constant amount per request (and rare millisecond-long
    // descheduling), which skews the means of short and of rare types.
    let shortest = w
        .types
        .iter()
        .map(|t| t.service.mean_us())
        .fold(f64::INFINITY, f64::min);
    let scale = (shortest_us / shortest).max(5.0);
    let rate = 0.03 * w.peak_rps(workers) / scale;
    let policy = format!("darc:samples={samples}");
    let r = run(
        &w,
        &policy,
        cfg(workers, 4096),
        exact_mix(&w, rate, samples + 200, scale),
    );
    r.dispatcher
        .reservation_log
        .first()
        .map(|e| e.reservation.clone())
        .unwrap_or_else(|| panic!("{name}: no reservation"))
}

#[test]
fn live_profiling_reproduces_the_worked_examples_on_14_workers() {
    let ws = WorkerSet::range;
    let r = first_reservation("high-bimodal", 1000, 20.0);
    assert_eq!(
        (
            r.groups[0].reserved,
            r.groups[0].stealable,
            r.groups[1].reserved
        ),
        (ws(0, 1), ws(1, 14), ws(1, 14)),
        "{r}"
    );
    // Extreme bimodal: the paper's 2.32 workers -> 2 holds with exact means (unit
    // test, simulator). Live on this 2-core VM, 15 threads share 2 cores: a 20 ms
    // long request holds a core alone while short ones share the other with the
    // dispatcher's wake-ups, inflating short services: demand 2.5-2.9 on a quiet
    // host, up to 4.3 when the host is busy (the same commit measured both within
    // an hour). A host busy with other processes can also deschedule a long
    // request mid-spin, inflating the long type instead and lowering the short
    // type's share (1.66-1.73 seen at load 5 on 2 cores). So assert a generous
    // band around 2.32 and, exactly, the reservation's shape.
    let r = first_reservation("extreme-bimodal", 2000, 20.0);
    println!("extreme-bimodal live: {r}");
    let short = &r.groups[0];
    assert!((1.5..6.0).contains(&short.demand), "{r}");
    assert!(
        (2..=6).contains(&short.reserved.len()) && short.reserved.first() == Some(0),
        "{r}"
    );
    assert_eq!(short.stealable, r.groups[1].reserved, "{r}");
    assert_eq!(short.reserved.len() + r.groups[1].reserved.len(), 14, "{r}");
    let r = first_reservation("rocksdb", 1000, 20.0);
    assert_eq!(
        (r.groups[0].reserved, r.groups[1].reserved),
        (ws(0, 1), ws(1, 14)),
        "{r}"
    );
    // TPC-C (Payment 5.7, OrderStatus 6, NewOrder 20, Delivery 88, StockLevel
    // 100 us): the unit tests and the simulator check the exact worked example.
    // Live on 15 threads over 2 cores, timing noise of 10-40% can split types
    // that are 5% or 13.6% apart (delta is 20%) and move a worker across a
    // rounding boundary (B and C sit within 0.6% of one): both were seen on an
    // unchanged commit when the host got busier. What the 3-4x gaps guarantee:
    // the two short types come before NewOrder, which comes before the two long
    // ones, and the shortest group starts at worker 0.
    let r = first_reservation("tpcc", 1000, 100.0);
    let g = |t: usize| r.group_of[t] as usize;
    assert!(g(0).max(g(1)) < g(2) && g(2) < g(3).min(g(4)), "{r}");
    assert_eq!(r.group_types(g(2)), [2], "NewOrder alone: {r}");
    assert_eq!(r.groups[0].reserved.first(), Some(0), "{r}");
    // Reservations never overlap (rounding may leave a worker only stealable).
    for (i, a) in r.groups.iter().enumerate() {
        for b in &r.groups[i + 1..] {
            assert!(a.reserved.and(b.reserved).is_empty(), "{r}");
        }
    }
}

#[test]
fn reservation_follows_each_phase_of_a_workload_change() {
    // Workloads.md's experiment, scaled to 2 workers: A fast / B slow, then (1)
    // A and B swap service times, (2) A makes 99.5% of requests, (3) only A.
    let phase0 = Workload::fixed("p0", &[("A", 100.0, 0.9), ("B", 2000.0, 0.1)]);
    let phase1 = Workload::fixed("p1", &[("A", 2000.0, 0.9), ("B", 100.0, 0.1)]);
    let phase2 = Workload::fixed("p2", &[("A", 2000.0, 0.995), ("B", 100.0, 0.005)]);
    let mut phase3 = Workload::fixed("p3", &[("A", 2000.0, 1.0), ("B", 100.0, 1e-9)]);
    phase3.types[1].ratio = 0.0;
    let phases = [&phase0, &phase1, &phase2, &phase3];
    // Phase 3 runs twice as long: B's stragglers from phase 2 keep B active
    // until a profiling window holds none of them, and a loaded machine serves
    // them late (its end fell past 1.5 s in 1 run of 3 at load 5).
    let phase_ns = |i: usize| {
        if i == 3 {
            3_000_000_000u64
        } else {
            1_500_000_000
        }
    };
    // 40% rather than the paper's 80%: on 2 workers, Algorithm 2 gives even a
    // near-zero-demand type a whole worker (half the machine), so at 80% the
    // other type is overloaded during phases 2-3 and its backlog, not the new
    // mix, drives the profile. That behaviour is documented in docs/results.md.
    let spec: Vec<(&Workload, f64, u64)> = phases
        .iter()
        .enumerate()
        .map(|(i, w)| (*w, 0.4 * w.peak_rps(2), phase_ns(i)))
        .collect();
    let arrivals = Box::new(PhasedArrivals::new(&spec, 5));
    let r = run(&phase0, "darc:samples=200,delay=1", cfg(2, 4096), arrivals);
    let log = &r.dispatcher.reservation_log;
    assert!(!log.is_empty(), "no reservation at all");
    for e in log {
        println!("{:7.3} s  {}", e.at_s, e.reservation); // shown on failure
    }
    // The reservation passes through each phase's mix, in order. Not by a
    // fixed time after each change: a loaded machine serves (hence profiles)
    // a phase's requests later, into the next phase's time, without changing
    // what the windows measure.
    // (Phase 3: stragglers of B keep it "active" with demand ~0, and every
    // active group holds a worker, until a window without B.)
    let a_first = |r: &Reservation| r.order[0] == 0;
    let b_inactive = |r: &Reservation| {
        r.groups.last().is_some_and(|g| g.inactive) && r.group_of[1] as usize == r.groups.len() - 1
    };
    type Check<'a> = (&'a str, &'a dyn Fn(&Reservation) -> bool);
    let checks: [Check; 4] = [
        ("phase 0: A (fast) first", &|r| a_first(r)),
        ("phase 1: B (now fast) first", &|r| !a_first(r)),
        // B (0.5%) may be absent from a window, and then rightly inactive.
        ("phase 2: A's demand near all workers", &|r| {
            r.type_demand[0] > 1.9
        }),
        ("phase 3: only A active", &|r| b_inactive(r)),
    ];
    let mut after_s = f64::NEG_INFINITY;
    for (what, ok) in &checks {
        let shown = log
            .iter()
            .find(|e| e.at_s > after_s && ok(&e.reservation))
            .unwrap_or_else(|| panic!("{what}: no such reservation after {after_s} s"));
        after_s = shown.at_s;
    }
}

#[test]
fn shutdown_with_a_request_in_flight_reports_it_and_does_not_hang() {
    // One 3 s request, a 200 ms drain: the run ends soon after the deadline
    // (the worker, still spinning, is abandoned) and reports it stranded.
    let w = Workload::fixed("one", &[("slow", 3_000_000.0, 1.0)]);
    let trace = vec![Arrival {
        flow: 0,
        at_ns: 0,
        type_id: 0,
        service_ns: 3_000_000_000,
    }];
    let mut c = cfg(2, 16);
    c.drain_timeout = Duration::from_millis(200);
    let r = run(&w, "c-fcfs", c, Box::new(TraceArrivals::new(trace)));
    // The run's own wall time (not time spent waiting for other tests' turn).
    assert!(
        r.wall < Duration::from_secs(10),
        "shutdown took {:?}",
        r.wall
    );
    assert_eq!(r.dispatcher.counts.stranded, 1);
    assert_eq!(r.dispatcher.counts.completed, 0);
}
