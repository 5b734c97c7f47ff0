//! The real applications on the real runtime: generated requests through the
//! dispatcher and two workers under six of the runtime's non-preemptive
//! policies (`POLICIES`; not `ws`, `darc+`, nor the preemptive `ts`,
//! `ts-block`, `concord`, `synergy`, `tq`), every request answered, nothing
//! refused; TPC-C's consistency conditions hold after a concurrent run.

use std::time::Duration;

use psp_apps::tpcc::{TpccConfig, TpccService};
use psp_apps::{AppConfig, KvConfig, Service};
use psp_core::{HeaderClassifier, PolicySpec};
use psp_runtime::{IdleStrategy, RunReport, RuntimeConfig};
use psp_workload::{PoissonArrivals, Workload};

/// The policies checked (the module comment names those left out).
const POLICIES: [&str; 6] = [
    "c-fcfs",
    "d-fcfs",
    "fp",
    "edf",
    "darc-static:1",
    "darc:samples=200",
];

fn names(w: &Workload) -> Vec<String> {
    w.types.iter().map(|t| t.name.clone()).collect()
}

/// Runs `w` at `rps` for `ms` on two workers under `policy`, served by `service`
/// with bodies from `app`'s encoder.
fn run(
    app: &AppConfig,
    service: &dyn Service,
    w: &Workload,
    policy: &str,
    rps: f64,
    ms: u64,
) -> RunReport {
    let cfg = RuntimeConfig {
        workers: 2,
        queue_capacity: 4096,
        idle: IdleStrategy::default(),
        drain_timeout: Duration::from_secs(20),
        raise_priority: false,
        ..RuntimeConfig::default()
    };
    let spec: PolicySpec = policy.parse().unwrap();
    psp_runtime::run(
        &cfg,
        &spec,
        w.type_infos(),
        Box::new(PoissonArrivals::new(w, rps, ms * 1_000_000, 3)),
        app.encoder(&names(w), 5).unwrap(),
        Box::new(HeaderClassifier {
            offset: psp_runtime::generator::TYPE_OFFSET,
            types: w.types.len() as u16,
        }),
        0,
        |i| service.handler(i),
    )
    .unwrap_or_else(|e| panic!("{policy}: {e}"))
}

fn assert_all_served(r: &RunReport, policy: &str) {
    let c = r.dispatcher.counts;
    assert!(c.arrived > 0, "{policy}");
    assert_eq!(c.completed, c.arrived, "{policy}: {c:?}");
    assert_eq!(
        (c.shed, c.handler_errors, c.bad_bodies, c.stranded),
        (0, 0, 0, 0),
        "{policy}: {c:?}"
    );
}

#[test]
fn the_key_value_service_runs_under_every_policy() {
    let w = Workload::fixed(
        "kv",
        &[("GET", 2.0, 0.6), ("SCAN", 300.0, 0.1), ("PUT", 5.0, 0.3)],
    );
    let app = AppConfig::new(KvConfig {
        keys: 500,
        ..KvConfig::default()
    });
    let service = app.start(&names(&w)).unwrap();
    for policy in POLICIES {
        let r = run(&app, &*service, &w, policy, 1_000.0, 150);
        assert_all_served(&r, policy);
        // Every operation was served (and recorded under its type).
        let stats = r.dispatcher.recorder.type_stats();
        assert!(stats.iter().all(|t| t.count > 0), "{policy}: {stats:?}");
    }
}

#[test]
fn tpcc_stays_consistent_under_concurrent_workers() {
    let w = Workload::resolve("tpcc").unwrap();
    let config = TpccConfig {
        warehouses: 2,
        full_scale: false,
        seed: 4,
    };
    let app = AppConfig::new(config);
    let ops = app.bind(&names(&w)).unwrap();
    let service = TpccService::load(&config, ops).unwrap();
    let before = service.database().stats();
    let mut new_orders = 0;
    for policy in ["c-fcfs", "darc:samples=200"] {
        let r = run(&app, &service, &w, policy, 20_000.0, 150);
        assert_all_served(&r, policy);
        new_orders += r.dispatcher.counts.completed;
    }
    service
        .database()
        .check_consistency()
        .unwrap_or_else(|e| panic!("{e}"));
    let after = service.database().stats();
    assert!(after.orders > before.orders, "NewOrders committed");
    assert!(after.history > before.history, "Payments committed");
    assert!(after.orders - before.orders < new_orders);
    assert!(
        service.finish().unwrap().contains("hold"),
        "{:?}",
        service.finish()
    );
}
