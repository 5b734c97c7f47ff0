//! Preemptive policies on the real runtime: requests on green threads,
//! preempted by the dispatcher at their quantum (`ts`, `concord`) or when a
//! short request is blocked (`ts-block`). Every request completes exactly once
//! whether preempted zero, one or many times, including under overload.
//!
//! Few workers and the parking idle strategy (never more spinning threads than
//! cores); service times of tens of microseconds and more.

use std::time::Duration;

use psp_core::{HeaderClassifier, PolicySpec};
use psp_runtime::handler::synthetic;
use psp_runtime::{RunReport, RuntimeConfig, SpinHandler, Spinner, SyntheticEncoder};
use psp_workload::{PoissonArrivals, Workload};

fn run(w: &Workload, policy: &str, load: f64, cap: usize, ms: u64) -> RunReport {
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
        Box::new(PoissonArrivals::new(
            w,
            load * w.peak_rps(2),
            ms * 1_000_000,
            11,
        )),
        Box::new(SyntheticEncoder),
        Box::new(classifier),
        0,
        // A preemption point every 2 µs of spinning.
        move |_| SpinHandler::new(spinner).with_point_interval(2_000),
    )
    .unwrap_or_else(|e| panic!("{policy}: {e}"))
}

#[test]
fn every_request_completes_exactly_once_whether_preempted_or_not() {
    let w = Workload::fixed("mix", &[("short", 20.0, 0.9), ("long", 1000.0, 0.1)]);
    for policy in [
        "ts:sq,quantum=50",
        "ts:quantum=50,requeue=head",
        "concord:quantum=50",
        "concord:k=1,quantum=50",
        "ts-block:0",
    ] {
        for (load, cap) in [(0.5, 4096), (3.0, 8)] {
            let r = run(&w, policy, load, cap, 300);
            let d = &r.dispatcher.counts;
            assert!(d.arrived > 100, "{policy}");
            assert_eq!(d.stranded, 0, "{policy} at {load}");
            assert_eq!(d.arrived, d.completed + d.shed, "{policy} at {load}");
            assert_eq!(d.admitted, d.completed, "{policy} at {load}");
            assert_eq!(
                r.served_per_worker.iter().sum::<u64>(),
                d.completed,
                "{policy}: each completion answered once"
            );
            assert_eq!(d.handler_errors, 0, "{policy} at {load}");
            let preemptions = r.dispatcher.policy_stats.preemptions;
            assert!(preemptions > 0, "{policy} at {load}: never preempted");
            // Service time is the sum of a request's segments: the long type's
            // mean stays its spin, however often it was cut.
            let long = &r.dispatcher.recorder.type_stats()[1];
            if long.count > 20 {
                assert!(
                    long.mean_service_us > 900.0 && long.mean_service_us < 2_000.0,
                    "{policy} at {load}: long mean service {} us",
                    long.mean_service_us
                );
            }
            if load > 1.0 {
                assert!(d.shed > 0, "{policy}: overload shed nothing");
            }
        }
    }
}

#[test]
fn a_handler_that_cannot_be_preempted_is_refused_for_a_preemptive_policy() {
    struct Plain;
    impl psp_runtime::Handler for Plain {
        fn handle(
            &mut self,
            _: &mut psp_runtime::RequestContext<'_>,
        ) -> Result<(), psp_runtime::HandlerError> {
            Ok(())
        }
    }
    let w = Workload::fixed("one", &[("a", 10.0, 1.0)]);
    let spec: PolicySpec = "ts".parse().unwrap();
    let r = psp_runtime::run(
        &RuntimeConfig {
            workers: 1,
            ..Default::default()
        },
        &spec,
        w.type_infos(),
        Box::new(PoissonArrivals::new(&w, 1000.0, 1_000_000, 1)),
        Box::new(SyntheticEncoder),
        Box::new(HeaderClassifier {
            offset: synthetic::TYPE_OFFSET,
            types: 1,
        }),
        0,
        |_| Plain,
    );
    assert!(
        matches!(r, Err(psp_runtime::RuntimeError::Preemptive(_))),
        "{:?}",
        r.err()
    );
}
