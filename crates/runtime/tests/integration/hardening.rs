//! Faults the runtime must survive without hanging or lying: a panicking
//! dispatcher or worker ends the run with an error (workers released and
//! joined), a handler that never returns does not hold shutdown past the drain
//! timeout and its request stays unanswered, and every latency is measured on
//! one clock (never shorter than the request's own service time).
//!
//! Each run happens on a helper thread with a deadline, so a regression fails
//! the test instead of hanging the suite.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use psp_core::{HeaderClassifier, PolicySpec};
use psp_runtime::handler::synthetic;
use psp_runtime::idle::Wakeup;
use psp_runtime::{
    DispatchCore, DispatcherReport, FrontEnd, GeneratedIo, Generator, Handler, HandlerError,
    IdleStrategy, Job, JobIo, RequestContext, RunReport, RuntimeConfig, RuntimeError, SpinHandler,
    Spinner, SyntheticEncoder, WrappedIo,
};
use psp_workload::{Arrival, ArrivalSource, PoissonArrivals, TraceArrivals, Workload};

/// Runs `f` on its own thread; fails the test if it takes longer than `limit`.
pub(crate) fn within<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("the run did not end within {limit:?}: it hangs"))
}

fn cfg(workers: usize) -> RuntimeConfig {
    RuntimeConfig {
        workers,
        queue_capacity: 64,
        idle: IdleStrategy::default(),
        drain_timeout: Duration::from_millis(200),
        ..Default::default()
    }
}

fn one_type() -> Workload {
    Workload::fixed("one", &[("x", 50.0, 1.0)])
}

fn generator(arrivals: Box<dyn ArrivalSource + Send>) -> Generator {
    Generator::new(
        Box::new(HeaderClassifier {
            offset: synthetic::TYPE_OFFSET,
            types: 1,
        }),
        arrivals,
        Box::new(SyntheticEncoder),
        psp_runtime::max_in_flight(&cfg(2), 1),
        0,
        IdleStrategy::default(),
    )
}

fn trace(n: u64, gap_ns: u64, service_ns: u64) -> Box<dyn ArrivalSource + Send> {
    Box::new(TraceArrivals::new(
        (0..n)
            .map(|i| Arrival {
                flow: 0,
                at_ns: i * gap_ns,
                type_id: 0,
                service_ns,
            })
            .collect(),
    ))
}

/// The generator, until its `fail_at`-th pass, which panics.
struct PanickingFrontEnd {
    inner: Generator,
    passes: u32,
    fail_at: u32,
}

impl FrontEnd for PanickingFrontEnd {
    type Report = DispatcherReport;
    type Io = GeneratedIo;
    fn worker_io(&mut self, worker: usize) -> GeneratedIo {
        self.inner.worker_io(worker)
    }
    fn begin(&mut self, core: &mut DispatchCore, now: u64) {
        self.inner.begin(core, now);
    }
    fn poll(&mut self, core: &mut DispatchCore, now: u64) -> bool {
        self.passes += 1;
        assert!(self.passes < self.fail_at, "injected dispatcher fault");
        self.inner.poll(core, now)
    }
    fn input_ended(&self) -> bool {
        self.inner.input_ended()
    }
    fn idle(&mut self, core: &DispatchCore, me: &Wakeup, now: u64, worked: bool) {
        self.inner.idle(core, me, now, worked);
    }
    fn finish(self, core: DispatcherReport) -> DispatcherReport {
        core
    }
}

#[test]
fn a_dispatcher_panic_ends_the_run_with_an_error() {
    let w = one_type();
    let spinner = Spinner::calibrate(Duration::from_millis(10));
    let r: Result<RunReport, RuntimeError> = within(Duration::from_secs(30), move || {
        let inner = generator(trace(1_000, 100_000, 20_000));
        let front = PanickingFrontEnd {
            inner,
            passes: 0,
            fail_at: 50,
        };
        psp_runtime::start(
            &cfg(2),
            &"c-fcfs".parse::<PolicySpec>().unwrap(),
            w.type_infos(),
            |_| SpinHandler::new(spinner),
            front,
        )
    });
    let err = r.expect_err("a panicking dispatcher must fail the run");
    assert!(
        err.to_string().contains("dispatcher panicked")
            && err.to_string().contains("injected dispatcher fault"),
        "{err}"
    );
}

/// Panics on its `fail_at`-th request.
struct PanickingHandler {
    seen: u32,
    fail_at: u32,
}

impl Handler for PanickingHandler {
    fn handle(&mut self, _: &mut RequestContext<'_>) -> Result<(), HandlerError> {
        self.seen += 1;
        assert!(self.seen < self.fail_at, "injected handler fault");
        Ok(())
    }
}

#[test]
fn a_worker_panic_ends_the_run_with_an_error() {
    let w = one_type();
    // A long schedule: without the failure flag the run would last 100 s.
    let r = within(Duration::from_secs(30), move || {
        let g = generator(trace(100_000, 1_000_000, 1_000));
        psp_runtime::start(
            &cfg(2),
            &"c-fcfs".parse::<PolicySpec>().unwrap(),
            w.type_infos(),
            |_| PanickingHandler {
                seen: 0,
                fail_at: 5,
            },
            g,
        )
    });
    let err = r.expect_err("a panicking worker must fail the run");
    assert!(
        err.to_string().contains("worker") && err.to_string().contains("injected handler fault"),
        "{err}"
    );
}

/// Blocks in its handler until the test releases it; its I/O counts answers.
struct BlockingHandler {
    release: Arc<std::sync::Barrier>,
}

impl Handler for BlockingHandler {
    fn handle(&mut self, _: &mut RequestContext<'_>) -> Result<(), HandlerError> {
        self.release.wait();
        Ok(())
    }
}

struct CountingIo(GeneratedIo, Arc<AtomicU64>);

impl JobIo for CountingIo {
    fn request<'a>(&'a self, job: &'a Job) -> &'a [u8] {
        self.0.request(job)
    }
    fn respond(&mut self, _: &Job, _: Result<(), HandlerError>, _: &[u8]) -> bool {
        self.1.fetch_add(1, Ordering::SeqCst);
        true
    }
}

#[test]
fn a_handler_that_never_returns_does_not_hold_shutdown_and_stays_unanswered() {
    let w = one_type();
    let release = Arc::new(std::sync::Barrier::new(2));
    let answers = Arc::new(AtomicU64::new(0));
    let (rel, ans) = (release.clone(), answers.clone());
    let started = std::time::Instant::now();
    let r = within(Duration::from_secs(20), move || {
        let g = generator(trace(1, 0, 1_000));
        psp_runtime::start(
            &cfg(1),
            &"c-fcfs".parse::<PolicySpec>().unwrap(),
            w.type_infos(),
            |_| BlockingHandler {
                release: rel.clone(),
            },
            WrappedIo {
                inner: g,
                wrap: |_, io| CountingIo(io, ans.clone()),
            },
        )
    })
    .expect("the run ends normally");
    // The handler never returns by itself: without the drain deadline the
    // run would wait forever, so any bound separates the two; a generous
    // one holds on a loaded machine (a 200 ms drain ends in well under 1 s
    // on a quiet one).
    let took = started.elapsed();
    assert!(took < Duration::from_secs(15), "shutdown took {took:?}");
    let c = r.dispatcher.counts;
    assert_eq!((c.arrived, c.stranded, c.completed), (1, 1, 0), "{c:?}");
    assert_eq!(r.abandoned_workers, vec![0]);
    // The handler returns now, after the deadline: its answer must not go out.
    release.wait();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        answers.load(Ordering::SeqCst),
        0,
        "a stranded request was answered"
    );
}

#[test]
fn latency_is_never_shorter_than_service_time() {
    // Latency runs from the scheduled time (the dispatcher's clock) to the
    // handler's return (the worker's): one clock, so latency >= service.
    let w = Workload::fixed("mix", &[("short", 20.0, 0.8), ("long", 200.0, 0.2)]);
    let spinner = Spinner::calibrate(Duration::from_millis(10));
    let rate = 0.5 * w.peak_rps(2);
    let arrivals = Box::new(PoissonArrivals::new(&w, rate, 300_000_000, 5));
    let types = w.type_infos();
    let r = within(Duration::from_secs(60), move || {
        psp_runtime::run(
            &RuntimeConfig {
                drain_timeout: Duration::from_secs(10),
                ..cfg(2)
            },
            &"c-fcfs".parse().unwrap(),
            types,
            arrivals,
            Box::new(SyntheticEncoder),
            Box::new(HeaderClassifier {
                offset: synthetic::TYPE_OFFSET,
                types: 2,
            }),
            0,
            move |_| SpinHandler::new(spinner),
        )
    })
    .expect("run");
    let rec = &r.dispatcher.recorder;
    assert!(rec.completed() > 500, "{}", rec.completed());
    let min = rec.min_slowdown().expect("completions");
    assert!(
        min >= 1.0,
        "a request's latency was {min} x its service time"
    );
}

/// An I/O whose every send fails (a full socket buffer, say).
struct FailingIo(GeneratedIo);

impl JobIo for FailingIo {
    fn request<'a>(&'a self, job: &'a Job) -> &'a [u8] {
        self.0.request(job)
    }
    fn respond(&mut self, _: &Job, _: Result<(), HandlerError>, _: &[u8]) -> bool {
        false
    }
}

#[test]
fn an_answer_that_could_not_be_sent_is_counted_and_not_a_latency_sample() {
    let w = one_type();
    let spinner = Spinner::calibrate(Duration::from_millis(10));
    let r = within(Duration::from_secs(30), move || {
        let g = generator(trace(20, 200_000, 10_000));
        psp_runtime::start(
            &cfg(1),
            &"c-fcfs".parse::<PolicySpec>().unwrap(),
            w.type_infos(),
            |_| SpinHandler::new(spinner),
            WrappedIo {
                inner: g,
                wrap: |_, io| FailingIo(io),
            },
        )
    })
    .expect("run");
    let c = r.dispatcher.counts;
    assert_eq!((c.arrived, c.completed, c.unsent), (20, 20, 20), "{c:?}");
    assert_eq!(r.dispatcher.recorder.completed(), 0);
    assert_eq!(r.dispatcher.recorder.errors(), 20);
}

/// Delivers responses of at most 4 bytes (the spin handler writes 8), and
/// records the outcomes it was asked to deliver.
struct SmallIo(GeneratedIo, Arc<AtomicU64>);

impl JobIo for SmallIo {
    fn request<'a>(&'a self, job: &'a Job) -> &'a [u8] {
        self.0.request(job)
    }
    fn respond(&mut self, _: &Job, outcome: Result<(), HandlerError>, _: &[u8]) -> bool {
        self.1
            .fetch_add(u64::from(outcome.is_err()), Ordering::SeqCst);
        true
    }
    fn max_response(&self) -> usize {
        4
    }
}

#[test]
fn a_response_longer_than_the_io_carries_is_a_handler_error_on_both_sides() {
    let w = one_type();
    let spinner = Spinner::calibrate(Duration::from_millis(10));
    let errors = Arc::new(AtomicU64::new(0));
    let seen = errors.clone();
    let r = within(Duration::from_secs(30), move || {
        let g = generator(trace(20, 200_000, 10_000));
        psp_runtime::start(
            &cfg(1),
            &"c-fcfs".parse::<PolicySpec>().unwrap(),
            w.type_infos(),
            |_| SpinHandler::new(spinner),
            WrappedIo {
                inner: g,
                wrap: |_, io| SmallIo(io, seen.clone()),
            },
        )
    })
    .expect("run");
    let c = r.dispatcher.counts;
    // What was delivered (an error each time) is what the dispatcher counted.
    assert_eq!(errors.load(Ordering::SeqCst), 20);
    assert_eq!(
        (c.completed, c.handler_errors, c.bad_bodies),
        (20, 20, 0),
        "{c:?}"
    );
    assert_eq!(r.dispatcher.recorder.completed(), 0);
    assert_eq!(r.dispatcher.recorder.errors(), 20);
}
