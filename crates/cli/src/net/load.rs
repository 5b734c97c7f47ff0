//! `psp load`: the open-loop client against a running server, one measured
//! point; with `--server-profile`, its rate set by the server's measured
//! service times. It starts no server.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use psp_metrics::{Extra, PointResult};
use psp_net::client::{LoadConfig, LoadReport, Progress, run_load};

use super::{ClientArgs, XdpArgs, load_config, parse_addr, server_profile};
use crate::app::AppArgs;
use crate::{Mode, OfferedLoad, PointArgs, limits, report};

/// `psp load` arguments.
#[derive(Args)]
pub struct LoadArgs {
    /// The server's address.
    #[arg(long, default_value = "127.0.0.1:7000")]
    server: String,
    #[command(flatten)]
    point: PointArgs,
    #[command(flatten)]
    offered: OfferedLoad,
    /// The server's policy, recorded in the report [default: the one the
    /// server's metrics name, with --server-profile; else "not given"].
    #[arg(long)]
    policy: Option<String>,
    /// Datapath: udp (kernel sockets, one per flow) or xdp (AF_XDP on the
    /// interface towards --server, which must be a neighbour; flow i sends
    /// from port 47000 + i; needs root).
    #[arg(long, default_value = "udp")]
    datapath: String,
    #[command(flatten)]
    xdp: XdpArgs,
    #[command(flatten)]
    client: ClientArgs,
    /// The application whose requests are sent (its options must match the
    /// server's, e.g. --kv-keys).
    #[command(flatten)]
    app: AppArgs,
    /// Write one CSV row per request (id, type, scheduled time, latency, status).
    #[arg(long)]
    samples: Option<PathBuf>,
    /// Print the point as JSON.
    #[arg(long)]
    json: bool,
    /// The server's --metrics address (host:port): before the run, read the
    /// mean service time it measured for each type, and turn --load into a
    /// rate by the measured mean of every type with at least 100 measured
    /// requests (by the declared one otherwise); warm the server up with a
    /// short run at the same load first.
    #[arg(long, value_name = "METRICS_ADDR", conflicts_with = "rps")]
    server_profile: Option<String>,
    /// With --server-profile: first offer the load for this long (e.g. 2s),
    /// read the server's service times before and after, and set the
    /// measured run's rate by the means of that run alone: the times under
    /// this load's contention, not since the server started.
    #[arg(
        long,
        value_name = "DURATION",
        requires = "server_profile",
        allow_hyphen_values = true
    )]
    calibrate: Option<String>,
}
/// Runs the client with a progress bar on stderr (hidden when not a terminal).
fn load_with_progress(cfg: &LoadConfig) -> Result<LoadReport> {
    let expected = cfg
        .workload
        .expected_requests(cfg.rate_rps, cfg.duration_ns, cfg.workers)
        .round() as u64;
    let bar = ProgressBar::new(expected.max(1));
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} sent {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let progress = Progress::default();
    let done = AtomicBool::new(false);
    let report = std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                bar.set_position(progress.sent.load(Ordering::Relaxed));
                bar.set_message(format!(
                    "{} received",
                    progress.received.load(Ordering::Relaxed)
                ));
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let r = run_load(cfg, &progress);
        done.store(true, Ordering::Relaxed);
        r
    });
    bar.finish_and_clear();
    report.with_context(|| format!("cannot load {}", cfg.server))
}

fn write_samples(path: &Path, cfg: &LoadConfig, rep: &LoadReport) -> Result<()> {
    let mut out = String::with_capacity(rep.samples.len() * 48 + 64);
    out.push_str("id,type,scheduled_us,latency_us,service_us,status,measured\n");
    let mut samples = rep.samples.clone();
    samples.sort_by_key(|s| s.id);
    for s in &samples {
        use std::fmt::Write as _;
        let _ = writeln!(
            out,
            "{},{},{:.3},{:.3},{:.3},{},{}",
            s.id,
            cfg.workload.types[s.type_id as usize].name,
            s.scheduled_ns as f64 / 1e3,
            s.latency_ns as f64 / 1e3,
            s.service_ns as f64 / 1e3,
            s.status.map_or("TIMEOUT", |st| st.name()),
            s.measured
        );
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create '{}'", dir.display()))?;
    }
    std::fs::write(path, out).with_context(|| format!("cannot write '{}'", path.display()))
}

/// Offered loads (by the declared service times) up to which the client
/// expects every type's median latency within [`CLIENT_LATENCY_FACTOR`] x its
/// declared mean service time plus [`CLIENT_LATENCY_FLOOR_US`].
const CLIENT_WARN_MAX_LOAD: f64 = 0.8;
/// See [`CLIENT_WARN_MAX_LOAD`].
const CLIENT_LATENCY_FACTOR: f64 = 10.0;
/// See [`CLIENT_WARN_MAX_LOAD`]: room for the network round trip.
const CLIENT_LATENCY_FLOOR_US: f64 = 1000.0;

/// The client's side of the service-time check. Replies carry no service
/// time, so the client judges by latency: at a load the declared service times
/// put at [`CLIENT_WARN_MAX_LOAD`] or less, a type whose median latency is past
/// [`CLIENT_LATENCY_FACTOR`] x its declared mean plus [`CLIENT_LATENCY_FLOOR_US`]
/// means the server carries far more than the declared load (slower service
/// than declared), or is shared.
fn latency_warning(point: &PointResult) -> Option<String> {
    if point.load > CLIENT_WARN_MAX_LOAD {
        return None;
    }
    let slow: Vec<String> = point
        .types
        .iter()
        .filter(|t| {
            t.count > 0
                && t.mean_service_us > 0.0
                && t.p50_latency_us
                    > CLIENT_LATENCY_FACTOR * t.mean_service_us + CLIENT_LATENCY_FLOOR_US
        })
        .map(|t| {
            format!(
                "{} median latency {:.0} us, {:.0}x its declared {:.2} us",
                t.name,
                t.p50_latency_us,
                t.p50_latency_us / t.mean_service_us,
                t.mean_service_us
            )
        })
        .collect();
    (!slow.is_empty()).then(|| {
        format!(
            "warning: at {:.0}% load by the workload's declared service times, {}: the server's real service times are likely longer than declared, so it runs at more than that load; its summary, statistics lines and /metrics report the measured utilization beside the declared one; measure the real times with `psp profile` and use the workload file it writes, or rate --load by the server's measured times with `psp load --server-profile`",
            point.load * 100.0,
            slow.join("; ")
        )
    })
}

/// Runs `psp load`.
pub fn load(a: LoadArgs) -> Result<()> {
    let server = parse_addr(&a.server, "--server")?;
    // --flows counts the client's sockets here: their range, not the
    // simulator's, which the point's own check below would name.
    let client = a.client.clone().with_flows(a.point.flows);
    client.check()?;
    let workload = crate::profile::resolve_workload(&a.point.workload)?;
    let point = a.point.clone().with_default_workers(Mode::Net);
    let workers = limits::WORKERS.check(point.workers())?;
    let calibrate = a
        .calibrate
        .as_deref()
        .map(|d| limits::CALIBRATE.parse(d))
        .transpose()?;
    // The server's measured means, read before anything else is set up.
    let profile = a
        .server_profile
        .as_deref()
        .map(|addr| server_profile::fetch(addr, &workload))
        .transpose()?;
    let rate_workload = profile.as_ref().map_or(&workload, |p| &p.0.rate_workload);
    let rate = a.offered.rate(rate_workload, workers)?;
    let sim = point.config(&workload, rate)?;
    let app = a.app.config(&workload, u64::MAX)?;
    let datapath = a.xdp.datapath(&a.datapath)?;
    // --calibrate: a run at that rate first; its own service times (the
    // server's counters before and after it) set the measured run's rate.
    let (profile, rate, sim) = match (calibrate, profile) {
        (Some(span), Some((first, before))) => {
            let addr = a.server_profile.as_deref().unwrap_or_default();
            let short = psp_sim::SimConfig {
                duration_ns: span.as_nanos() as u64,
                ..sim.clone()
            };
            limits::point_requests(&workload, workers, rate, short.duration_ns)?;
            let mut cal = load_config(server, &workload, &app, &short, &client, false)?;
            cal.datapath = datapath.clone();
            eprintln!(
                "calibrating: {} requests/s for {span:?} ({})",
                report::rate_text(rate),
                first.line(&workload, rate, workers)
            );
            load_with_progress(&cal)?;
            let (_, after) = server_profile::fetch(addr, &workload)?;
            let p = server_profile::of_run(addr, &workload, &before, &after)?;
            let rate = a.offered.rate(&p.rate_workload, workers)?;
            let sim = point.config(&workload, rate)?;
            (Some(p), rate, sim)
        }
        (_, profile) => (profile.map(|(p, _)| p), rate, sim),
    };
    // A phased workload runs its phases: their requests, not --duration's.
    limits::point_requests(&workload, workers, rate, sim.duration_ns)?;
    let mut cfg = load_config(server, &workload, &app, &sim, &client, a.samples.is_some())?;
    cfg.datapath = datapath;
    if let Some(p) = &profile {
        eprintln!("{}", p.line(&workload, rate, workers));
    }
    let rep = load_with_progress(&cfg)?;
    if let Some(path) = &a.samples {
        write_samples(path, &cfg, &rep)?;
        eprintln!("wrote {}", path.display());
    }
    // The policy the report names: given, else the server's own.
    let policy = match (&a.policy, &a.server_profile) {
        (Some(p), _) => p.clone(),
        (None, Some(addr)) => parse_addr(addr, "--server-profile")
            .ok()
            .and_then(|addr| psp_net::scrape::fetch_server_policy(addr).ok().flatten())
            .unwrap_or_else(|| "not given (--policy)".into()),
        (None, None) => "not given (--policy)".into(),
    };
    let mut point = rep.to_point(&cfg, &policy, point.workers());
    // Nothing answered: the report still prints (every request a timeout),
    // and the run fails, so that a script does not read it as a result.
    let unanswered = rep.responses.iter().sum::<u64>() == 0 && rep.scheduled > 0;
    match &profile {
        // The load by the means the rate was computed from, and those means.
        Some(p) => {
            point.load = p.load(rate, workers);
            if let Extra::Net(x) = &mut point.extra {
                x.rate_means = Some(p.means.clone());
            }
        }
        // The warning's premise: declared service times that may be off.
        None => {
            if let Some(w) = latency_warning(&point) {
                eprintln!("{w}");
            }
        }
    }
    if rep.rejected.total() > 0 {
        eprintln!(
            "warning: {} replies rejected (not answers to requests this client sent on that flow, or duplicates): {:?}",
            rep.rejected.total(),
            rep.rejected
        );
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&point)?);
    } else {
        print!("{}", report::point_table(&point));
    }
    if unanswered {
        anyhow::bail!(
            "no response at all from {server}: is a server running there? (every request counted as a timeout)"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use psp_metrics::LoadedServer;

    use super::*;

    fn client_point(load: f64, svc_us: f64, p50_us: f64) -> PointResult {
        let mut rec = psp_metrics::Recorder::new(["SCAN"]);
        for _ in 0..100 {
            rec.record(0, (p50_us * 1e3) as u64, (svc_us * 1e3) as u64);
        }
        let meta = psp_metrics::PointMeta {
            mode: "net",
            workload: "rocksdb".into(),
            policy: "darc".into(),
            workers: 2,
            load,
            offered_rps: 1.0,
            duration_s: 1.0,
            measured_s: 1.0,
            seed: 1,
        };
        let extra = psp_metrics::NetExtra {
            server: LoadedServer::Address("127.0.0.1:7000".into()),
            flows: 1,
            timeout_ms: 1000.0,
            scheduled_total: 100,
            sent_total: 100,
            send_errors: 0,
            responses_total: psp_metrics::ResponsesByStatus {
                ok: 100,
                ..Default::default()
            },
            late_responses: 0,
            unexpected_datagrams: 0,
            rejected_replies: Default::default(),
            send_lag_us: Default::default(),
            wall_s: 1.0,
            reservation: None,
            rate_means: None,
        };
        PointResult::new(meta, &rec, 100, Extra::Net(Box::new(extra)))
    }

    /// The client warns when a type's median latency is past 10x its declared
    /// mean plus 1 ms at a declared load of 80% or less.
    #[test]
    fn client_warns_of_latency_far_past_the_declared_service() {
        let w = latency_warning(&client_point(0.3, 635.0, 737_000.0)).expect("a warning");
        assert!(
            w.contains("SCAN median latency") && w.contains("psp profile"),
            "{w}"
        );
        // Within the bound, or at a load where queueing may explain it: quiet.
        assert!(latency_warning(&client_point(0.3, 635.0, 7_000.0)).is_none());
        assert!(latency_warning(&client_point(0.9, 635.0, 737_000.0)).is_none());
    }
}
