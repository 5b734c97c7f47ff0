//! The system cost model: off, it changes nothing; on, the dispatcher is a
//! serial resource that caps a centralized policy, the network adds its latency,
//! and every request is still accounted for. Also the simulated classifier.

use psp_core::{ClassifierKind, PolicySpec};
use psp_metrics::{PointResult, SimExtra};
use psp_sim::{SimConfig, SystemCosts, Workload, simulate_point};

fn cfg(workers: usize, rate_rps: f64, duration_ms: u64, system: SystemCosts) -> SimConfig {
    SimConfig {
        workers,
        rate_rps,
        duration_ns: duration_ms * 1_000_000,
        warmup_fraction: 0.1,
        seed: 1,
        flows: psp_sim::DEFAULT_FLOWS,
        queue_capacity: 4096,
        system,
        classifier: ClassifierKind::Header,
        series_window_ns: None,
        max_wait_ns: Vec::new(),
    }
}

/// The simulator's own figures of a point.
fn sim(p: &PointResult) -> &SimExtra {
    p.extra.sim().expect("a simulated point")
}

fn request_cost(ns: u64) -> SystemCosts {
    let mut c = SystemCosts::default();
    c.set("request", ns).unwrap();
    c
}

/// Figures recorded by the simulator before the cost model existed (commit
/// 02eec9f, `psp sim --policy P --load 0.85 --duration 50ms --workers 16`):
/// the ideal system must reproduce them exactly, down to the mean's last bit.
#[test]
fn the_ideal_system_reproduces_the_simulator_before_the_cost_model_bit_for_bit() {
    let w = Workload::resolve("extreme-bimodal").unwrap();
    // policy, overall p99.9 slowdown, (short, long): p99.9 us, mean us; preemptions.
    type Before = (&'static str, f64, [(f64, f64); 2], u64);
    let before: &[Before] = &[
        (
            "c-fcfs",
            686.079,
            [(343.039, 29.884944370332814), (841.215, 529.2933121801433)],
            0,
        ),
        (
            "darc",
            210.687,
            [(105.343, 1.8848595401359607), (1055.743, 562.6823705220062)],
            0,
        ),
        (
            "ts",
            12.679,
            [(6.339, 2.0573999173012645), (2390.015, 994.5515353121801)],
            107_316,
        ),
        (
            "ts-block:1",
            52.703,
            [(26.351, 9.119737214923184), (24002.559, 7255.30374616172)],
            404_948,
        ),
    ];
    for &(policy, overall, types, preemptions) in before {
        let spec: PolicySpec = policy.parse().unwrap();
        let c = cfg(16, 0.85 * w.peak_rps(16), 50, SystemCosts::default());
        let p = simulate_point(&w, &spec, &c).unwrap();
        assert_eq!(p.overall.count, 204_124, "{policy}");
        assert_eq!(p.overall.p999_slowdown, overall, "{policy}");
        for (t, (p999, mean)) in p.types.iter().zip(types) {
            assert_eq!(
                (t.p999_latency_us, t.mean_latency_us),
                (p999, mean),
                "{policy} {}",
                t.name
            );
        }
        assert_eq!(sim(&p).preemptions, preemptions, "{policy}");
        assert_eq!(p.dropped, 0, "{policy}");
    }
}

#[test]
fn a_dispatcher_cost_caps_a_centralized_policy_at_one_over_the_cost() {
    let w = Workload::resolve("fixed").unwrap(); // 1 us requests
    let per_request_ns = 500; // cap: 2 M requests/s; 14 workers could do 14 M
    for policy in ["c-fcfs", "darc:samples=1000", "ts-block:1"] {
        let spec: PolicySpec = policy.parse().unwrap();
        let cap = 1e9 / per_request_ns as f64;
        // Below the cap: everything served, no loss.
        let below = simulate_point(
            &w,
            &spec,
            &cfg(14, 0.8 * cap, 50, request_cost(per_request_ns)),
        )
        .unwrap();
        assert_eq!(below.dropped, 0, "{policy} below the cap");
        assert!(below.overall.p999_slowdown < 10.0, "{policy} below the cap");
        // Above it: throughput is held at or under 1 / cost, the rest is lost.
        let above = simulate_point(
            &w,
            &spec,
            &cfg(14, 1.5 * cap, 50, request_cost(per_request_ns)),
        )
        .unwrap();
        assert!(
            above.achieved_rps <= 1.001 * cap && above.achieved_rps > 0.5 * cap,
            "{policy}: {} achieved against a cap of {cap}",
            above.achieved_rps
        );
        assert!(above.dropped > 0, "{policy} above the cap dropped nothing");
        // The same offered load on the ideal system is served in full.
        let ideal =
            simulate_point(&w, &spec, &cfg(14, 1.5 * cap, 50, SystemCosts::default())).unwrap();
        assert_eq!(ideal.dropped, 0, "{policy} on the ideal system");
    }
}

#[test]
fn a_decentralized_policy_pays_no_dispatcher() {
    let w = Workload::resolve("fixed").unwrap();
    let costly = request_cost(1000); // a 1 M/s dispatcher
    let spec: PolicySpec = "d-fcfs".parse().unwrap();
    let a = simulate_point(&w, &spec, &cfg(14, 4e6, 20, costly)).unwrap();
    let b = simulate_point(&w, &spec, &cfg(14, 4e6, 20, SystemCosts::default())).unwrap();
    assert_eq!(a.types[0].mean_latency_us, b.types[0].mean_latency_us);
    assert_eq!((a.dropped, a.achieved_rps), (b.dropped, b.achieved_rps));
}

#[test]
fn the_network_adds_its_latency_to_every_response() {
    let w = Workload::resolve("fixed").unwrap();
    let mut net = SystemCosts::default();
    net.set("network", 10_000).unwrap();
    for policy in ["c-fcfs", "d-fcfs", "ts"] {
        let spec: PolicySpec = policy.parse().unwrap();
        let a = simulate_point(&w, &spec, &cfg(4, 1e6, 20, net)).unwrap();
        let b = simulate_point(&w, &spec, &cfg(4, 1e6, 20, SystemCosts::default())).unwrap();
        let (ta, tb) = (&a.types[0], &b.types[0]);
        assert!(
            (ta.mean_latency_us - tb.mean_latency_us - 10.0).abs() < 1e-6,
            "{policy}: {} vs {}",
            ta.mean_latency_us,
            tb.mean_latency_us
        );
        assert_eq!(ta.count, tb.count);
    }
}

#[test]
fn with_costs_every_request_is_completed_or_counted_as_dropped() {
    let w = Workload::resolve("high-bimodal").unwrap();
    let mut small_ring = SystemCosts::preset("shinjuku").unwrap();
    small_ring.set("ingress", 16).unwrap();
    // Receiving alone caps the dispatcher at 100k requests/s, below 3x the peak
    // of 4 workers (237k/s): the ring must fill.
    small_ring.set("arrival", 10_000).unwrap();
    for policy in [
        "c-fcfs",
        "darc:samples=2000",
        "ts",
        "ts-block:1",
        "edf",
        "d-fcfs",
    ] {
        let spec: PolicySpec = policy.parse().unwrap();
        for load in [0.5, 3.0] {
            let p =
                simulate_point(&w, &spec, &cfg(4, load * w.peak_rps(4), 20, small_ring)).unwrap();
            let (gen_, done, drop) = (
                sim(&p).generated_total,
                sim(&p).completed_total,
                sim(&p).dropped_total,
            );
            assert_eq!(sim(&p).stranded, 0, "{policy} at {load}");
            assert_eq!(gen_, done + drop, "{policy} at {load}");
            if load > 1.0 && policy != "d-fcfs" {
                assert!(
                    sim(&p).ingress_dropped_total > 0,
                    "{policy} at {load}: the 16-slot ring never filled"
                );
            }
        }
    }
}

#[test]
fn a_random_classifier_hides_types_from_the_policy_but_not_from_the_report() {
    let w = Workload::resolve("extreme-bimodal").unwrap();
    let spec: PolicySpec = "darc:samples=2000".parse().unwrap();
    let mut c = cfg(16, 0.5 * w.peak_rps(16), 50, SystemCosts::default());
    let header = simulate_point(&w, &spec, &c).unwrap();
    c.classifier = ClassifierKind::Random(7);
    let random = simulate_point(&w, &spec, &c).unwrap();
    // Latency is reported under the true type: same counts per type.
    let counts = |p: &PointResult| p.types.iter().map(|t| t.count).collect::<Vec<_>>();
    assert_eq!(counts(&header), counts(&random));
    assert_eq!(sim(&random).classifier, "random");
    // The policy saw two types of equal mean: it cannot keep long requests off
    // the short requests' workers, so short requests wait behind them.
    assert!(
        random.types[0].p999_latency_us > 5.0 * header.types[0].p999_latency_us,
        "short p99.9: random {} vs header {}",
        random.types[0].p999_latency_us,
        header.types[0].p999_latency_us
    );
}
