//! Black-box properties of the simulator driving the shared policy core.

use psp_core::{ClassifierKind, Policy, PolicyContext, PolicySpec, Request, WorkerId};
use psp_metrics::{Extra, PointResult, SimExtra};
use psp_sim::{
    Arrival, PreemptionCost, SimConfig, Simulator, SystemCosts, TraceArrivals, Workload,
    simulate_point,
};

/// Every registered policy (its registry example, DARC's variants with a
/// window that fills in these short runs), then variants of those with
/// more mechanisms to cover.
fn all_policies() -> Vec<String> {
    let mut all = psp_core::policy::registry::examples_with(&[("samples", "2000")]);
    all.extend(
        [
            "ts:sq,requeue=head,preempt=waiting",
            "ts-block:0,pick=short",
            "concord:k=1,quantum=2",
            "ws:threshold=2",
            "synergy:ws=off,wq=off,cp=off,qa=off,quantum=5",
            "synergy:wqd=1,cqf=5,mech=signal",
            "tq:quantum=5,mech=uintr",
        ]
        .map(String::from),
    );
    all
}

fn cfg(workers: usize, workload: &Workload, load: f64, duration_ms: u64, seed: u64) -> SimConfig {
    SimConfig {
        workers,
        rate_rps: workload.peak_rps(workers) * load,
        duration_ns: duration_ms * 1_000_000,
        warmup_fraction: 0.1,
        seed,
        flows: psp_sim::DEFAULT_FLOWS,
        queue_capacity: 256,
        system: SystemCosts::default(),
        classifier: ClassifierKind::Header,
        series_window_ns: None,
        max_wait_ns: Vec::new(),
    }
}

/// The simulator's own figures of a point.
fn sim(p: &PointResult) -> &SimExtra {
    p.extra.sim().expect("a simulated point")
}

#[test]
fn every_request_is_completed_or_counted_as_dropped() {
    let w = Workload::resolve("high-bimodal").unwrap();
    for policy in all_policies() {
        let spec: PolicySpec = policy.parse().unwrap();
        // Below, near and well above the peak (the last one must drop).
        for load in [0.5, 0.95, 3.0] {
            let p = simulate_point(&w, &spec, &cfg(4, &w, load, 20, 3)).unwrap();
            let (gen_, done, drop) = (
                sim(&p).generated_total,
                sim(&p).completed_total,
                sim(&p).dropped_total,
            );
            assert!(gen_ > 0);
            assert_eq!(
                sim(&p).stranded,
                0,
                "{policy} at {load}: requests stranded in queues"
            );
            assert_eq!(
                gen_,
                done + drop,
                "{policy} at {load}: {gen_} generated, {done} completed, {drop} dropped"
            );
            if load > 1.0 {
                assert!(
                    drop > 0 && p.dropped > 0,
                    "{policy} at {load} dropped nothing"
                );
            }
        }
    }
}

/// `mech=none` models handlers without preemption points: a preemption never
/// lands, so nothing is handed back preempted and every request still
/// completes; with compiler-inserted checks the same point preempts.
#[test]
fn without_preemption_points_no_preemption_lands() {
    let w = Workload::resolve("extreme-bimodal").unwrap();
    for (policy, lands) in [
        ("synergy:mech=ci", Some(true)),
        ("synergy:mech=none", Some(false)),
        ("ts:mech=none", None),
        ("darc-lend:mech=none", None),
    ] {
        let spec: PolicySpec = policy.parse().unwrap();
        let p = simulate_point(&w, &spec, &cfg(4, &w, 0.7, 50, 5)).unwrap();
        let s = sim(&p);
        assert_eq!(s.stranded, 0, "{policy}");
        assert_eq!(
            s.completed_total + s.dropped_total,
            s.generated_total,
            "{policy}"
        );
        // SYNERGY counts the preempted requests its wait queue took back.
        if let Some(lands) = lands {
            assert_eq!(s.wait_queue_passes > 0, lands, "{policy}");
        }
    }
}

#[test]
fn same_seed_same_result() {
    let w = Workload::resolve("extreme-bimodal").unwrap();
    // Wall-clock figures differ from run to run.
    let strip = |mut p: PointResult| {
        if let Extra::Sim(s) = &mut p.extra {
            (s.wall_s, s.sim_requests_per_s) = (0.0, 0.0);
        }
        p
    };
    for policy in [
        "c-fcfs",
        "darc:samples=1000",
        "ts",
        "d-fcfs",
        "ws",
        "synergy:wqd=1",
        "tq",
    ] {
        let spec: PolicySpec = policy.parse().unwrap();
        let a = strip(simulate_point(&w, &spec, &cfg(4, &w, 0.8, 10, 42)).unwrap());
        let b = strip(simulate_point(&w, &spec, &cfg(4, &w, 0.8, 10, 42)).unwrap());
        let c = strip(simulate_point(&w, &spec, &cfg(4, &w, 0.8, 10, 43)).unwrap());
        assert_eq!(a, b, "{policy}: same seed, different result");
        assert_ne!(a.overall, c.overall, "{policy}: the seed has no effect");
    }
}

#[test]
fn c_fcfs_on_one_worker_matches_mm1_mean_response_time() {
    // M/M/1: mean response time = 1 / (mu - lambda).
    let w = Workload::resolve("exponential").unwrap();
    for load in [0.5, 0.8] {
        let mut c = cfg(1, &w, load, 400, 11);
        c.queue_capacity = 1 << 20;
        let p = simulate_point(&w, &"c-fcfs".parse().unwrap(), &c).unwrap();
        let mu = 1.0; // per us
        let expected_us = 1.0 / (mu - load * mu);
        let got = p.types[0].mean_latency_us;
        assert!(
            (got / expected_us - 1.0).abs() < 0.04,
            "load {load}: mean {got} us, M/M/1 says {expected_us} us"
        );
        assert_eq!(p.dropped, 0);
    }
}

#[test]
fn darc_never_runs_a_request_on_a_worker_reserved_for_a_shorter_group() {
    for (name, workers) in [("extreme-bimodal", 16), ("tpcc", 14), ("zippydb", 8)] {
        let w = Workload::resolve(name).unwrap();
        let ctx = PolicyContext {
            workers,
            types: w.type_infos(),
            queue_capacity: 4096,
        };
        let mut policy = "darc:samples=5000,delay=1"
            .parse::<PolicySpec>()
            .unwrap()
            .build(&ctx)
            .unwrap();
        let mut checked = 0u64;
        let mut probe = |p: &dyn Policy, worker: WorkerId, req: &Request| {
            let Some(r) = p.reservation() else { return };
            if let Some(v) = r.dispatch_violation(req.type_id, worker) {
                panic!("{name}: {v}");
            }
            checked += 1;
        };
        let c = cfg(workers, &w, 0.9, 30, 5);
        let names: Vec<String> = w.types.iter().map(|t| t.name.clone()).collect();
        let mut arrivals = psp_sim::PoissonArrivals::new(&w, c.rate_rps, c.duration_ns, c.seed);
        let out = Simulator::new(&mut *policy, workers, &names, 0)
            .with_probe(&mut probe)
            .run(&mut arrivals);
        assert!(
            checked > 5_000,
            "{name}: only {checked} dispatches under a reservation"
        );
        assert_eq!(out.generated, out.completed + out.dropped);
    }
}

#[test]
fn darc_learns_the_paper_reservation_for_extreme_bimodal_on_16_workers() {
    let w = Workload::resolve("extreme-bimodal").unwrap();
    let p = simulate_point(&w, &"darc".parse().unwrap(), &cfg(16, &w, 0.8, 100, 1)).unwrap();
    let r = sim(&p).reservation.as_ref().expect("reservation");
    let [short, long] = &r.groups[..] else {
        panic!("two groups: {r}")
    };
    // Demand 2.66 workers (R_long is estimated from ~250 samples per window, so the
    // learned demand wanders by ~10%), paper rounding: 3 reserved for short.
    assert_eq!(short.types, [0], "{r}");
    assert!((2.4..2.95).contains(&short.demand), "{r}");
    assert_eq!(short.reserved, [0, 1, 2], "{r}");
    assert_eq!(short.stealable, (3..16).collect::<Vec<_>>(), "{r}");
    assert_eq!(long.types, [1], "{r}");
    assert!((13.0..14.0).contains(&long.demand), "{r}");
    assert_eq!(long.reserved, (3..16).collect::<Vec<_>>(), "{r}");
    assert!(
        long.stealable.is_empty() && !short.spillway && !long.spillway,
        "{r}"
    );
}

/// Every figure of the simulator's `SimStats` reaches the point's `extra` under
/// its own name and with its value (the reservation as data whose text is the
/// simulator's): none is lost on the way into the schema's typed figures.
#[test]
fn the_point_carries_every_figure_of_the_simulator() {
    let w = Workload::resolve("extreme-bimodal").unwrap();
    let (p, stats) =
        psp_sim::simulate(&w, &"darc".parse().unwrap(), &cfg(16, &w, 0.8, 100, 1)).unwrap();
    let serde_json::Value::Object(stats) = serde_json::to_value(&stats).unwrap() else {
        panic!("a struct serializes to an object")
    };
    let doc = serde_json::to_value(&p).unwrap();
    let extra = doc["extra"].as_object().expect("an extra object");
    assert_eq!(
        stats.keys().collect::<Vec<_>>(),
        extra.keys().collect::<Vec<_>>()
    );
    for (k, v) in &stats {
        if k == "reservation" {
            // The simulator hands its reservation over as data now: the
            // point's reads back to the same text.
            let r: psp_metrics::ReservationLayout =
                serde_json::from_value(extra[k].clone()).unwrap();
            let sim: psp_metrics::ReservationLayout = serde_json::from_value(v.clone()).unwrap();
            assert_eq!(r.to_string(), sim.to_string());
            assert!(r.to_string().contains("reserved"), "{r}");
        } else {
            assert_eq!(&extra[k], v, "{k}");
        }
    }
}

/// One worker, explicit arrivals; returns per-type mean latency in us.
fn timeline(policy: &str, arrivals: &[(u64, u16, u64)]) -> Vec<f64> {
    let w = Workload::fixed("two", &[("short", 0.5, 0.5), ("long", 500.0, 0.5)]);
    let ctx = PolicyContext {
        workers: 1,
        types: w.type_infos(),
        queue_capacity: 16,
    };
    let spec = policy.parse::<PolicySpec>().unwrap();
    let mut p = spec.build(&ctx).unwrap();
    let trace = arrivals
        .iter()
        .map(|&(at_ns, type_id, service_ns)| Arrival {
            flow: 0,
            at_ns,
            type_id,
            service_ns,
        })
        .collect();
    let names = vec!["short".to_string(), "long".to_string()];
    let out = Simulator::new(&mut *p, 1, &names, 0)
        .with_preemption(PreemptionCost::for_policy(&spec))
        .run(&mut TraceArrivals::new(trace));
    assert_eq!(out.completed, arrivals.len() as u64);
    out.recorder
        .type_stats()
        .iter()
        .map(|t| t.mean_latency_us)
        .collect()
}

#[test]
fn synergy_timeline_is_exact() {
    // One worker. A long request (500 µs) at 0 declares itself long and is
    // armed with 5 µs (the starting short average) × 2 = 10 µs; a short one
    // arrives at 1 µs. At 10 µs the worker has queued work: preempted
    // (compiler interrupt: no propagation, 55 ns switch), the long request
    // goes to the wait queue, the worker serves its own queue first (the
    // short one, 10.055 -> 10.555), then resumes the long one, whose
    // quantum then renews (nothing queued) until it completes at 500.555.
    let lat = timeline("synergy", &[(0, 1, 500_000), (1_000, 0, 500)]);
    assert!((lat[0] - 9.555).abs() < 1e-9, "short {}", lat[0]);
    assert!((lat[1] - 500.555).abs() < 1e-9, "long {}", lat[1]);
    // With a free mechanism the switch costs nothing.
    let lat = timeline("synergy:mech=free", &[(0, 1, 500_000), (1_000, 0, 500)]);
    assert!((lat[0] - 9.5).abs() < 1e-9, "short {}", lat[0]);
    // A signal reaches the worker 2.962 µs after the timer's decision (the
    // request runs on meanwhile) and costs 2.075 µs of switch.
    let lat = timeline("synergy:mech=signal", &[(0, 1, 500_000), (1_000, 0, 500)]);
    assert!(
        (lat[0] - (12.962 + 2.075 + 0.5 - 1.0)).abs() < 1e-9,
        "short {}",
        lat[0]
    );
    // Without conditional preemption, alone: preempted at every quantum
    // (the fixed 5 µs without the dynamic quantum), back to its own queue,
    // resumed at once: 99 preemptions of 55 ns each.
    let lat = timeline("synergy:cp=off,qa=off,wq=off", &[(0, 1, 500_000)]);
    assert!(
        (lat[1] - (500.0 + 99.0 * 0.055)).abs() < 1e-6,
        "long {}",
        lat[1]
    );
}

#[test]
fn tiny_quanta_timeline_is_exact() {
    // One worker, 2 µs quanta: the long request yields at 2 µs to the short
    // one queued behind it (55 ns switch), which runs 2.055 -> 2.555; then
    // the long one, alone, never yields again.
    let lat = timeline("tq", &[(0, 1, 500_000), (1_000, 0, 500)]);
    assert!((lat[0] - 1.555).abs() < 1e-9, "short {}", lat[0]);
    assert!((lat[1] - 500.555).abs() < 1e-9, "long {}", lat[1]);
}

#[test]
fn time_sharing_timeline_is_exact() {
    let arrivals = [(0, 1, 500_000), (1_000, 0, 500)];
    // Long runs 0-5, switch 5-6, short 6-6.5 (latency 5.5), long resumes with 495 us
    // left: 99 quanta, preempted after each of the first 98 at 1 us each.
    let lat = timeline("ts:sq,quantum=5,cost=1", &arrivals);
    assert!((lat[0] - 5.5).abs() < 1e-9, "{lat:?}");
    assert!((lat[1] - 599.5).abs() < 1e-9, "{lat:?}");
    // Preempting only when a request waits: the long request then runs on.
    let lat = timeline("ts:sq,quantum=5,cost=1,preempt=waiting", &arrivals);
    assert!(
        (lat[0] - 5.5).abs() < 1e-9 && (lat[1] - 501.5).abs() < 1e-9,
        "{lat:?}"
    );
}

#[test]
fn preempt_on_block_timeline_is_exact() {
    // Short arrives at 10 us behind a long: the signal lands at 12, switch to 14,
    // short runs 14-14.5; the long resumes at 14.5 with 488 us left.
    let lat = timeline("ts-block:4", &[(0, 1, 500_000), (10_000, 0, 500)]);
    assert!((lat[0] - 4.5).abs() < 1e-9, "{lat:?}");
    assert!((lat[1] - 502.5).abs() < 1e-9, "{lat:?}");
    // Ideal preemption: the short request never waits.
    let lat = timeline("ts-block:0", &[(0, 1, 500_000), (10_000, 0, 500)]);
    assert!((lat[0] - 0.5).abs() < 1e-9, "{lat:?}");
}

#[test]
fn darc_idles_reserved_workers_rather_than_run_long_requests_on_them() {
    // Two workers; DARC-static reserves worker 0 for short requests. Two longs at
    // t=0: one runs on worker 1, the other waits although worker 0 is idle.
    let lat = {
        let w = Workload::fixed("two", &[("short", 0.5, 0.5), ("long", 500.0, 0.5)]);
        let ctx = PolicyContext {
            workers: 2,
            types: w.type_infos(),
            queue_capacity: 16,
        };
        let mut p = "darc-static:1"
            .parse::<PolicySpec>()
            .unwrap()
            .build(&ctx)
            .unwrap();
        let trace = vec![
            Arrival {
                flow: 0,
                at_ns: 0,
                type_id: 1,
                service_ns: 500_000,
            },
            Arrival {
                flow: 0,
                at_ns: 0,
                type_id: 1,
                service_ns: 500_000,
            },
            Arrival {
                flow: 0,
                at_ns: 1_000,
                type_id: 0,
                service_ns: 500,
            },
        ];
        let names = vec!["short".to_string(), "long".to_string()];
        let out = Simulator::new(&mut *p, 2, &names, 0).run(&mut TraceArrivals::new(trace));
        out.recorder
            .type_stats()
            .iter()
            .map(|t| t.mean_latency_us)
            .collect::<Vec<_>>()
    };
    assert!((lat[0] - 0.5).abs() < 1e-9, "short waited: {lat:?}");
    assert!((lat[1] - 750.0).abs() < 1e-9, "longs: {lat:?}"); // (500 + 1000) / 2
}

/// Holds every arrival until the next tick, then serves them FIFO on one worker:
/// a policy that only makes progress through `on_tick`.
struct TickBatcher {
    queue: std::collections::VecDeque<Request>,
    released: usize,
    free: bool,
    ticks: Vec<u64>,
}

impl Policy for TickBatcher {
    fn name(&self) -> String {
        "tick-batcher".into()
    }
    fn on_arrival(&mut self, req: Request, _now: u64) -> Result<(), Request> {
        self.queue.push_back(req);
        Ok(())
    }
    fn on_completion(&mut self, _: WorkerId, _: &Request, _: u64, _: u64) {
        self.free = true;
    }
    fn next_action(&mut self, _now: u64) -> Option<psp_core::Action> {
        if !self.free || self.released == 0 {
            return None;
        }
        let req = self.queue.pop_front()?;
        self.released -= 1;
        self.free = false;
        Some(psp_core::Action::Dispatch {
            worker: 0,
            req,
            quantum_ns: None,
        })
    }
    fn tick_interval(&self) -> Option<u64> {
        Some(10_000)
    }
    fn on_tick(&mut self, now: u64) {
        self.ticks.push(now);
        self.released = self.queue.len();
    }
    fn queued(&self) -> usize {
        self.queue.len()
    }
    fn idle_workers(&self) -> psp_core::WorkerSet {
        if self.free {
            psp_core::WorkerSet::range(0, 1)
        } else {
            psp_core::WorkerSet::EMPTY
        }
    }
}

#[test]
fn a_policy_that_asks_for_a_tick_gets_one_every_period_until_the_run_ends() {
    let mut p = TickBatcher {
        queue: Default::default(),
        released: 0,
        free: true,
        ticks: Vec::new(),
    };
    // Arrivals at 1, 12 and 35 µs, 1 µs each: each waits for the next tick.
    let trace = [1_000, 12_000, 35_000]
        .into_iter()
        .map(|at_ns| Arrival {
            flow: 0,
            at_ns,
            type_id: 0,
            service_ns: 1_000,
        })
        .collect();
    let names = vec!["only".to_string()];
    let out = Simulator::new(&mut p, 1, &names, 0).run(&mut TraceArrivals::new(trace));
    assert_eq!(out.completed, 3);
    assert_eq!(out.stranded, 0);
    let t = &out.recorder.type_stats()[0];
    // Latencies 9 + 1, 8 + 1, 5 + 1 µs: served at the ticks of 10, 20 and 40 µs.
    assert!(
        (t.mean_latency_us - (10.0 + 9.0 + 6.0) / 3.0).abs() < 1e-9,
        "{t:?}"
    );
    // Every tick on the period, until nothing else is left to happen: the
    // last request completes at 41 µs, so the tick of 50 µs is the last.
    assert!(
        p.ticks
            .iter()
            .enumerate()
            .all(|(i, &at)| at == (i as u64 + 1) * 10_000)
    );
    assert_eq!(p.ticks.last(), Some(&50_000), "{:?}", p.ticks);
}

#[test]
fn ticks_stop_when_a_policy_holds_requests_it_never_releases() {
    let mut p = TickBatcher {
        queue: Default::default(),
        released: 0,
        free: false, // never frees its worker: nothing is ever dispatched
        ticks: Vec::new(),
    };
    let trace = vec![Arrival {
        flow: 0,
        at_ns: 0,
        type_id: 0,
        service_ns: 1_000,
    }];
    let names = vec!["only".to_string()];
    let out = Simulator::new(&mut p, 1, &names, 0).run(&mut TraceArrivals::new(trace));
    assert_eq!(out.stranded, 1);
    assert_eq!(p.ticks.len(), 1_001, "bounded idle ticks");
}

#[test]
fn concord_protects_short_requests_from_long_ones_at_a_cost_to_them() {
    let w = Workload::resolve("extreme-bimodal").unwrap();
    let run = |policy: &str| {
        let c = cfg(16, &w, 0.7, 100, 3);
        simulate_point(&w, &policy.parse::<PolicySpec>().unwrap(), &c).unwrap()
    };
    let (fcfs, concord) = (run("c-fcfs"), run("concord"));
    assert_eq!(sim(&concord).stranded, 0);
    let short = |p: &PointResult| p.types[0].p999_slowdown;
    let long = |p: &PointResult| p.types[1].p999_latency_us;
    assert!(
        short(&concord) * 5.0 < short(&fcfs),
        "short p99.9 slowdown: concord {} vs c-fcfs {}",
        short(&concord),
        short(&fcfs)
    );
    // Long requests pay: they are sliced and wait behind short ones.
    assert!(
        long(&concord) > long(&fcfs),
        "{} vs {}",
        long(&concord),
        long(&fcfs)
    );
}

#[test]
fn work_stealing_sits_between_d_fcfs_and_c_fcfs_and_flows_decide_d_fcfs() {
    let w = Workload::resolve("high-bimodal").unwrap();
    let p999 = |policy: &str, flows: u32| {
        let mut c = cfg(8, &w, 0.7, 200, 5);
        c.flows = flows;
        c.queue_capacity = 1 << 16;
        let p = simulate_point(&w, &policy.parse().unwrap(), &c).unwrap();
        (p.overall.p999_slowdown, sim(&p).steals)
    };
    let (d, d_steals) = p999("d-fcfs", 512);
    let (ws, ws_steals) = p999("ws", 512);
    let (c, _) = p999("c-fcfs", 512);
    assert_eq!(d_steals, 0);
    assert!(ws_steals > 0);
    // Stealing recovers most of what per-worker queues lose to imbalance.
    assert!(ws < d / 2.0, "ws {ws} vs d-fcfs {d}");
    assert!(ws < c * 1.5, "ws {ws} vs c-fcfs {c}");
    // With as many flows as workers, some workers get none: d-FCFS saturates
    // the others; ws still serves everything.
    let (d_few, _) = p999("d-fcfs", 2);
    let (ws_few, _) = p999("ws", 2);
    assert!(
        d_few > d * 3.0,
        "d-fcfs on 2 flows {d_few} vs 512 flows {d}"
    );
    assert!(ws_few < c * 3.0, "ws on 2 flows {ws_few} vs c-fcfs {c}");
}

#[test]
fn synergy_reports_each_mechanism_and_the_ablation_switches_them_off() {
    let w = Workload::resolve("extreme-bimodal").unwrap();
    let run = |policy: &str| {
        let spec: PolicySpec = policy.parse().unwrap();
        let p = simulate_point(&w, &spec, &cfg(8, &w, 0.9, 100, 5)).unwrap();
        assert_eq!(sim(&p).stranded, 0, "{policy}");
        assert_eq!(
            sim(&p).generated_total,
            sim(&p).completed_total + sim(&p).dropped_total,
            "{policy}"
        );
        p
    };
    let p = run("synergy:wqd=1,cqf=5");
    let preempted = sim(&p).preemptions;
    assert!(preempted > 0, "never preempted");
    // Conditional preemption renews most expiries (docs/results.md's "SYNERGY" cites
    // this): more renewed than preempted.
    let avoided = sim(&p).preemptions_avoided;
    assert!(
        avoided > preempted,
        "renewed {avoided}, preempted {preempted}"
    );
    // Compiler interrupts land at once: every preemption passes through the
    // wait queue.
    assert_eq!(sim(&p).wait_queue_passes, preempted);
    assert!(sim(&p).steals > 0, "never stole");
    assert!(sim(&p).congestion_episodes > 0, "never congested");
    // Each switch turns its counter off.
    let p = run("synergy:ws=off,wq=off,cp=off,qa=off");
    assert_eq!(sim(&p).steals, 0);
    assert_eq!(sim(&p).wait_queue_passes, 0);
    assert_eq!(sim(&p).preemptions_avoided, 0, "cp=off renews nothing");
    assert_eq!(sim(&p).congestion_episodes, 0);
    assert!(sim(&p).preemptions > 0);
}

/// The queueing bound (`SimConfig::max_wait_ns`, `--max-wait`): at 150% of
/// capacity a request whose start would come past its type's bound is
/// dropped unrun and counted, every request still ends once (preemptive
/// policies too), and under the run-to-completion ones no request waited
/// longer than its bound.
/// Without the bound the same overload makes requests wait far longer.
#[test]
fn a_request_whose_start_comes_past_its_bound_is_dropped_unrun() {
    let w = Workload::resolve("high-bimodal").unwrap();
    let bound_ns = 500_000; // 5 long requests' service
    for policy in ["c-fcfs", "darc:samples=2000", "ws", "ts", "synergy"] {
        let spec: PolicySpec = policy.parse().unwrap();
        let unbounded = simulate_point(&w, &spec, &cfg(4, &w, 1.5, 50, 3)).unwrap();
        let mut c = cfg(4, &w, 1.5, 50, 3);
        c.max_wait_ns = vec![Some(bound_ns); w.types.len()];
        let p = simulate_point(&w, &spec, &c).unwrap();
        let s = sim(&p);
        assert_eq!(s.stranded, 0, "{policy}");
        assert_eq!(
            s.generated_total,
            s.completed_total + s.dropped_total,
            "{policy}: every request ends once"
        );
        assert!(s.expired_total <= s.dropped_total, "{policy}");
        assert_eq!(sim(&unbounded).expired_total, 0, "{policy}");
        // Run to completion (no preemption): a completed request waited at
        // most its bound, then served its service time.
        // Preemptive policies start a new request within a few quanta
        // (they may never pass the bound); run to completion, they do.
        if matches!(policy, "c-fcfs" | "darc:samples=2000" | "ws") {
            assert!(s.expired_total > 0, "{policy}: nothing expired at 150%");
            // p99.9: the recorder's histograms keep 3 significant digits.
            for t in &p.types {
                assert!(
                    t.p999_latency_us <= 1.01 * (bound_ns as f64 / 1e3 + t.mean_service_us),
                    "{policy} {}: p99.9 {} us past a {} us bound and {} us of service",
                    t.name,
                    t.p999_latency_us,
                    bound_ns / 1_000,
                    t.mean_service_us
                );
            }
            let worst = |p: &PointResult| {
                p.types
                    .iter()
                    .map(|t| t.p999_latency_us)
                    .fold(0.0, f64::max)
            };
            assert!(
                worst(&unbounded) > 2.0 * bound_ns as f64 / 1e3,
                "{policy}: without the bound the overload should queue far past it ({} us)",
                worst(&unbounded)
            );
        }
    }
}
