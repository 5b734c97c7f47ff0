//! `psp netbench`: the highest sustained rate of trivial (0 us, echo)
//! requests, psp serve beside the plain echo server on each datapath, the
//! same client measuring both. It measures the datapath and dispatch
//! overhead, not a policy's tails.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::Args;
use psp_apps::AppConfig;
use psp_core::PolicySpec;
use psp_net::client::{Progress, run_load};
use psp_net::echo::EchoServer;
use psp_net::server::DatapathKind;
use psp_net::{ClassifierKind, Server, ServerConfig};
use psp_runtime::{IdleStrategy, InlineWorker, RuntimeConfig};
use psp_sim::{SimConfig, Workload};
use serde_json::json;

use super::{ClientArgs, DEFAULT_SOCKETS, XdpArgs, load_config, server_summary};
use crate::app::declared;
use crate::limits;

/// `psp netbench` arguments.
#[derive(Args)]
pub struct NetbenchArgs {
    /// Offered rates to try, in requests per second (e.g. 50000,100000,200000).
    #[arg(
        long,
        allow_hyphen_values = true,
        default_value = "25000,50000,100000,150000,200000,250000,300000"
    )]
    rates: String,
    /// Length of each measurement.
    #[arg(long, allow_hyphen_values = true, default_value = "2s")]
    duration: String,
    /// psp serve's workers (and the echo server's threads).
    #[arg(long, allow_hyphen_values = true, default_value_t = 1)]
    workers: usize,
    /// psp serve's policy.
    #[arg(long, default_value = "c-fcfs")]
    policy: String,
    /// psp serve's idle strategy: spin, yield, park or park:SPIN_US.
    #[arg(long, default_value = "park")]
    idle: String,
    /// Whether psp serve runs worker 0 on its dispatcher's thread: auto
    /// (where its threads would take every core: with the default one
    /// worker on 2 cores, one thread, as the echo server's), on or off.
    #[arg(long, default_value = "auto")]
    inline_worker: String,
    /// Largest tolerated fraction of lost requests for a rate to count as sustained.
    #[arg(long, allow_hyphen_values = true, default_value_t = 0.001)]
    max_loss: f64,
    /// Sockets (source ports) the client spreads its requests over.
    #[arg(long, allow_hyphen_values = true, default_value_t = DEFAULT_SOCKETS)]
    flows: usize,
    /// The servers' datapaths, each measured in turn: udp, xdp or udp,xdp
    /// (xdp needs --netns).
    #[arg(long, default_value = "udp")]
    datapaths: String,
    /// The client's datapath: udp, xdp, or same (the server's).
    #[arg(long, default_value = "same")]
    client_datapath: String,
    /// Run the servers in namespace PREFIX-srv at --server-ip:7000 and the
    /// client in PREFIX-cli, over the veth pair `scripts/netns.sh up --prefix
    /// PREFIX` makes [default: both on loopback, udp only].
    #[arg(long)]
    netns: Option<String>,
    /// The server's address in PREFIX-srv (with --netns).
    #[arg(long, default_value = "10.77.0.1")]
    server_ip: std::net::Ipv4Addr,
    #[command(flatten)]
    xdp: XdpArgs,
    #[command(flatten)]
    client: ClientArgs,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `f` in network namespace `ns`, or here.
fn in_ns<T: Send>(ns: Option<&str>, f: impl FnOnce() -> T + Send) -> Result<T> {
    match ns {
        Some(ns) => Ok(psp_net::xdp::device::in_namespace(ns, f)?),
        None => Ok(f()),
    }
}

/// Runs `psp netbench`: at each rate, the same client measures psp serve (0 us
/// requests, echo application) and then the plain echo server.
pub fn netbench(mut a: NetbenchArgs) -> Result<()> {
    let bench = plan(&mut a)?;
    let rows = measure_rows(&a, &bench)?;
    print_report(&a, &bench, rows)
}

/// What `psp netbench` measures, every flag checked.
struct Bench {
    rates: Vec<f64>,
    spec: PolicySpec,
    idle: IdleStrategy,
    inline_worker: InlineWorker,
    duration_ns: u64,
    workload: Workload,
    sim: SimConfig,
    datapaths: Vec<DatapathKind>,
    /// `None`: the server's.
    client_datapath: Option<DatapathKind>,
    srv_ns: Option<String>,
    cli_ns: Option<String>,
    addr: SocketAddr,
}

/// Checks the flags (`a`'s client takes `--flows`) before anything starts.
fn plan(a: &mut NetbenchArgs) -> Result<Bench> {
    a.client = a.client.clone().with_flows(Some(a.flows));
    limits::RATE_POINTS.check(a.rates.split(',').count())?;
    let rates: Vec<f64> = a
        .rates
        .split(',')
        .map(|r| match r.trim().parse::<f64>() {
            Ok(v) => limits::RATE.check(v),
            Err(_) => bail!("--rates: '{r}' is not a rate in requests per second"),
        })
        .collect::<Result<_>>()?;
    limits::WORKERS.check(a.workers)?;
    let spec: PolicySpec = a.policy.parse()?;
    let idle = limits::idle(&a.idle)?;
    let inline_worker = limits::inline_worker(&a.inline_worker)?;
    let duration_ns = limits::DURATION.parse_ns(&a.duration)?;
    limits::MAX_LOSS.check(a.max_loss)?;
    a.client.check()?;
    for &rate in &rates {
        limits::requests(rate, duration_ns)?;
    }
    let workload = Workload::fixed("zero", &[("req", 0.0, 1.0)]);
    let sim = SimConfig {
        workers: a.workers,
        rate_rps: 0.0,
        duration_ns,
        warmup_fraction: 0.1,
        seed: 1,
        flows: psp_workload::DEFAULT_FLOWS,
        queue_capacity: 4096,
        system: psp_sim::SystemCosts::default(),
        classifier: ClassifierKind::Header,
        series_window_ns: None,
        max_wait_ns: Vec::new(),
    };
    spec.build(&psp_core::PolicyContext {
        workers: a.workers,
        types: workload.type_infos(),
        queue_capacity: sim.queue_capacity,
    })?;
    let names: Vec<&str> = a.datapaths.split(',').map(str::trim).collect();
    limits::DATAPATHS.check(names.len())?;
    let mut datapaths = Vec::new();
    for n in &names {
        if datapaths.iter().any(|d: &DatapathKind| d.name() == *n) {
            bail!("--datapaths: '{n}' twice");
        }
        datapaths.push(if *n == "udp" {
            DatapathKind::Udp
        } else {
            a.xdp.datapath(n)?
        });
    }
    let client_datapath = match a.client_datapath.as_str() {
        "same" => None,
        d => Some(a.xdp.datapath(d)?),
    };
    let (srv_ns, cli_ns) = match &a.netns {
        // scripts/netns.sh's rule: it names files under /var/run/netns.
        Some(p)
            if p.is_empty()
                || p.len() > 14
                || !p
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') =>
        {
            bail!("--netns wants 1 to 14 of [A-Za-z0-9_-] (scripts/netns.sh's --prefix), not '{p}'")
        }
        Some(p) => (Some(format!("{p}-srv")), Some(format!("{p}-cli"))),
        None => (None, None),
    };
    let needs_ns = datapaths
        .iter()
        .chain(&client_datapath)
        .any(|d| matches!(d, DatapathKind::Xdp(_)));
    if needs_ns && a.netns.is_none() {
        bail!(
            "--datapaths xdp needs --netns PREFIX (two namespaces joined by a veth pair: scripts/netns.sh up --prefix PREFIX)"
        );
    }
    let addr: SocketAddr = match &a.netns {
        Some(_) => SocketAddr::from((a.server_ip, 7000)),
        None => "127.0.0.1:0".parse().expect("literal address"),
    };
    Ok(Bench {
        rates,
        spec,
        idle,
        inline_worker,
        duration_ns,
        workload,
        sim,
        datapaths,
        client_datapath,
        srv_ns,
        cli_ns,
        addr,
    })
}

/// Each datapath at each rate, psp serve then the echo server: one JSON row
/// each, in that order.
fn measure_rows(a: &NetbenchArgs, b: &Bench) -> Result<Vec<serde_json::Value>> {
    let mut rows = Vec::new();
    for datapath in &b.datapaths {
        let dp = datapath.name();
        for &rate in &b.rates {
            let sim = SimConfig {
                rate_rps: rate,
                ..b.sim.clone()
            };
            for kind in ["psp-serve", "echo"] {
                let (addr, stop) = in_ns(b.srv_ns.as_deref(), || {
                    netbench_server(kind, datapath, a.workers, b)
                })??;
                let mut lc = load_config(
                    addr,
                    &b.workload,
                    &AppConfig::new(psp_apps::EchoConfig),
                    &sim,
                    &a.client,
                    false,
                )?;
                // A saturation benchmark: the client must not outrank either server.
                lc.raise_priority = false;
                lc.datapath = b
                    .client_datapath
                    .clone()
                    .unwrap_or_else(|| datapath.clone());
                let rep = in_ns(b.cli_ns.as_deref(), || run_load(&lc, &Progress::default()));
                let server = stop()?;
                let rep = rep??;
                let point = rep.to_point(&lc, kind, a.workers);
                let p99 = point.types[0].p99_latency_us;
                eprintln!(
                    "{dp} {kind:>9} at {:>8.0} rps: achieved {:>8.0} rps, loss {:.4}%, p50 {:.1} us, p99 {:.1} us, client lag p99 {:.1} us",
                    rate,
                    point.achieved_rps,
                    point.loss_fraction * 100.0,
                    point.types[0].p50_latency_us,
                    p99,
                    rep.send_lag_ns[1] as f64 / 1e3
                );
                rows.push(json!({
                    "datapath": dp,
                    "client_datapath": lc.datapath.name(),
                    "server": kind,
                    "offered_rps": rate,
                    "achieved_rps": point.achieved_rps,
                    "loss_fraction": point.loss_fraction,
                    "p50_latency_us": point.types[0].p50_latency_us,
                    "p99_latency_us": p99,
                    "client_send_lag_p99_us": rep.send_lag_ns[1] as f64 / 1e3,
                    "server_counters": server,
                }));
            }
        }
    }
    Ok(rows)
}

/// The highest sustained rate of each server on each datapath, as a table or
/// (`--json`) one document with every row.
fn print_report(a: &NetbenchArgs, b: &Bench, rows: Vec<serde_json::Value>) -> Result<()> {
    let (spec, datapaths) = (b.spec.clone(), &b.datapaths);
    // The highest rate of the ladder before the first one past --max-loss.
    let sustained = |dp: &str, kind: &str| {
        let mut best = None;
        for r in rows
            .iter()
            .filter(|r| r["server"] == kind && r["datapath"] == dp)
        {
            if r["loss_fraction"].as_f64().unwrap_or(1.0) > a.max_loss {
                break;
            }
            best = r["offered_rps"].as_f64();
        }
        best
    };
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => Some(a / b),
        _ => None,
    };
    let mut summary = serde_json::Map::new();
    let mut lines = Vec::new();
    let f = |v: Option<f64>| v.map_or("none".to_string(), |v| format!("{v:.0} rps"));
    let r2 = |v: Option<f64>| v.map_or("n/a".to_string(), |r| format!("{r:.2}"));
    for d in datapaths {
        let dp = d.name();
        let (ours, echo) = (sustained(dp, "psp-serve"), sustained(dp, "echo"));
        summary.insert(
            dp.into(),
            json!({
                "sustained_rps": {"psp-serve": ours, "echo": echo},
                "ratio_psp_over_echo": ratio(ours, echo),
            }),
        );
        lines.push(format!(
            "{dp}: psp serve ({spec}) {} | echo server {} | ratio {}",
            f(ours),
            f(echo),
            r2(ratio(ours, echo))
        ));
    }
    let xdp_over_udp = ratio(sustained("xdp", "psp-serve"), sustained("udp", "psp-serve"));
    let doc = json!({
        "workers": a.workers,
        "policy": spec.to_string(),
        "idle": a.idle,
        "duration_s": b.duration_ns as f64 / 1e9,
        "max_loss": a.max_loss,
        "flows": a.client.flows,
        "netns": a.netns,
        "datapaths": summary,
        "ratio_psp_serve_xdp_over_udp": xdp_over_udp,
        "points": rows,
    });
    if a.json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        println!(
            "highest sustained rate (loss <= {}%), 0 us requests, {} worker(s)/thread(s):",
            a.max_loss * 100.0,
            a.workers,
        );
        for l in lines {
            println!("  {l}");
        }
        if datapaths.len() > 1 {
            println!("  psp serve xdp / udp: {}", r2(xdp_over_udp));
        }
    }
    Ok(())
}

/// What stops a netbench server and returns its counters.
type StopServer = Box<dyn FnOnce() -> Result<serde_json::Value> + Send>;

/// Starts `kind` (psp-serve or echo) on `datapath` at `addr`.
fn netbench_server(
    kind: &str,
    datapath: &DatapathKind,
    workers: usize,
    b: &Bench,
) -> Result<(SocketAddr, StopServer)> {
    let (addr, workload) = (b.addr, &b.workload);
    Ok(match (kind, datapath) {
        ("psp-serve", _) => {
            let s = Server::start(ServerConfig {
                addr,
                metrics: None,
                runtime: RuntimeConfig {
                    workers,
                    idle: b.idle,
                    inline_worker: b.inline_worker,
                    // As the echo server's threads: normal priority.
                    raise_priority: false,
                    ..RuntimeConfig::default()
                },
                policy: b.spec.clone(),
                types: workload.type_infos(),
                classifier: ClassifierKind::Header,
                app_classifier: None,
                handlers: psp_apps::handler_factory(Arc::new(psp_apps::spin::EchoService), None),
                datapath: datapath.clone(),
                protocol: Default::default(),
            })?;
            let d = declared(workload);
            (
                s.local_addr(),
                Box::new(move || Ok(serde_json::to_value(server_summary(&s.stop()?, &d))?)),
            )
        }
        (_, DatapathKind::Udp) => {
            let s = EchoServer::start(addr, workers)?;
            (
                s.local_addr(),
                Box::new(move || Ok(json!({"echoed": s.stop()}))),
            )
        }
        (_, DatapathKind::Tcp(..)) => bail!("psp netbench measures udp and xdp"),
        (_, DatapathKind::Xdp(x)) => {
            let s = psp_net::xdp::XdpEcho::start(x, addr)
                .with_context(|| format!("AF_XDP echo server on {addr}"))?;
            (
                s.local_addr(),
                Box::new(move || Ok(json!({"echoed": s.stop()}))),
            )
        }
    })
}
