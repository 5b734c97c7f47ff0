//! End-to-end cost of one dispatcher-driven preemption on the real runtime
//! (`psp_runtime::run`: generator, dispatcher, one worker, green threads),
//! not of the fiber switch alone (`benches/green.rs` has that).
//!
//! # Method
//!
//! One worker serves a fixed trace: [`REQUESTS`] spin requests of
//! [`SPIN_US`] each, all arriving at once (a backlog), with a preemption point
//! every 1 µs of spinning ([`SpinHandler`]). Each configuration serves the
//! whole trace in one runtime run (one criterion iteration); the time
//! reported is the run's *serving interval*, from the first request's start
//! to the last one's return, as a wrapper around the handler stamps them
//! (thread start-up, the generator's start delay and shutdown are left out).
//!
//! - `no-preempt`: `ts:sq` with a 1 s quantum. Requests run on fibers and the
//!   dispatcher watches their quanta exactly as below, but none expires: the
//!   baseline. (`c-fcfs`, run without fibers, is measured for reference.)
//! - `q=Q`: `ts:sq,quantum=Q,requeue=head`. Every expired quantum preempts
//!   (`preempt=always`), and the preempted request goes back to the head of
//!   the queue, so the one worker resumes it next: one request in flight at a
//!   time (one stack, no cache traffic between requests' stacks), and each
//!   preemption is a whole round trip: flag raised, the request yields at
//!   its next point, the worker parks the fiber and reports it, the
//!   dispatcher re-queues and re-dispatches it, the worker pops the job and
//!   resumes the fiber.
//!
//! The spin counts only the time it spun (not the time suspended), so every
//! configuration does the same useful work; what a preemption adds is the
//! worker's time away from it. Hence, printed after the criterion groups
//! (medians over every run criterion made, warm-up included):
//!
//! - **cost per preemption** = (median serving interval at `q=Q` − median at
//!   `no-preempt`) / median yields per run at `q=Q`: the worker time one
//!   preemption costs, end to end;
//! - **away per preemption**: inside each run, Σ over requests of (handler
//!   wall time − time spun) / yields: from the yield to the resume, as the
//!   request sees it (the flag-to-yield latency is spent spinning, so it is
//!   not in it).
//!
//! Yields are counted by the handler wrapper (`Preemption::yields`), not the
//! policy's preemption count (asked, not necessarily delivered). Both idle
//! strategies: `spin` (dispatcher and worker poll: quanta are watched on
//! every pass) and `park` (`psp run --idle park`, where the dispatcher
//! sleeps until the next quantum end it knows of).
//!
//! Reading them: the two figures agree when a run has many preemptions and
//! nothing else changes between the runs compared (`spin`). Under `park` a
//! run has few preemptions (the printed segment length says how long a
//! request really ran between two), and the hand-offs *between* requests
//! also change with where the dispatcher's park timer stands, so the
//! difference of serving intervals is noise there: read the away time. The
//! baselines' away per request (no preemption) shows the spin's own
//! accuracy.
//!
//! `cargo bench -p psp-runtime --features bench --bench preempt`; takes 1-2 minutes. Needs
//! two otherwise idle cores (the dispatcher and the worker are pinned).
#![allow(missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group};
use psp_core::{HeaderClassifier, PolicySpec};
use psp_runtime::handler::synthetic;
use psp_runtime::{
    Handler, HandlerError, IdleStrategy, RequestContext, RuntimeConfig, SpinHandler, Spinner,
    SyntheticEncoder,
};
use psp_workload::{Arrival, TraceArrivals, Workload};

/// Requests in the trace.
const REQUESTS: u64 = 10;
/// Spin of each request (µs).
const SPIN_US: u64 = 2_000;
/// The quanta measured (µs).
const QUANTA_US: [u64; 3] = [10, 50, 200];

/// What the handler wrapper saw in one run.
struct Log {
    epoch: Instant,
    first_start: AtomicU64,
    last_end: AtomicU64,
    yields: AtomicU64,
    /// Σ (handler wall time − time asked to spin).
    away_ns: AtomicU64,
}

impl Log {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            epoch: Instant::now(),
            first_start: AtomicU64::new(u64::MAX),
            last_end: AtomicU64::new(0),
            yields: AtomicU64::new(0),
            away_ns: AtomicU64::new(0),
        })
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }
}

/// [`SpinHandler`], stamping each request's start and end.
struct Timed {
    spin: SpinHandler,
    log: Arc<Log>,
}

impl Handler for Timed {
    fn handle(&mut self, ctx: &mut RequestContext<'_>) -> Result<(), HandlerError> {
        let t0 = self.log.now();
        let asked = synthetic::service_ns(ctx.body).unwrap_or(0);
        let r = self.spin.handle(ctx);
        let t1 = self.log.now();
        let log = &self.log;
        log.first_start.fetch_min(t0, Ordering::Relaxed);
        log.last_end.fetch_max(t1, Ordering::Relaxed);
        log.yields
            .fetch_add(u64::from(ctx.preempt.yields()), Ordering::Relaxed);
        log.away_ns
            .fetch_add((t1 - t0).saturating_sub(asked), Ordering::Relaxed);
        r
    }

    fn fiber_safe(&self) -> bool {
        true
    }
}

/// One run's figures.
#[derive(Debug, Clone, Copy)]
struct Sample {
    serving_ns: u64,
    yields: u64,
    away_ns: u64,
}

/// Serves the trace once through `policy`.
fn serve(policy: &str, idle: IdleStrategy, spinner: Spinner) -> Sample {
    let spec: PolicySpec = policy.parse().unwrap();
    let w = Workload::fixed("spin", &[("long", SPIN_US as f64, 1.0)]);
    let cfg = RuntimeConfig {
        workers: 1,
        idle,
        queue_capacity: 64,
        drain_timeout: Duration::from_secs(30),
        ..Default::default()
    };
    // All at once (1 ns apart, to keep their order).
    let trace = (0..REQUESTS)
        .map(|i| Arrival {
            flow: 0,
            at_ns: i,
            type_id: 0,
            service_ns: SPIN_US * 1_000,
        })
        .collect();
    let log = Log::new();
    let r = psp_runtime::run(
        &cfg,
        &spec,
        w.type_infos(),
        Box::new(TraceArrivals::new(trace)),
        Box::new(SyntheticEncoder),
        Box::new(HeaderClassifier {
            offset: synthetic::TYPE_OFFSET,
            types: 1,
        }),
        0,
        |_| Timed {
            spin: SpinHandler::new(spinner),
            log: log.clone(),
        },
    )
    .unwrap_or_else(|e| panic!("{policy}: {e}"));
    let d = r.dispatcher.counts;
    assert_eq!(
        (d.completed, d.handler_errors),
        (REQUESTS, 0),
        "{policy}: {d:?}"
    );
    Sample {
        serving_ns: log.last_end.load(Ordering::Relaxed) - log.first_start.load(Ordering::Relaxed),
        yields: log.yields.load(Ordering::Relaxed),
        away_ns: log.away_ns.load(Ordering::Relaxed),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The configurations: (name, policy).
fn configs() -> Vec<(String, String)> {
    let mut c = vec![
        ("c-fcfs".to_string(), "c-fcfs".to_string()),
        (
            "no-preempt".to_string(),
            "ts:sq,quantum=1000000,requeue=head".to_string(),
        ),
    ];
    for q in QUANTA_US {
        c.push((
            format!("q={q}us"),
            format!("ts:sq,quantum={q},requeue=head"),
        ));
    }
    c
}

fn e2e(c: &mut Criterion, idle_name: &str, idle: IdleStrategy, spinner: Spinner) {
    let mut g = c.benchmark_group(format!("preempt_e2e_{idle_name}"));
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    let mut samples: Vec<(String, Vec<Sample>)> = Vec::new();
    for (name, policy) in configs() {
        let mut got = Vec::new();
        g.bench_function(BenchmarkId::new("serving_interval", &name), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let s = serve(&policy, idle, spinner);
                    total += Duration::from_nanos(s.serving_ns);
                    got.push(s);
                }
                total
            })
        });
        samples.push((name, got));
    }
    g.finish();
    report(idle_name, &samples);
}

/// The derived figures (module docs), from the medians of every run.
fn report(idle_name: &str, samples: &[(String, Vec<Sample>)]) {
    let med = |v: &[Sample], f: fn(&Sample) -> f64| median(v.iter().map(f).collect());
    let base = samples
        .iter()
        .find(|(n, _)| n == "no-preempt")
        .map(|(_, v)| med(v, |s| s.serving_ns as f64))
        .unwrap_or(f64::NAN);
    println!(
        "preempt_e2e, idle {idle_name}: {REQUESTS} requests x {SPIN_US} us spin on one worker; medians over runs"
    );
    for (name, v) in samples {
        let serving = med(v, |s| s.serving_ns as f64);
        let yields = med(v, |s| s.yields as f64);
        let away = med(v, |s| {
            if s.yields == 0 {
                f64::NAN
            } else {
                s.away_ns as f64 / s.yields as f64
            }
        });
        let away_per_request = med(v, |s| s.away_ns as f64 / REQUESTS as f64);
        let mut line = format!(
            "  {name:>10}: {} runs, serving {:>9.1} us, away/request {:>6.2} us, yields/run {yields:>6.0}",
            v.len(),
            serving / 1e3,
            away_per_request / 1e3,
        );
        if yields > 0.0 {
            let segment_us = (REQUESTS * SPIN_US) as f64 / (yields + REQUESTS as f64);
            line += &format!(
                " (segment {segment_us:>6.1} us), cost/preemption {:>6.2} us, away/preemption {:>6.2} us",
                (serving - base) / yields / 1e3,
                away / 1e3,
            );
        }
        println!("{line}");
    }
}

fn benches(c: &mut Criterion) {
    let spinner = Spinner::calibrate(Duration::from_millis(50));
    e2e(c, "spin", IdleStrategy::Spin, spinner);
    e2e(c, "park", "park".parse().unwrap(), spinner);
}

criterion_group!(preempt, benches);

fn main() {
    preempt();
    Criterion::default().configure_from_args().final_summary();
}
