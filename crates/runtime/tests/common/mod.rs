//! What the runtime's end-to-end tests share: a run of the calibrated spin
//! application on 2 workers with the parking idle strategy.

use std::time::Duration;

use psp_core::{HeaderClassifier, PolicySpec};
use psp_runtime::handler::synthetic;
use psp_runtime::{RunReport, RuntimeConfig, SpinHandler, Spinner, SyntheticEncoder};
use psp_workload::{ArrivalSource, Workload};

/// Runs `policy` over `arrivals` of `w` on 2 workers serving the spin
/// application (with a preemption point every `point_ns` of spinning, when
/// given), with queues of `cap` and a 20 s drain.
pub fn run_spin(
    w: &Workload,
    policy: &str,
    arrivals: impl ArrivalSource + Send + 'static,
    cap: usize,
    point_ns: Option<u64>,
) -> RunReport {
    let spec: PolicySpec = policy.parse().unwrap();
    let classifier = HeaderClassifier {
        offset: synthetic::TYPE_OFFSET,
        types: w.types.len() as u16,
    };
    let spinner = Spinner::calibrate(Duration::from_millis(20));
    let cfg = RuntimeConfig {
        workers: 2,
        queue_capacity: cap,
        drain_timeout: Duration::from_secs(20),
        ..Default::default()
    };
    psp_runtime::run(
        &cfg,
        &spec,
        w.type_infos(),
        Box::new(arrivals),
        Box::new(SyntheticEncoder),
        Box::new(classifier),
        0,
        move |_| match point_ns {
            Some(ns) => SpinHandler::new(spinner).with_point_interval(ns),
            None => SpinHandler::new(spinner),
        },
    )
    .unwrap_or_else(|e| panic!("{policy}: {e}"))
}

/// Tests that time a running server take turns, across all of this binary's
/// modules: each expects the 2-core machine's cores to itself (more spinning
/// threads than cores turn its measurements into noise). One lock for the
/// whole binary keeps the turns the separate test binaries used to give.
#[allow(dead_code)] // the `integration` binary times no server
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}
