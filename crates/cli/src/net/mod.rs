//! The network commands, one file each: `psp serve` (the runtime behind a
//! datapath: kernel UDP, AF_XDP or TCP), `psp load` (the open-loop client),
//! `psp echo` (the baseline echo server), `psp netbench` (highest sustained
//! rate of trivial requests: psp serve beside the echo server) and the
//! net-mode point that `psp sweep --mode net` measures. This module holds only
//! what they share: the datapath and client options, the load generator's
//! config and the server's summary; it runs no command itself.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use psp_apps::AppConfig;
use psp_metrics::{ServerSummary, ServerTypeLatency};
use psp_net::ServerReport;
use psp_net::client::LoadConfig;
use psp_net::server::DatapathKind;
use psp_net::xdp::XdpConfig;
use psp_sim::{SimConfig, Workload};
use serde::Deserialize;

use crate::app::{or_each_missing, type_names};
use crate::limits;

mod echo;
mod load;
mod netbench;
mod point;
mod serve;
mod server_profile;

pub use echo::{EchoArgs, echo};
pub use load::{LoadArgs, load};
pub use netbench::{NetbenchArgs, netbench};
pub use point::{NetOptions, measure};
pub use serve::{ServeArgs, serve};

/// The default bound on the service time a request may ask the spin
/// application for: 100 times the largest type's mean, at least 1 ms, so that
/// one datagram cannot hold a worker for as long as it likes.
pub fn default_max_service_ns(workload: &Workload) -> u64 {
    workload
        .types
        .iter()
        .map(|t| t.service.mean_us() * 1e3 * 100.0)
        .fold(1e6, f64::max) as u64
}

/// A socket address flag's value (`flag` names it in the error).
pub fn parse_addr(s: &str, flag: &str) -> Result<SocketAddr> {
    s.to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .with_context(|| format!("{flag}: '{s}' is not an address (example: 127.0.0.1:7000)"))
}

/// Raises `flag` on SIGINT and SIGTERM.
fn stop_on_signals(flag: &Arc<AtomicBool>) -> Result<()> {
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, flag.clone())
            .context("cannot install a signal handler")?;
    }
    Ok(())
}

/// The AF_XDP datapath's settings (`--datapath xdp`), shared by `psp serve`,
/// `psp load`, `psp echo` and `psp netbench` (and `psp serve`'s `--config`
/// file, by the same names with underscores).
#[derive(Args, Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct XdpArgs {
    /// AF_XDP: entries of each ring (fill, RX, TX, completion), a power of two
    /// from 64 to 32768 [default: 2048].
    #[arg(long, allow_hyphen_values = true)]
    pub xdp_ring: Option<u32>,
    /// AF_XDP: frames each transmitter (worker, dispatcher) owns, 16 to 8192
    /// [default: 512].
    #[arg(long, allow_hyphen_values = true)]
    pub xdp_tx_frames: Option<u32>,
    /// AF_XDP: receive queues to bind, one socket each, 1 to 64 [default:
    /// every queue of the interface].
    #[arg(long, allow_hyphen_values = true)]
    pub xdp_queues: Option<u32>,
    /// AF_XDP: zero-copy mode: auto (where the driver supports it), on, off
    /// (copy mode) [default: auto].
    #[arg(long)]
    pub xdp_zero_copy: Option<String>,
    /// AF_XDP: where the XDP program runs: auto (the driver if it can), driver,
    /// generic [default: auto].
    #[arg(long)]
    pub xdp_attach: Option<String>,
    /// AF_XDP: busy polling (SO_BUSY_POLL) in microseconds, 0 to 1000
    /// [default: 0, off].
    #[arg(long, allow_hyphen_values = true)]
    pub xdp_busy_poll: Option<u32>,
}

or_each_missing!(XdpArgs {
    xdp_ring,
    xdp_tx_frames,
    xdp_queues,
    xdp_zero_copy,
    xdp_attach,
    xdp_busy_poll
});

impl XdpArgs {
    /// Whether any setting is given.
    pub fn any(&self) -> bool {
        self.xdp_ring.is_some()
            || self.xdp_tx_frames.is_some()
            || self.xdp_queues.is_some()
            || self.xdp_zero_copy.is_some()
            || self.xdp_attach.is_some()
            || self.xdp_busy_poll.is_some()
    }

    /// The datapath `--datapath` names, with these settings for `xdp`.
    ///
    /// # Errors
    /// An unknown datapath or a setting out of its range (one line).
    pub fn datapath(&self, name: &str) -> Result<DatapathKind> {
        match name {
            "udp" if self.any() => bail!("--xdp-* options need --datapath xdp"),
            "udp" => Ok(DatapathKind::Udp),
            "xdp" => {
                let d = XdpConfig::default();
                let cfg = XdpConfig {
                    ring: self.xdp_ring.unwrap_or(d.ring),
                    tx_frames: self.xdp_tx_frames.unwrap_or(d.tx_frames),
                    queues: self.xdp_queues,
                    zero_copy: match self.xdp_zero_copy.as_deref() {
                        None | Some("auto") => None,
                        Some("on") => Some(true),
                        Some("off") => Some(false),
                        Some(o) => bail!("--xdp-zero-copy must be auto, on or off, not '{o}'"),
                    },
                    attach: match self.xdp_attach.as_deref() {
                        None | Some("auto") => None,
                        Some("driver") => Some(psp_net::xdp::bpf::AttachMode::Driver),
                        Some("generic") => Some(psp_net::xdp::bpf::AttachMode::Generic),
                        Some(o) => {
                            bail!("--xdp-attach must be auto, driver or generic, not '{o}'")
                        }
                    },
                    busy_poll_us: self.xdp_busy_poll.unwrap_or(0),
                };
                cfg.check().map_err(anyhow::Error::msg)?;
                Ok(DatapathKind::Xdp(cfg))
            }
            _ => bail!(
                "--datapath must be udp (kernel UDP sockets) or xdp (AF_XDP, kernel bypass), not '{name}'"
            ),
        }
    }
}

/// Client options shared by `psp load`, `psp sweep --mode net` and `psp netbench`.
#[derive(Args, Clone, Debug)]
pub struct ClientArgs {
    /// Sockets (source ports) the client spreads its requests over: `--flows`,
    /// a flag of the point ([`PointArgs`](crate::PointArgs)) or of `psp netbench`.
    #[arg(skip = DEFAULT_SOCKETS)]
    pub flows: usize,
    /// How long a request may wait for its response before it counts as a timeout.
    #[arg(long, allow_hyphen_values = true, default_value = "1s")]
    pub timeout: String,
    /// Leave the client's threads at normal priority (by default, at rates up to
    /// 5000 requests/s, they ask for SCHED_FIFO so that busy server threads on the
    /// same cores do not delay sends; `psp netbench` never raises it).
    #[arg(long)]
    pub no_raise_priority: bool,
}

/// The client's sockets unless `--flows` says otherwise.
pub const DEFAULT_SOCKETS: usize = 16;

impl ClientArgs {
    /// These options with `flows` sockets when given.
    pub fn with_flows(mut self, flows: Option<usize>) -> Self {
        self.flows = flows.unwrap_or(DEFAULT_SOCKETS);
        self
    }

    /// Checks the flags; returns the timeout.
    ///
    /// # Errors
    /// A flag out of range ([`limits::FLOWS`], [`limits::TIMEOUT`]).
    pub fn check(&self) -> Result<Duration> {
        limits::FLOWS.check(self.flows)?;
        limits::TIMEOUT.parse(&self.timeout)
    }
}

/// The load generator's config: `client`'s options, `sim`'s rate, length,
/// workers and seed, `app`'s request bodies.
fn load_config(
    server: SocketAddr,
    workload: &Workload,
    app: &AppConfig,
    sim: &SimConfig,
    client: &ClientArgs,
    keep_samples: bool,
) -> Result<LoadConfig> {
    Ok(LoadConfig {
        server,
        workload: workload.clone(),
        bodies: app.encoders(&type_names(workload)),
        rate_rps: sim.rate_rps,
        duration_ns: workload.arrival_period_ns(sim.duration_ns),
        workers: sim.workers,
        warmup_ns: (workload.arrival_period_ns(sim.duration_ns) as f64 * sim.warmup_fraction)
            as u64,
        seed: sim.seed,
        flows: client.flows,
        timeout: client.check()?,
        keep_samples,
        raise_priority: !client.no_raise_priority,
        datapath: Default::default(),
    })
}

/// The server's summary of `s`, whose types declare the mean service times
/// `declared` (ns, in type order).
///
/// # Errors
/// A final reservation whose text does not read back as data.
fn server_summary(s: &ServerReport, declared: &[Option<f64>]) -> ServerSummary {
    let (d, n) = (&s.dispatcher, &s.net);
    let c = &d.counts;
    let (measured_utilization, declared_utilization) = d.utilization(
        s.served_per_worker.len(),
        s.wall.as_nanos() as f64,
        declared,
    );
    ServerSummary {
        received: n.received,
        requests: c.arrived,
        admitted: c.admitted,
        completed: c.completed,
        truncated_dropped: n.truncated,
        bad_request: n.bad_request,
        unknown_type: n.unknown_type,
        overloaded: n.overloaded,
        shed_unanswered: n.shed_unanswered,
        handler_errors: c.handler_errors,
        expired: c.expired,
        no_fiber: c.no_fiber,
        bad_bodies: c.bad_bodies,
        reply_send_errors: n.reply_send_errors,
        worker_send_errors: c.unsent,
        receive_errors: n.receive_errors,
        dropped_by_os: n.dropped_by_os,
        malformed_frames: n.malformed_frames,
        syscalls: n.syscalls,
        xdp: n.xdp.clone(),
        tcp: n.tcp.clone(),
        stranded: c.stranded,
        abandoned_workers: s.abandoned_workers.clone(),
        warming_up: d.policy_stats.warming_up,
        reservation_updates: d.policy_stats.reservation_updates,
        reservation: d
            .reservation
            .as_ref()
            .map(psp_metrics::reservation::ReservationLayout::from),
        served_per_worker: s.served_per_worker.clone(),
        steals_per_worker: s.steals_per_worker.clone(),
        preemptions: crate::run::preemptions(s.local.as_ref(), &d.policy_stats),
        local: s.local.as_ref().map(crate::run::local_counters),
        pinned: s.pinned,
        polls_yield: s.polls_yield,
        inline_worker: s.inline_worker,
        threads: s.threads.clone(),
        cpu_us_per_request: (c.completed > 0)
            .then(|| s.process_cpu.as_secs_f64() * 1e6 / c.completed as f64),
        wall_s: s.wall.as_secs_f64(),
        measured_utilization,
        declared_utilization,
        server_side_latency: d
            .recorder
            .type_stats()
            .into_iter()
            .zip(declared.iter().chain(std::iter::repeat(&None)))
            .zip(d.shed_by_type.iter().copied().chain(std::iter::repeat(0)))
            .map(|((t, m), shed)| ServerTypeLatency {
                name: t.name,
                completed: t.count,
                mean_service_us: t.mean_service_us,
                declared_service_us: m.map(|ns| ns / 1e3),
                p50_latency_us: t.p50_latency_us,
                p99_latency_us: t.p99_latency_us,
                p999_latency_us: t.p999_latency_us,
                shed,
            })
            .collect(),
        app_check: None,
    }
}
