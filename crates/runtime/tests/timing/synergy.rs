//! SYNERGY and Tiny Quanta on the real runtime (crate::local): every request
//! completes exactly once through preemptions, steals and wait-queue passes,
//! with the checksum it would have computed unpreempted; short requests (never
//! declared long) are never preempted; conditional preemption renews a lone
//! long request's quantum instead of preempting it, whether the timer's
//! thread or the worker itself checks the quantum (`timer=core|worker`);
//! Tiny Quanta yields locally (its own TSC deadline) and only to another
//! request of its worker.
//!
//! Two workers at most, the parking idle strategy, runs of a few hundred ms.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

use psp_core::{HeaderClassifier, PolicySpec};
use psp_runtime::handler::synthetic;
use psp_runtime::{
    Handler, HandlerError, RequestContext, RunReport, RuntimeConfig, Spinner, SyntheticEncoder,
};
use psp_workload::{Arrival, ArrivalSource, PoissonArrivals, TraceArrivals, Workload};

/// One run at a time: each expects the machine's cores to itself.
fn serial() -> MutexGuard<'static, ()> {
    crate::common::one_at_a_time()
}

/// What the probe application saw.
#[derive(Default)]
struct Tally {
    /// Handler invocations (a resumed request does not invoke it again).
    starts: AtomicU64,
    /// Handlers that returned.
    ends: AtomicU64,
    /// Checksums that differ from the unpreempted computation.
    wrong: AtomicU64,
    /// Yields of requests of type 0 (never declared long).
    short_yields: AtomicU64,
    /// Yields of requests of type 1 (declared long).
    long_yields: AtomicU64,
    /// Wall time that requests of type 1 spent in their handler, less the
    /// time suspended across the preemption points that yielded: their
    /// segments, as the handler saw them.
    long_busy_ns: AtomicU64,
}

fn mix(h: u64, i: u64) -> u64 {
    (h ^ i).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(23)
}

/// Spins for the body's service time in 1 µs steps with a preemption point
/// after each, folding a checksum across the points; type 1 declares itself
/// long (`feedback_start()`) first.
struct Probe {
    spinner: Spinner,
    tally: Arc<Tally>,
}

impl Handler for Probe {
    fn handle(&mut self, ctx: &mut RequestContext<'_>) -> Result<(), HandlerError> {
        self.tally.starts.fetch_add(1, Ordering::Relaxed);
        let ns = synthetic::service_ns(ctx.body).ok_or(HandlerError::BadBody("short body"))?;
        let long = ctx.type_id == 1;
        if long {
            ctx.feedback_start();
        }
        let steps = ns / 1_000;
        let mut h = ns;
        let started = Instant::now();
        let mut suspended = Duration::ZERO;
        for i in 0..steps {
            h = mix(h, i);
            self.spinner.spin_ns(1_000);
            let (before, t) = (ctx.preempt.yields(), Instant::now());
            ctx.preemption_point();
            if ctx.preempt.yields() != before {
                suspended += t.elapsed();
            }
        }
        if long {
            ctx.feedback_finished();
            let busy = started.elapsed().saturating_sub(suspended);
            self.tally
                .long_busy_ns
                .fetch_add(busy.as_nanos() as u64, Ordering::Relaxed);
        }
        let expected = (0..steps).fold(ns, mix);
        if h != expected {
            self.tally.wrong.fetch_add(1, Ordering::Relaxed);
        }
        let yields = u64::from(ctx.preempt.yields());
        if long {
            self.tally.long_yields.fetch_add(yields, Ordering::Relaxed);
        } else {
            self.tally.short_yields.fetch_add(yields, Ordering::Relaxed);
        }
        ctx.response.extend_from_slice(&h.to_le_bytes());
        self.tally.ends.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn fiber_safe(&self) -> bool {
        true
    }
}

fn spinner() -> Spinner {
    static S: std::sync::OnceLock<Spinner> = std::sync::OnceLock::new();
    *S.get_or_init(|| Spinner::calibrate(Duration::from_millis(20)))
}

/// Serves `arrivals` of `w` through `policy` on `workers` workers.
fn serve(
    w: &Workload,
    policy: &str,
    workers: usize,
    arrivals: Box<dyn ArrivalSource + Send>,
) -> (RunReport, Arc<Tally>) {
    let spec: PolicySpec = policy.parse().unwrap();
    let tally = Arc::new(Tally::default());
    let cfg = RuntimeConfig {
        workers,
        // Well below the fiber slots (1024 per worker): time sharing starts
        // every queued request, and on a loaded machine the queues fill; a
        // request that finds no slot is a handler error, not what these
        // tests are about.
        queue_capacity: 256,
        drain_timeout: Duration::from_secs(20),
        ..Default::default()
    };
    let (t, spinner) = (tally.clone(), spinner());
    let r = psp_runtime::run(
        &cfg,
        &spec,
        w.type_infos(),
        arrivals,
        Box::new(SyntheticEncoder),
        Box::new(HeaderClassifier {
            offset: synthetic::TYPE_OFFSET,
            types: w.types.len() as u16,
        }),
        0,
        move |_| Probe {
            spinner,
            tally: t.clone(),
        },
    )
    .unwrap_or_else(|e| panic!("{policy}: {e}"));
    (r, tally)
}

fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

/// Every admitted request answered once, nothing stranded, every handler
/// started once and returned once, every checksum right.
fn assert_conserved(at: &str, r: &RunReport, t: &Tally) {
    let d = &r.dispatcher.counts;
    assert!(d.arrived > 0, "{at}");
    assert_eq!(d.stranded, 0, "{at}");
    assert_eq!(d.arrived, d.completed + d.shed, "{at}");
    assert_eq!(d.admitted, d.completed, "{at}");
    assert_eq!(d.handler_errors, 0, "{at}");
    assert_eq!(
        r.served_per_worker.iter().sum::<u64>(),
        d.completed,
        "{at}: each completion answered once"
    );
    assert_eq!(get(&t.starts), d.completed, "{at}: a request started twice");
    assert_eq!(get(&t.ends), d.completed, "{at}");
    assert_eq!(get(&t.wrong), 0, "{at}: a checksum differs");
}

fn mix_workload() -> Workload {
    Workload::fixed("mix", &[("short", 20.0, 0.9), ("long", 1000.0, 0.1)])
}

#[test]
fn synergy_conserves_requests_and_never_preempts_short_ones() {
    let _one_at_a_time = serial();
    let w = mix_workload();
    for policy in [
        "synergy:timer=core",
        "synergy:timer=worker",
        "synergy:wq=off",
        "synergy:cp=off",
    ] {
        conserves_without_preempting_short_ones(&w, policy);
        // A steal, checked in full too. Under the mix a worker may never
        // be idle while the other's queue holds work on a loaded machine
        // (CI saw no steal in 3 runs), so the steal is forced: 2,000 short
        // requests 15 µs apart on one flow give its worker 1.33x its rate
        // for 30 ms, and the other worker is woken at the second admission
        // with a queue to take half of. Only a thread kept off its core for
        // all of 30 ms would miss it: up to 3 runs, each conserving.
        let stole = (0..3).any(|_| {
            let (r, t) = serve(&w, policy, 2, trace(0, 20_000, 2_000, 15_000));
            assert_conserved(policy, &r, &t);
            assert_eq!(get(&t.short_yields), 0, "{policy}: a short request yielded");
            r.steals_per_worker.iter().sum::<u64>() > 0
        });
        assert!(stole, "{policy}: no steal in 3 runs of a one-flow burst");
    }
}

/// One run of `synergy_conserves_requests_and_never_preempts_short_ones`
/// under the mix: conserved, long requests preempted, short ones never.
fn conserves_without_preempting_short_ones(w: &Workload, policy: &str) {
    let arrivals = PoissonArrivals::new(w, 0.7 * w.peak_rps(2), 300_000_000, 3).with_flows(8);
    let (r, t) = serve(w, policy, 2, Box::new(arrivals));
    assert_conserved(policy, &r, &t);
    let l = r.local.as_ref().expect("synergy reports its counters");
    assert_eq!(l.executor, "synergy");
    let preemptions: u64 = l.preemptions.iter().sum();
    let renewals: u64 = l.preemptions_avoided.iter().sum();
    let passes: u64 = l.wait_queue_passes.iter().sum();
    assert_eq!(get(&t.short_yields), 0, "{policy}: a short request yielded");
    assert!(preemptions > 0, "{policy}: never preempted");
    assert!(get(&t.long_yields) > 0, "{policy}: no long request yielded");
    let preempted_yields = if l.timer == "worker" {
        // The worker checks its own quantum: every expiry yields to it, and
        // it preempts or renews.
        assert_eq!(
            get(&t.long_yields),
            preemptions + renewals,
            "{policy}: each expiry yields once"
        );
        preemptions
    } else {
        // Every yield of a long request was a preemption; a raise can find
        // the request finished.
        assert!(get(&t.long_yields) <= preemptions, "{policy}");
        get(&t.long_yields)
    };
    if policy.contains("timer=") {
        assert_eq!(l.timer, &policy[policy.find("timer=").unwrap() + 6..]);
    }
    if policy.contains("wq=off") {
        assert_eq!(passes, 0, "{policy}: the wait queue is off");
    } else {
        assert_eq!(
            passes, preempted_yields,
            "{policy}: preemptions pass the wait queue"
        );
    }
    assert_eq!(l.wait_queue_full, 0, "{policy}");
    // Service time is the sum of a request's segments: at least the
    // 1 ms of spinning, and what the handler itself timed of its run,
    // less its suspensions. Both are wall time, so a loaded machine
    // inflates them alike; the slack covers the fiber switches and
    // points outside the handler's view, not a segment counted twice
    // (or lost, below the handler's own sum). The upper slack is 1.9x,
    // under the 2x that counting every segment twice gives: a segment's
    // edges include the worker's wake-up, which a 2-core machine running
    // 3 threads delays (1.33x seen in a CI run at load 2, 1.50x in a whole
    // suite run beside a busy core at load 4, with nothing counted twice).
    let long = &r.dispatcher.recorder.type_stats()[1];
    let service_ns = long.mean_service_us * 1e3 * long.count as f64;
    let busy_ns = get(&t.long_busy_ns) as f64;
    assert!(
        long.mean_service_us > 900.0,
        "{policy}: long mean service {} us",
        long.mean_service_us
    );
    assert!(
        service_ns >= 0.95 * busy_ns && service_ns <= 1.9 * busy_ns + 1e6,
        "{policy}: {} long requests served for {service_ns} ns in all, their handlers ran {busy_ns} ns",
        long.count
    );
}

/// `n` requests of `service_ns` of type `type_id` on flow 0, `gap_ns` apart
/// from time 0.
fn trace(type_id: u16, service_ns: u64, n: u64, gap_ns: u64) -> Box<dyn ArrivalSource + Send> {
    Box::new(TraceArrivals::new(
        (0..n)
            .map(|i| Arrival {
                flow: 0,
                at_ns: i * gap_ns,
                type_id,
                service_ns,
            })
            .collect(),
    ))
}

#[test]
fn conditional_preemption_renews_a_lone_long_requests_quantum() {
    let _one_at_a_time = serial();
    let w = mix_workload();
    // One 20 ms long request alone on one worker: its 10 µs quantum expires
    // again and again, with nothing queued. Whoever checks the quantum.
    for (policy, yields_per_renewal) in [("synergy:timer=core", 0), ("synergy:timer=worker", 1)] {
        let (r, t) = serve(&w, policy, 1, trace(1, 20_000_000, 1, 0));
        assert_conserved(policy, &r, &t);
        let l = r.local.as_ref().unwrap();
        assert_eq!(
            l.preemptions,
            vec![0],
            "{policy}: nothing queued: never preempted"
        );
        assert!(l.preemptions_avoided[0] > 10, "{policy}: renewed: {l:?}");
        // The worker's own check switches out to the worker and straight
        // back in; the timer's thread renews without a switch.
        assert_eq!(
            get(&t.long_yields),
            yields_per_renewal * l.preemptions_avoided[0],
            "{policy}"
        );
    }
    // Without conditional preemption the same request is preempted.
    let (r, t) = serve(&w, "synergy:cp=off", 1, trace(1, 20_000_000, 1, 0));
    assert_conserved("cp=off", &r, &t);
    let l = r.local.as_ref().unwrap();
    assert!(l.preemptions[0] > 10, "cp=off preempts: {l:?}");
    assert_eq!(l.preemptions_avoided, vec![0]);
}

#[test]
fn a_short_request_is_never_preempted_however_long_it_runs() {
    let _one_at_a_time = serial();
    let w = mix_workload();
    // Type 0 never declares itself long: 5 ms requests back to back on one
    // worker with a queue behind them all along, never preempted.
    for policy in ["synergy:cp=off,timer=core", "synergy:cp=off,timer=worker"] {
        let (r, t) = serve(&w, policy, 1, trace(0, 5_000_000, 6, 0));
        assert_conserved(policy, &r, &t);
        let l = r.local.as_ref().unwrap();
        assert_eq!(l.preemptions, vec![0], "{policy}");
        assert_eq!(get(&t.short_yields), 0, "{policy}");
    }
}

#[test]
fn tq_shares_a_worker_by_local_yields_and_jsq_spreads_arrivals() {
    let _one_at_a_time = serial();
    let w = mix_workload();
    // Two 5 ms requests on one worker: processor sharing in 2 µs quanta,
    // each yielding to the other at its own deadline.
    let (r, t) = serve(&w, "tq", 1, trace(1, 5_000_000, 2, 0));
    assert_conserved("tq shared", &r, &t);
    let l = r.local.as_ref().unwrap();
    assert_eq!(l.executor, "tq");
    assert!(l.preemptions[0] > 100, "time shared: {l:?}");
    // Shared: both finish near 10 ms, not one at 5 ms and one at 10.
    let long = &r.dispatcher.recorder.type_stats()[1];
    assert!(
        long.p50_latency_us > 8_000.0,
        "p50 latency {} us: not shared",
        long.p50_latency_us
    );
    // One request alone: its quanta expire, it never yields to anyone.
    let (r, t) = serve(&w, "tq", 1, trace(1, 5_000_000, 1, 0));
    assert_conserved("tq alone", &r, &t);
    let l = r.local.as_ref().unwrap();
    assert_eq!(l.preemptions, vec![0]);
    assert!(l.preemptions_avoided[0] > 100, "{l:?}");
    // Each expiry switched out to the worker and straight back in.
    assert_eq!(get(&t.long_yields), l.preemptions_avoided[0]);
    // JSQ: two simultaneous requests go to the two workers. A worker counts
    // as busy from just after it takes its request: the second admission
    // can land in that gap (a preempted thread can sit in it for
    // milliseconds on a loaded machine) and find both workers idle. So a
    // few attempts, each conserving every request; one must spread them.
    let mut spreads = Vec::new();
    while spreads.len() < 5 && !spreads.contains(&vec![1, 1]) {
        let (r, t) = serve(&w, "tq", 2, trace(1, 5_000_000, 2, 0));
        assert_conserved("tq jsq", &r, &t);
        spreads.push(r.served_per_worker);
    }
    assert!(spreads.contains(&vec![1, 1]), "never spread: {spreads:?}");
    // And under load everything completes once.
    let arrivals = PoissonArrivals::new(&w, 0.7 * w.peak_rps(2), 300_000_000, 5);
    let (r, t) = serve(&w, "tq", 2, Box::new(arrivals));
    assert_conserved("tq load", &r, &t);
    assert!(r.local.as_ref().unwrap().preemptions.iter().sum::<u64>() > 0);
}
