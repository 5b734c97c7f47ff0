//! Worker 0 on the dispatcher's thread (`InlineWorker`): every request is
//! answered exactly once, worker 0 serves its share on the dispatcher's
//! thread, a panic there ends the run with an error, and a policy that
//! preempts is refused.

use std::time::Duration;

use psp_core::HeaderClassifier;
use psp_runtime::handler::synthetic;
use psp_runtime::{
    Handler, HandlerError, IdleStrategy, InlineWorker, RequestContext, RuntimeConfig, RuntimeError,
    SpinHandler, Spinner, SyntheticEncoder,
};
use psp_workload::{PoissonArrivals, Workload};

use crate::hardening::within;

fn cfg(workers: usize) -> RuntimeConfig {
    RuntimeConfig {
        workers,
        queue_capacity: 256,
        // No more spinning threads than cores in a test.
        idle: IdleStrategy::SpinPark {
            spin_us: 0,
            park_us: 1_000,
        },
        drain_timeout: Duration::from_secs(10),
        raise_priority: false,
        inline_worker: InlineWorker::On,
        ..Default::default()
    }
}

fn run<H: Handler + 'static>(
    policy: &str,
    workers: usize,
    make: impl FnMut(usize) -> H + Send + 'static,
) -> Result<psp_runtime::RunReport, RuntimeError> {
    run_with(cfg(workers), policy, make)
}

fn run_with<H: Handler + 'static>(
    cfg: RuntimeConfig,
    policy: &str,
    make: impl FnMut(usize) -> H + Send + 'static,
) -> Result<psp_runtime::RunReport, RuntimeError> {
    let workers = cfg.workers;
    let w = Workload::fixed("mix", &[("short", 5.0, 0.9), ("long", 50.0, 0.1)]);
    let arrivals = Box::new(PoissonArrivals::new(
        &w,
        0.4 * w.peak_rps(workers),
        200_000_000,
        3,
    ));
    let types = w.type_infos();
    let policy = policy.to_string();
    within(Duration::from_secs(60), move || {
        psp_runtime::run(
            &cfg,
            &policy.parse().unwrap(),
            types,
            arrivals,
            Box::new(SyntheticEncoder),
            Box::new(HeaderClassifier {
                offset: synthetic::TYPE_OFFSET,
                types: 2,
            }),
            0,
            make,
        )
    })
}

#[test]
fn worker_0_on_the_dispatchers_thread_answers_every_request_once() {
    let spinner = Spinner::calibrate(Duration::from_millis(10));
    for (policy, workers) in [("c-fcfs", 1), ("c-fcfs", 2), ("darc:samples=20", 2)] {
        let r = run(policy, workers, move |_| SpinHandler::new(spinner)).expect("run");
        let c = &r.dispatcher.counts;
        assert!(r.inline_worker, "{policy}");
        assert!(c.arrived > 1_000, "{policy}: {c:?}");
        assert_eq!(c.arrived, c.completed + c.shed, "{policy}: {c:?}");
        assert_eq!(c.stranded, 0, "{policy}: {c:?}");
        assert_eq!(
            r.served_per_worker.iter().sum::<u64>(),
            c.completed,
            "{policy}: one job per request here"
        );
        assert!(
            r.served_per_worker[0] > 0,
            "{policy}: worker 0 served nothing: {:?}",
            r.served_per_worker
        );
    }
}

struct PanickingHandler(u32);

impl Handler for PanickingHandler {
    fn handle(&mut self, _: &mut RequestContext<'_>) -> Result<(), HandlerError> {
        self.0 += 1;
        assert!(self.0 < 50, "injected handler fault");
        Ok(())
    }
}

#[test]
fn a_panic_in_worker_0_on_the_dispatchers_thread_ends_the_run_with_an_error() {
    let err = run("c-fcfs", 1, |_| PanickingHandler(0)).expect_err("a panic must fail the run");
    assert!(err.to_string().contains("panicked"), "{err}");
}

#[test]
fn a_preemptive_policy_cannot_put_worker_0_on_the_dispatchers_thread() {
    let spinner = Spinner::calibrate(Duration::from_millis(1));
    for policy in ["ts", "synergy", "d-fcfs"] {
        let err = run(policy, 2, move |_| SpinHandler::new(spinner))
            .expect_err("refused before it starts");
        assert!(
            matches!(err, RuntimeError::Unsupported(_)) && err.to_string().contains("worker 0"),
            "{policy}: {err}"
        );
    }
}

#[test]
fn the_thread_layout_names_each_thread_and_its_core() {
    let w = Workload::fixed("mix", &[("short", 5.0, 0.9), ("long", 50.0, 0.1)]);
    let describe = |inline: InlineWorker, cores: Vec<usize>| {
        let cfg = RuntimeConfig {
            inline_worker: inline,
            cores: Some(cores),
            ..cfg(2)
        };
        psp_runtime::describe_threads(&cfg, &"c-fcfs".parse().unwrap(), w.type_infos())
            .expect("a layout")
    };
    // Three threads on two cores: worker 0 moves onto the dispatcher's.
    assert_eq!(
        describe(InlineWorker::Auto, vec![0, 1, 1]),
        "dispatcher and worker 0 on core 0, worker 1 on core 1 (2 threads, 2 cores)"
    );
    assert_eq!(
        describe(InlineWorker::Off, vec![0, 1, 1]),
        "dispatcher on core 0, worker 0 on core 1, worker 1 on core 1 (3 threads, 2 cores; polling passes yield)"
    );
}

/// Records which thread served each type, then spins as the synthetic
/// handler does.
struct WhereServed {
    spin: SpinHandler,
    seen: std::sync::Arc<std::sync::Mutex<std::collections::BTreeSet<(u16, String)>>>,
}

impl Handler for WhereServed {
    fn handle(&mut self, ctx: &mut RequestContext<'_>) -> Result<(), HandlerError> {
        let thread = std::thread::current().name().unwrap_or("?").to_string();
        self.seen.lock().unwrap().insert((ctx.type_id, thread));
        self.spin.handle(ctx)
    }
}

/// Jobs of an open-ended type that the policy gives worker 0 run on its
/// spare thread (the dispatcher's thread goes on reading), the others on
/// the dispatcher's thread, and every request is still answered exactly
/// once: worker 0's handler, I/O and completions pass between the two
/// threads for every open-ended job (about a hundred a run).
#[test]
fn worker_0s_open_ended_jobs_run_on_its_spare_thread_and_every_request_is_answered_once() {
    let spinner = Spinner::calibrate(Duration::from_millis(10));
    for (policy, workers) in [("c-fcfs", 1), ("c-fcfs", 2)] {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(std::collections::BTreeSet::new()));
        let record = seen.clone();
        let cfg = RuntimeConfig {
            open_ended_types: vec![1],
            ..cfg(workers)
        };
        let r = run_with(cfg, policy, move |_| WhereServed {
            spin: SpinHandler::new(spinner),
            seen: record.clone(),
        })
        .expect("run");
        let c = &r.dispatcher.counts;
        assert!(r.inline_worker, "{policy}");
        assert!(c.arrived > 1_000, "{policy}: {c:?}");
        assert_eq!(c.arrived, c.completed + c.shed, "{policy}: {c:?}");
        assert_eq!(c.stranded, 0, "{policy}: {c:?}");
        let seen = seen.lock().unwrap();
        assert!(
            seen.contains(&(1, "psp-worker-0-spare".to_string())),
            "{policy}: {seen:?}"
        );
        assert!(
            seen.contains(&(0, "psp-dispatcher".to_string())),
            "{policy}: {seen:?}"
        );
        assert!(
            !seen.contains(&(1, "psp-dispatcher".to_string())),
            "{policy}: an open-ended job ran on the dispatcher's thread: {seen:?}"
        );
        assert!(
            !seen.contains(&(0, "psp-worker-0-spare".to_string())),
            "{policy}: {seen:?}"
        );
    }
}
