//! The queueing bound (`RuntimeConfig::max_wait`): a request whose turn
//! comes after its type's bound is dropped unrun and counted expired (and
//! shed), never served late; every other request is served; nothing is lost
//! or counted twice. Under the central executor (c-FCFS, DARC, which must
//! not learn a service time from a dropped request) and the worker queues
//! (d-FCFS).

use std::time::Duration;

use psp_core::HeaderClassifier;
use psp_runtime::handler::synthetic;
use psp_runtime::{IdleStrategy, RuntimeConfig, SpinHandler, Spinner, SyntheticEncoder};
use psp_workload::{Arrival, TraceArrivals, Workload};

use crate::hardening::within;

/// Requests in the burst, each `SERVICE` long, all due at once.
const BURST: u64 = 40;
const SERVICE: Duration = Duration::from_millis(50);
/// The bound: the burst's first request starts at once, the second and
/// third after one and two services (50 and 100 ms), the fourth not before
/// 150 ms, past it.
const BOUND: Duration = Duration::from_millis(120);

#[test]
fn a_request_whose_turn_comes_past_its_bound_is_dropped_unrun_and_counted() {
    let spinner = Spinner::calibrate(Duration::from_millis(10));
    for policy in ["c-fcfs", "darc:samples=2", "d-fcfs"] {
        let w = Workload::fixed("one", &[("x", 50_000.0, 1.0)]);
        let arrivals = Box::new(TraceArrivals::new(
            (0..BURST)
                .map(|_| Arrival {
                    flow: 0,
                    at_ns: 0,
                    type_id: 0,
                    service_ns: SERVICE.as_nanos() as u64,
                })
                .collect(),
        ));
        let cfg = RuntimeConfig {
            workers: 1,
            queue_capacity: 64,
            idle: IdleStrategy::SpinPark {
                spin_us: 0,
                park_us: 1_000,
            },
            drain_timeout: Duration::from_secs(20),
            raise_priority: false,
            max_wait: vec![Some(BOUND)],
            ..Default::default()
        };
        let types = w.type_infos();
        let spec = policy.parse().unwrap();
        let r = within(Duration::from_secs(60), move || {
            psp_runtime::run(
                &cfg,
                &spec,
                types,
                arrivals,
                Box::new(SyntheticEncoder),
                Box::new(HeaderClassifier {
                    offset: synthetic::TYPE_OFFSET,
                    types: 1,
                }),
                0,
                move |_| SpinHandler::new(spinner),
            )
        })
        .unwrap_or_else(|e| panic!("{policy}: {e}"));
        let c = r.dispatcher.counts;
        assert_eq!(c.arrived, BURST, "{policy}: {c:?}");
        assert_eq!(c.admitted, BURST, "{policy}: {c:?}");
        // Every request ends once: served, or expired (and counted shed).
        assert_eq!(c.completed + c.expired, BURST, "{policy}: {c:?}");
        assert_eq!(c.shed, c.expired, "{policy}: {c:?}");
        assert_eq!(c.stranded, 0, "{policy}: {c:?}");
        assert_eq!(c.handler_errors, 0, "{policy}: {c:?}");
        // No request started past its bound: at most three could start in
        // time (a slower or loaded machine starts fewer, never more).
        assert!(
            c.completed <= 3,
            "{policy}: {} served of {BURST}: {c:?}",
            c.completed
        );
        assert_eq!(
            r.served_per_worker.iter().sum::<u64>(),
            BURST,
            "{policy}: a dropped request is answered too"
        );
    }
}
