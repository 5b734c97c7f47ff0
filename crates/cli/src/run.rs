//! `psp run`: one point on the real runtime (dispatcher + pinned workers) with the
//! in-process open-loop generator and an application (the calibrated spin by
//! default); optionally the simulator's prediction for the same point beside it.
//! A phased workload runs its phases one after the other (their durations, not
//! `--duration`), each at its own rate.

use std::time::Duration;

use anyhow::{Result, bail};
use clap::Args;
use psp_apps::AppConfig;
use psp_core::PolicySpec;
use psp_metrics::series::TimeSeries;
use psp_metrics::{
    Agreement, Extra, LocalCounters, PhaseSpan, PointMeta, PointResult, ReservationChange,
    ReservationLayout, RunExtra, TypeStats,
};
use psp_runtime::{IdleStrategy, RequestCounts, RuntimeConfig, StatsConfig};
use psp_sim::{Workload, simulate_point};
use psp_workload::Arrivals;

use crate::app::{AppArgs, type_names};
use crate::{PolicyPoint, limits, report};

/// `psp run` arguments.
#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    target: PolicyPoint,
    #[command(flatten)]
    app: AppArgs,
    /// Cores to pin to, dispatcher first (e.g. 0-14 or 0,2,4); default: every
    /// thread when the machine has a core per thread, else only the workers when it
    /// has a core per worker.
    #[arg(long)]
    cores: Option<String>,
    /// How idle threads wait: spin (a core each), yield, or park (the default; fine
    /// with fewer cores than threads), or park:SPIN_US (poll this long first).
    #[arg(long, default_value = "park")]
    idle: String,
    /// Whether polling threads yield their core on each pass: auto (when the
    /// runtime's threads outnumber its cores), on or off. Off by default here:
    /// the generator shares no core with a client process, and yielding
    /// raised the short type's tail (docs/results.md, "Redis clients: GETs beside LRANGE 0 599").
    #[arg(long, default_value = "off")]
    poll_yield: String,
    /// Print live statistics every interval (e.g. 1s) on stderr.
    #[arg(long, allow_hyphen_values = true)]
    stats_interval: Option<String>,
    /// Live statistics as JSON lines.
    #[arg(long)]
    stats_json: bool,
    /// Longest wait for in-flight requests after the last arrival.
    #[arg(long, allow_hyphen_values = true, default_value = "10s")]
    drain_timeout: String,
    /// Longest a request may wait from its arrival to its start, past which
    /// it is dropped unrun (counted shed) instead of served late: DUR for
    /// every type, TYPE=DUR,... for the types named, DUR,TYPE=DUR,... for
    /// every type with exceptions (TYPE=none: unbounded); 1us to 1h
    /// [default: none].
    #[arg(long, allow_hyphen_values = true)]
    max_wait: Option<String>,
    /// Also simulate the same point and print the prediction beside the measurement.
    #[arg(long)]
    compare_sim: bool,
    /// Also record a time series (per-type latency percentiles and the
    /// reservation per window, warm-up included) and write it as STEM.json,
    /// STEM.svg and STEM.png.
    #[arg(long)]
    series: Option<std::path::PathBuf>,
    /// Window of the time series.
    #[arg(long, default_value = "100ms", allow_hyphen_values = true)]
    series_window: String,
    /// Print the point as JSON.
    #[arg(long)]
    json: bool,
}

/// Parses a core list such as `0-14` or `0,2,4`: ids in [`limits::CORE_ID`],
/// each at most once.
///
/// # Errors
/// A part that does not parse, an id out of range or a repeated one.
pub fn parse_cores(s: &str) -> Result<Vec<usize>> {
    let mut out: Vec<usize> = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || anyhow::anyhow!("--cores: cannot parse '{part}' (examples: 0-14, 0,2,4)");
        let id = |v: &str| -> Result<usize> {
            limits::CORE_ID.check(v.trim().parse().map_err(|_| bad())?)
        };
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (id(a)?, id(b)?),
            None => (id(part)?, id(part)?),
        };
        if b < a {
            return Err(bad());
        }
        for c in a..=b {
            if out.contains(&c) {
                bail!("--cores lists core {c} twice");
            }
            out.push(c);
        }
    }
    Ok(out)
}

/// How the runtime is set up for a point, beyond the point itself.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Pinning (`None`: automatic).
    pub cores: Option<Vec<usize>>,
    /// Idle strategy.
    pub idle: IdleStrategy,
    /// Whether polling passes yield the core.
    pub poll_yield: psp_runtime::PollYield,
    /// Live statistics.
    pub stats: Option<StatsConfig>,
    /// Longest drain.
    pub drain_timeout: Duration,
    /// Per type, the longest wait for a start ([`RuntimeConfig::max_wait`]).
    pub max_wait: Vec<Option<Duration>>,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            cores: None,
            idle: IdleStrategy::default(),
            // As `psp run`'s flag (see there).
            poll_yield: psp_runtime::PollYield::Off,
            stats: None,
            drain_timeout: Duration::from_secs(10),
            max_wait: Vec::new(),
        }
    }
}

/// Runs `psp run`.
pub fn run(a: RunArgs) -> Result<()> {
    let (workload, spec, mut sim_cfg) = a.target.resolve(crate::Mode::Run)?;
    if let Some(stem) = &a.series {
        let window = limits::SERIES_WINDOW.parse_ns(&a.series_window)?;
        crate::check_series_stem(stem)?;
        let period_ns = workload.arrival_period_ns(sim_cfg.duration_ns);
        psp_metrics::series::check_window(window, period_ns).map_err(anyhow::Error::msg)?;
        sim_cfg.series_window_ns = Some(window);
    }
    // A phased workload runs its phases (their requests, not --duration's),
    // here and in the simulator's prediction.
    limits::point_work(
        &spec,
        &workload,
        sim_cfg.workers,
        sim_cfg.rate_rps,
        sim_cfg.duration_ns,
    )?;
    limits::runtime_quantum(&spec)?;
    // Generated requests are trusted: the spin application takes any length.
    let app = a.app.config(&workload, u64::MAX)?;
    let stats = match &a.stats_interval {
        Some(s) => Some(StatsConfig {
            interval: limits::STATS_INTERVAL.parse(s)?,
            json: a.stats_json,
        }),
        None => None,
    };
    let opts = RunOptions {
        cores: a.cores.as_deref().map(parse_cores).transpose()?,
        idle: limits::idle(&a.idle)?,
        poll_yield: limits::poll_yield(&a.poll_yield)?,
        stats,
        drain_timeout: limits::DRAIN_TIMEOUT.parse(&a.drain_timeout)?,
        max_wait: match &a.max_wait {
            Some(s) => limits::max_wait(s, &type_names(&workload))?,
            None => Vec::new(),
        },
    };
    // The simulator's prediction (--compare-sim) drops past the same bounds.
    sim_cfg.max_wait_ns = crate::max_wait_ns(&opts.max_wait);
    let (mut point, counts, series) = measure(&workload, &app, &spec, &sim_cfg, &opts)?;
    if let (Some(stem), Some(series)) = (&a.series, &series) {
        crate::write_series(series, &workload, stem, &point.policy)?;
    }
    // After the measurement, so that an error is still one line.
    if let Some(w) = machine_warning(&workload, sim_cfg.workers) {
        eprintln!("{w}");
    }
    if let Some(w) = point
        .extra
        .run()
        .and_then(|r| service_warning(&workload, r))
    {
        eprintln!("{w}");
    }
    let prediction = if a.compare_sim {
        Some(simulate_point(&workload, &spec, &sim_cfg)?)
    } else {
        None
    };
    if let (Some(p), Extra::Run(r)) = (&prediction, &mut point.extra) {
        r.sim_agreement = Some(sim_agreement(&point.types, p));
        r.sim_prediction = Some(Box::new(p.clone()));
    }
    if let Some(w) = report::point_warmup_warning(&point) {
        eprintln!("{w}");
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&point)?);
    } else {
        print!("{}", report::point_table(&point));
        let run = point.extra.run().expect("psp run measures a run point");
        if let Some(d) = run.declared_utilization {
            println!(
                "utilization over the run: measured {:.1}% | by the workload's declared service times {:.1}%",
                run.measured_utilization * 100.0,
                d * 100.0
            );
        }
        if let Some(line) = executor_counters(run) {
            println!("{line}");
        }
        if let Some(p) = &prediction {
            println!("\nsimulator's prediction for the same point:");
            print!("{}", report::point_table(p));
            println!("\nmeasured / predicted, per type:");
            for r in sim_agreement(&point.types, p) {
                println!(
                    "  {:<12} p99.9 latency {:>6.2}x   p50 latency {:>6.2}x",
                    r.name, r.p999_ratio, r.p50_ratio
                );
            }
        }
    }
    if counts.stranded > 0 {
        bail!(
            "{} requests were still in flight when the drain timed out",
            counts.stranded
        );
    }
    Ok(())
}

/// Service times below which a thread descheduled mid-request (a time slice:
/// milliseconds) dwarfs the request.
const FEW_US: f64 = 10.0;

/// A warning when the point measures the machine rather than the policy:
/// more busy threads (the workers and the dispatcher, which also generates
/// the arrivals) than cores, and a shortest type of only a few microseconds.
pub fn machine_warning(workload: &Workload, workers: usize) -> Option<String> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = workers + 1;
    let shortest = workload
        .types
        .iter()
        .min_by(|a, b| a.service.mean_us().total_cmp(&b.service.mean_us()))?;
    let us = shortest.service.mean_us();
    (threads > cores && us < FEW_US).then(|| {
        format!(
            "warning: {workers} workers and the dispatcher (which also generates the arrivals) are {threads} busy threads on {cores} cores, and the shortest type ({}, {us:.2} us) takes only a few microseconds: a thread descheduled mid-request holds it for a time slice (milliseconds), so this point measures the machine, not the policy; use a scaled workload (e.g. extreme-bimodal-x1000, high-bimodal-x100) or fewer workers",
            shortest.name,
        )
    })
}

/// A warning naming the types whose measured mean service time (the run's
/// `service_us_by_type`) is more than [`psp_runtime::SERVICE_OFF_FACTOR`] off
/// the declared one (types with 100 completions or more). Phased workloads
/// change their service times on purpose: not checked.
fn service_warning(workload: &Workload, run: &RunExtra) -> Option<String> {
    if !workload.phases.is_empty() {
        return None;
    }
    let f = psp_runtime::SERVICE_OFF_FACTOR;
    let off: Vec<String> = workload
        .types
        .iter()
        .zip(run.service_us_by_type.iter().zip(&run.completed_by_type))
        .filter_map(|(t, (&m, &n))| {
            let r = psp_runtime::service_off(m, t.service.mean_us(), n)?;
            Some({
                format!(
                    "{} {m:.2} us, {r:.2}x the declared {:.2} us",
                    t.name,
                    t.service.mean_us()
                )
            })
        })
        .collect();
    (!off.is_empty()).then(|| {
        format!(
            "warning: measured mean service times more than {f}x off the workload's declared ones ({}): --load is computed from the declared times, so it is not the load the workers carried (see measured_utilization); measure the real times with `psp profile` and use the workload file it writes",
            off.join("; ")
        )
    })
}

/// A list of counters as the text report writes it: `[a,b,c]`.
fn counter_list(v: &[u64]) -> String {
    let items: Vec<String> = v.iter().map(u64::to_string).collect();
    format!("[{}]", items.join(","))
}

/// SYNERGY's or Tiny Quanta's counters from a measured run, as one line for
/// the text report (`None` for other executors).
fn executor_counters(run: &RunExtra) -> Option<String> {
    let l = run.local.as_ref()?;
    Some(local_counters_line(
        l,
        run.preemptions,
        &run.steals_per_worker,
    ))
}

/// SYNERGY's or Tiny Quanta's counters as one line (`psp run` and `psp
/// serve`'s text output).
pub fn local_counters_line(
    l: &LocalCounters,
    preemptions: u64,
    steals_per_worker: &[u64],
) -> String {
    format!(
        "{} counters: preemptions {} (per worker {}), preemptions avoided {} (per worker {}), steals {} (per worker {}), wait-queue passes {}, congestion episodes {}, wait-queue full {}, {} late at expiries {:.1} us mean, {:.1} us worst",
        l.executor,
        preemptions,
        counter_list(&l.preemptions_per_worker),
        l.preemptions_avoided,
        counter_list(&l.preemptions_avoided_per_worker),
        steals_per_worker.iter().sum::<u64>(),
        counter_list(steals_per_worker),
        l.wait_queue_passes,
        l.congestion_episodes,
        l.wait_queue_full,
        match l.timer.as_str() {
            "worker" => "quanta checked by the workers,",
            _ => "timer",
        },
        l.timer_late_mean_us,
        l.timer_late_max_us,
    )
}

/// Measured over predicted latency quantiles, per type of `measured` (same
/// arrivals: same workload, rate, seed and flows).
pub fn sim_agreement(measured: &[TypeStats], predicted: &PointResult) -> Vec<Agreement> {
    measured
        .iter()
        .zip(&predicted.types)
        .map(|(m, p)| Agreement {
            name: m.name.clone(),
            p999_ratio: m.p999_latency_us / p.p999_latency_us,
            p50_ratio: m.p50_latency_us / p.p50_latency_us,
        })
        .collect()
}

/// Refuses a system cost model for a real measurement: the runtime pays its
/// own costs.
///
/// # Errors
/// A `--system` other than `ideal`.
pub fn ideal_system_only(cfg: &psp_sim::SimConfig) -> Result<()> {
    if cfg.system != psp_sim::SystemCosts::default() {
        bail!("--system models a system's costs in the simulator; the runtime pays its own");
    }
    Ok(())
}

/// Measures one point on the real runtime: `spec` on `workload`, served by
/// `app`, at `cfg`'s rate, workers, duration, warm-up, seed and queue bound.
///
/// # Errors
/// A classifier name, policy or core list the runtime cannot use; an
/// application that cannot start.
pub fn measure(
    workload: &Workload,
    app: &AppConfig,
    spec: &PolicySpec,
    sim_cfg: &psp_sim::SimConfig,
    opts: &RunOptions,
) -> Result<(PointResult, RequestCounts, Option<TimeSeries>)> {
    ideal_system_only(sim_cfg)?;
    let classifier = sim_cfg.classifier.build(
        psp_runtime::generator::TYPE_OFFSET,
        workload.types.len() as u16,
    );
    let rate = sim_cfg.rate_rps;
    let cfg = runtime_config(sim_cfg, opts);
    let names = type_names(workload);
    let service = app.start(&names)?;
    // SYNERGY's synthetic application declares long requests from `long`.
    let handlers = psp_apps::handler_factory(service.clone(), spec.feedback_threshold_ns());
    let encoder = app.encoder(&names, sim_cfg.seed ^ 0xb0d1)?;
    let arrivals = Arrivals::new(
        workload,
        rate,
        sim_cfg.duration_ns,
        sim_cfg.workers,
        sim_cfg.seed,
    )
    .with_flows(sim_cfg.flows);
    let period_ns = workload.arrival_period_ns(sim_cfg.duration_ns);
    let warmup_ns = (period_ns as f64 * sim_cfg.warmup_fraction) as u64;
    let report = psp_runtime::run(
        &cfg,
        spec,
        workload.type_infos(),
        Box::new(arrivals),
        encoder,
        classifier,
        warmup_ns,
        |i| handlers.handler(i),
    )?;
    let extra = run_extra(workload, sim_cfg, opts, &cfg, &report, service.as_ref());
    let meta = PointMeta {
        mode: "run",
        workload: workload.name.clone(),
        policy: spec.to_string(),
        workers: cfg.workers,
        load: rate / workload.peak_rps(cfg.workers),
        offered_rps: rate,
        duration_s: period_ns as f64 / 1e9,
        measured_s: period_ns as f64 * (1.0 - sim_cfg.warmup_fraction) / 1e9,
        seed: sim_cfg.seed,
    };
    let d = &report.dispatcher;
    Ok((
        PointResult::new(
            meta,
            &d.recorder,
            d.measured_arrived,
            Extra::Run(Box::new(extra)),
        ),
        d.counts,
        report.dispatcher.series,
    ))
}

/// The runtime's configuration for one measured point.
fn runtime_config(sim_cfg: &psp_sim::SimConfig, opts: &RunOptions) -> RuntimeConfig {
    RuntimeConfig {
        workers: sim_cfg.workers,
        cores: opts.cores.clone(),
        idle: opts.idle,
        queue_capacity: sim_cfg.queue_capacity,
        drain_timeout: opts.drain_timeout,
        stats: opts.stats,
        raise_priority: true,
        series_window_ns: sim_cfg.series_window_ns,
        poll_yield: opts.poll_yield,
        // `psp run` measures the paper's layout: every worker on a thread.
        inline_worker: psp_runtime::InlineWorker::Off,
        max_wait: opts.max_wait.clone(),
        open_ended_types: Vec::new(),
    }
}

/// What a measured point carries beside its latencies: the dispatcher's
/// counts, the reservations, the workers' and the application's accounts.
/// Asks `service` to describe and finish itself.
fn run_extra(
    workload: &Workload,
    sim_cfg: &psp_sim::SimConfig,
    opts: &RunOptions,
    cfg: &RuntimeConfig,
    report: &psp_runtime::RunReport,
    service: &dyn psp_apps::Service,
) -> RunExtra {
    let d = &report.dispatcher;
    let c = &d.counts;
    // What the workers were busy with over the run, beside what the declared
    // service times imply for the same completions.
    let (measured_utilization, declared_utilization) = d.utilization(
        cfg.workers,
        report.wall.as_nanos() as f64,
        &crate::app::declared(workload),
    );
    let sum = |v: &[u64]| v.iter().sum::<u64>();
    RunExtra {
        generated_total: c.arrived,
        admitted_total: c.admitted,
        completed_total: c.completed,
        shed_total: c.shed,
        expired: c.expired,
        handler_errors: c.handler_errors,
        no_fiber: c.no_fiber,
        bad_bodies: c.bad_bodies,
        stranded: c.stranded,
        warming_up: d.policy_stats.warming_up,
        reservation_updates: d.policy_stats.reservation_updates,
        reservation: d.reservation.as_ref().map(ReservationLayout::from),
        reservation_log: d
            .reservation_log
            .iter()
            .map(|e| ReservationChange {
                at_s: e.at_s,
                reservation: ReservationLayout::from(&e.reservation),
            })
            .collect(),
        phases: phase_spans(workload, sim_cfg.rate_rps, sim_cfg.duration_ns, cfg.workers),
        served_per_worker: report.served_per_worker.clone(),
        steals_total: sum(&report.steals_per_worker),
        steals_per_worker: report.steals_per_worker.clone(),
        local: report.local.as_ref().map(local_counters),
        preemptions: preemptions(report.local.as_ref(), &d.policy_stats),
        abandoned_workers: report.abandoned_workers.clone(),
        pinned: report.pinned,
        polls_yield: report.polls_yield,
        idle: format!("{:?}", opts.idle),
        classifier: sim_cfg.classifier.name().to_string(),
        app: service.describe(),
        app_check: service.finish(),
        wall_s: report.wall.as_secs_f64(),
        measured_utilization,
        declared_utilization,
        completed_by_type: d.completed_by_type.clone(),
        service_us_by_type: mean_service_us(&d.completed_by_type, &d.service_ns_by_type),
        sim_prediction: None,
        sim_agreement: None,
    }
}

/// The workload's phases as the run offered them.
fn phase_spans(workload: &Workload, rate: f64, duration_ns: u64, workers: usize) -> Vec<PhaseSpan> {
    workload
        .phase_boundaries()
        .iter()
        .zip(workload.arrival_plan(rate, duration_ns, workers))
        .map(|((start_s, name), (rps, d))| PhaseSpan {
            name: name.clone(),
            start_s: *start_s,
            duration_s: d as f64 / 1e9,
            offered_rps: rps,
        })
        .collect()
}

/// Mean service time per type in µs (0 where none completed).
fn mean_service_us(completed: &[u64], service_ns: &[u64]) -> Vec<f64> {
    completed
        .iter()
        .zip(service_ns)
        .map(|(&n, &ns)| {
            if n == 0 {
                0.0
            } else {
                ns as f64 / n as f64 / 1e3
            }
        })
        .collect()
}

/// SYNERGY's or Tiny Quanta's counters as a result carries them (`psp run`'s
/// point and `psp serve`'s summary).
pub fn local_counters(l: &psp_runtime::LocalStats) -> LocalCounters {
    let sum = |v: &[u64]| v.iter().sum::<u64>();
    LocalCounters {
        executor: l.executor.to_string(),
        preemptions_per_worker: l.preemptions.clone(),
        preemptions_avoided: sum(&l.preemptions_avoided),
        preemptions_avoided_per_worker: l.preemptions_avoided.clone(),
        wait_queue_passes: sum(&l.wait_queue_passes),
        wait_queue_passes_per_worker: l.wait_queue_passes.clone(),
        congestion_episodes: l.congestion_episodes,
        wait_queue_full: l.wait_queue_full,
        timer_late_mean_us: l.timer_late_mean_ns as f64 / 1e3,
        timer_late_max_us: l.timer_late_max_ns as f64 / 1e3,
        timer: l.timer.to_string(),
    }
}

/// A run's preemptions: the local executor's when it has one (its workers
/// preempt), else the policy's (the dispatcher preempts).
pub fn preemptions(
    local: Option<&psp_runtime::LocalStats>,
    policy: &psp_core::policy::PolicyStats,
) -> u64 {
    match local {
        Some(l) => l.preemptions.iter().sum(),
        None => policy.preemptions,
    }
}
